# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""One node of a batch through its steps."""

from __future__ import annotations

import copy
import functools
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, CloudStackError, StepFailed
from ansible_collections.cloudstack.cks.plugins.module_utils._common.stamps import utc_stamp
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.after_stop import (
    put_back_cause,
    refused_after_stop,
    start_refusal_cause,
    start_refused_after_change,
    to_undo,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.marks import (
    LB_EXCLUSION_LABEL,
    ExclusionDecision,
    exclusion_decision,
    exclusion_patch,
    marks_of,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node import (
    CordonDecision,
    back_for_uncordon,
    boot_id_of,
    change_plan,
    cordon_decision,
    describe_changes,
    node_with_vm,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node_events import (
    STARTED,
    NodeEvent,
    eviction_blocked,
    left_cordoned,
    put_back_event,
    step_event,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.reasons import outdated_reasons
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import (
    CONTROL,
    ETCD,
    NO_BOOT_ID,
    ROLLOUT_ANNOTATION,
    STOP_ANNOTATION,
    ClusterView,
    Node,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.drainer import Drainer
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.live_scale import grew_live
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.marks import return_to_service
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.node_back import wait_for_etcd, wait_for_load_balancers, wait_until_back
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.options import BatchContext
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.results import NodeResult, StepRecord, error_answer, step_failure_cause
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.steps import PHASE_OUTCOMES, PHASE_UNCORDON, STEPS, steps_for
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.vm_changes import VmChanges, settled

#: A skip rule's answer for a step done again in a later phase that has nothing to do: not recorded.
SILENT = "(not recorded)"


class NodeCycle:
    """The steps of one node of a batch. ``run`` never raises: it fills ``result`` / ``failure``."""

    def __init__(self, batch: BatchContext, view: ClusterView, node: Node, deadline: Deadline) -> None:
        self.batch = batch
        self.view = view
        self.node = node
        self.deadline = deadline
        self.cloud = batch.cloud
        self.kube = batch.kube
        self.options = batch.options
        self.type_settings = batch.settings[node.node_type]
        self.plan = change_plan(node, self.type_settings)
        self.result = NodeResult(name=node.name, node_type=node.node_type)
        self.result.changes = describe_changes(self.plan, view)
        self.failure: Optional[StepFailed] = None
        self._old_boot_ids: list[Optional[str]] = []
        self._ours = False
        self._lb_ours = False  # the load-balancer exclusion label is the rollout's
        self.last_read: Optional[dict[str, Any]] = None  # the node as last read (by verify, at the latest)
        self._since_stop: Optional[dict[str, Any]] = None  # the node as the stop annotation's write left it
        #: The resourceVersion the cycle's last write of the node answered: the validation reads the
        #: batch's watch only once it shows every node's (a state from after the batch).
        self.written_version: Optional[str] = None
        self._cordoned_with_annotation = False
        self._cordon = CordonDecision(False, False, False, None, "not read")
        self._exclusion = ExclusionDecision(False, False, "not read")
        self.vm_changes = VmChanges(self.cloud, node.vm_id, target=node.vm_name, project_id=view.project_id)

    # -- helpers -----------------------------------------------------------------------------

    def _step(self, name: str, fn: Callable[[], str]) -> None:
        record = StepRecord(name=name, started=time.time())
        self.result.steps.append(record)
        try:
            detail = fn()
        except StepFailed as exc:
            record.ended, record.outcome, record.detail = time.time(), "failed", step_failure_cause(exc)
            self._tell(name, "failed", record.detail)
            raise
        except CksError as exc:
            record.ended, record.outcome, record.detail = time.time(), "failed", exc.msg
            self._tell(name, "failed", exc.msg)
            raise StepFailed(self.node.name, name, exc.msg, **error_answer(exc)) from exc
        record.ended, record.outcome, record.detail = time.time(), "ok", detail or ""
        self._tell(name, "ok", record.detail)

    def _skip(self, name: str, why: str) -> None:
        now = time.time()
        self.result.steps.append(StepRecord(name=name, started=now, ended=now, outcome="skipped", detail=why))
        self._tell(name, "skipped", why)

    def _tell(self, step: str, outcome: str, detail: str) -> None:
        """The node's Event for a step, when it has one (``_decisions/node_events.py``)."""
        sink = self.batch.node_events
        event = step_event(step, outcome, detail, sink.run) if sink is not None else None
        if event is not None:
            self.write_event(event)

    def write_event(self, event: NodeEvent) -> None:
        """The node's Event (the live path's too, _rollout/live_scale.py, which reads last_read and vm_changes)."""
        sink = self.batch.node_events
        if sink is None or not self._k8s:
            return  # an external etcd node is no Node: nothing to tell describe
        known = self.last_read or self.view.k8s_objects.get(self.node.name) or {}
        sink.record(self.node.name, (known.get("metadata") or {}).get("uid"), event)

    @property
    def _k8s(self) -> bool:
        return self.node.is_kubernetes_node

    @property
    def _needs_etcd(self) -> bool:
        return self.node.node_type == ETCD or (self.node.node_type == CONTROL and not self.view.external_etcd)

    # -- the step table, read by the real run and by check mode ------------------------------------

    def _observe(self, current: dict[str, Any]) -> None:
        """What one read of the Node says of it: whose cordon it is, the boot ID before the stop."""
        self._cordon = cordon_decision(current)
        self._ours = self._cordon.ours
        self.result.cordoned_by_others = not self._ours
        self._old_boot_ids = [self._cordon.boot_id, boot_id_of(current)]
        self._exclusion = exclusion_decision(current)
        self._lb_ours = self._exclusion.ours
        self.last_read = current

    def _first_look(self) -> dict[str, Any]:
        """The node as the batch's view listed it moments ago (else a read): the annotate-and-cordon
        write is sent onto that version only, so a change since then is re-read, not overwritten."""
        listed = self.view.k8s_objects.get(self.node.name)
        return copy.deepcopy(dict(listed)) if listed is not None else self.kube.read_node(self.node.name)

    def _marks_left(self) -> bool:
        """Whether the node carries (in check mode: would carry) marks of the rollout when it goes back."""
        marks = marks_of(self.last_read or {})
        if self.options.check_mode:
            return marks.any or bool(self.options.exclude_from_load_balancers and self._exclusion.label)
        return marks.any

    def would_run(self) -> NodeResult:
        """Check mode: the steps this phase would run for the node, from one read of it; nothing changes."""
        now = time.time()
        if self._k8s:
            self._observe(self._first_look())
        for step, again in steps_for(self.options.phase, self._k8s, self.options, again=False):
            why = ACTIONS[step.name].skip(self, again)
            if why is not SILENT:
                self.result.steps.append(StepRecord(step.name, now, now, "would_run" if why is None else "would_skip",
                                                    why or ""))
        self.result.outcome = "would_cycle"
        self.result.started = self.result.ended = now
        return self.result

    def run(self) -> None:
        self.result.started = time.time()
        phase = self.options.phase
        try:
            if self._k8s and phase != PHASE_UNCORDON:
                self._observe(self._first_look())
            if self._k8s and grew_live(self):  # rollout_live_scale: auto (_rollout/live_scale.py)
                self.result.ended = time.time()
                return
            for step, again in steps_for(phase, self._k8s, self.options):
                action = ACTIONS[step.name]
                why = action.skip(self, again)
                if why is None:
                    self._step(step.name, functools.partial(action.run, self))
                elif why is not SILENT:
                    self._skip(step.name, why)
            self.result.outcome = PHASE_OUTCOMES[phase]
        except StepFailed as exc:
            self.failure = exc
            if self.options.put_back_on_refusal and refused_after_stop(exc.step, exc.details):
                self.failure = self._put_back(exc)
            elif self.options.put_back_on_refusal and start_refused_after_change(exc.step, exc.details, self._changed()):
                self.failure = self._put_back(exc, undo=to_undo(self._changed()))
            self._tell_failure(exc)
        except Exception as exc:  # a bug must still end this node's thread with a result
            self.failure = StepFailed(self.node.name, self.result.steps[-1].name if self.result.steps else "cycle",
                                      f"{type(exc).__name__}: {exc}")
        if self.failure is not None:
            self.result.outcome = "failed"
            self.result.error = {"step": self.failure.step, "message": self.failure.msg,
                                 **{k: v for k, v in self.failure.details.items() if k not in ("node", "step")}}
        self.result.ended = time.time()

    def _changed(self) -> list[str]:
        """The steps of this cycle that went through."""
        return [r.name for r in self.result.steps if r.outcome == "ok"]

    # -- the put-back: after a refusal, the node back into service on what it had ------------------

    def _put_back(self, refusal: StepFailed, undo: Optional[list[str]] = None) -> StepFailed:
        """CloudStack refused a change of the Stopped VM: start it on what it has now, see it back and
        return it to service. The batch still fails with the refusal (the node stays out of date; the
        next run retries it). A put-back that fails leaves the node as it is, cordoned, for the rerun
        to resume; a refusal never leaves a drained node down.

        ``undo``: the planner refused the start of the changed VM; these changes (its groups, its
        offering) are undone first (``UNDO``), so that it starts on what it had."""
        answer = {k: v for k, v in refusal.details.items() if k not in ("node", "step")}
        refused = step_failure_cause(refusal)
        try:
            for name in undo or []:
                step, action = UNDO[name]
                self._step(step, functools.partial(action, self))
            self._step("start", self._run_start)
            self._step("verify", self._verify_put_back)
            if self._k8s and self._ours:
                self._step("uncordon", self._run_uncordon)
            elif self._k8s and self._marks_left():
                self._step("unmark", self._run_unmark)
        except StepFailed as failed:
            why: Optional[str] = f"{failed.step}: {step_failure_cause(failed)}"
        else:
            why = None
        back = why is None
        cause = (put_back_cause(refused, why, back and self._ours) if undo is None
                 else start_refusal_cause(refused, undo, why, back and self._ours))
        return StepFailed(self.node.name, refusal.step, cause, **answer, put_back=back)

    def _restore_affinity_groups(self) -> str:
        groups = self.plan.affinity_groups
        if groups is None:
            raise AssertionError("only a change of groups is undone")
        names = self.result.changes.get("affinity_groups", {})
        return settled(f"{names.get('to')} -> {names.get('from')} (as before the rollout)",
                       self.vm_changes.set_affinity_groups(list(groups.from_), self._job_deadline()))

    def _restore_offering(self) -> str:
        offering = self.plan.offering
        if offering is None or offering.from_ is None:
            raise StepFailed(self.node.name, "restore_offering", "the VM's previous offering is not known")
        return settled(f"{self.view.offering_name(offering.to)} -> {self.view.offering_name(offering.from_)} "
                       "(as before the rollout)", self.vm_changes.change_offering(offering.from_, self.deadline))

    def _verify_put_back(self) -> str:
        """As verify, but the VM still differs from the settings: that is what was refused."""
        parts = [self._wait_until_back()] if self._k8s else []
        state = self.vm_changes.read_vm().get("state")
        if state != "Running":
            raise StepFailed(self.node.name, "verify", f"VM is {state}")
        parts.append("VM Running on what it had (still out of date)")
        if self._needs_etcd:
            parts.append(wait_for_etcd(self.batch, self.node, self.deadline))
        return "; ".join(parts)

    def _tell_failure(self, failed: StepFailed) -> None:
        """The Event that says where a failure left the node: put back, or left cordoned and why."""
        sink = self.batch.node_events
        if sink is None or self.failure is None:
            return
        cause = step_failure_cause(failed)
        put_back = self.failure.details.get("put_back")
        if put_back is True:
            self.write_event(put_back_event(failed.step, cause, None, self._ours, sink.run))
        elif put_back is False:
            self.write_event(put_back_event(failed.step, cause, step_failure_cause(self.failure), self._ours, sink.run))
        elif self._ours and ((self.last_read or {}).get("spec") or {}).get("unschedulable"):
            self.write_event(left_cordoned(failed.step, f"{failed.step} failed: {cause}", sink.run))

    # -- the steps ----------------------------------------------------------------------------------

    def _run_annotate(self) -> str:
        """The boot ID annotation and, when the cordon step follows, the cordon, in one write.

        One merge patch applies both or neither, so the node is never cordoned without the
        annotation that says the cordon is the rollout's. It goes onto the version observed
        (resourceVersion); on a 409 the node is read again and judged again (client-go's
        RetryOnConflict), so a cordon someone made meanwhile stays theirs.
        """
        first = self.last_read

        def build(current: dict[str, Any]) -> Optional[dict[str, Any]]:
            if current is not first:
                self._observe(current)
            patch: dict[str, Any] = {}
            if self._cordon.annotate:
                patch["metadata"] = {"annotations": {ROLLOUT_ANNOTATION: self._cordon.boot_id or NO_BOOT_ID}}
            if self._cordon.cordon:
                patch["spec"] = {"unschedulable": True}
            self._cordoned_with_annotation = self._cordon.cordon
            return patch or None

        answer = self._wrote(self.kube.patch_node_checked(self.node.name, build, node=first))
        if answer is not None:
            self.last_read = answer
        return f"boot ID {self._cordon.boot_id}"

    def _run_cordon(self) -> str:
        if self._cordoned_with_annotation:
            return "unschedulable (in the annotation's write)"
        return self._patch({"spec": {"unschedulable": True}}, "unschedulable")

    def _run_exclude_from_lb(self) -> str:
        return self._patch(exclusion_patch(), f"labelled {LB_EXCLUSION_LABEL}")

    def _run_drain(self) -> str:
        drainer = Drainer(self.kube, self.options.drain, self.batch.daemonsets)
        self._tell("drain", STARTED, "")
        drainer.on_blocked = lambda pod, pdb, answer: self.write_event(eviction_blocked(pod, pdb, answer))
        return self._drain(drainer)

    def _run_lb_wait(self) -> str:
        return wait_for_load_balancers(self.node, self.options.exclude_delay, self.deadline)

    def _run_stop(self) -> str:
        return self._stop(self.vm_changes)

    def _run_change_offering(self) -> str:
        offering = self.plan.offering
        if offering is None:
            raise AssertionError("change_offering runs only for an offering change")
        return settled(f"{self.view.offering_name(offering.from_)} -> {self.view.offering_name(offering.to)}",
                       self.vm_changes.change_offering(offering.to, self.deadline))

    def _run_resize_root_disk(self) -> str:
        disk = self.plan.root_disk
        if disk is None:
            raise AssertionError("resize_root_disk runs only for a root disk change")
        volume_id = self.node.root_volume_id
        if not volume_id:
            raise StepFailed(self.node.name, "resize_root_disk", "no ROOT volume visible to resize")
        return settled(f"{disk.from_} GB -> {disk.to} GB",
                       self.vm_changes.resize_root_disk(volume_id, disk.to, self._job_deadline()))

    def _run_update_affinity_groups(self) -> str:
        groups = self.plan.affinity_groups
        if groups is None:
            raise AssertionError("update_affinity_groups runs only for a change of groups")
        names = self.result.changes.get("affinity_groups", {})
        return settled(f"{names.get('from')} -> {names.get('to')}",
                       self.vm_changes.set_affinity_groups(groups.to, self._job_deadline()))

    def _run_start(self) -> str:
        gates = self.batch.start_gates
        if not gates.groups_of(self.node.name):
            return settled("Running", self.vm_changes.start(self._job_deadline()))
        # Not at the same moment as another node of its strict groups: each is planned with the
        # one before already on its host.
        with gates.held(self.node.name):
            how = self.vm_changes.start(self._job_deadline())
        self.result.changes["start"] = {"waited_for_planner": gates.waited.get(self.node.name, 0.0)}
        return settled("Running", how) + " (one at a time in its strict affinity groups)"

    def _run_verify(self) -> str:
        parts = []
        if self._k8s:
            parts.append(self._wait_until_back())
        parts.append(self._vm_matches())
        if self._needs_etcd:
            parts.append(wait_for_etcd(self.batch, self.node, self.deadline))
        return "; ".join(parts)

    def _run_recheck(self) -> str:
        """The uncordon phase: one read says the node is still back as the restart phase left it
        (the after_verify hooks ran since); it also says whose cordon it is."""
        current = None
        if self._k8s:
            current = self.kube.read_node(self.node.name)
            self._observe(current)
        ok, why = back_for_uncordon(self.node.vm_state, current)
        if not ok:
            raise StepFailed(self.node.name, "recheck", f"not back as the restart phase left it: {why}")
        return why

    def _run_uncordon(self) -> str:
        """Back into service in one write: uncordon, drop the annotations and the rollout's marks.

        The marks come off whatever this run's options are (a stopped run may have left them).
        """
        return self._return(True)

    def _run_unmark(self) -> str:
        """A node someone else cordoned stays cordoned; only the rollout's marks come off it."""
        return self._return(False)

    def _wait_until_back(self) -> str:
        self.last_read, why = wait_until_back(self.batch, self.node, self._old_boot_ids, self._since_stop,
                                              self.deadline)
        return why

    def _vm_matches(self) -> str:
        # The start's and the resize's own answers are the VM and volume as they are now: read
        # again only what no job of this cycle answered (a lost answer, no resize planned).
        vm = self.vm_changes.job_answer("startVirtualMachine") or self.vm_changes.read_vm()
        if self.plan.root_disk is None:
            root: Optional[dict[str, Any]] = None  # unchanged since the batch read it
        else:
            root = self.vm_changes.job_answer("resizeVolume", self.node.root_volume_id) or self.vm_changes.read_root()
        refreshed = node_with_vm(self.node, vm, root, self.view)
        if refreshed.vm_state != "Running":
            raise StepFailed(self.node.name, "verify", f"VM is {refreshed.vm_state}")
        reasons = outdated_reasons(refreshed, self.type_settings, self.view, kubelet=False)
        if reasons:
            raise StepFailed(self.node.name, "verify", "the VM still differs from the settings: "
                             + "; ".join(r.message for r in reasons))
        return "VM matches the settings"

    def _patch(self, patch: dict[str, Any], detail: str) -> str:
        self._wrote(self.kube.patch_node(self.node.name, patch))
        return detail

    def _wrote(self, answer: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
        """Note the version a write of the node answered (None: nothing was written)."""
        version = ((answer or {}).get("metadata") or {}).get("resourceVersion")
        if version:
            self.written_version = str(version)
        return answer

    def _drain(self, drainer: Drainer) -> str:
        report = drainer.drain(self.node.name, self.deadline, node_down=not self.node.running)
        self.result.changes["drain"] = {"evicted": report.evicted, "skipped": len(report.skipped)}
        if report.warnings:
            self.result.changes["drain"]["warnings"] = report.warnings
        if report.budget_waits:
            self.result.changes["drain"]["waited_for"] = report.budget_waits
        return f"{len(report.evicted)} pods evicted, {len(report.skipped)} left (DaemonSet and mirror pods)"

    def _job_deadline(self) -> Deadline:
        return self.deadline.sub(self.options.job_timeout)

    def _stop(self, changes: VmChanges) -> str:
        if self._k8s and self._ours:
            # Release must know a stop may have happened: then a Ready with the old boot ID is
            # never taken for "it never went down" (it may be the stale one from before the stop).
            self._since_stop = self._wrote(self.kube.patch_node(
                self.node.name, {"metadata": {"annotations": {STOP_ANNOTATION: utc_stamp()}}}))
        try:
            how = changes.stop(self._job_deadline())
        except CloudStackError:
            # A failed job may still have left the VM stopped: its state says.
            if changes.read_vm().get("state") != "Stopped":
                raise
            how = "the VM is Stopped after all"
        return settled("Stopped", how)

    def _return(self, uncordon: bool) -> str:
        current = self.last_read if self.last_read is not None else self.kube.read_node(self.node.name)
        marks = marks_of(current)
        self._wrote(return_to_service(self.kube, self.node.name, marks, uncordon, node=current))
        done = ["uncordoned, annotation removed"] if uncordon else []
        if marks.any:
            done.append(f"{marks.words()} removed")
        return ", ".join(done)


@dataclass(frozen=True)
class StepAction:
    """What a step of the table in steps.py does for a node, and its skip rule: None, the step runs;
    else why it is skipped (``SILENT``: a step done again, ``again``, with nothing to do)."""

    run: Callable[[NodeCycle], str]
    skip: Callable[[NodeCycle, bool], Optional[str]]


def _runs(_cycle: NodeCycle, _again: bool) -> Optional[str]:
    return None


def _skip_cordon(cycle: NodeCycle, again: bool) -> Optional[str]:
    if cycle._cordon.cordon:
        return None
    return SILENT if again else "already cordoned" if cycle._ours else cycle._cordon.why


def _skip_lb_wait(cycle: NodeCycle, _again: bool) -> Optional[str]:
    if not cycle._lb_ours:
        return "the node was out of load balancers before the rollout"
    return None if cycle.node.running else f"VM is {cycle.node.vm_state}: no traffic to wait for"


def _skip_update_affinity_groups(cycle: NodeCycle, _again: bool) -> Optional[str]:
    if cycle.plan.affinity_groups:
        return None
    return "the type records no groups" if cycle.type_settings.affinity_group_ids is None else "groups already as set"


#: Each step of ``STEPS``, by its name there: the one place a step's action and skip rule are named.
ACTIONS: dict[str, StepAction] = {
    "annotate": StepAction(NodeCycle._run_annotate,
                           lambda c, again: None if c._cordon.annotate else SILENT if again else c._cordon.why),
    "cordon": StepAction(NodeCycle._run_cordon, _skip_cordon),
    "exclude_from_lb": StepAction(NodeCycle._run_exclude_from_lb,
                                  lambda c, again: None if c._exclusion.label else SILENT if again else c._exclusion.why),
    "drain": StepAction(NodeCycle._run_drain, _runs),
    "lb_wait": StepAction(NodeCycle._run_lb_wait, _skip_lb_wait),
    "stop": StepAction(NodeCycle._run_stop,
                       lambda c, _again: "VM already Stopped" if c.node.vm_state == "Stopped" else None),
    "change_offering": StepAction(NodeCycle._run_change_offering,
                                  lambda c, _again: None if c.plan.offering else "offering already as set"),
    "resize_root_disk": StepAction(NodeCycle._run_resize_root_disk,
                                   lambda c, _again: None if c.plan.root_disk else "root disk already large enough"),
    "update_affinity_groups": StepAction(NodeCycle._run_update_affinity_groups, _skip_update_affinity_groups),
    "start": StepAction(NodeCycle._run_start, _runs),
    "verify": StepAction(NodeCycle._run_verify, _runs),
    "recheck": StepAction(NodeCycle._run_recheck, _runs),
    "uncordon": StepAction(NodeCycle._run_uncordon,
                           lambda c, _again: None if c._ours else "cordoned by someone else before the rollout: left cordoned"),
    # Only a node someone else cordoned: for the rollout's own, the uncordon takes the marks off.
    "unmark": StepAction(NodeCycle._run_unmark, lambda c, _again: None if not c._ours and c._marks_left() else SILENT),
}
# A step of the table without an action (or an action of no step) fails at import, not in a node's thread.
if set(ACTIONS) != {step.name for step in STEPS}:
    raise ImportError(f"node_cycle: the steps {sorted(set(ACTIONS) ^ {step.name for step in STEPS})} "
                      "are not both in steps.STEPS and ACTIONS")

#: The changes a refused start undoes, by the step that made them: the put-back's step and its action.
UNDO: dict[str, tuple[str, Callable[[NodeCycle], str]]] = {
    "update_affinity_groups": ("restore_affinity_groups", NodeCycle._restore_affinity_groups),
    "change_offering": ("restore_offering", NodeCycle._restore_offering),
}
