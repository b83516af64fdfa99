# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""What cks_node_outdated reports: node records, per-type counts, the drain blockers of the plan."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.drain import DrainOptions, controller_of, drain_blockers
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.order import Plan
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.quorum import can_lose_a_node
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.reasons import outdated_reasons
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.refusals import validate
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.request import SettingsRequest, refused, resolve
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import NODE_TYPES, ClusterView, Node


def node_record(view: ClusterView, node: Node, type_settings: TypeSettings) -> dict[str, Any]:
    """One node as the operator reads it (and as ``select`` sees it)."""
    reasons = outdated_reasons(node, type_settings, view)
    groups = sorted(node.affinity_groups, key=lambda g: g.name)
    return {
        "name": node.name,
        "vm_name": node.vm_name,
        "vm_id": node.vm_id,
        "ip_address": node.ip_address,
        "node_type": node.node_type,
        "vm_state": node.vm_state,
        "kubernetes_node": node.k8s_present,
        "ready": node.ready,
        "boot_id": node.boot_id,
        "annotated": node.annotated,
        "rollout_boot_id": node.rollout_boot_id,
        "back": node.back,
        "cordoned": node.unschedulable,
        "cordoned_by_others": node.cordoned_by_others,
        "external": node.external,
        "offering": node.offering_name or view.offering_name(node.offering_id),
        "offering_id": node.offering_id,
        "root_disk_size": node.root_disk_gb,
        "affinity_groups": [g.name for g in groups],
        "dedication_groups": [g.name for g in groups if g.is_dedication],
        "out_of_date": bool(reasons),
        "reasons": [r.to_dict() for r in reasons],
    }


def select_nodes(expression: str, nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """The names a JMESPath ``expression`` picks from the node records.

    The expression runs over the list of node records; it may give records or names back.
    """
    if not HAS_JMESPATH:
        raise InvalidInput("select", expression, f"needs the jmespath Python library ({JMESPATH_IMPORT_ERROR})")
    try:
        found = jmespath.search(expression, list(nodes))
    except jmespath.exceptions.JMESPathError as exc:
        raise InvalidInput("select", expression, f"not a valid JMESPath expression: {exc}")
    if found is None:
        return []
    if isinstance(found, (dict, str)):
        found = [found]
    if not isinstance(found, list):
        raise InvalidInput("select", expression, "must give a list of node records or node names, "
                           f"not {type(found).__name__}")
    names: list[str] = []
    for item in found:
        name = item.get("name") if isinstance(item, dict) else item
        if not isinstance(name, str):
            raise InvalidInput("select", expression, "must give node records (with a name) or node names, "
                               f"not {item!r}")
        if name not in names:
            names.append(name)
    known = {n.get("name") for n in nodes}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InvalidInput("select", expression, f"gave {', '.join(repr(u) for u in unknown[:5])}, which are not "
                           "node names; give node records or their names")
    return names


def node_type_summary(view: ClusterView, rollout_plan: Plan) -> dict[str, dict[str, Any]]:
    summary: dict[str, dict[str, Any]] = {}
    for t in NODE_TYPES:
        can, why = can_lose_a_node(t, view)
        summary[t] = {
            "nodes": len(view.nodes_of(t)),
            "out_of_date": rollout_plan.out_of_date.get(t, 0),
            "can_lose_a_node": can,
            "why": why,
            "not_rolled": rollout_plan.skipped.get(t),
        }
    return summary


@dataclass(frozen=True)
class DrainCheck:
    """What the drain check judges, read once: every pod, every PDB, which DaemonSets exist."""

    pods: Sequence[Mapping[str, Any]]
    pdbs: Sequence[Mapping[str, Any]]
    daemonsets: frozenset[tuple[str, str]] = frozenset()
    options: DrainOptions = field(default_factory=DrainOptions)

    def daemonset_exists(self, namespace: str, name: str) -> bool:
        return (namespace, name) in self.daemonsets


def daemonset_owners(pods: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """The DaemonSets (namespace, name) that control some of ``pods``: the only ones the filter
    chain may ask about (to tell an orphaned DaemonSet pod)."""
    found: dict[tuple[str, str], None] = {}
    for pod in pods:
        owner = controller_of(dict(pod))
        if owner is not None and owner.get("kind") == "DaemonSet":
            found.setdefault((str((pod.get("metadata") or {}).get("namespace")), str(owner.get("name"))), None)
    return list(found)


def plan_drain_blockers(view: ClusterView, rollout_plan: Plan, check: DrainCheck) -> list[dict[str, Any]]:
    """Per planned Kubernetes node, in plan order, what would block its drain now; nodes with
    nothing in the way are left out. Pure: ``check`` holds what was read."""
    by_node: dict[str, list[dict[str, Any]]] = {}
    for pod in check.pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name:
            by_node.setdefault(str(node_name).lower(), []).append(dict(pod))
    pdbs = [dict(p) for p in check.pdbs]
    found: list[dict[str, Any]] = []
    for index, batch in enumerate(rollout_plan.batches, start=1):
        for name in batch.nodes:
            node = view.find_node(name)
            if node is None or not node.is_kubernetes_node:
                continue  # external etcd nodes run no pods: nothing to drain
            blockers = drain_blockers(name, by_node.get(name, []), pdbs, check.options,
                                      check.daemonset_exists)
            if not blockers.empty:
                found.append(dict(blockers.to_dict(), batch=index, node_type=batch.node_type))
    return found


def requested_settings(view: ClusterView, current: Settings,
                       changes: Optional[SettingsRequest]) -> Settings:
    """``current`` with the given changes, as a rollout would store them; refused as it would be."""
    if changes is None or not changes.changes_settings:
        return current
    requested = resolve(view, current, changes)
    refusals = validate(view, current, requested, rollout=True)
    if refusals:
        raise refused(refusals, changes)
    return requested


try:
    import jmespath

    HAS_JMESPATH = True
    JMESPATH_IMPORT_ERROR: Optional[str] = None
except ImportError as exc:  # pragma: no cover - depends on the controller's Python
    HAS_JMESPATH = False
    JMESPATH_IMPORT_ERROR = str(exc)


@dataclass(frozen=True)
class EtcdHealth:
    """What etcd said of its members when the plan was made: ``down`` are the voting members it
    reports unhealthy (they name their nodes); ``error`` when it could not be asked."""

    down: tuple[str, ...] = ()
    message: str = ""
    error: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        return {"asked": self.error is None, "down": list(self.down), "message": self.message, "error": self.error}
