# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""One node of a batch through its steps."""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, CloudStackError, DeadlineExceeded, StepFailed
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline, wait_for
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.marks import LB_EXCLUSION_LABEL, Marks, exclusion_decision, exclusion_patch, marks_of
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node import (
    back_for_uncordon,
    boot_id_of,
    change_plan,
    cordon_decision,
    describe_changes,
    node_is_back,
    node_with_vm,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.reasons import outdated_reasons
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import CONTROL, ETCD, ROLLOUT_ANNOTATION, STOP_ANNOTATION, ClusterView, Node
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.drainer import Drainer
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.marks import put_back
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.options import BatchContext
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.vm_changes import VmChanges, settled
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.results import (
    PHASE_ALL,
    PHASE_CORDON,
    PHASE_OUTCOMES,
    PHASE_RESTART,
    PHASE_STEPS,
    PHASE_UNCORDON,
    NodeResult,
    StepRecord,
    _cause,
)


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
        self._last_read: Optional[dict[str, Any]] = None  # the node as verify last read it

    # -- helpers -----------------------------------------------------------------------------

    def _step(self, name: str, fn: Callable[[], str]) -> None:
        record = StepRecord(name=name, started=time.time())
        self.result.steps.append(record)
        try:
            detail = fn()
        except StepFailed as exc:
            record.ended, record.outcome, record.detail = time.time(), "failed", _cause(exc)
            raise
        except CksError as exc:
            record.ended, record.outcome, record.detail = time.time(), "failed", exc.msg
            raise StepFailed(self.node.name, name, exc.msg, **_answer(exc)) from exc
        record.ended, record.outcome, record.detail = time.time(), "ok", detail or ""

    def _skip(self, name: str, why: str) -> None:
        now = time.time()
        self.result.steps.append(StepRecord(name=name, started=now, ended=now, outcome="skipped", detail=why))

    @property
    def _k8s(self) -> bool:
        return self.node.is_kubernetes_node

    @property
    def _needs_etcd(self) -> bool:
        return self.node.node_type == ETCD or (self.node.node_type == CONTROL and not self.view.external_etcd)

    # -- check mode ----------------------------------------------------------------------------

    def would_run(self) -> NodeResult:
        now = time.time()
        steps: list[tuple[str, str, str]] = []
        current: dict[str, Any] = {}
        if self._k8s:
            current = self.kube.read_node(self.node.name)
            decision = cordon_decision(current)
            self.result.cordoned_by_others = not decision.ours
            steps.append(("annotate", "would_run" if decision.annotate else "would_skip", decision.why))
            steps.append(("cordon", "would_run" if decision.cordon else "would_skip", decision.why))
            exclusion = exclusion_decision(current)
            if self.options.exclude_from_load_balancers:
                steps.append(("exclude_from_lb", "would_run" if exclusion.label else "would_skip", exclusion.why))
            steps.append(("drain", "would_run", ""))
            if self.options.exclude_from_load_balancers:
                waits = exclusion.ours and self.node.running
                steps.append(("lb_wait", "would_run" if waits else "would_skip",
                              f"{self.options.exclude_delay:g}s" if waits else "nothing to wait for"))
        steps.append(("stop", "would_run" if self.node.running else "would_skip", f"VM is {self.node.vm_state}"))
        for name, change in (("change_offering", self.plan.offering), ("resize_root_disk", self.plan.root_disk),
                             ("update_affinity_groups", self.plan.affinity_groups)):
            steps.append((name, "would_run" if change else "would_skip", "" if change else "already as set"))
        steps.append(("start", "would_run", ""))
        steps.append(("verify", "would_run", ""))
        if self._k8s:
            steps.append(("uncordon", "would_run" if not self.result.cordoned_by_others else "would_skip", ""))
            marks = marks_of(current)
            if self.result.cordoned_by_others and (marks.any or self.options.exclude_from_load_balancers):
                steps.append(("unmark", "would_run", "the rollout's marks come off; the node stays cordoned"))
        phase = self.options.phase
        if phase != PHASE_ALL:
            steps = [step for step in steps if step[0] in PHASE_STEPS[phase]]
        if phase == PHASE_UNCORDON:
            steps.insert(0, ("recheck", "would_run", "the node must still be back as the restart phase left it"))
        self.result.steps = [StepRecord(n, now, now, o, d) for n, o, d in steps]
        self.result.outcome = "would_cycle"
        self.result.started = self.result.ended = now
        return self.result

    # -- the cycle ------------------------------------------------------------------------------

    def run(self) -> None:
        self.result.started = time.time()
        phase = self.options.phase
        try:
            if self._k8s and phase in (PHASE_ALL, PHASE_CORDON, PHASE_RESTART):
                self._cordon(resumed=phase == PHASE_RESTART)
            if phase in (PHASE_ALL, PHASE_RESTART):
                if self._k8s:
                    self._drain_and_wait()
                self._change()
                self._verify()
            if phase == PHASE_UNCORDON:
                self._step("recheck", self._recheck)
            if self._k8s and phase in (PHASE_ALL, PHASE_UNCORDON):
                self._uncordon()
            self.result.outcome = PHASE_OUTCOMES[phase]
        except StepFailed as exc:
            self.failure = exc
        except Exception as exc:  # a bug must still end this node's thread with a result
            self.failure = StepFailed(self.node.name, self.result.steps[-1].name if self.result.steps else "cycle",
                                      f"{type(exc).__name__}: {exc}")
        if self.failure is not None:
            self.result.outcome = "failed"
            self.result.error = {"step": self.failure.step, "message": self.failure.msg,
                                 **{k: v for k, v in self.failure.details.items() if k not in ("node", "step")}}
        self.result.ended = time.time()

    def _cordon(self, resumed: bool = False) -> None:
        """Annotate, cordon, label out of the load balancers: what the node needs of it.

        ``resumed`` (the restart phase): the cordon phase did it already, so the node is read to
        learn what it did (its recorded boot ID, whose cordon it is), and only what a hook may have
        undone is done again; steps with nothing to do are not recorded a second time.
        """
        current = self.kube.read_node(self.node.name)
        decision = cordon_decision(current)
        self._ours = decision.ours
        self.result.cordoned_by_others = not decision.ours
        self._old_boot_ids = [decision.boot_id, boot_id_of(current)]
        if decision.annotate:
            self._step("annotate", lambda: self._patch({"metadata": {"annotations": {
                ROLLOUT_ANNOTATION: decision.boot_id or ""}}}, f"boot ID {decision.boot_id}"))
        elif not resumed:
            self._skip("annotate", decision.why)
        if decision.cordon:
            self._step("cordon", lambda: self._patch({"spec": {"unschedulable": True}}, "unschedulable"))
        elif not resumed:
            self._skip("cordon", "already cordoned" if decision.ours else decision.why)
        if self.options.exclude_from_load_balancers:
            self._exclude_from_load_balancers(current, resumed)

    def _drain_and_wait(self) -> None:
        drainer = Drainer(self.kube, self.options.drain)
        self._step("drain", lambda: self._drain(drainer))
        if self.options.exclude_from_load_balancers:
            self._wait_for_load_balancers()

    def _exclude_from_load_balancers(self, current: dict[str, Any], resumed: bool = False) -> None:
        exclusion = exclusion_decision(current)
        self._lb_ours = exclusion.ours
        if exclusion.label:
            self._step("exclude_from_lb", lambda: self._patch(
                exclusion_patch(), f"labelled {LB_EXCLUSION_LABEL}"))
        elif not resumed:
            self._skip("exclude_from_lb", exclusion.why)

    def _recheck(self) -> str:
        """The uncordon phase: one read says the node is still back as the restart phase left it
        (the after_verify hooks ran since); it also says whose cordon it is."""
        current = None
        if self._k8s:
            current = self._last_read = self.kube.read_node(self.node.name)
            self._ours = cordon_decision(current).ours
            self.result.cordoned_by_others = not self._ours
        ok, why = back_for_uncordon(self.node.vm_state, current)
        if not ok:
            raise StepFailed(self.node.name, "recheck", f"not back as the restart phase left it: {why}")
        return why

    def _wait_for_load_balancers(self) -> None:
        """Give the service controller time to drop the node before its VM stops (EKS waits too)."""
        if not self._lb_ours:
            self._skip("lb_wait", "the node was out of load balancers before the rollout")
        elif not self.node.running:
            self._skip("lb_wait", f"VM is {self.node.vm_state}: no traffic to wait for")
        else:
            self._step("lb_wait", self._lb_wait)

    def _lb_wait(self) -> str:
        delay = max(0.0, float(self.options.exclude_delay))
        if self.deadline.remaining() < delay:
            raise StepFailed(self.node.name, "lb_wait", f"the batch deadline leaves {self.deadline.remaining():.0f}s, "
                             f"less than the {delay:g}s to wait for the load balancers")
        time.sleep(delay)
        return f"waited {delay:g}s after the drain for the load balancers to drop the node"

    def _patch(self, patch: dict[str, Any], detail: str) -> str:
        self.kube.patch_node(self.node.name, patch)
        return detail

    def _drain(self, drainer: Drainer) -> str:
        report = drainer.drain(self.node.name, self.deadline, node_down=not self.node.running)
        self.result.changes.setdefault("drain", {})
        self.result.changes["drain"] = {"evicted": report.evicted, "skipped": len(report.skipped)}
        if report.warnings:
            self.result.changes["drain"]["warnings"] = report.warnings
        return f"{len(report.evicted)} pods evicted, {len(report.skipped)} left (DaemonSet and mirror pods)"

    def _change(self) -> None:
        vm_id = self.node.vm_id
        changes = VmChanges(self.cloud, vm_id, target=self.node.vm_name)
        if self.node.vm_state == "Stopped":
            self._skip("stop", "VM already Stopped")
        else:
            self._step("stop", lambda: self._stop(changes))
        if self.plan.offering:
            offering = self.plan.offering
            self._step("change_offering", lambda: settled(
                f"{self.view.offering_name(offering.from_)} -> {self.view.offering_name(offering.to)}",
                changes.change_offering(offering.to, self.deadline)))
        else:
            self._skip("change_offering", "offering already as set")
        if self.plan.root_disk:
            disk = self.plan.root_disk
            if not self.node.root_volume_id:
                raise StepFailed(self.node.name, "resize_root_disk", "no ROOT volume visible to resize")
            volume_id = self.node.root_volume_id
            self._step("resize_root_disk", lambda: settled(
                f"{disk.from_} GB -> {disk.to} GB", changes.resize_root_disk(volume_id, disk.to, self._job_deadline())))
        else:
            self._skip("resize_root_disk", "root disk already large enough")
        if self.plan.affinity_groups:
            groups = self.plan.affinity_groups
            names = self.result.changes.get("affinity_groups", {})
            self._step("update_affinity_groups", lambda: settled(
                f"{names.get('from')} -> {names.get('to')}", changes.set_affinity_groups(groups.to, self._job_deadline())))
        else:
            why = "the type records no groups" if self.type_settings.affinity_group_ids is None else "groups already as set"
            self._skip("update_affinity_groups", why)
        self._step("start", lambda: settled("Running", changes.start(self._job_deadline())))

    def _job_deadline(self) -> Deadline:
        return self.deadline.sub(self.options.job_timeout)

    def _stop(self, changes: VmChanges) -> str:
        if self._k8s and self._ours:
            # Release must know a stop may have happened: then a Ready with the old boot ID is
            # never taken for "it never went down" (it may be the stale one from before the stop).
            self.kube.patch_node(self.node.name, {"metadata": {"annotations": {STOP_ANNOTATION: _now_text()}}})
        try:
            how = changes.stop(self._job_deadline())
        except CloudStackError:
            # A failed job may still have left the VM stopped: its state says.
            if changes.read_vm().get("state") != "Stopped":
                raise
            how = "the VM is Stopped after all"
        return settled("Stopped", how)

    def _read_vm(self) -> dict[str, Any]:
        found = self.cloud.list("listVirtualMachines", id=self.node.vm_id, listall=True)
        if not found:
            raise CloudStackError("listVirtualMachines", "the VM is gone", target=self.node.vm_name)
        return found[0]

    def _read_root(self) -> Optional[dict[str, Any]]:
        volumes = self.cloud.list("listVolumes", virtualmachineid=self.node.vm_id, type="ROOT", listall=True)
        return volumes[0] if volumes else None

    def _verify(self) -> None:
        self._step("verify", self._verify_all)

    def _verify_all(self) -> str:
        parts = []
        if self._k8s:
            last = {"why": ""}

            def back() -> bool:
                self._last_read = self.kube.read_node(self.node.name)
                ok, why = node_is_back(self._last_read, self._old_boot_ids)
                last["why"] = why
                return ok

            try:
                wait_for(back, self.deadline, self.options.poll_interval, what=f"node {self.node.name} to come back")
            except DeadlineExceeded:
                raise StepFailed(self.node.name, "verify", f"not back by the batch deadline: {last['why']}")
            parts.append(last["why"])
        refreshed = node_with_vm(self.node, self._read_vm(), self._read_root(), self.view)
        if refreshed.vm_state != "Running":
            raise StepFailed(self.node.name, "verify", f"VM is {refreshed.vm_state}")
        reasons = outdated_reasons(refreshed, self.type_settings, self.view)
        if reasons:
            raise StepFailed(self.node.name, "verify", "the VM still differs from the settings: "
                             + "; ".join(r.message for r in reasons))
        parts.append("VM matches the settings")
        if self._needs_etcd:
            check = self.batch.etcd_check
            if check is None:
                raise StepFailed(self.node.name, "verify", "no etcd check configured to prove the member is back")
            last_etcd = {"why": ""}

            def etcd_back() -> bool:
                ok, why = check(healthy=[self.node.name])
                last_etcd["why"] = why
                return ok

            try:
                wait_for(etcd_back, self.deadline, self.options.poll_interval, what=f"etcd member {self.node.name}")
            except DeadlineExceeded:
                raise StepFailed(self.node.name, "verify", f"etcd not healthy by the batch deadline: {last_etcd['why']}")
            parts.append(f"etcd healthy: {last_etcd['why']}")
        return "; ".join(parts)

    def _uncordon(self) -> None:
        """Back into service in one write: uncordon, drop the annotations and the rollout's marks.

        The marks come off whatever this run's options are (a stopped run may have left them). A
        node someone else cordoned stays cordoned; only the marks come off it.
        """
        current = self._last_read if self._last_read is not None else self.kube.read_node(self.node.name)
        marks = marks_of(current)
        if self._ours:
            self._step("uncordon", lambda: self._return(current, marks, True))
            return
        self._skip("uncordon", "cordoned by someone else before the rollout: left cordoned")
        if marks.any:
            self._step("unmark", lambda: self._return(current, marks, False))

    def _return(self, current: dict[str, Any], marks: Marks, uncordon: bool) -> str:
        put_back(self.kube, self.node.name, marks, uncordon, node=current)
        done = ["uncordoned, annotation removed"] if uncordon else []
        if marks.any:
            done.append(f"{marks.words()} removed")
        return ", ".join(done)


def _answer(exc: CksError) -> dict[str, Any]:
    """What CloudStack or Kubernetes answered, for the result (no secrets are in these fields)."""
    keep = ("command", "errorcode", "errortext", "target", "action", "status", "reason", "what", "jobid")
    return {k: v for k, v in exc.details.items() if k in keep}


def _now_text() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
