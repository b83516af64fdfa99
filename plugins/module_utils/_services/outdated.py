# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The service behind ``cks_node_outdated``: which nodes differ and why, and the rollout plan.

Read-only. The decisions are ``_decisions``'; this file reads the record and the lock, shapes one
record per node for the operator (and for ``select``), and lays the plan out the way a playbook
consumes it: the batches, the ``serial`` list, the hosts in order, the nodes to release and the
node types that cannot be rolled, with a message ready to be kept as the last error.

For a dry run it also judges the nodes against settings given with the call (as a rollout would
store them), and, with ``drain_check``, what would block the drain of each planned node: one
listing of the pods and one of the PodDisruptionBudgets, judged by ``drain.drain_blockers``.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.autoscaler import autoscaler_deployed
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd import QuorumClient, client_from_options
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd_exec import exec_access
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd_pod import pod_access, quorum_client
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.owners import OwnerReads
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.placement import read_placement
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, DeadlineExceeded, InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._common.memory import no_cycle_collection
from ansible_collections.cloudstack.cks.plugins.module_utils._common.option_defaults import RESTART_OUTDATED
from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import PodsApi
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline, wait_for
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.autoscaler import HOLD_ANNOTATION, autoscaler_of, autoscaler_words
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.drain import DrainOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.etcd_paths import ExecAccess, PodAccess, etcd_check_paths, etcd_check_refusal
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.holder import describe_controller
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.order import plan
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.outdated_report import (
    DrainCheck,
    EtcdHealth,
    daemonset_owners,
    node_record,
    node_type_summary,
    plan_drain_blockers,
    requested_settings,
    select_nodes,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.placement import PlacementReads, placement_error, placement_refusals
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.quorum import QuorumVerdict
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.reasons import OUT_OF_DATE_KEYS
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.request import SettingsRequest, describe
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.restart_round import (
    already_restarted,
    restart_scope,
    resumed_round,
    round_words,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import PARAM_AFFINITY, PARAM_OFFERINGS, PARAM_ROOT_DISKS, Settings
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.stop_refusals import refusal_error, stop_refusals
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.work_left import work_left
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import CONTROL, ETCD, NODE_TYPES, ClusterView, Node
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.stop_check import read_for
from ansible_collections.cloudstack.cks.plugins.module_utils._services.live_paths import GuestProbe, live_scale_mode, with_paths
from ansible_collections.cloudstack.cks.plugins.module_utils._services.session import ClusterSession
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import LockInfo, Record
from ansible_collections.cloudstack.cks.plugins.module_utils._state.settings_store import (
    effective_settings,
    lock_dict,
    stored_max_unavailable,
    stored_settings,
)

#: How long a plan asks etcd again while no voting member is healthy, as during a leader election:
#: etcd's default election timeout is 1 s, drawn again up to 2 s for a round that split its votes.
ELECTION_SECONDS = 5.0


def outdated_report(view: ClusterView, record: Optional[Record], lock: Optional[LockInfo],
                    max_unavailable: Optional[int] = None, select: Optional[str] = None,
                    changes: Optional[SettingsRequest] = None, canary: bool = False,
                    drain_check: Optional[DrainCheck] = None, etcd_health: Optional[EtcdHealth] = None,
                    etcd_endpoints_given: bool = False, etcd_exec_access: Optional[ExecAccess] = None,
                    owner_reads: Optional[OwnerReads] = None, etcd_pod_access: Optional[PodAccess] = None,
                    placement: Optional[tuple[Optional[PlacementReads], list[str]]] = None,
                    restart: str = RESTART_OUTDATED) -> dict[str, Any]:
    """Everything cks_node_outdated returns, from what was read. Pure.

    ``owner_reads``: who the key is and the owner's headroom (``planned_settings`` and
    ``planned_nodes`` say for what); without them no change is judged against them.
    ``placement``: the hosts and strict groups' members (``_clients.placement``) and why not.
    """
    if max_unavailable is not None and (isinstance(max_unavailable, bool) or max_unavailable < 1):
        raise InvalidInput("max_unavailable", max_unavailable, "must be at least 1")
    stored = effective_settings(view, record)[0]
    settings = requested_settings(view, stored, changes)
    stored_mu = stored_max_unavailable(record)
    mu = max_unavailable or stored_mu or 1
    nodes = [node_record(view, n, settings[n.node_type]) for n in view.nodes]
    selected = select_nodes(select, nodes) if select else None
    # A restart with no change: the round it resumes, and the nodes that round restarted already.
    scope = restart_scope(restart, selected)
    resumed = resumed_round(record.restart_round if record is not None else None, scope)
    restarted = already_restarted(resumed, view.nodes)
    rollout_plan = plan(view, settings, mu, selected=selected, canary=canary,
                        etcd_down=etcd_health.down if etcd_health is not None else (), restart=restart,
                        restarted=restarted)
    laid_out = rollout_plan.to_dict()
    result: dict[str, Any] = {
        "changed": False,
        "cluster": {"id": view.id, "name": view.name, "state": view.state, "external_etcd": view.external_etcd},
        "nodes": nodes,
        "out_of_date": [n["name"] for n in nodes if n["out_of_date"]],
        # Beside the counts: a node down or still cordoned by the rollout is work left, out of date or not.
        "work_left": work_left(nodes),
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
        "settings": describe(view, settings),
        "settings_given": changes is not None and changes.changes_settings,
        "canary": canary,
        "restart": restart,
        "not_selected": laid_out["not_selected"],
        "restart_round": None if scope is None else {
            "scope": scope, "resumed": resumed is not None, "started": resumed.started if resumed else None,
            "run_id": resumed.run_id if resumed else None, "restarted": laid_out["restarted"],
            "words": round_words(scope, resumed, laid_out["restarted"])},
        **record_fields(view, record, lock),
    }
    if drain_check is not None:
        result["drain_blockers"] = plan_drain_blockers(view, rollout_plan, drain_check)
    if etcd_health is not None:
        result["etcd"] = etcd_health.to_dict()
    paths = etcd_check_paths(view.external_etcd, etcd_endpoints_given, etcd_exec_access, etcd_pod_access)
    by_name = {n.name: n.node_type for n in rollout_plan.nodes}
    planned = sorted({by_name[h] for h in rollout_plan.hosts if h in by_name})
    result["etcd_checks"] = paths
    result["etcd_check_refusal"] = etcd_check_refusal(paths, planned, view.external_etcd, etcd_exec_access,
                                                      etcd_pod_access)
    for t in NODE_TYPES:
        result[OUT_OF_DATE_KEYS[t]] = laid_out[OUT_OF_DATE_KEYS[t]]
    reads = owner_reads or OwnerReads()
    refusals = stop_refusals(view, settings, planned_nodes(view, rollout_plan.hosts), reads.caller, reads.headroom)
    result["would_be_refused"] = [r.to_dict() for r in refusals]
    result["refusal_error"] = refusal_error(refusals)
    hosts_read, placement_notes = placement or (None, [])
    misfits = (placement_refusals(view, settings, planned_nodes(view, rollout_plan.hosts), hosts_read)
               if hosts_read is not None else [])
    result["would_not_be_placed"] = [r.to_dict() for r in misfits]
    result["placement_error"] = placement_error(misfits)
    result["not_checked"] = list(reads.notes) + list(placement_notes)
    return result


def record_fields(view: ClusterView, record: Optional[Record], lock: Optional[LockInfo]) -> dict[str, Any]:
    """The part of ``report`` that the record and the lock decide, apart: a run that stores the
    settings and takes the lock after planning lays these over its plan instead of planning again."""
    return {
        "settings_recorded": stored_settings(record) is not None,
        "lock": lock_dict(lock),
        "lock_holder": lock.holder if lock is not None and lock.held else None,
        "last_error": record.last_error if record is not None else None,
        "outcome": record.outcome if record is not None else None,
        "result": record.result if record is not None else None,
        "record_updated": record.updated if record is not None else None,
        "cancel_requested": bool(record.cancel) if record is not None else False,
        "previous_holder_stopped": record.previous_holder_stopped if record is not None else None,
        "stopped_without_release": stopped_without_release(view, record, lock),
        # The rollout holding the lock now: who (its controller), its batch, when the lock ends unless renewed.
        "running": lock.summary() if lock is not None and lock.held else None,
    }


def planned_settings(view: ClusterView, record: Optional[Record], changes: Optional[SettingsRequest]) -> Settings:
    """The settings ``report`` plans with."""
    return requested_settings(view, effective_settings(view, record)[0], changes)


def planned_nodes(view: ClusterView, hosts: Any) -> list[Node]:
    """The plan's nodes in the order it hands them on."""
    return [n for n in (view.find_node(h) for h in hosts) if n is not None]


def stopped_without_release(view: ClusterView, record: Optional[Record],
                            lock: Optional[LockInfo]) -> Optional[dict[str, Any]]:
    """The rollout that stopped without its release, if one did; None otherwise.

    Its lock, expired but still naming it, says so until another rollout takes the lock over;
    from then on the record's ``previous_holder_stopped`` does, until a release has run.
    """
    left = sorted(n.name for n in view.nodes if n.annotated)
    stopped = sorted(n.name for n in view.nodes if n.vm_state != "Running")
    if lock is not None and lock.holder and lock.expired:
        summary = lock.summary()
        return {"holder": lock.holder, "since": lock.acquire_time, "renew_time": lock.renew_time,
                "taken_over": False, "nodes_left_annotated": left, "controller": summary["controller"],
                "controller_text": summary["controller_text"],
                "batch": summary["batch"], "why": lock.gone or "its lock expired", "nodes_left_stopped": stopped}
    previous = record.previous_holder_stopped if record is not None else None
    if previous:
        return {"holder": previous.get("holder"), "since": previous.get("acquire_time"),
                "renew_time": previous.get("renew_time"), "taken_over": True, "nodes_left_annotated": left,
                "controller": previous.get("controller"), "batch": previous.get("batch"),
                "controller_text": describe_controller(previous.get("controller")) or None,
                "why": previous.get("gone") or "its lock expired", "nodes_left_stopped": stopped}
    return None


def read_exec_access(params: Mapping[str, Any], session: ClusterSession, view: ClusterView) -> Optional[ExecAccess]:
    """Whether the key may exec into the etcd pods, asked only where that is the path (stacked
    control nodes, no ``etcd_endpoints``): learned here, before the lock, not at batch 1."""
    if client_from_options(params) is not None or view.external_etcd or not view.nodes_of(CONTROL):
        return None
    return exec_access(session.kube)


def read_pod_access(params: Mapping[str, Any], session: ClusterSession, view: ClusterView) -> Optional[PodAccess]:
    """Whether the key may run the check pod, asked only where that is the path (external etcd
    nodes, no ``etcd_endpoints``): learned here, before the lock, not at batch 1."""
    if client_from_options(params) is not None or not view.external_etcd or not view.nodes_of(ETCD):
        return None
    return pod_access(session.kube)


def read_etcd_health(params: Mapping[str, Any], session: Optional[ClusterSession] = None,
                     view: Optional[ClusterView] = None, access: Optional[ExecAccess] = None,
                     pod: Optional[PodAccess] = None) -> Optional[EtcdHealth]:
    """etcd's member health, through the explicit ``etcd_endpoints`` when given, else etcdctl in the
    etcd pods (stacked etcd, where the key may exec) or in a check pod (external etcd, where the key
    may run it). A plan is still made when etcd cannot be asked: the batches' own preflight judges
    the quorum before anything goes down. Options etcd could never be asked with (an endpoint that
    is no URL) are refused."""
    stacked = session is not None and view is not None and not view.external_etcd and bool(view.nodes_of(CONTROL))
    external = session is not None and view is not None and view.external_etcd and bool(view.nodes_of(ETCD))
    if access is not None and not access.allowed and client_from_options(params) is None:
        return EtcdHealth(error=f"may not exec into {', '.join(access.denied_pods) or 'the etcd pods'}")
    if pod is not None and not pod.allowed and client_from_options(params) is None:
        return EtcdHealth(error=f"may not run the etcd check pod: {', '.join(pod.denied) or pod.reason}")
    client = quorum_client(params, session.kube if (stacked or external) and session is not None else None,
                           external_etcd=external)
    if client is None:
        return None
    try:
        verdict = member_health(client)
    except CksError as exc:
        return EtcdHealth(error=exc.msg)
    return EtcdHealth(down=tuple(m.name for m in verdict.unhealthy if m.name), message=verdict.message)


def member_health(client: QuorumClient, seconds: float = ELECTION_SECONDS) -> QuorumVerdict:
    """The members' health, asked again (for up to ``seconds``) while no voting member is healthy:
    planned from a reading taken during an election, every member would be judged down and the
    killed one not put first."""
    readings: list[QuorumVerdict] = []

    def a_voter_is_healthy() -> bool:
        readings.append(client.check(require_ready=False))
        return not readings[-1].no_voter_healthy

    try:
        wait_for(a_voter_is_healthy, Deadline(seconds), interval=1.0, what="a healthy etcd member")
    except DeadlineExceeded:
        pass  # no election but the quorum gone: planned as read, and each batch's preflight asks again
    return readings[-1]


def read_drain_check(kube: PodsApi, options: DrainOptions) -> DrainCheck:
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


def node_outdated(session: ClusterSession, params: Mapping[str, Any], check_mode: bool = False) -> dict[str, Any]:
    """cks_node_outdated: read the cluster, the record and the lock; report (see the module's docs)."""
    # The plan of a large cluster is as large as the cluster (a record per node, the batches).
    with no_cycle_collection():
        return _node_outdated(session, params, check_mode)


def _node_outdated(session: ClusterSession, params: Mapping[str, Any], check_mode: bool = False) -> dict[str, Any]:
    max_unavailable = params.get("max_unavailable")
    if max_unavailable is not None and max_unavailable < 1:
        raise InvalidInput("max_unavailable", max_unavailable, "must be at least 1")
    # Only the settings options: the rest of a settings request (rollout, lock, cancel) is not ours.
    changes = SettingsRequest.from_params({
        key: params.get(key) for key in (PARAM_OFFERINGS, PARAM_ROOT_DISKS, PARAM_AFFINITY)})
    del check_mode  # it only reads
    view = session.view()
    answer = plan_report(session, params, view, session.store.read(), session.lock().read(), changes)
    # The cluster autoscaler as status shows it: on, min/max, and the nodes a rollout keeps it off.
    autoscaler = autoscaler_of(session.entry(), autoscaler_deployed(session.kube))
    autoscaler["held_by_rollout"] = [n.name for n in view.nodes if HOLD_ANNOTATION in n.annotations]
    autoscaler["words"] = autoscaler_words(autoscaler) + (
        f"; marked scale-down-disabled by a rollout: {', '.join(autoscaler['held_by_rollout'])}"
        if autoscaler["held_by_rollout"] else "")
    answer["autoscaler"] = autoscaler
    return answer


def plan_report(session: ClusterSession, params: Mapping[str, Any], view: ClusterView, record: Optional[Record],
                lock: Optional[LockInfo], changes: SettingsRequest, probe: Optional[GuestProbe] = None) -> dict[str, Any]:
    """The whole cks_node_outdated answer for what was read, with the reads the plan needs (owners,
    etcd, the drain check) made here; the catalog the run used goes with it. With ``live_scale:
    auto``, each planned node's path (``live_paths.with_paths``; ``probe`` asks the guests of the
    live paths that add vCPUs for their domain's headroom)."""
    mode = live_scale_mode(params)
    judged = _plan_report(session, params, view, record, lock, changes)
    return with_paths(judged, session, view, planned_settings(view, record, changes), mode, probe=probe)


def _plan_report(session: ClusterSession, params: Mapping[str, Any], view: ClusterView, record: Optional[Record],
                 lock: Optional[LockInfo], changes: SettingsRequest) -> dict[str, Any]:
    max_unavailable = params.get("max_unavailable")
    check = None
    if params.get("drain_check"):
        check = read_drain_check(session.kube, DrainOptions(
            delete_emptydir_data=bool(params.get("delete_emptydir_data", True)), force=bool(params.get("force"))))
    given = client_from_options(params) is not None
    # What every plan below is asked with; the later ones add what was read for the first.
    asked: dict[str, Any] = {"max_unavailable": max_unavailable, "select": params.get("select"), "changes": changes,
                             "canary": bool(params.get("canary")), "drain_check": check, "etcd_endpoints_given": given,
                             "restart": params.get("restart") or RESTART_OUTDATED}
    first = outdated_report(view, record, lock, **asked)
    # Only the reads the planned changes need: a plan with no growth and no group change costs none.
    reads = read_for(session.cloud, view, planned_settings(view, record, changes), planned_nodes(view, first["hosts"]))
    # Whether the deployment planner can place the nodes a change puts into strict groups: read only
    # for such a change (listHosts, the groups' VMs), noted as not checked for a key that may not.
    placement = read_placement(session.cloud, view, planned_settings(view, record, changes),
                               planned_nodes(view, first["hosts"]))
    if reads.caller is not None or reads.headroom is not None or reads.notes or placement != (None, []):
        first = outdated_report(view, record, lock, **asked, owner_reads=reads, placement=placement)
    # etcd is asked only when the plan has etcd members to restart: a workers-only plan costs no
    # exec and no access review (the planning call budget of a large cluster).
    if not given and not any(w.get("node_type") in (CONTROL, ETCD) for w in first["work"]):
        return dict(first, catalog=session.catalog_dict())
    access = read_exec_access(params, session, view)
    pod = read_pod_access(params, session, view)
    judged = outdated_report(view, record, lock, **asked, etcd_health=read_etcd_health(params, session, view, access, pod),
                             etcd_exec_access=access, owner_reads=reads, etcd_pod_access=pod, placement=placement)
    # The later runs of a rollout take it over (their catalog option) instead of listing it again.
    judged["catalog"] = session.catalog_dict()
    return judged
