# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The service behind ``cks_node_settings`` with ``plan=true``: the start of a rollout in one module run.

In this order, as the rollout role did it in four runs before:

0. with ``live_scale: auto``, the guests of the live paths that add vCPUs asked for their running
   domain's headroom (``live_paths.with_paths``; not in check mode, which creates no pod);
1. refuse before the lock: the settings as a rollout would store them, the etcd checks the plan
   would need, the changes CloudStack would refuse once a node is stopped, the nodes its deployment
   planner could not place in their strict affinity groups (``cks_node_outdated``'s
   ``etcd_check_refusal``, ``refusal_error`` and ``placement_error``) and the commands the plan
   sends that the API key may not call (``api_access_error``, with a warning when the key pair
   ends within the rollout's longest expected time); nothing is written;
2. store the settings and take the lock (``NodeSettingsService``);
3. the plan: the one judged in 1., made from the same reads, with what the record and the lock say
   after 2. laid over it (the settings it judged are the ones just stored);
4. with the cluster autoscaler on, the planned nodes marked scale-down-disabled (``_decisions/autoscaler``);
5. the pending taint on the planned nodes (``taint_pending``);
6. a restart with no change (``restart: selected | all``) that resumes no round records its round
   (each node's boot ID now, ``_decisions.restart_round``), so that a rerun after a killed or failed
   run restarts only the nodes not restarted since.

The lock is read before the cluster is: a rollout whose release ends while this run reads would
otherwise leave a view older than the free lock this run then takes. Anything failing after the
lock was taken runs the release, which gives the lock back and keeps why as the last error.
In check mode nothing is written: the settings are judged, the lock is read, the plan is made.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.api_access import read_api_access
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.autoscaler import autoscaler_deployed, hold_nodes
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.live_scale import probe_guests
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.node_events import events_access_warning
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._common.memory import no_cycle_collection
from ansible_collections.cloudstack.cks.plugins.module_utils._common.option_defaults import default_of
from ansible_collections.cloudstack.cks.plugins.module_utils._common.stamps import utc_stamp
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.api_access import (
    api_access_error,
    expiry_warning,
    live_path_refusal,
    missing_commands,
    without_live_scale,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.autoscaler import autoscaler_of, autoscaler_words
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.request import SettingsRequest
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.restart_round import RestartRound, round_to_store
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.scale_path import GuestView
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import PARAM_AFFINITY, PARAM_OFFERINGS, PARAM_ROOT_DISKS
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ClusterView
from ansible_collections.cloudstack.cks.plugins.module_utils._services.live_paths import GuestProbe
from ansible_collections.cloudstack.cks.plugins.module_utils._services.outdated import plan_report, planned_nodes, planned_settings, record_fields
from ansible_collections.cloudstack.cks.plugins.module_utils._services.release import node_release
from ansible_collections.cloudstack.cks.plugins.module_utils._services.session import ClusterSession
from ansible_collections.cloudstack.cks.plugins.module_utils._services.settings import NodeSettingsService
from ansible_collections.cloudstack.cks.plugins.module_utils._services.taint import taint_pending
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import Lock, Record

REFUSED = "Refused before the lock (nothing changed): "
#: Seconds a guest probe before the lock may take (its pod started, three reads, deleted).
PROBE_SECONDS = 120.0
#: The settings service's answers kept next to the plan's (the plan's own keys win: they are the same
#: values, read once).
SETTINGS_ONLY = ("previous_settings", "first_use", "rollout", "diff")


def refusal(judged: Mapping[str, Any]) -> Optional[str]:
    """Why the planned rollout is refused before the lock, or None: the etcd checks first, as before."""
    for key in ("etcd_check_refusal", "refusal_error", "placement_error", "api_access_error"):
        if judged.get(key):
            return REFUSED + str(judged[key])
    return None


def judge_api_access(session: ClusterSession, params: Mapping[str, Any], view: ClusterView, record: Optional[Record],
                     changes: SettingsRequest, judged: dict[str, Any]) -> None:
    """Whether the key may send what the plan's node cycles (and their put-backs) send, and whether
    it ends during the rollout: ``would_not_be_allowed``, ``api_access_error``, ``api_key_ends`` and
    a warning, laid into ``judged``. Asked only when nodes are planned."""
    if not judged.get("hosts"):
        return
    reads, notes = read_api_access(session.cloud)
    missing = missing_commands(planned_settings(view, record, changes), planned_nodes(view, judged["hosts"]), reads)
    judged["would_not_be_allowed"] = [m.to_dict() for m in missing]
    judged["api_access_error"] = api_access_error(missing, reads.key_name)
    judged["api_key_ends"] = reads.key_end
    live_refused = live_path_refusal(reads)
    if live_refused is not None:
        judged.update(without_live_scale(judged, live_refused))
    judged["not_checked"] = list(judged.get("not_checked") or []) + notes
    batch_timeout = float(params.get("batch_timeout") or default_of("batch_timeout"))
    warning = expiry_warning(reads, datetime.now(timezone.utc), len(judged.get("plan") or []), batch_timeout)
    if warning is not None:
        judged["warnings"] = list(judged.get("warnings") or []) + [warning]


def start_rollout(session: ClusterSession, params: Mapping[str, Any], check_mode: bool = False) -> dict[str, Any]:
    """cks_node_settings with plan=true (see the module's docs)."""
    # The plan of a large cluster is as large as the cluster (a record per node, the batches).
    with no_cycle_collection():
        return _start(session, params, check_mode)


def _start(session: ClusterSession, params: Mapping[str, Any], check_mode: bool) -> dict[str, Any]:
    max_unavailable = params.get("max_unavailable")
    if max_unavailable is not None and max_unavailable < 1:
        raise InvalidInput("max_unavailable", max_unavailable, "must be at least 1")
    changes = SettingsRequest.from_params({key: params.get(key) for key in (PARAM_OFFERINGS, PARAM_ROOT_DISKS, PARAM_AFFINITY)})
    request = SettingsRequest.from_params(params)
    if not request.rollout or request.cancel_rollout:
        raise InvalidInput("plan", True, "starts a rollout: give it with rollout=true (and lock_holder), "
                                         "never with rollout=false or cancel_rollout")
    lock_before = session.lock(request.lock_holder, request.lock_duration).read()
    view = session.view()
    record = session.store.read()
    # The guests of the live paths that add vCPUs are asked for their headroom here, before the lock
    # (a pod each, read only); not by a dry run, which creates nothing, nor while another rollout
    # holds the lock (this run is refused below).
    free = lock_before is None or not lock_before.held or lock_before.holder == request.lock_holder
    probe = guest_probe(session, params) if not check_mode and free else None
    judged = plan_report(session, params, view, record, lock_before, changes, probe=probe)
    judge_api_access(session, params, view, record, changes, judged)
    refused = refusal(judged)
    if refused is not None:
        raise CksError(refused)

    # The plan's batches go into the Lease with the lock: a batch's run then knows its number, and
    # what a rollout that stopped without release left is told as "batch N of M".
    batches = [[str(n) for n in batch.get("nodes") or []] for batch in judged.get("plan") or []]

    def lock_with_plan(holder: Optional[str], duration: Optional[int]) -> Lock:
        lock = session.lock(holder, duration)
        lock.plan = batches
        return lock

    service = NodeSettingsService(view, session.store, lock_with_plan, check_mode=check_mode, diff=session.diff)
    stored = service.run(request, known=(record, lock_before))
    try:
        result = dict(judged, **record_fields(view, service.record, service.lock_info))
        result.update({key: stored[key] for key in SETTINGS_ONLY if key in stored})
        result["changed"] = bool(stored.get("changed"))
        taken = service.lock_info
        if not check_mode and taken is not None and taken.holder == request.lock_holder and taken.resource_version:
            # The Lease as this run left it: the first batch renews from it in one write, no read.
            result["lock_version"] = taken.resource_version
        if result["hosts"] and not check_mode:
            # The nodes' Events need create and patch on events: without them a warning, not a refusal.
            # Not asked in a dry run, which only gets and lists (a review is a create).
            warning = events_access_warning(session.kube)
            result["node_events_allowed"] = warning is None
            if warning is not None:
                result["warnings"] = list(result.get("warnings") or []) + [warning]
        # The cluster autoscaler (autoscaling on, or its Deployment in kube-system) must not remove a
        # node the rollout is restarting: every node of the plan is marked scale-down-disabled until
        # the release, which takes off only what this put on.
        result["autoscaler"] = autoscaler_of(session.entry(), autoscaler_deployed(session.kube))
        # The nodes there now: any other a later batch finds, the autoscaler added during the rollout.
        result["autoscaler"]["known_nodes"] = [n.name for n in view.nodes if n.is_kubernetes_node]
        result["autoscaler"]["words"] = autoscaler_words(result["autoscaler"])
        if result["autoscaler"]["on"] and result["hosts"] and not check_mode:
            result["autoscaler"]["held"] = hold_nodes(session.kube, result["hosts"])
            result["changed"] = result["changed"] or bool(result["autoscaler"]["held"])
        begun = begin_restart_round(session, view, result, request.lock_holder) if not check_mode else None
        if begun is not None:
            result["restart_round"] = dict(result["restart_round"], started=begun.started, run_id=begun.run_id)
        if params.get("taint_pending") and result["hosts"] and not check_mode:
            tainted = taint_pending(session, {"nodes": result["hosts"], "lock_holder": request.lock_holder})
            result["pending_taint"] = tainted["pending_taint"]
            result["changed"] = result["changed"] or bool(tainted.get("changed"))
        return result
    except Exception as exc:
        if check_mode:
            raise
        raise _released(session, params, request.lock_holder, exc)


def guest_probe(session: ClusterSession, params: Mapping[str, Any]) -> GuestProbe:
    """The plan's guest probe: the live path's pod on each node (``live_scale_image``), read only."""
    image = str(params.get("live_scale_image") or default_of("live_scale_image"))
    interval = float(default_of("poll_interval"))

    def probe(nodes: list[str]) -> Mapping[str, tuple[Optional[GuestView], Optional[str], Optional[str]]]:
        return probe_guests(session.kube, nodes, image, PROBE_SECONDS, interval)

    return probe


def begin_restart_round(session: ClusterSession, view: ClusterView, judged: Mapping[str, Any],
                        holder: Optional[str]) -> Optional[RestartRound]:
    """Record the round of a restart that resumes none, once the lock is held (one write of the
    record); None when there is none to record."""
    begun = round_to_store(judged.get("restart_round"), view.nodes, utc_stamp(), holder)
    if begun is None:
        return None
    stored = begun.to_dict()
    session.store.update(lambda record: setattr(record, "restart_round", stored))
    return begun


def _released(session: ClusterSession, params: Mapping[str, Any], holder: Optional[str], failure: Exception) -> CksError:
    """The lock was taken and planning failed: release (the lock back, any pending taint off, why
    kept as the last error), then say both what failed and how the release went."""
    why = failure.msg if isinstance(failure, CksError) else f"{type(failure).__name__}: {failure}"
    released = "the lock was released"
    try:
        node_release(session, {"cluster": params.get("cluster"), "project_id": params.get("project_id"),
                               "lock_holder": holder, "rollout": {"last_error": f"planning failed: {why}"}})
    except CksError as exc:
        released = f"the release failed too ({exc.msg}); the lock expires by itself after lock_duration"
    details = dict(failure.details) if isinstance(failure, CksError) else {}
    return CksError(f"Planning the rollout failed: {why}; {released}", **details)
