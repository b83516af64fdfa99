# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""A node put back into service after CloudStack refused its change or its start: the steps that
undo what the planner could be refusing, start, verify and uncordon it, so that a refusal never
leaves a drained node down, and the Event that says where a failure left the node."""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Protocol

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import StepFailed
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.after_stop import put_back_cause, start_refusal_cause
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node import ChangePlan
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node_events import NodeEvent, left_cordoned, put_back_event
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ClusterView, Node
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.options import BatchContext
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.results import NodeResult, step_failure_cause
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.vm_changes import VmChanges, settled


class PutBackCycle(Protocol):
    """What a put-back needs of the node's cycle (``node_cycle.NodeCycle``)."""

    batch: BatchContext
    view: ClusterView
    node: Node
    deadline: Deadline
    plan: ChangePlan
    result: NodeResult
    failure: Optional[StepFailed]
    _ours: bool
    _last_read: Optional[dict[str, Any]]
    _changes: VmChanges

    @property
    def _k8s(self) -> bool:
        """The node is a Kubernetes node (not an external etcd node)."""

    @property
    def _needs_etcd(self) -> bool:
        """The node runs an etcd member."""

    def _step(self, name: str, fn: Callable[[], str]) -> None:
        """Run ``fn`` as step ``name``, recorded; a failure raises StepFailed."""

    def _run_start(self) -> str:
        """The start step."""

    def _run_uncordon(self) -> str:
        """The uncordon step."""

    def _run_unmark(self) -> str:
        """The unmark step."""

    def _marks_left(self) -> bool:
        """The node still carries the rollout's marks."""

    def _job_deadline(self) -> Deadline:
        """The deadline of one CloudStack job."""

    def _wait_until_back(self) -> str:
        """Wait until the node is Ready with a new boot ID."""

    def _read_vm(self) -> dict[str, Any]:
        """The VM as CloudStack has it now."""

    def _wait_for_etcd(self) -> str:
        """Wait until the node's etcd member is healthy again."""

    def _event(self, event: NodeEvent) -> None:
        """Write an Event on the node."""


def put_back_after(cycle: PutBackCycle, refusal: StepFailed, undo: Optional[list[str]] = None) -> StepFailed:
    """CloudStack refused a change of the Stopped VM: start it on what it has now, see it back and
    return it to service. The batch still fails with the refusal (the node stays out of date; the
    next run retries it). A put-back that fails leaves the node as it is, cordoned, for the rerun
    to resume.

    ``undo``: the planner refused the start of the changed VM; these changes (its groups, its
    offering) are undone first, so that it starts on what it had."""
    answer = {k: v for k, v in refusal.details.items() if k not in ("node", "step")}
    refused = step_failure_cause(refusal)
    try:
        for name in undo or []:
            step, action = UNDO[name]
            cycle._step(step, functools.partial(action, cycle))
        cycle._step("start", cycle._run_start)
        cycle._step("verify", functools.partial(_verify_put_back, cycle))
        if cycle._k8s and cycle._ours:
            cycle._step("uncordon", cycle._run_uncordon)
        elif cycle._k8s and cycle._marks_left():
            cycle._step("unmark", cycle._run_unmark)
    except StepFailed as failed:
        why: Optional[str] = f"{failed.step}: {step_failure_cause(failed)}"
    else:
        why = None
    back = why is None
    cause = (put_back_cause(refused, why, back and cycle._ours) if undo is None
             else start_refusal_cause(refused, undo, why, back and cycle._ours))
    return StepFailed(cycle.node.name, refusal.step, cause, **answer, put_back=back)


def _undo_update_affinity_groups(cycle: PutBackCycle) -> str:
    groups = cycle.plan.affinity_groups
    if groups is None:
        raise AssertionError("only a change of groups is undone")
    names = cycle.result.changes.get("affinity_groups", {})
    return settled(f"{names.get('to')} -> {names.get('from')} (as before the rollout)",
                   cycle._changes.set_affinity_groups(list(groups.from_), cycle._job_deadline()))


def _undo_change_offering(cycle: PutBackCycle) -> str:
    offering = cycle.plan.offering
    if offering is None or offering.from_ is None:
        raise StepFailed(cycle.node.name, "restore_offering", "the VM's previous offering is not known")
    return settled(f"{cycle.view.offering_name(offering.to)} -> {cycle.view.offering_name(offering.from_)} "
                   "(as before the rollout)", cycle._changes.change_offering(offering.from_, cycle.deadline))


def _verify_put_back(cycle: PutBackCycle) -> str:
    """As verify, but the VM still differs from the settings: that is what was refused."""
    parts = [cycle._wait_until_back()] if cycle._k8s else []
    state = cycle._read_vm().get("state")
    if state != "Running":
        raise StepFailed(cycle.node.name, "verify", f"VM is {state}")
    parts.append("VM Running on what it had (still out of date)")
    if cycle._needs_etcd:
        parts.append(cycle._wait_for_etcd())
    return "; ".join(parts)


def tell_failure(cycle: PutBackCycle, failed: StepFailed) -> None:
    """The Event that says where a failure left the node: put back, or left cordoned and why."""
    sink = cycle.batch.node_events
    if sink is None or cycle.failure is None:
        return
    run = sink.run
    cause = step_failure_cause(failed)
    put_back = cycle.failure.details.get("put_back")
    if put_back is True:
        cycle._event(put_back_event(failed.step, cause, None, cycle._ours, run))
    elif put_back is False:
        cycle._event(put_back_event(failed.step, cause, step_failure_cause(cycle.failure), cycle._ours, run))
    elif cycle._ours and ((cycle._last_read or {}).get("spec") or {}).get("unschedulable"):
        cycle._event(left_cordoned(failed.step, f"{failed.step} failed: {cause}", run))


#: The changes a refused start undoes, by the step that made them: the put-back step and its action.
UNDO: dict[str, tuple[str, Callable[[PutBackCycle], str]]] = {
    "update_affinity_groups": ("restore_affinity_groups", _undo_update_affinity_groups),
    "change_offering": ("restore_offering", _undo_change_offering),
}
