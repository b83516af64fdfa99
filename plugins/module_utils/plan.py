# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The decisions of a rollout, as pure functions of a ClusterView and the node settings.

What is out of date and why, which settings are refused, which node types can lose a node,
in what order and in what batches the nodes are restarted, whether a batch may go ahead,
and what ``release`` does. No I/O here: everything is decided from the view, so every rule is
tested as a table.
"""

from __future__ import annotations

from collections.abc import Mapping as AbcMapping
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence, Tuple, Union

from ansible_collections.cloudstack.cks.plugins.module_utils.cluster import (
    CONTROL,
    ETCD,
    NODE_TYPES,
    WORKER,
    ClusterView,
    Node,
)
from ansible_collections.cloudstack.cks.plugins.module_utils.errors import InvalidInput

# The option names refusals speak of (the modules' parameters).
PARAM_OFFERINGS = "node_offerings"
PARAM_ROOT_DISKS = "node_root_disk_sizes"
PARAM_AFFINITY = "node_affinity_groups"
PARAM_MAX_UNAVAILABLE = "max_unavailable"

# CKS's own floor for a node's service offering.
MIN_NODE_CPU = 2
MIN_NODE_MEMORY_MB = 2048

OUT_OF_DATE_KEYS: Mapping[str, str] = {
    CONTROL: "controlnodesoutofdate",
    WORKER: "workernodesoutofdate",
    ETCD: "etcdnodesoutofdate",
}


# ---------------------------------------------------------------------------------------------
# Settings


@dataclass(frozen=True)
class TypeSettings:
    """The settings of one node type. None means "not set": that setting is not compared."""

    offering_id: Optional[str] = None
    root_disk_gb: Optional[int] = None
    #: None leaves the nodes' groups alone; () means "no groups" (dedication groups are kept).
    affinity_group_ids: Optional[tuple[str, ...]] = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "offering_id": self.offering_id,
            "root_disk_gb": self.root_disk_gb,
            "affinity_group_ids": (list(self.affinity_group_ids)
                                   if self.affinity_group_ids is not None else None),
        }

    @classmethod
    def from_dict(cls, data: Optional[Mapping[str, Any]]) -> TypeSettings:
        if data is None:
            return cls()
        if not isinstance(data, AbcMapping):
            raise InvalidInput("settings", data, "each node type's settings must be a mapping")
        offering = data.get("offering_id")
        root = data.get("root_disk_gb")
        groups = data.get("affinity_group_ids")
        if offering is not None and not isinstance(offering, str):
            raise InvalidInput("settings.offering_id", offering, "must be an offering id (a string)")
        if root is not None and (isinstance(root, bool) or not isinstance(root, int)):
            raise InvalidInput("settings.root_disk_gb", root, "must be a whole number of GB")
        if groups is not None and (isinstance(groups, (str, bytes))
                                   or not all(isinstance(g, str) for g in groups)):
            raise InvalidInput("settings.affinity_group_ids", groups, "must be a list of group ids")
        return cls(offering_id=offering, root_disk_gb=root,
                   affinity_group_ids=_unique(groups) if groups is not None else None)


def _unique(ids: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for i in ids:
        seen.setdefault(i, None)
    return tuple(seen)


def _node_type(key: str, parameter: str) -> str:
    node_type = str(key).strip().lower()
    if node_type not in NODE_TYPES:
        raise InvalidInput(parameter, key, f"not a node type; node types are {', '.join(sorted(NODE_TYPES))}")
    return node_type


@dataclass(frozen=True)
class Settings(Mapping[str, TypeSettings]):
    """The settings of every node type: a read-only mapping node type -> TypeSettings."""

    control: TypeSettings = field(default_factory=TypeSettings)
    worker: TypeSettings = field(default_factory=TypeSettings)
    etcd: TypeSettings = field(default_factory=TypeSettings)

    def __getitem__(self, node_type: str) -> TypeSettings:
        if node_type not in NODE_TYPES:
            raise KeyError(node_type)
        return getattr(self, node_type)

    def __iter__(self) -> Iterator[str]:
        return iter(NODE_TYPES)

    def __len__(self) -> int:
        return len(NODE_TYPES)

    def with_type(self, node_type: str, type_settings: TypeSettings) -> Settings:
        return replace(self, **{_node_type(node_type, "node type"): type_settings})

    def with_changes(
        self,
        offerings: Optional[Mapping[str, str]] = None,
        root_disk_sizes: Optional[Mapping[str, int]] = None,
        affinity_groups: Optional[Mapping[str, Optional[Sequence[str]]]] = None,
    ) -> Settings:
        """These settings with the operator's per-type changes laid over them.

        Node type keys are case-insensitive. A type absent from a mapping keeps its value.
        """
        result = self
        for key, offering_id in (offerings or {}).items():
            t = _node_type(key, PARAM_OFFERINGS)
            result = result.with_type(t, replace(result[t], offering_id=offering_id))
        for key, size in (root_disk_sizes or {}).items():
            t = _node_type(key, PARAM_ROOT_DISKS)
            result = result.with_type(t, replace(result[t], root_disk_gb=size))
        for key, ids in (affinity_groups or {}).items():
            t = _node_type(key, PARAM_AFFINITY)
            result = result.with_type(t, replace(
                result[t], affinity_group_ids=_unique(ids) if ids is not None else None))
        return result

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {t: self[t].to_dict() for t in NODE_TYPES}

    @classmethod
    def from_dict(cls, data: Optional[Mapping[str, Any]]) -> Settings:
        if data is None:
            return cls()
        if not isinstance(data, AbcMapping):
            raise InvalidInput("settings", data, "must be a mapping of node type to settings")
        unknown = sorted(set(data) - set(NODE_TYPES))
        if unknown:
            raise InvalidInput("settings", unknown, "not node types; node types are control, worker, etcd")
        return cls(**{t: TypeSettings.from_dict(data.get(t)) for t in NODE_TYPES})


def resolve_offering(view: ClusterView, ref: str, parameter: str = PARAM_OFFERINGS) -> str:
    """The id of the service offering named by id or by exact name."""
    if ref in view.offerings:
        return ref
    matches = [o for o in view.offerings.values() if o.name == ref]
    if len(matches) == 1:
        return matches[0].id
    if matches:
        raise InvalidInput(parameter, ref, f"{len(matches)} service offerings have this name "
                           f"({', '.join(sorted(o.id for o in matches))}); give the id")
    raise InvalidInput(parameter, ref, "not a service offering this account can use (by id or name)")


def resolve_affinity_groups(view: ClusterView, refs: Sequence[str],
                            parameter: str = PARAM_AFFINITY) -> tuple[str, ...]:
    """The ids of the affinity groups named by id or by exact name, in the order given."""
    ids: list[str] = []
    for ref in refs:
        if view.group(ref) is not None:
            ids.append(ref)
            continue
        matches = sorted({g.id for g in view.affinity_groups.values() if g.name == ref})
        if len(matches) == 1:
            ids.append(matches[0])
        elif matches:
            raise InvalidInput(parameter, ref, f"{len(matches)} affinity groups have this name "
                               f"({', '.join(matches)}); give the id")
        else:
            raise InvalidInput(parameter, ref, "not an affinity group this account can use (by id or name)")
    return _unique(ids)


def initial_settings(view: ClusterView) -> Settings:
    """The settings of a cluster whose node types have none of their own yet (gen 1 -> gen 2).

    - offering: the per-type offering CloudStack reports, else the cluster's service offering,
      copied to each type so that changing one type later leaves the others as they are;
    - root disk: the smallest root disk of the type's nodes. A node is out of date only when its
      disk is smaller than the type's size, so the minimum is the one size that leaves every node
      up to date (any larger value would restart the smaller nodes for a change nobody asked for);
    - affinity groups: the (non-dedication) groups all nodes of the type share, if they share
      some; otherwise None, which leaves the nodes' groups alone.
    """
    types: dict[str, TypeSettings] = {}
    for t in NODE_TYPES:
        nodes = view.nodes_of(t)
        disks = [n.root_disk_gb for n in nodes if n.root_disk_gb is not None]
        group_sets = {n.chosen_group_ids for n in nodes}
        shared = next(iter(group_sets)) if len(group_sets) == 1 else frozenset()
        types[t] = TypeSettings(
            offering_id=view.node_offerings.get(t) or view.offering_id,
            root_disk_gb=min(disks) if disks else None,
            affinity_group_ids=tuple(sorted(shared)) if shared else None,
        )
    return Settings(**types)


# ---------------------------------------------------------------------------------------------
# Out of date


@dataclass(frozen=True)
class Ref:
    """An offering or group: its id and the name an operator knows it by."""

    id: Optional[str]
    name: str

    def to_dict(self) -> dict[str, Optional[str]]:
        return {"id": self.id, "name": self.name}


# Runtime alias: typing.Tuple keeps it importable on the older Pythons of ansible-test sanity.
ReasonValue = Union[Ref, int, None, Tuple[Ref, ...]]


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


@dataclass(frozen=True)
class Reason:
    """Why a node differs from its type's settings. ``from_``/``to`` are names and ids."""

    kind: str  # "offering" | "root_disk" | "affinity_groups"
    from_: ReasonValue
    to: ReasonValue

    @property
    def message(self) -> str:
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


def _is_dedication(view: ClusterView, group_id: str) -> bool:
    group = view.group(group_id)
    return bool(group and group.is_dedication)


def outdated_reasons(node: Node, type_settings: TypeSettings, view: ClusterView) -> list[Reason]:
    """How ``node`` differs from ``type_settings``; empty when it is up to date."""
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
        wanted = frozenset(g for g in type_settings.affinity_group_ids if not _is_dedication(view, g))
        if node.chosen_group_ids != wanted:
            reasons.append(Reason("affinity_groups", _group_refs(view, node.chosen_group_ids),
                                  _group_refs(view, wanted)))
    return reasons


def target_affinity_group_ids(node: Node, type_settings: TypeSettings) -> Optional[tuple[str, ...]]:
    """The full group list to give updateVMAffinityGroup (which replaces the whole list).

    None: the type records no groups, leave the node's alone. Otherwise the recorded groups
    plus the node's ExplicitDedication groups, which CKS added and which must stay.
    """
    if type_settings.affinity_group_ids is None:
        return None
    return _unique(list(type_settings.affinity_group_ids) + list(node.dedication_group_ids))


# ---------------------------------------------------------------------------------------------
# Quorum arithmetic and which node types can lose a node


def quorum_size(voters: int) -> int:
    """Members needed for a quorum of ``voters`` voting members."""
    return voters // 2 + 1


def tolerated_failures(voters: int) -> int:
    """Voting members that may be down while a quorum remains."""
    return max(0, (voters - 1) // 2)


def quorum_after(voters: int, healthy: int, going_down: int,
                 without: Sequence[str] = ()) -> tuple[bool, str]:
    """Would a quorum remain if ``going_down`` of the ``healthy`` members went down?

    ``going_down`` counts healthy members only (one already down is not lost again).
    ``without`` names them, for the message.
    """
    remaining = max(0, healthy - going_down)
    needed = quorum_size(voters)
    names = f" without {', '.join(without)}" if without else ""
    message = f"{remaining} of {voters} voting members healthy{names}; {needed} needed"
    return remaining >= needed, message


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def can_lose_a_node(node_type: str, view: ClusterView) -> tuple[bool, str]:
    """Whether a node of this type may be restarted at all, by the cluster's shape alone.

    Health comes later, in the preflight; this is the arithmetic: stacked control nodes are
    the etcd voters; with external etcd the etcd nodes are, and the control plane only needs
    another control node to serve the API.
    """
    count = len(view.nodes_of(node_type))
    if node_type == WORKER:
        # The seed clamps the batch to min(maxunavailable, workers - 1) but never below 1, so
        # even a single worker is restarted (its pods wait for it to come back).
        if count <= 1:
            return True, f"{_plural(count, 'worker')}: restarted alone, its pods wait until it is back"
        return True, f"{count} workers: up to {count - 1} restarted at a time"
    if count == 0:
        return True, f"no {node_type} nodes"
    if node_type == CONTROL and view.external_etcd:
        if count < 2:
            return False, ("a single control node (etcd is external): no other control node "
                           "would serve the Kubernetes API while it restarts")
        return True, f"{count} control nodes: another one serves the Kubernetes API"
    what = "control nodes with stacked etcd" if node_type == CONTROL else "etcd nodes"
    if count == 1:
        what = "control node with stacked etcd" if node_type == CONTROL else "etcd node"
        return False, (f"a single {what}: etcd has 1 voting member, quorum 1, "
                       "so it cannot go down without losing etcd")
    quorum = quorum_size(count)
    tolerated = tolerated_failures(count)
    if tolerated < 1:
        return False, (f"{count} {what}: {count} voting members need {quorum} for quorum, "
                       "so none can go down")
    return True, f"{count} {what}: quorum {quorum} of {count} tolerates {tolerated} down"


def worker_batch_size(max_unavailable: int, workers: int) -> int:
    """The seed's clamp: min(max_unavailable, workers - 1), always at least 1."""
    return max(1, min(max_unavailable, workers - 1))


# ---------------------------------------------------------------------------------------------
# Validation of requested settings


@dataclass(frozen=True)
class Refusal:
    """A requested setting that is refused; nothing is stored. Says what to change."""

    parameter: str
    value: Any
    why: str
    change: str

    @property
    def message(self) -> str:
        return f"{self.parameter}={self.value!r}: {self.why}; {self.change}"

    def to_dict(self) -> dict[str, Any]:
        return {"parameter": self.parameter, "value": self.value, "why": self.why,
                "change": self.change, "message": self.message}

    def to_error(self) -> InvalidInput:
        return InvalidInput(self.parameter, self.value, f"{self.why}; {self.change}")


def _names(nodes: Iterable[Node]) -> str:
    return ", ".join(n.name for n in nodes)


def _validate_offering(view: ClusterView, t: str, current: TypeSettings, requested: TypeSettings,
                       rollout: bool) -> list[Refusal]:
    wanted = requested.offering_id
    if wanted is None or wanted == current.offering_id:
        return []
    parameter = f"{PARAM_OFFERINGS}.{t}"
    offering = view.offerings.get(wanted)
    if offering is None:
        return [Refusal(parameter, wanted, "not a service offering this account can use",
                        "give the id of a listed service offering")]
    if offering.customized:
        return [Refusal(parameter, wanted, f"{offering.name} is a custom (dynamic) offering",
                        "CKS nodes need an offering with a fixed CPU count and memory")]
    if offering.cpu < MIN_NODE_CPU or offering.memory_mb < MIN_NODE_MEMORY_MB:
        return [Refusal(parameter, wanted,
                        f"{offering.name} has {offering.cpu} CPUs and {offering.memory_mb} MB",
                        f"CKS nodes need at least {MIN_NODE_CPU} CPUs and {MIN_NODE_MEMORY_MB} MB")]
    if not rollout:
        return []
    # changeServiceForVirtualMachine refuses a change of disk offering strictness, or of the
    # linked disk offering when strict: found out here, not with the node stopped.
    clashing = []
    for node in view.nodes_of(t):
        if node.offering_id == wanted:
            continue
        old = view.offerings.get(node.offering_id) if node.offering_id else None
        if old is None:
            continue
        if old.disk_offering_strict != offering.disk_offering_strict or (
                offering.disk_offering_strict and old.disk_offering_id != offering.disk_offering_id):
            clashing.append((node, old))
    if clashing:
        detail = ", ".join(f"{n.name} ({o.name})" for n, o in clashing)
        return [Refusal(parameter, wanted,
                        f"the disk offering strictness of {offering.name} differs from the offering of {detail}, "
                        "and CloudStack refuses such a change",
                        "choose an offering with the same disk offering strictness")]
    return []


def _validate_root_disk(view: ClusterView, t: str, current: TypeSettings, requested: TypeSettings,
                        rollout: bool) -> list[Refusal]:
    size = requested.root_disk_gb
    if size is None or size == current.root_disk_gb:
        return []
    parameter = f"{PARAM_ROOT_DISKS}.{t}"
    if size < 1:
        return [Refusal(parameter, size, "a root disk size is at least 1 GB", "give a size in GB")]
    if not rollout:
        # Stored for nodes created later, as createKubernetesCluster accepts any size.
        return []
    refusals: list[Refusal] = []
    nodes = [n for n in view.nodes_of(t) if n.root_disk_gb is not None]
    larger = [n for n in nodes if n.root_disk_gb is not None and n.root_disk_gb > size]
    if larger:
        detail = ", ".join(f"{n.name} ({n.root_disk_gb} GB)" for n in larger)
        refusals.append(Refusal(parameter, size, f"would shrink the root disk of {detail}; root disks only grow",
                                f"give at least {max(n.root_disk_gb or 0 for n in larger)} GB, "
                                "or use rollout=false to store it for nodes created later"))
    growing = [n for n in nodes if n.root_disk_gb is not None and n.root_disk_gb < size]
    strict = [n for n in growing if n.root_disk_strict]
    strict_names = {n.name for n in strict}
    if strict:
        refusals.append(Refusal(parameter, size,
                                f"the root disk of {_names(strict)} has a strictly fixed size "
                                "(its disk offering is strict)",
                                "leave the root disk size of this type as it is, or use rollout=false"))
    target = view.offerings.get(requested.offering_id) if requested.offering_id else None
    fixed = []
    for node in growing:
        if node.name in strict_names:
            continue
        compute_only = node.root_disk_offering_id not in view.disk_offerings
        if (compute_only and node.offering_root_gb > 0) or (target is not None and target.rootdisksize_gb > 0):
            fixed.append(node)
    if fixed:
        where = (f"the service offering {target.name} fixes the root disk at {target.rootdisksize_gb} GB"
                 if target is not None and target.rootdisksize_gb > 0
                 else "their service offering fixes the root disk size (rootdisksize)")
        refusals.append(Refusal(parameter, size,
                                f"{where}, and CloudStack refuses a size-only resize of the root disk of {_names(fixed)}",
                                "choose an offering without a root disk size, or leave the root disk size as it is"))
    return refusals


def _validate_groups(view: ClusterView, t: str, current: TypeSettings, requested: TypeSettings) -> list[Refusal]:
    ids = requested.affinity_group_ids
    if ids is None or (current.affinity_group_ids is not None
                       and frozenset(ids) == frozenset(current.affinity_group_ids)):
        return []
    parameter = f"{PARAM_AFFINITY}.{t}"
    refusals: list[Refusal] = []
    unknown = [g for g in ids if view.group(g) is None]
    if unknown:
        refusals.append(Refusal(parameter, list(ids), f"{', '.join(unknown)}: not an affinity group this account can use",
                                "give the ids of listed affinity groups"))
    dedication = [g for g in ids if _is_dedication(view, g)]
    if dedication:
        names = ", ".join(view.group(g).name for g in dedication)  # type: ignore[union-attr]
        refusals.append(Refusal(parameter, list(ids), f"{names}: an ExplicitDedication group, which CKS adds by itself "
                                "and which every node keeps", "leave it out"))
    return refusals


_KIND_PARAMETER = {"offering": PARAM_OFFERINGS, "root_disk": PARAM_ROOT_DISKS, "affinity_groups": PARAM_AFFINITY}


def _value_of(kind: str, ts: TypeSettings) -> Any:
    if kind == "offering":
        return ts.offering_id
    if kind == "root_disk":
        return ts.root_disk_gb
    return list(ts.affinity_group_ids) if ts.affinity_group_ids is not None else None


def _validate_unrollable(view: ClusterView, t: str, current: TypeSettings,
                         requested: TypeSettings) -> list[Refusal]:
    ok, why = can_lose_a_node(t, view)
    if ok:
        return []
    # Only a running node that is up to date now and would differ: nodes that already differ
    # and stopped nodes lose nothing new, and no-op settings change nothing.
    newly: dict[str, list[Node]] = {}
    for node in view.nodes_of(t):
        if not node.running or outdated_reasons(node, current, view):
            continue
        for reason in outdated_reasons(node, requested, view):
            newly.setdefault(reason.kind, []).append(node)
    return [Refusal(f"{_KIND_PARAMETER[kind]}.{t}", _value_of(kind, requested),
                    f"would make {t} node {_names(nodes)} out of date, and {why}",
                    f"use rollout=false to store it for nodes created later, or add {t} nodes first")
            for kind, nodes in newly.items()]


def validate(view: ClusterView, current: Settings, requested: Settings, rollout: bool,
             max_unavailable: Optional[int] = None) -> list[Refusal]:
    """Every reason to refuse ``requested`` (the full settings that would be stored).

    Only settings that change are judged, so passing the stored values again is accepted.
    """
    refusals: list[Refusal] = []
    if max_unavailable is not None and (isinstance(max_unavailable, bool) or max_unavailable < 1):
        refusals.append(Refusal(PARAM_MAX_UNAVAILABLE, max_unavailable, "must be at least 1",
                                "give the number of workers to restart at a time (1 or more)"))
    for t in NODE_TYPES:
        cur, req = current[t], requested[t]
        refusals += _validate_offering(view, t, cur, req, rollout)
        refusals += _validate_root_disk(view, t, cur, req, rollout)
        refusals += _validate_groups(view, t, cur, req)
        if rollout:
            refusals += _validate_unrollable(view, t, cur, req)
    return refusals


# ---------------------------------------------------------------------------------------------
# The plan


@dataclass(frozen=True)
class PlannedNode:
    """A node with work left: out of date, down, or left cordoned by a rollout that stopped."""

    name: str
    node_type: str
    vm_state: str
    reasons: tuple[Reason, ...]
    annotated: bool  # carries the annotation of a rollout that stopped
    back: bool = False  # ... and is Ready with a new boot ID
    etcd_down: bool = False  # its etcd member is not healthy although its VM runs

    @property
    def out_of_date(self) -> bool:
        return bool(self.reasons)

    @property
    def first(self) -> bool:
        """Stopped nodes and nodes still carrying the annotation go first; so does a node whose
        etcd member is down: etcd has lost that member already, and while it is down the quorum
        preflight refuses every other member's node, so restarting it first is the way forward."""
        return self.vm_state != "Running" or self.annotated or self.etcd_down

    @property
    def why(self) -> str:
        parts = [r.message for r in self.reasons]
        if self.vm_state != "Running":
            parts.append(f"VM is {self.vm_state}")
        if self.annotated and not self.back:
            parts.append("still cordoned by a rollout that stopped")
        if self.etcd_down:
            parts.append("its etcd member is not healthy")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "node_type": self.node_type, "vm_state": self.vm_state,
                "annotated": self.annotated, "back": self.back, "etcd_down": self.etcd_down,
                "out_of_date": self.out_of_date, "reasons": [r.to_dict() for r in self.reasons], "why": self.why}


@dataclass(frozen=True)
class Batch:
    node_type: str
    nodes: tuple[str, ...]
    #: The first worker batch of a canary plan: one worker alone, so that a bad offering or group
    #: fails on one node before the workers go ``worker_batch_size`` at a time.
    canary: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"node_type": self.node_type, "nodes": list(self.nodes), "canary": self.canary}


@dataclass(frozen=True)
class Plan:
    batches: tuple[Batch, ...]
    nodes: tuple[PlannedNode, ...]  # every node with work left (skipped ones too), in order
    out_of_date: Mapping[str, int]  # node type -> nodes that differ from its settings
    skipped: Mapping[str, str]  # node type -> why its nodes are not restarted
    to_release: tuple[str, ...]  # annotated, back and up to date: uncordon, no restart
    worker_batch_size: int
    #: Nodes with work left that ``selected`` leaves out (they stay out of date); not the held ones.
    not_selected: tuple[str, ...] = ()

    @property
    def hosts(self) -> tuple[str, ...]:
        """The batches' nodes in order, for add_host."""
        return tuple(name for batch in self.batches for name in batch.nodes)

    @property
    def last_error(self) -> Optional[str]:
        """The skipped types, ready for the record's last error; None when nothing is skipped."""
        if not self.skipped:
            return None
        return "; ".join(self.skipped[t] for t in NODE_TYPES if t in self.skipped)

    def to_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "batches": [b.to_dict() for b in self.batches],
            "serial": serial_list(self),
            "hosts": list(self.hosts),
            "nodes": [n.to_dict() for n in self.nodes],
            "skipped": dict(self.skipped),
            "to_release": list(self.to_release),
            "worker_batch_size": self.worker_batch_size,
            "last_error": self.last_error,
            "not_selected": list(self.not_selected),
        }
        for t in NODE_TYPES:
            result[OUT_OF_DATE_KEYS[t]] = self.out_of_date.get(t, 0)
        return result


def _order_key(planned: PlannedNode) -> tuple[int, str]:
    return (0 if planned.first else 1, planned.name)


def plan(view: ClusterView, settings: Settings, max_unavailable: int = 1,
         selected: Optional[Iterable[str]] = None, canary: bool = False,
         etcd_down: Iterable[str] = ()) -> Plan:
    """The nodes to restart, in batches: external etcd nodes one at a time, then control nodes
    one at a time, then workers ``worker_batch_size`` at a time (with ``canary``, the first
    worker alone first, then the others ``worker_batch_size`` at a time).

    The work left is derived from the nodes alone: nodes that differ from their type's
    settings, whose VM is not Running, or that still carry the annotation of a rollout that
    stopped before it verified them. Within a type, the stopped and annotated ones go first,
    then by name. A type that cannot lose a node keeps its running nodes out of the batches
    and is reported in ``skipped``; its stopped nodes are still taken (they are down already,
    nothing more is lost). ``selected`` restricts the batches (not the counts) to these nodes.
    ``etcd_down``: the nodes whose etcd member etcd reports unhealthy; those with work left go
    first within their type (they add no work of their own).
    """
    if max_unavailable < 1:
        raise InvalidInput(PARAM_MAX_UNAVAILABLE, max_unavailable, "must be at least 1")
    chosen: Optional[set[str]] = None
    if selected is not None:
        chosen = {s.lower() for s in selected}
        unknown = sorted(chosen - {n.name for n in view.nodes})
        if unknown:
            raise InvalidInput("nodes", unknown, f"not nodes of cluster {view.name}; its nodes are "
                               f"{', '.join(n.name for n in view.nodes) or 'none'}")

    planned_all: list[PlannedNode] = []
    batches: list[Batch] = []
    out_of_date: dict[str, int] = {}
    skipped: dict[str, str] = {}
    to_release: list[str] = []
    not_selected: list[str] = []
    workers = len(view.nodes_of(WORKER))
    size = worker_batch_size(max_unavailable, workers)
    members_down = {name.lower() for name in etcd_down}

    for t in NODE_TYPES:
        planned: list[PlannedNode] = []
        for node in view.nodes_of(t):
            reasons = tuple(outdated_reasons(node, settings[t], view))
            stuck = node.annotated and not node.back
            if reasons or not node.running or stuck:
                planned.append(PlannedNode(node.name, t, node.vm_state, reasons, node.annotated, node.back,
                                           etcd_down=node.running and node.name in members_down))
            elif node.annotated:
                to_release.append(node.name)
        planned.sort(key=_order_key)
        planned_all.extend(planned)
        out_of_date[t] = sum(1 for p in planned if p.out_of_date)

        rollable, why = can_lose_a_node(t, view)
        held = [p for p in planned if p.vm_state == "Running"] if not rollable else []
        if held:
            skipped[t] = f"{t} nodes not restarted: {', '.join(f'{p.name} ({p.why})' for p in held)}: {why}"
        held_names = {p.name for p in held}
        names = [p.name for p in planned if p.name not in held_names
                 and (chosen is None or p.name in chosen)]
        not_selected += [p.name for p in planned if p.name not in held_names and p.name not in names]
        step = size if t == WORKER else 1
        first = 0
        if canary and t == WORKER and names:
            # The canary is simply the first worker in plan order: the order (stopped and
            # annotated first, then by name) and the hosts stay what they are without it.
            batches.append(Batch(t, (names[0],), canary=True))
            first = 1
        for start in range(first, len(names), step):
            batches.append(Batch(t, tuple(names[start:start + step])))

    return Plan(batches=tuple(batches), nodes=tuple(planned_all), out_of_date=out_of_date,
                skipped=skipped, to_release=tuple(to_release), worker_batch_size=size,
                not_selected=tuple(not_selected))


def serial_list(rollout_plan: Plan) -> list[int]:
    """Ansible ``serial`` for the plan's hosts: one entry per batch.

    Ansible uses each entry once, in order, and repeats the last; one entry per batch makes
    every batch exactly one play pass. An empty plan gives [] (the play has no hosts).
    """
    return [len(b.nodes) for b in rollout_plan.batches]


# ---------------------------------------------------------------------------------------------
# Cluster states

#: A rollout starts from these CKS states (and tolerates the Alert it causes itself).
ROLLOUT_STATES = frozenset({"Running", "Alert"})
#: CKS states in which another operation holds the cluster, or it is going away.
BUSY_STATES = frozenset({"Starting", "Stopping", "Scaling", "ScalingStoppedCluster", "Upgrading",
                         "Importing", "RemovingNodes", "Recovering", "Destroying", "Destroyed"})


def state_problem(view: ClusterView, rollout: bool) -> Optional[str]:
    """Why the cluster's CKS state does not allow this now; None when it does.

    Storing settings (rollout=false) works in any state but while another operation runs or
    the cluster is being destroyed; a rollout needs Running or Alert.
    """
    if view.state in BUSY_STATES:
        return f"cluster {view.name} is {view.state}: another CKS operation holds it; try again when it is done"
    if rollout and view.state not in ROLLOUT_STATES:
        return f"cluster {view.name} is {view.state}: a rollout starts from Running or Alert"
    return None


# ---------------------------------------------------------------------------------------------
# Preflight, release, capacity, outcome


def preflight_problems(view: ClusterView, batch: Sequence[str],
                       max_unavailable: Optional[int] = None) -> list[str]:
    """What stops ``batch`` from going down now, from the view alone; empty when it may.

    Every other VM Running and every other Kubernetes node Ready; control and etcd nodes one
    at a time and only in a type that can lose one; with external etcd, another control node
    Running and Ready to serve the API. etcd's own health is checked by the etcd module.
    """
    problems: list[str] = []
    names = {b.lower() for b in batch}
    members: list[Node] = []
    for name in sorted(names):
        node = view.find_node(name)
        if node is None:
            problems.append(f"{name}: not a node of cluster {view.name}")
        else:
            members.append(node)
    types = {n.node_type for n in members}
    if len(types) > 1:
        problems.append(f"batch {', '.join(sorted(names))} mixes node types {', '.join(sorted(types))}")
    for t in (CONTROL, ETCD):
        of_type = [n for n in members if n.node_type == t]
        if len(of_type) > 1:
            problems.append(f"{t} nodes go one at a time, not {_names(of_type)} together")
    workers = [n for n in members if n.node_type == WORKER]
    if max_unavailable is not None and workers:
        allowed = worker_batch_size(max_unavailable, len(view.nodes_of(WORKER)))
        if len(workers) > allowed:
            problems.append(f"{len(workers)} workers at once ({_names(workers)}); at most {allowed}")
    for node in members:
        if node.node_type in (CONTROL, ETCD) and node.running:
            ok, why = can_lose_a_node(node.node_type, view)
            if not ok:
                problems.append(f"{node.name}: {why}")

    for node in view.nodes:
        if node.name in names:
            continue
        if not node.running:
            problems.append(f"{node.name}: VM is {node.vm_state}")
        elif node.is_kubernetes_node and not node.k8s_present:
            problems.append(f"{node.name}: no Kubernetes node of this name")
        elif node.is_kubernetes_node and not node.ready:
            problems.append(f"{node.name}: Kubernetes node not Ready")
    for name, ready in sorted(view.unmatched_k8s_nodes.items()):
        if not ready:
            problems.append(f"{name}: Kubernetes node not Ready (no VM of the cluster has this name)")

    if view.external_etcd and any(n.node_type == CONTROL for n in members):
        serving = [n for n in view.nodes_of(CONTROL) if n.name not in names and n.running and n.ready]
        if not serving:
            problems.append(f"no other control node would serve the Kubernetes API while "
                            f"{_names(n for n in members if n.node_type == CONTROL)} is down")
    return problems


def batch_is_safe(view: ClusterView, batch: Sequence[str],
                  max_unavailable: Optional[int] = None) -> tuple[bool, list[str]]:
    problems = preflight_problems(view, batch, max_unavailable)
    return not problems, problems


def release_decisions(view: ClusterView) -> tuple[list[str], list[tuple[str, str]]]:
    """Which annotated nodes ``release`` uncordons, and which it leaves cordoned and why.

    Only nodes carrying the rollout annotation are considered: a node someone else cordoned
    is never touched.
    """
    uncordon: list[str] = []
    leave: list[tuple[str, str]] = []
    for node in view.nodes:
        if not node.annotated:
            continue
        if node.back:
            uncordon.append(node.name)
        elif not node.running:
            leave.append((node.name, f"VM is {node.vm_state}"))
        elif not node.ready:
            leave.append((node.name, "Kubernetes node not Ready"))
        elif node.boot_id == node.rollout_boot_id:
            leave.append((node.name, "boot ID unchanged: it has not restarted since it was cordoned"))
        else:
            leave.append((node.name, "no boot ID reported"))
    return uncordon, leave


def capacity(view: ClusterView) -> tuple[int, int]:
    """CPU cores and memory (MB) of the cluster, counted from the VMs' actual offerings."""
    return sum(n.cpu for n in view.nodes), sum(n.memory_mb for n in view.nodes)


def health_problems(view: ClusterView) -> list[str]:
    """Why the cluster is not healthy (every VM Running, every Kubernetes node Ready)."""
    problems = []
    for node in view.nodes:
        if not node.running:
            problems.append(f"{node.name}: VM is {node.vm_state}")
        elif node.is_kubernetes_node and not node.k8s_present:
            problems.append(f"{node.name}: no Kubernetes node of this name")
        elif node.is_kubernetes_node and not node.ready:
            problems.append(f"{node.name}: Kubernetes node not Ready")
    return problems


def outcome(view: ClusterView) -> str:
    """The state a rollout ends in: Running when healthy, else Alert."""
    return "Alert" if health_problems(view) else "Running"
