# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""One node's cycle, decided from what it shows: whose cordon it is, what its VM needs, whether it is back."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.reasons import target_affinity_group_ids
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import TypeSettings
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import (
    NO_BOOT_ID,
    ROLLOUT_ANNOTATION,
    UNHEALTHY_TAINTS,
    AffinityGroup,
    ClusterView,
    Node,
)


def _condition(node: dict[str, Any], kind: str) -> dict[str, Any]:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return cond
    return {}


def boot_id_of(node: dict[str, Any]) -> Optional[str]:
    info = (node.get("status") or {}).get("nodeInfo") or {}
    return info.get("bootID") or None


def annotations_of(node: dict[str, Any]) -> dict[str, str]:
    return dict((node.get("metadata") or {}).get("annotations") or {})


def node_is_back(node: dict[str, Any], old_boot_ids: Sequence[Optional[str]]) -> tuple[bool, str]:
    """One read of a Node: restarted and Ready, or why not.

    A Ready condition from before the stop can outlive the VM by the node-monitor grace period,
    so only a boot ID other than every one seen before the stop proves a new boot.
    """
    boot_id = boot_id_of(node)
    old = {b for b in old_boot_ids if b}
    if not boot_id:
        return False, "reports no boot ID"
    if boot_id in old:
        return False, f"still reports boot ID {boot_id} from before the restart"
    ready = _condition(node, "Ready")
    if ready.get("status") != "True":
        return False, f"new boot ID {boot_id}, Ready={ready.get('status', 'missing')} ({ready.get('reason', '')})"
    if ready.get("reason") not in (None, "", "KubeletReady"):
        return False, f"Ready=True but reason {ready.get('reason')}"
    taints = sorted({t.get("key") for t in (node.get("spec") or {}).get("taints") or []} & UNHEALTHY_TAINTS)
    if taints:
        return False, f"Ready but tainted {', '.join(taints)}"
    return True, f"Ready with new boot ID {boot_id}"


def back_for_uncordon(vm_state: str, node: Optional[dict[str, Any]]) -> tuple[bool, str]:
    """The uncordon phase's check, from one read of the Node (None: no Kubernetes node, an external
    etcd VM): still back as the restart phase verified it, or why not.

    The boot ID to compare with is the annotation's, written before the stop, so a stale Ready
    is never taken for a restart. A node someone else cordoned carries no annotation (no boot ID
    was recorded): it only has to be Ready, as it is not uncordoned, only its marks come off.
    """
    if vm_state != "Running":
        return False, f"VM is {vm_state}"
    if node is None:
        return True, "VM Running"
    annotations = annotations_of(node)
    if ROLLOUT_ANNOTATION in annotations:
        return node_is_back(node, [annotations[ROLLOUT_ANNOTATION]])
    if not (node.get("spec") or {}).get("unschedulable"):
        return False, ("carries no rollout annotation and is not cordoned: the cordon and restart phases did not "
                       "run for it (or someone uncordoned it meanwhile)")
    ok, why = node_is_back(node, [])
    return ok, (f"{why} (cordoned by someone else: no boot ID recorded to compare)" if ok else why)


def seconds_left(batch_timeout: float, batch_started: Optional[float], now: float) -> float:
    """What a phase has left of the batch's deadline, counted from the batch's start (None: now)."""
    if batch_started is None:
        return max(0.0, float(batch_timeout))
    return max(0.0, float(batch_timeout) - max(0.0, now - float(batch_started)))


@dataclass(frozen=True)
class CordonDecision:
    """How the cycle treats the node's cordon. ``ours``: the rollout cordoned it (or will)."""

    ours: bool
    annotate: bool  # write the boot-ID annotation
    cordon: bool  # send the cordon patch
    boot_id: Optional[str]  # the boot ID recorded for the node (annotation, or now)
    why: str


def cordon_decision(node: dict[str, Any]) -> CordonDecision:
    annotations = annotations_of(node)
    unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
    if ROLLOUT_ANNOTATION in annotations:
        # A rollout that stopped left it: the node may have restarted since, so the recorded
        # boot ID stays (release compares against it).
        return CordonDecision(True, False, not unschedulable, annotations[ROLLOUT_ANNOTATION],
                              "annotated by a rollout that stopped: resumed")
    if unschedulable:
        return CordonDecision(False, False, False, boot_id_of(node),
                              "cordoned by someone else: not annotated, and left cordoned afterwards")
    return CordonDecision(True, True, True, boot_id_of(node) or NO_BOOT_ID, "annotated and cordoned")


@dataclass(frozen=True)
class Change:
    kind: str  # offering | root_disk | affinity_groups
    from_: Any
    to: Any

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.from_, "to": self.to}


@dataclass(frozen=True)
class ChangePlan:
    offering: Optional[Change] = None  # ids in from_/to
    root_disk: Optional[Change] = None  # GB
    affinity_groups: Optional[Change] = None  # full id lists (dedication groups included)

    @property
    def empty(self) -> bool:
        return not (self.offering or self.root_disk or self.affinity_groups)


def change_plan(node: Node, type_settings: TypeSettings) -> ChangePlan:
    """What the stopped VM needs: only the calls whose setting actually differs.

    CloudStack refuses an offering the VM already has, and a root disk only grows.
    """
    offering = None
    if type_settings.offering_id is not None and node.offering_id != type_settings.offering_id:
        offering = Change("offering", node.offering_id, type_settings.offering_id)
    disk = None
    wanted = type_settings.root_disk_gb
    if wanted is not None and node.root_disk_gb is not None and node.root_disk_gb < wanted:
        disk = Change("root_disk", node.root_disk_gb, wanted)
    groups = None
    target = target_affinity_group_ids(node, type_settings)
    current = tuple(g.id for g in node.affinity_groups)
    if target is not None and frozenset(target) != frozenset(current):
        groups = Change("affinity_groups", current, target)
    return ChangePlan(offering, disk, groups)


def needs_root_volume(node: Node, type_settings: TypeSettings) -> bool:
    """Whether the batch must read ``node``'s ROOT volume (listVolumes) before its drain.

    A root disk setting needs the volume's size to compare and its id to resize. An offering
    change needs the pool the volume is on: changeServiceForVirtualMachine refuses, once the VM
    is stopped, an offering whose storage scope differs from the ROOT volume's pool
    (``VirtualMachineManagerImpl.checkIfCanUpgrade`` → ``checkIfNewOfferingStorageScopeMatchesStoragePool``,
    which reads the volume's pool, not the VM's current offering), judged by ``_decisions
    .stop_refusals`` from the volume's ``storagetype``. Nothing else a batch decides reads the
    volume: a change of affinity groups alone, or a node already on its offering, needs none.
    """
    if type_settings.root_disk_gb is not None:
        return True
    return type_settings.offering_id is not None and node.offering_id != type_settings.offering_id


def describe_changes(plan: ChangePlan, view: ClusterView) -> dict[str, Any]:
    """The changes in operator words (names next to ids), for the rollout report."""
    out: dict[str, Any] = {}
    if plan.offering:
        out["offering"] = {"from": view.offering_name(plan.offering.from_), "to": view.offering_name(plan.offering.to),
                           "from_id": plan.offering.from_, "to_id": plan.offering.to}
    if plan.root_disk:
        out["root_disk_gb"] = {"from": plan.root_disk.from_, "to": plan.root_disk.to}
    if plan.affinity_groups:
        def names(ids: Sequence[str]) -> list[str]:
            return [(view.group(i).name if view.group(i) else i) for i in ids]  # type: ignore[union-attr]

        out["affinity_groups"] = {"from": names(plan.affinity_groups.from_), "to": names(plan.affinity_groups.to),
                                  "from_ids": list(plan.affinity_groups.from_),
                                  "to_ids": list(plan.affinity_groups.to)}
    return out


def node_with_vm(node: Node, vm: dict[str, Any], root: Optional[dict[str, Any]], view: ClusterView) -> Node:
    """``node`` with the settings re-read from listVirtualMachines / listVolumes."""
    groups = []
    for raw in vm.get("affinitygroup") or []:
        gid = str(raw.get("id"))
        known = view.group(gid)
        groups.append(known or AffinityGroup(id=gid, name=str(raw.get("name", gid)), type=str(raw.get("type", ""))))
    root_gb = node.root_disk_gb
    if root is not None and root.get("size") is not None:
        root_gb = int(root["size"]) >> 30
    return dataclasses.replace(
        node,
        vm_state=str(vm.get("state", node.vm_state)),
        offering_id=vm.get("serviceofferingid") or node.offering_id,
        offering_name=vm.get("serviceofferingname") or node.offering_name,
        root_disk_gb=root_gb,
        affinity_groups=tuple(groups),
    )
