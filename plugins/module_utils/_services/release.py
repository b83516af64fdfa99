# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The service behind cks_node_cycle (mode=release)."""

from __future__ import annotations

from typing import Any, Mapping

from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.release import Release
from ansible_collections.cloudstack.cks.plugins.module_utils._services.session import ClusterSession
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import held_lock


def node_release(session: ClusterSession, params: Mapping[str, Any], check_mode: bool = False) -> dict[str, Any]:
    """``release`` as the module's parameters say (mode=release)."""
    cloud, kube = session.cloud, session.kube
    release = Release(cloud, kube, session.loader, str(params["cluster"]), session.store,
                      held_lock(kube, params.get("lock_holder")), project_id=params.get("project_id"),
                      check_mode=check_mode)
    result = release.run(last_error=params.get("last_error"), skipped=params.get("skipped"))
    return {"release": result.to_dict(), "changed": result.changed}
