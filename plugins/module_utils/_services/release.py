# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The service behind cks_node_cycle (mode=release)."""

from __future__ import annotations

from typing import Any, Mapping

from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.release import Release
from ansible_collections.cloudstack.cks.plugins.module_utils._services.session import ClusterSession
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import Lock


def node_release(session: ClusterSession, params: Mapping[str, Any], check_mode: bool = False) -> dict[str, Any]:
    """``release`` as the module's parameters say (mode=release)."""
    cloud, kube = session.cloud, session.kube
    # Not held_lock: it reads the lease up front, and the release must not fail on that read.
    # Giving the lock back writes duration 1 anyway, so the lease's own duration is not needed.
    holder = params.get("lock_holder")
    release = Release(cloud, kube, session.loader, str(params["cluster"]), session.store,
                      Lock(kube, holder_identity=holder) if holder else None, project_id=params.get("project_id"),
                      check_mode=check_mode)
    result = release.run(last_error=params.get("last_error"), skipped=params.get("skipped"))
    return {"release": result.to_dict(), "changed": result.changed}
