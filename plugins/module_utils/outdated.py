# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The service behind ``cks_node_outdated``: which nodes differ and why, and the rollout plan.

Read-only. The decisions are ``plan.py``'s; this file reads the record and the lock, shapes one
record per node for the operator (and for ``select``), and lays the plan out the way a playbook
consumes it: the batches, the ``serial`` list, the hosts in order, the nodes to release and the
node types that cannot be rolled, with a message ready to be kept as the last error.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils import plan as plans
from ansible_collections.cloudstack.cks.plugins.module_utils import record as records
from ansible_collections.cloudstack.cks.plugins.module_utils import settings as node_settings
from ansible_collections.cloudstack.cks.plugins.module_utils.cluster import NODE_TYPES, ClusterView, Node
from ansible_collections.cloudstack.cks.plugins.module_utils.errors import InvalidInput

try:
    import jmespath

    HAS_JMESPATH = True
    JMESPATH_IMPORT_ERROR: Optional[str] = None
except ImportError as exc:  # pragma: no cover - depends on the controller's Python
    HAS_JMESPATH = False
    JMESPATH_IMPORT_ERROR = str(exc)


def node_record(view: ClusterView, node: Node, type_settings: plans.TypeSettings) -> dict[str, Any]:
    """One node as the operator reads it (and as ``select`` sees it)."""
    reasons = plans.outdated_reasons(node, type_settings, view)
    groups = sorted(node.affinity_groups, key=lambda g: g.name)
    return {
        "name": node.name,
        "vm_name": node.vm_name,
        "vm_id": node.vm_id,
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


def node_type_summary(view: ClusterView, rollout_plan: plans.Plan) -> dict[str, dict[str, Any]]:
    summary: dict[str, dict[str, Any]] = {}
    for t in NODE_TYPES:
        can, why = plans.can_lose_a_node(t, view)
        summary[t] = {
            "nodes": len(view.nodes_of(t)),
            "out_of_date": rollout_plan.out_of_date.get(t, 0),
            "can_lose_a_node": can,
            "why": why,
            "not_rolled": rollout_plan.skipped.get(t),
        }
    return summary


def report(view: ClusterView, record: Optional[records.Record], lock: Optional[records.LockInfo],
           max_unavailable: Optional[int] = None, select: Optional[str] = None) -> dict[str, Any]:
    """Everything cks_node_outdated returns, from what was read. Pure."""
    if max_unavailable is not None and (isinstance(max_unavailable, bool) or max_unavailable < 1):
        raise InvalidInput("max_unavailable", max_unavailable, "must be at least 1")
    settings, recorded = node_settings.effective_settings(view, record)
    stored_mu = node_settings.stored_max_unavailable(record)
    mu = max_unavailable or stored_mu or 1
    nodes = [node_record(view, n, settings[n.node_type]) for n in view.nodes]
    selected = select_nodes(select, nodes) if select else None
    rollout_plan = plans.plan(view, settings, mu, selected=selected)
    laid_out = rollout_plan.to_dict()
    result: dict[str, Any] = {
        "changed": False,
        "cluster": {"id": view.id, "name": view.name, "state": view.state, "external_etcd": view.external_etcd},
        "nodes": nodes,
        "out_of_date": [n["name"] for n in nodes if n["out_of_date"]],
        "node_types": node_type_summary(view, rollout_plan),
        "plan": laid_out["batches"],
        "serial": laid_out["serial"],
        "hosts": laid_out["hosts"],
        "work": laid_out["nodes"],
        "to_release": laid_out["to_release"],
        # Not "skipped": Ansible would take a truthy "skipped" for a skipped task.
        "unrollable": laid_out["skipped"],
        "unrollable_error": laid_out["last_error"],
        "worker_batch_size": laid_out["worker_batch_size"],
        "max_unavailable": mu,
        "selected": selected,
        "settings": node_settings.describe(view, settings),
        "settings_recorded": recorded,
        "lock": node_settings.lock_dict(lock),
        "lock_holder": lock.holder if lock is not None and lock.held else None,
        "last_error": record.last_error if record is not None else None,
        "outcome": record.outcome if record is not None else None,
        "record_updated": record.updated if record is not None else None,
        "cancel_requested": bool(record.cancel) if record is not None else False,
        "previous_holder_stopped": record.previous_holder_stopped if record is not None else None,
    }
    for t in NODE_TYPES:
        result[plans.OUT_OF_DATE_KEYS[t]] = laid_out[plans.OUT_OF_DATE_KEYS[t]]
    return result


def node_outdated(cloud: Any, connect_kube: node_settings.KubeConnector, params: Mapping[str, Any]) -> dict[str, Any]:
    """cks_node_outdated: read the cluster, the record and the lock; report (see the module's docs)."""
    max_unavailable = params.get("max_unavailable")
    if max_unavailable is not None and max_unavailable < 1:
        raise InvalidInput("max_unavailable", max_unavailable, "must be at least 1")
    with node_settings.OpenCluster(cloud, connect_kube, str(params["cluster"]), params.get("project_id")) as opened:
        record = opened.store.read()
        lock = opened.lock().read()
        return report(opened.view, record, lock, max_unavailable=max_unavailable, select=params.get("select"))


__all__ = ["HAS_JMESPATH", "node_outdated", "node_record", "report", "select_nodes"]
