# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The live path of a node (``rollout_live_scale: auto``): grow the running VM, make the kubelet
see it, check it; no drain, no stop. Any step that does not end as it should hands the node to the
restart path of the same cycle (cordon, drain, stop, start), with the reason in its result.

In order, each recorded as a step of the node:

- first the decision (``_decisions.scale_path``), from the VM, its offerings and listCapabilities
  read now, before anything changes; it is the result's ``changes.path``. A restart decision ends here.
- ``guest_check``: a privileged pod on the node (``_clients.live_scale.NodeShell``) reads the
  guest's vCPUs online, the vCPUs its domain was started with room for, and MemTotal. A domain
  without room for the new vCPUs restarts (CloudStack's hypervisor would refuse, 530).
- ``scale_live``: scaleVirtualMachine of the running VM. A refusal restarts the node; the change is
  then the restart path's (the VM still has its old offering).
- ``guest_sees``: the guest has the new vCPUs online and its MemTotal grew by the added memory
  (less the kernel's page structures of it), within ``GUEST_WAIT`` seconds.
- ``kubelet_restart``: ``systemctl restart kubelet`` through a transient timer, so the exec returns
  before the kubelet that carries it stops. The pod is deleted.
- ``node_reports``: the Node reports the new CPU count and at least the allocatable memory
  ``expected_capacity`` computes, Ready, with the boot ID it had before (no reboot happened).

No cordon: nothing is evicted and the node keeps every pod, so a cordon would only keep new pods
off a node that is about to have more room; a fallback cordons it as the restart path always does.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.live_scale import NodeShell, read_facts, scale
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, CloudStackError, DeadlineExceeded
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import wait_for
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node import boot_id_of
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node_events import WARNING, NodeEvent
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.scale_path import (
    AUTO,
    LIVE,
    NEVER,
    GuestView,
    LiveFacts,
    OfferingFacts,
    ScalePath,
    capacity_words,
    event_words,
    expected_capacity,
    guest_sees,
    headroom_refusal,
    kubelet_unaware,
    quantity_kib,
    reports_capacity,
    reports_vm_size,
    scale_path,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.results import StepRecord
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.steps import PHASE_ALL

#: Seconds the guest has to online what was hot-added (udev acts within a second).
GUEST_WAIT = 30.0


def grew_live(cycle: Any) -> bool:
    """The live path of a cycle whose offering changes, under ``live_scale: auto``: True when the node
    grew without a restart; else the restart path follows, without the offering change when the live
    scale made it. A cycle with nothing to change on its VM takes it only for a kubelet that has not
    seen its VM's size (``LivePath.catch_up``)."""
    if cycle.options.live_scale == NEVER:
        return False
    if cycle.plan.empty:
        return LivePath(cycle).catch_up()
    if cycle.plan.offering is None:
        return False
    live = LivePath(cycle)
    if live.run():
        return True
    if live.scaled:
        cycle.plan = dataclasses.replace(cycle.plan, offering=None)
    return False


class Fallback(Exception):
    """The node takes the restart path: why."""


class LivePath:
    def __init__(self, cycle: Any) -> None:
        # The node's NodeCycle (node_cycle.py imports this module): its plan, options, clients,
        # deadline and result, and its Event writer.
        self.cycle = cycle
        self.scaled = False  # the VM has its new offering: the restart path changes nothing more
        self.facts: Optional[LiveFacts] = None  # what the decision read

    def decide(self) -> ScalePath:
        c = self.cycle
        changes = frozenset(k for k in ("offering", "root_disk", "affinity_groups") if getattr(c.plan, k))
        offering = c.plan.offering
        if c.options.live_scale == AUTO and changes == {"offering"} and offering is not None:
            self.facts = read_facts(c.cloud, c.node.vm_id, offering.to, c.vm_changes.scope)
        return scale_path(c.options.live_scale, changes, self.facts, phased=c.options.phase != PHASE_ALL)

    def run(self) -> bool:
        """True when the node grew live and reports it; False: the restart path follows."""
        return self._follow(self.decide(), self._live)

    def _follow(self, decided: ScalePath, live: Callable[[], str]) -> bool:
        """The decided path, ``live`` run for a live one: True when it ended live."""
        c = self.cycle
        if decided.path != LIVE:
            c.result.changes["path"] = decided.to_dict()
            return False
        try:
            detail = live()
        except Fallback as why:
            c.result.changes["path"] = {"path": "restart", "reason": str(why), "fell_back_from": LIVE}
            c.write_event(NodeEvent("LiveScaleFellBack", "ScaleLive", f"restart instead: {why}"[:1000], WARNING))
            return False
        c.result.changes["path"] = {"path": LIVE, "reason": decided.reason, "capacity": detail}
        c.result.outcome = "done"
        return True

    def catch_up(self) -> bool:
        """A VM that has its offering already and a kubelet that has not seen it (a run stopped
        between the live scale and the kubelet's restart): the kubelet restarted and the node's new
        size awaited, no scale; False: the restart path follows (it changes nothing on the VM)."""
        c = self.cycle
        node = c.node
        unaware = kubelet_unaware(node.kubelet_cpu, node.kubelet_memory, node.cpu, node.memory_mb)
        if unaware is None:
            return False
        decided = scale_path(c.options.live_scale, frozenset(), None, phased=c.options.phase != PHASE_ALL,
                             unaware=unaware)
        return self._follow(decided, lambda: self._restart_kubelet(
            lambda status: reports_vm_size(status, node.cpu, node.memory_mb),
            f"{node.cpu} CPU and {node.memory_mb} MiB as its VM has"))

    def _restart_kubelet(self, judge: Callable[[dict[str, Any]], tuple[bool, str]], expected: str) -> str:
        c = self.cycle
        before_node = c.last_read or c.kube.read_node(c.node.name)
        boot_id = boot_id_of(before_node)
        if not boot_id:
            raise Fallback("the node's boot ID could not be read")
        self._in_pod(self._restart_in)
        status = self._must("node_reports", lambda: self._node_reports(judge, expected, boot_id))
        words = f"kubelet restarted to see its VM's size; capacity now {capacity_words(status)}"
        c.write_event(NodeEvent("ScaledLive", "ScaleLive", words))
        return capacity_words(status)

    def _live(self) -> str:
        c = self.cycle
        offering = c.plan.offering
        facts = self.facts
        if offering is None or facts is None or facts.current is None or facts.target is None:
            raise Fallback("the VM or its offerings were not read")
        old, new = facts.current, facts.target
        before_node = c.last_read or c.kube.read_node(c.node.name)
        boot_id = boot_id_of(before_node)
        allocatable = quantity_kib(str(((before_node.get("status") or {}).get("allocatable") or {}).get("memory", "")))
        if allocatable is None or not boot_id:
            raise Fallback("the node's allocatable memory or boot ID could not be read")

        def scale_in(shell: NodeShell) -> None:
            before = self._must("guest_check", lambda: self._guest_room(shell.guest(), new))
            self._must("scale_live", lambda: self._scale(old, new, offering.to))
            self._must("guest_sees", lambda: self._guest_grew(shell, before, old, new))
            self._restart_in(shell)

        self._in_pod(scale_in)
        expected = expected_capacity(new, old.memory_mb, allocatable)
        status = self._must("node_reports", lambda: self._node_reports(
            lambda found: reports_capacity(found, expected), expected.why, boot_id))
        c.write_event(NodeEvent("ScaledLive", "ScaleLive", event_words(new.name, status)))
        return capacity_words(status)

    def _in_pod(self, steps: Callable[[NodeShell], None]) -> None:
        """``steps`` with the privileged pod on the node, deleted however they end."""
        c = self.cycle
        shell = NodeShell(c.kube, c.node.name, c.options.live_scale_image, c.deadline, c.options.poll_interval)
        try:
            with shell:
                steps(shell)
        except CksError as exc:
            raise Fallback(f"the pod on the node failed: {exc.msg}") from exc
        finally:
            if shell.left_behind:
                c.result.changes["left_behind"] = f"pod kube-system/{shell.left_behind} could not be seen deleted"

    # -- the steps -----------------------------------------------------------------------------------

    def _restart_in(self, shell: NodeShell) -> None:
        self._must("kubelet_restart", lambda: f"kubelet restart queued ({shell.restart_kubelet()})")

    def _guest_room(self, guest: GuestView, new: OfferingFacts) -> GuestView:
        refusal = headroom_refusal(guest, new)
        if refusal is not None:
            raise Fallback(refusal)
        return guest

    def _scale(self, old: OfferingFacts, new: OfferingFacts, offering_id: str) -> str:
        c = self.cycle
        try:
            scale(c.cloud, c.node.vm_id, offering_id, c.deadline.sub(c.options.job_timeout), c.node.vm_name)
        except CloudStackError as exc:
            # A lost answer or a failed job may still have left the VM on its new offering.
            self.scaled = self._has_offering(offering_id)
            code = exc.details.get("errorcode")
            raise Fallback(f"CloudStack refused the live scale ({code}): {exc.details.get('errortext') or exc.msg}")
        self.scaled = True
        return f"{old.name} -> {new.name} on the running VM"

    def _has_offering(self, offering_id: str) -> bool:
        try:
            vm = self.cycle.vm_changes.read_vm()
        except CksError:
            return False  # unknown: the restart path's change settles it (it skips an offering already set)
        return str(vm.get("serviceofferingid") or "").lower() == offering_id.lower()

    def _guest_grew(self, shell: NodeShell, before: GuestView, old: OfferingFacts, new: OfferingFacts) -> str:
        c = self.cycle
        last = {"why": ""}

        def grown() -> bool:
            ok, why = guest_sees(before, shell.guest(), old, new)
            last["why"] = why
            return ok

        try:
            wait_for(grown, c.deadline.sub(GUEST_WAIT), c.options.poll_interval, what=f"the guest of {c.node.name}")
        except DeadlineExceeded:
            raise Fallback(last["why"])
        return last["why"]

    def _node_reports(self, judge: Callable[[dict[str, Any]], tuple[bool, str]], expected: str,
                      boot_id: str) -> dict[str, Any]:
        c = self.cycle
        last = {"why": ""}

        def reported(node: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
            if node is None:
                last["why"] = "the Node is not in the API"
                return None
            status = node.get("status") or {}
            ok, why = judge(status)
            ready = any(x.get("type") == "Ready" and x.get("status") == "True" for x in status.get("conditions") or [])
            if boot_id_of(node) != boot_id:
                last["why"] = f"boot ID changed from {boot_id}: the node rebooted"
                return None
            last["why"] = why if not ok else ("" if ready else "not Ready")
            return node if ok and ready else None

        try:
            node = c.kube.await_node(c.node.name, reported, c.deadline.sub(c.options.live_scale_timeout),
                                     c.options.poll_interval, what=f"node {c.node.name} to report its new size")
        except DeadlineExceeded:
            raise Fallback(f"the node did not report its new size within {c.options.live_scale_timeout:g}s: "
                           f"{last['why']} ({expected})")
        c.last_read = node
        return dict(node.get("status") or {})

    # -- recording ----------------------------------------------------------------------------------

    def _must(self, name: str, fn: Callable[[], Any]) -> Any:
        record = StepRecord(name=name, started=time.time())
        self.cycle.result.steps.append(record)
        try:
            value = fn()
        except Fallback as why:
            record.ended, record.outcome, record.detail = time.time(), "failed", str(why)
            raise
        except CksError as exc:
            record.ended, record.outcome, record.detail = time.time(), "failed", exc.msg
            raise Fallback(f"{name}: {exc.msg}") from exc
        record.ended, record.outcome = time.time(), "ok"
        record.detail = value if isinstance(value, str) else ""
        return value
