# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The service behind cks_node_cycle (mode=release)."""

from __future__ import annotations

import time
from typing import Any, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError
from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import StateApi
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.release import Release, ReleaseResult
from ansible_collections.cloudstack.cks.plugins.module_utils._services.session import ClusterSession
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import Lock, LockInfo


def taken_over(kube: StateApi, holder: Optional[str]) -> Optional[LockInfo]:
    """The lock as another rollout holds it now, if one does (it took ours over after it expired)."""
    if not holder:
        return None
    try:
        info = Lock(kube, holder_identity=holder).read()
    except CksError:
        # The release must not fail on this read (the API may be down for a while): the release
        # itself retries, and gives the lock back only if it is still ours.
        return None
    if info is not None and info.held and info.holder != holder:
        return info
    return None


def node_release(session: ClusterSession, params: Mapping[str, Any], check_mode: bool = False) -> dict[str, Any]:
    """``release`` as the module's parameters say (mode=release)."""
    cloud, kube = session.cloud, session.kube
    other = taken_over(kube, params.get("lock_holder"))
    if other is not None:
        # The nodes annotated now, the outcome and the last error are that rollout's: uncordoning,
        # untainting or overwriting them would undo work in flight. Say so and end.
        result = ReleaseResult(started=time.time(), outcome="unchanged", ended=time.time(),
                               lock_held_by={"holder": other.holder, "since": other.acquire_time,
                                             "renew_time": other.renew_time})
        return {"release": result.to_dict(), "changed": False,
                "msg": (f"not released: the rollout {other.holder} holds the lock since {other.acquire_time} "
                        f"(it took over after the lock of {params.get('lock_holder')} expired); its nodes, "
                        "outcome and last error were left as they are")}
    # Not held_lock: it reads the lease up front, and the release must not fail on that read.
    # Giving the lock back writes duration 1 anyway, so the lease's own duration is not needed.
    holder = params.get("lock_holder")
    release = Release(cloud, kube, session.loader, str(params["cluster"]), session.store,
                      Lock(kube, holder_identity=holder) if holder else None, project_id=params.get("project_id"),
                      check_mode=check_mode)
    result = release.run(last_error=params.get("last_error"), skipped=params.get("skipped"),
                         rollout_result=params.get("result"))
    return {"release": result.to_dict(), "changed": result.changed}
