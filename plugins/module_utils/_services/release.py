# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The service behind cks_node_cycle (mode=release)."""

from __future__ import annotations

import time
from typing import Any, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.node_events import NodeEvents
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.report_file import write_private_json, write_private_text
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError
from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import StateApi
from ansible_collections.cloudstack.cks.plugins.module_utils._common.stamps import utc_stamp
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.autoscaler import added_nodes, autoscaler_words
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.reasons import OUT_OF_DATE_KEYS
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.timeline_picture import picture_path, timeline_svg
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import NODE_TYPES, ClusterView
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.release_steps import Release, ReleaseResult
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.state import Rollout
from ansible_collections.cloudstack.cks.plugins.module_utils._services.outdated import outdated_report
from ansible_collections.cloudstack.cks.plugins.module_utils._services.session import ClusterSession
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import Lock, LockInfo, Record


def after_counts(view: Optional[ClusterView], record: Optional[Record]) -> Optional[dict[str, Any]]:
    """What is still out of date after the rollout, judged against the stored settings, in the
    keys cks_node_outdated returns them: the role reads it here instead of in a module run of its
    own. None when the cluster could not be read."""
    if view is None:
        return None
    judged = outdated_report(view, record, None)
    after: dict[str, Any] = {"out_of_date": judged["out_of_date"], "work_left": judged["work_left"],
                             "node_types": {t: {"nodes": judged["node_types"][t]["nodes"],
                                                "out_of_date": judged["node_types"][t]["out_of_date"]}
                                            for t in NODE_TYPES}}
    for t in NODE_TYPES:
        after[OUT_OF_DATE_KEYS[t]] = judged[OUT_OF_DATE_KEYS[t]]
    return after


def autoscaler_after(autoscaler: Optional[Mapping[str, Any]], view: ClusterView,
                     after: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """The autoscaler at the release: the nodes it added during the rollout, and those of them still
    out of date with why (CKS gives a new node the cluster's own offering, not the rollout's)."""
    if not autoscaler or not autoscaler.get("on"):
        return None
    added = added_nodes(autoscaler.get("known_nodes") or [], [n.name for n in view.nodes if n.is_kubernetes_node])
    stale = [name for name in added if name in set(after.get("out_of_date") or [])]
    words = autoscaler_words(autoscaler, added)
    if stale:
        words += (f"; still out of date: {', '.join(stale)} (added by the cluster autoscaler during the rollout with "
                  "the cluster's CKS settings, after its batches were planned; run the rollout again to roll them)")
    return {"on": True, "minsize": autoscaler.get("minsize"), "maxsize": autoscaler.get("maxsize"),
            "added": added, "added_out_of_date": stale, "words": words}


def lease_now(kube: StateApi, holder: Optional[str]) -> Optional[LockInfo]:
    """The lock as it is now (None without a holder to release for, or a lease that cannot be read)."""
    if not holder:
        return None
    try:
        return Lock(kube, holder_identity=holder).read()
    except CksError:
        # The release must not fail on this read (the API may be down for a while): the release
        # itself retries, and gives the lock back only if it is still ours.
        return None


def taken_over(info: Optional[LockInfo], holder: Optional[str]) -> Optional[LockInfo]:
    """The lock as another rollout holds it now, if one does (it took ours over after it expired)."""
    if info is not None and info.held and info.holder != holder:
        return info
    return None


def node_release(session: ClusterSession, params: Mapping[str, Any], check_mode: bool = False) -> dict[str, Any]:
    """``release`` as the module's parameters say (mode=release): how the rollout ended, its last error
    and what it skipped come from the rollout object (option ``rollout``)."""
    rollout = Rollout.from_dict(params.get("rollout"))
    holder = params.get("lock_holder") or rollout.run_id or None
    cloud, kube = session.cloud, session.kube
    seen = lease_now(kube, holder)
    other = taken_over(seen, holder)
    if other is not None:
        # The nodes annotated now, the outcome and the last error are that rollout's: uncordoning,
        # untainting or overwriting them would undo work in flight. Say so and end.
        result = ReleaseResult(started=time.time(), outcome="unchanged", ended=time.time(),
                               lock_held_by={"holder": other.holder, "since": other.acquire_time,
                                             "renew_time": other.renew_time})
        return with_report({"release": result.to_dict(), "changed": False, "after": _read_after(session),
                            "msg": (f"not released: the rollout {other.holder} holds the lock since {other.acquire_time} "
                                    f"(it took over after the lock of {holder} expired); its nodes, "
                                    "outcome and last error were left as they are")}, rollout, params, check_mode)
    # Not held_lock: it reads the lease up front, and the release must not fail on that read.
    # Giving the lock back writes duration 1 anyway, so the lease's own duration is not needed.
    lock = Lock(kube, holder_identity=holder) if holder else None
    if lock is not None and seen is not None and seen.holder == holder:
        # Ours when read moments ago: given back in one write conditional on that version (a
        # lease written since is read and judged again, as without it).
        lock.written_version = seen.resource_version
    events = NodeEvents(kube, run=holder)
    planned_round = rollout.plan.get("restart_round")
    release = Release(cloud, kube, session.loader, str(params["cluster"]), session.store, lock,
                      project_id=params.get("project_id"), check_mode=check_mode, node_events=events,
                      restart_scope=planned_round.get("scope") if isinstance(planned_round, Mapping) else None)
    rollout_result, last_error = rollout.ending()
    try:
        result = release.run(last_error=last_error, skipped=rollout.skipped, rollout_result=rollout_result)
    finally:
        events.flush()  # what the release queued, before the module returns (bounded)
    record = release.record if release.record is not None or release.view is None else session.store.read()
    after = after_counts(release.view, record)
    if after is not None and release.view is not None:
        autoscaler = autoscaler_after(rollout.plan.get("autoscaler"), release.view, after)
        if autoscaler is not None:
            after["autoscaler"] = autoscaler
    answer = with_report({"release": result.to_dict(), "changed": result.changed,
                          "after": after}, rollout, params, check_mode)
    if events.written or events.failed:
        answer["node_events"] = events.report()
    if events.warnings():
        answer["warnings"] = answer.get("warnings", []) + events.warnings()
    return answer


def with_report(answer: dict[str, Any], rollout: Rollout, params: Mapping[str, Any], check_mode: bool) -> dict[str, Any]:
    """The release's answer with the rollout report (of a rollout that planned: the object carries the
    plan and the batches), written to ``report_path`` when given.

    Written here, after the release, rather than by a task of its own: the report is whole only once
    the release has said how the rollout ended. A report that cannot be written does not undo the
    release: ``report_error`` says why, and the role fails on it once it has shown the outcome.
    """
    report = rollout.report(answer["release"], after=answer.get("after") or {},
                            ended=utc_stamp())
    if report is None:
        return answer
    answer["report"] = report
    path = params.get("report_path")
    if path and not check_mode:
        try:
            write_private_json(path, report)
            answer["report_path"] = path
        except OSError as exc:
            answer["report_error"] = f"the rollout report could not be written to {path}: {exc.strerror or exc}"
            return answer
        # Its picture beside it, drawn from the report alone; one that cannot be written is a warning.
        picture = picture_path(path)
        try:
            write_private_text(picture, timeline_svg(report))
            answer["timeline_path"] = picture
        except OSError as exc:
            answer["warnings"] = [f"the rollout's timeline picture could not be written to {picture}: "
                                  f"{exc.strerror or exc}"]
    return answer


def _read_after(session: ClusterSession) -> Optional[dict[str, Any]]:
    # Another rollout's release: the counts are still this run's report's, read as they are now.
    try:
        return after_counts(session.view(), session.store.read())
    except CksError:
        return None
