# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Why a node is out of date: its offering, root disk or affinity groups differ from its type's
settings, or its kubelet reports less CPU or memory than its VM has (``kubelet_capacity``: a live
scale the kubelet has not seen, as a run that stopped between the scale and the kubelet's restart
leaves it; no node ends a rollout unaware of its resources)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Union

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.scale_path import kubelet_unaware
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import TypeSettings, unique_ids
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import CONTROL, ETCD, WORKER, ClusterView, Node

OUT_OF_DATE_KEYS: Mapping[str, str] = {
    CONTROL: "controlnodesoutofdate",
    WORKER: "workernodesoutofdate",
    ETCD: "etcdnodesoutofdate",
}


@dataclass(frozen=True)
class Ref:
    """An offering or group: its id and the name an operator knows it by."""

    id: Optional[str]
    name: str

    def to_dict(self) -> dict[str, Optional[str]]:
        return {"id": self.id, "name": self.name}


# Runtime alias: typing.Tuple keeps it importable on the older Pythons of ansible-test sanity.
ReasonValue = Union[Ref, int, None, tuple[Ref, ...]]


def _render(value: ReasonValue) -> Any:
    if isinstance(value, Ref):
        return value.to_dict()
    if isinstance(value, tuple):
        return [v.to_dict() for v in value]
    return value


def _words(value: ReasonValue) -> str:
    if isinstance(value, Ref):
        return value.name
    if isinstance(value, tuple):
        return "[" + ", ".join(v.name for v in value) + "]"
    if isinstance(value, int):
        return f"{value} GB"
    return "none"


KUBELET_CAPACITY = "kubelet_capacity"


@dataclass(frozen=True)
class Reason:
    """Why a node differs from its type's settings. ``from_``/``to`` are names and ids."""

    kind: str  # "offering" | "root_disk" | "affinity_groups" | "kubelet_capacity"
    from_: ReasonValue
    to: ReasonValue
    words: str = ""  # kubelet_capacity: what the kubelet reports against its VM

    @property
    def message(self) -> str:
        if self.kind == KUBELET_CAPACITY:
            return self.words
        label = {"offering": "offering", "root_disk": "root disk",
                 "affinity_groups": "affinity groups"}[self.kind]
        return f"{label} {_words(self.from_)} -> {_words(self.to)}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "from": _render(self.from_), "to": _render(self.to),
                "message": self.message}


def _group_refs(view: ClusterView, ids: Iterable[str]) -> tuple[Ref, ...]:
    refs = []
    for gid in sorted(ids):
        group = view.group(gid)
        refs.append(Ref(gid, group.name if group else gid))
    return tuple(refs)


def is_dedication(view: ClusterView, group_id: str) -> bool:
    group = view.group(group_id)
    return bool(group and group.is_dedication)


def outdated_reasons(node: Node, type_settings: TypeSettings, view: ClusterView, kubelet: bool = True) -> list[Reason]:
    """How ``node`` differs from ``type_settings``; empty when it is up to date.

    ``kubelet``: also judge what its kubelet reports (``kubelet_capacity``); a check of the VM
    alone (the cycle's verify, on a VM re-read without its Node) leaves it out.
    """
    reasons: list[Reason] = []
    wanted_offering = type_settings.offering_id
    if wanted_offering is not None and node.offering_id != wanted_offering:
        reasons.append(Reason(
            "offering",
            Ref(node.offering_id, node.offering_name or view.offering_name(node.offering_id)),
            Ref(wanted_offering, view.offering_name(wanted_offering)),
        ))
    wanted_disk = type_settings.root_disk_gb
    # Only a smaller disk is out of date: root disks only grow.
    if wanted_disk is not None and node.root_disk_gb is not None and node.root_disk_gb < wanted_disk:
        reasons.append(Reason("root_disk", node.root_disk_gb, wanted_disk))
    if type_settings.affinity_group_ids is not None:
        wanted = frozenset(g for g in type_settings.affinity_group_ids if not is_dedication(view, g))
        if node.chosen_group_ids != wanted:
            reasons.append(Reason("affinity_groups", _group_refs(view, node.chosen_group_ids),
                                  _group_refs(view, wanted)))
    unaware = kubelet_unaware(node.kubelet_cpu, node.kubelet_memory, node.cpu, node.memory_mb) \
        if kubelet and node.running and node.is_kubernetes_node else None
    if unaware is not None:
        reasons.append(Reason(KUBELET_CAPACITY, None, None, unaware))
    return reasons


def target_affinity_group_ids(node: Node, type_settings: TypeSettings) -> Optional[tuple[str, ...]]:
    """The full group list to give updateVMAffinityGroup (which replaces the whole list).

    None: the type records no groups, leave the node's alone. Otherwise the recorded groups
    plus the node's ExplicitDedication groups, which CKS added and which must stay.
    """
    if type_settings.affinity_group_ids is None:
        return None
    return unique_ids(list(type_settings.affinity_group_ids) + list(node.dedication_group_ids))
