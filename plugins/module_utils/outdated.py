# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The service behind ``cks_node_outdated``: which nodes differ and why, and the rollout plan.

Read-only. The decisions are ``plan.py``'s; this file reads the record and the lock, shapes one
record per node for the operator (and for ``select``), and lays the plan out the way a playbook
consumes it: the batches, the ``serial`` list, the hosts in order, the nodes to release and the
node types that cannot be rolled, with a message ready to be kept as the last error.

For a dry run it also judges the nodes against settings given with the call (as a rollout would
store them), and, with ``drain_check``, what would block the drain of each planned node: one
listing of the pods and one of the PodDisruptionBudgets, judged by ``drain.drain_blockers``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils import drain as drains
from ansible_collections.cloudstack.cks.plugins.module_utils import etcd
from ansible_collections.cloudstack.cks.plugins.module_utils import plan as plans
from ansible_collections.cloudstack.cks.plugins.module_utils import record as records
from ansible_collections.cloudstack.cks.plugins.module_utils import settings as node_settings
from ansible_collections.cloudstack.cks.plugins.module_utils.cluster import NODE_TYPES, ClusterView, Node
from ansible_collections.cloudstack.cks.plugins.module_utils.errors import CksError, InvalidInput

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


@dataclass(frozen=True)
class DrainCheck:
    """What the drain check judges, read once: every pod, every PDB, which DaemonSets exist."""

    pods: Sequence[Mapping[str, Any]]
    pdbs: Sequence[Mapping[str, Any]]
    daemonsets: frozenset[tuple[str, str]] = frozenset()
    options: drains.DrainOptions = field(default_factory=drains.DrainOptions)

    def daemonset_exists(self, namespace: str, name: str) -> bool:
        return (namespace, name) in self.daemonsets


def daemonset_owners(pods: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """The DaemonSets (namespace, name) that control some of ``pods``: the only ones the filter
    chain may ask about (to tell an orphaned DaemonSet pod)."""
    found: dict[tuple[str, str], None] = {}
    for pod in pods:
        owner = drains.controller_of(dict(pod))
        if owner is not None and owner.get("kind") == "DaemonSet":
            found.setdefault((str((pod.get("metadata") or {}).get("namespace")), str(owner.get("name"))), None)
    return list(found)


def drain_blockers(view: ClusterView, rollout_plan: plans.Plan, check: DrainCheck) -> list[dict[str, Any]]:
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
            blockers = drains.drain_blockers(name, by_node.get(name, []), pdbs, check.options,
                                             check.daemonset_exists)
            if not blockers.empty:
                found.append(dict(blockers.to_dict(), batch=index, node_type=batch.node_type))
    return found


def requested_settings(view: ClusterView, current: plans.Settings,
                       changes: Optional[node_settings.SettingsRequest]) -> plans.Settings:
    """``current`` with the given changes, as a rollout would store them; refused as it would be."""
    if changes is None or not changes.changes_settings:
        return current
    requested = node_settings.resolve(view, current, changes)
    refusals = plans.validate(view, current, requested, rollout=True)
    if refusals:
        raise node_settings.refused(refusals, changes)
    return requested


def report(view: ClusterView, record: Optional[records.Record], lock: Optional[records.LockInfo],
           max_unavailable: Optional[int] = None, select: Optional[str] = None,
           changes: Optional[node_settings.SettingsRequest] = None, canary: bool = False,
           drain_check: Optional[DrainCheck] = None, etcd_health: Optional[EtcdHealth] = None) -> dict[str, Any]:
    """Everything cks_node_outdated returns, from what was read. Pure."""
    if max_unavailable is not None and (isinstance(max_unavailable, bool) or max_unavailable < 1):
        raise InvalidInput("max_unavailable", max_unavailable, "must be at least 1")
    stored, recorded = node_settings.effective_settings(view, record)
    settings = requested_settings(view, stored, changes)
    stored_mu = node_settings.stored_max_unavailable(record)
    mu = max_unavailable or stored_mu or 1
    nodes = [node_record(view, n, settings[n.node_type]) for n in view.nodes]
    selected = select_nodes(select, nodes) if select else None
    rollout_plan = plans.plan(view, settings, mu, selected=selected, canary=canary,
                              etcd_down=etcd_health.down if etcd_health is not None else ())
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
        "settings_given": changes is not None and changes.changes_settings,
        "canary": canary,
        "not_selected": laid_out["not_selected"],
        "lock": node_settings.lock_dict(lock),
        "lock_holder": lock.holder if lock is not None and lock.held else None,
        "last_error": record.last_error if record is not None else None,
        "outcome": record.outcome if record is not None else None,
        "record_updated": record.updated if record is not None else None,
        "cancel_requested": bool(record.cancel) if record is not None else False,
        "previous_holder_stopped": record.previous_holder_stopped if record is not None else None,
    }
    if drain_check is not None:
        result["drain_blockers"] = drain_blockers(view, rollout_plan, drain_check)
    if etcd_health is not None:
        result["etcd"] = etcd_health.to_dict()
    for t in NODE_TYPES:
        result[plans.OUT_OF_DATE_KEYS[t]] = laid_out[plans.OUT_OF_DATE_KEYS[t]]
    return result


@dataclass(frozen=True)
class EtcdHealth:
    """What etcd said of its members when the plan was made: ``down`` are the voting members it
    reports unhealthy (they name their nodes); ``error`` when it could not be asked."""

    down: tuple[str, ...] = ()
    message: str = ""
    error: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        return {"asked": self.error is None, "down": list(self.down), "message": self.message, "error": self.error}


def read_etcd_health(params: Mapping[str, Any]) -> Optional[EtcdHealth]:
    """etcd's member health, when ``etcd_endpoints`` are given. A plan is still made when etcd
    cannot be asked: the batches' own preflight judges the quorum before anything goes down.
    Options etcd could never be asked with (an endpoint that is no URL) are refused."""
    client = etcd.client_from_options(params)
    if client is None:
        return None
    try:
        verdict = client.check(require_ready=False)
    except CksError as exc:
        return EtcdHealth(error=exc.msg)
    return EtcdHealth(down=tuple(m.name for m in verdict.unhealthy if m.name), message=verdict.message)


def read_drain_check(kube: Any, options: drains.DrainOptions) -> DrainCheck:
    """The reads behind the drain check, bounded whatever the plan: the pods and the PDBs listed
    once (paged), and one GET per DaemonSet that controls a pod."""
    pods = kube.list_all_pods()
    pdbs = kube.list_pdbs()
    existing = set()
    for namespace, name in daemonset_owners(pods):
        # None when it is gone (404): an orphaned DaemonSet pod, which only force evicts.
        if kube.read_daemonset(namespace, name) is not None:
            existing.add((namespace, name))
    return DrainCheck(pods=pods, pdbs=pdbs, daemonsets=frozenset(existing), options=options)


def node_outdated(cloud: Any, connect_kube: node_settings.KubeConnector, params: Mapping[str, Any]) -> dict[str, Any]:
    """cks_node_outdated: read the cluster, the record and the lock; report (see the module's docs)."""
    max_unavailable = params.get("max_unavailable")
    if max_unavailable is not None and max_unavailable < 1:
        raise InvalidInput("max_unavailable", max_unavailable, "must be at least 1")
    # Only the settings options: the rest of a settings request (rollout, lock, cancel) is not ours.
    changes = node_settings.SettingsRequest.from_params({
        key: params.get(key) for key in (plans.PARAM_OFFERINGS, plans.PARAM_ROOT_DISKS, plans.PARAM_AFFINITY)})
    with node_settings.OpenCluster(cloud, connect_kube, str(params["cluster"]), params.get("project_id")) as opened:
        record = opened.store.read()
        lock = opened.lock().read()
        check = None
        if params.get("drain_check"):
            check = read_drain_check(opened.kube, drains.DrainOptions(
                delete_emptydir_data=bool(params.get("delete_emptydir_data")), force=bool(params.get("force"))))
        return report(opened.view, record, lock, max_unavailable=max_unavailable, select=params.get("select"),
                      changes=changes, canary=bool(params.get("canary")), drain_check=check,
                      etcd_health=read_etcd_health(params))


__all__ = ["HAS_JMESPATH", "DrainCheck", "EtcdHealth", "daemonset_owners", "drain_blockers", "node_outdated",
           "node_record", "read_drain_check", "read_etcd_health", "report", "requested_settings", "select_nodes"]
