# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""A batch's module run that outlives its controller.

A cancelled AWX job (ansible-runner SIGKILLs ansible-playbook's process group) or a killed playbook
leaves the module run of the batch in progress alive: it runs in a worker that Ansible put in a
session of its own (or in a module process below it). That run notices its controller gone
(``ControllerWatch``), lets its batch reach its safe point - every node of it either finished (changed,
started, verified, uncordoned) or put back by its cycle, none left Stopped by this run - and then runs
the release itself, with why as the last error, so the next rollout starts at once instead of waiting
for the lease to expire.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._clients import processes
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, StepFailed
from ansible_collections.cloudstack.cks.plugins.module_utils._common.stamps import utc_stamp
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.holder import batch_of, describe_batch
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.results import BatchResult
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.state import Rollout
from ansible_collections.cloudstack.cks.plugins.module_utils._services.release import node_release
from ansible_collections.cloudstack.cks.plugins.module_utils._services.session import ClusterSession
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import Lock


def batch_note(nodes: Sequence[str], phase: str) -> dict[str, Any]:
    """The batch annotation of the Lease: this module run (host, boot id, pid, start) and the batch."""
    return dict(processes.process_identity(), nodes=[str(n).lower() for n in nodes], phase=phase,
                started=utc_stamp())


def controller_gone_error(plan: Optional[Sequence[Any]], nodes: Sequence[str], began: bool) -> tuple[str, str]:
    """(last error, result) of a rollout whose controller went away before or during this batch."""
    where = describe_batch({"nodes": list(nodes)}, plan) or "its batch"
    numbered = batch_of(plan, nodes)
    short = f"batch {numbered[0]} of {numbered[1]}" if numbered else "a batch"
    if began:
        return (f"the controller went away during {where}; the batch's own run brought it to a safe point and "
                "released the rollout: run the rollout again to resume", f"stopped: the controller went away during {short}")
    return (f"the controller went away before {where} began (nothing of it was done); its run released the rollout: "
            "run the rollout again to resume", f"stopped: the controller went away before {short}")


def orphan_release(session: ClusterSession, params: Mapping[str, Any], rollout: Rollout, lock: Lock,
                   nodes: Sequence[str], result: Optional[BatchResult]) -> dict[str, Any]:
    """Release the rollout from the batch's own run (its controller is gone); fails with what it did,
    so that a controller wrongly judged gone still stops its rollout there."""
    plan = lock.last_seen.plan if lock.last_seen is not None else None
    why, ended = controller_gone_error(plan, nodes, began=result is not None)
    if result is not None and result.error is not None:
        why = f"{why}; the batch failed: {result.error.msg}"
    details: dict[str, Any] = dict(result.to_dict(), changed=result.changed) if result is not None else {"changed": False}
    try:
        stopped = dataclasses.replace(rollout, last_error=why, ended=ended)
        released = node_release(session, {"cluster": params.get("cluster"), "project_id": params.get("project_id"),
                                          "lock_holder": lock.holder_identity, "rollout": stopped.to_dict()})
        details["release"] = released["release"]
    except CksError as exc:
        why = f"{why}; the release failed ({exc.msg}): the lock ends by itself after lock_duration"
    raise StepFailed(", ".join(nodes) or "-", "controller", why, controller_gone=True, **details)
