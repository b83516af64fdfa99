# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The API's refusals of requested settings: each names the parameter, why, and what to change."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.quorum import can_lose_a_node
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.reasons import is_dedication, outdated_reasons
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import (
    MIN_NODE_CPU,
    MIN_NODE_MEMORY_MB,
    PARAM_AFFINITY,
    PARAM_MAX_UNAVAILABLE,
    PARAM_OFFERINGS,
    PARAM_ROOT_DISKS,
    Settings,
    TypeSettings,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import NODE_TYPES, ClusterView, Node, node_names


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
        # Stored without a rollout, as the seed accepts it (createKubernetesCluster accepts any size).
        return []
    refusals: list[Refusal] = []
    nodes = [n for n in view.nodes_of(t) if n.root_disk_gb is not None]
    larger = [n for n in nodes if n.root_disk_gb is not None and n.root_disk_gb > size]
    if larger:
        detail = ", ".join(f"{n.name} ({n.root_disk_gb} GB)" for n in larger)
        refusals.append(Refusal(parameter, size, f"would shrink the root disk of {detail}; root disks only grow",
                                f"give at least {max(n.root_disk_gb or 0 for n in larger)} GB, "
                                "or use rollout=false to store it without restarting any node"))
    growing = [n for n in nodes if n.root_disk_gb is not None and n.root_disk_gb < size]
    strict = [n for n in growing if n.root_disk_strict]
    strict_names = {n.name for n in strict}
    if strict:
        refusals.append(Refusal(parameter, size,
                                f"the root disk of {node_names(strict)} has a strictly fixed size "
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
                                f"{where}, and CloudStack refuses a size-only resize of the root disk of {node_names(fixed)}",
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
    dedication = [g for g in ids if is_dedication(view, g)]
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
                    f"would make {t} node {node_names(nodes)} out of date, and {why}",
                    f"use rollout=false to store it without restarting any node, or add {t} nodes first")
            for kind, nodes in newly.items()]


def _rollout_baseline(view: ClusterView, t: str, current: TypeSettings, requested: TypeSettings) -> TypeSettings:
    """``current`` without the values a rollout would still have to apply to a node of type ``t``.

    A value stored with rollout=false was never judged against the nodes (a size on a strict disk,
    an offering that clashes with the disk's strictness): left in the baseline it would pass
    unjudged, and CloudStack would refuse it only once the first node is stopped. Dropped from the
    baseline, it is judged as if this call named it, with the same refusals.
    """
    nodes = view.nodes_of(t)
    baseline = current
    if requested.offering_id is not None and any(n.offering_id != requested.offering_id for n in nodes):
        baseline = replace(baseline, offering_id=None)
    # Only a disk the rollout would grow: a larger one is not out of date, and is left alone.
    if requested.root_disk_gb is not None and any(
            n.root_disk_gb is not None and n.root_disk_gb < requested.root_disk_gb for n in nodes):
        baseline = replace(baseline, root_disk_gb=None)
    if requested.affinity_group_ids is not None:
        wanted = frozenset(g for g in requested.affinity_group_ids if not is_dedication(view, g))
        if any(n.chosen_group_ids != wanted for n in nodes):
            baseline = replace(baseline, affinity_group_ids=None)
    return baseline


def validate(view: ClusterView, current: Settings, requested: Settings, rollout: bool,
             max_unavailable: Optional[int] = None) -> list[Refusal]:
    """Every reason to refuse ``requested`` (the full settings that would be stored).

    Without a rollout only settings that change are judged, so passing the stored values again is
    accepted. With one, the whole target is judged: every value some node would still be changed
    to, stored earlier or given now (see ``_rollout_baseline``).
    """
    refusals: list[Refusal] = []
    if max_unavailable is not None and (isinstance(max_unavailable, bool) or max_unavailable < 1):
        refusals.append(Refusal(PARAM_MAX_UNAVAILABLE, max_unavailable, "must be at least 1",
                                "give the number of workers to restart at a time (1 or more)"))
    for t in NODE_TYPES:
        cur, req = current[t], requested[t]
        judged = _rollout_baseline(view, t, cur, req) if rollout else cur
        refusals += _validate_offering(view, t, judged, req, rollout)
        refusals += _validate_root_disk(view, t, judged, req, rollout)
        refusals += _validate_groups(view, t, judged, req)
        if rollout:
            refusals += _validate_unrollable(view, t, cur, req)
    return refusals
