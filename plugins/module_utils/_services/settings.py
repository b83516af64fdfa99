# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The service behind ``cks_node_settings``: read, validate and store the per-type node settings.

The flow, for one call:

1. the cluster's CKS state decides whether settings may be stored at all (not while a CKS
   operation runs, not while a rollout holds our lock);
2. offering and affinity group names are resolved to ids against the lists the cluster view
   already holds (no extra calls), refusing unknown, ambiguous and dedication groups;
3. the requested changes are laid over the stored settings, or, on first use, over the
   settings copied from the cluster (``_decisions.settings.initial_settings``), so a change to one node type
   leaves the others as they are;
4. ``_decisions.refusals.validate`` judges what changes; anything refused means nothing is written;
5. with ``rollout=true`` the lock is taken before the settings are stored; if storing fails,
   the lock is given back and the failure kept as the last error.

``cancel_rollout`` only sets the cancel flag that a running rollout reads between batches.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.order import plan
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.reasons import OUT_OF_DATE_KEYS
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.refusals import validate
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.request import SettingsRequest, describe, refused, resolve, same_settings
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.states import BUSY_STATES as OPERATION_STATES
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.states import ROLLOUT_STATES
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import NODE_TYPES, ClusterView
from ansible_collections.cloudstack.cks.plugins.module_utils._services.session import ClusterSession, LockFactory
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import NAMESPACE, RECORD_NAME, Lock, LockInfo, Record, RecordConflict, RecordStore
from ansible_collections.cloudstack.cks.plugins.module_utils._state.settings_store import (
    cancel_older_than_lock,
    effective_settings,
    lock_dict,
    lock_held_error,
    settings_data,
    stored_max_unavailable,
    stored_settings,
)


class NodeSettingsService:
    """Stores (and with rollout=true, locks for) the node settings of one cluster."""

    def __init__(self, view: ClusterView, store: RecordStore, lock_factory: LockFactory,
                 check_mode: bool = False, diff: bool = False) -> None:
        self.view = view
        self.store = store
        self.lock_factory = lock_factory
        self.check_mode = check_mode
        self.diff = diff
        #: After ``run``: the record as stored (or read) and the lock as taken (or read), for a
        #: caller that plans on in the same run (``_services.start``).
        self.record: Optional[Record] = None
        self.lock_info: Optional[LockInfo] = None

    # -- entry point ---------------------------------------------------------------------------

    def run(self, request: SettingsRequest, known: Optional[tuple[Optional[Record], Optional[LockInfo]]] = None) -> dict[str, Any]:
        """``known``: the record and the lock as the caller read them already in this run (not read again)."""
        if request.cancel_rollout:
            return self._cancel(request)
        self._check_state(request)
        lock = self.lock_factory(request.lock_holder, request.lock_duration)
        record, lock_before = known if known is not None else (self.store.read(), lock.read())
        ours = lock_before is not None and lock_before.held and lock_before.holder == request.lock_holder
        if lock_before is not None and lock_before.held and not ours:
            raise lock_held_error(lock_before)

        if request.max_unavailable is not None and not request.rollout:
            # The seed: maxunavailable "only with rollout=true"; with rollout=false the settings
            # are stored and nothing else. Refused rather than ignored, so nobody believes it kept.
            raise InvalidInput("max_unavailable", request.max_unavailable,
                               "is used only with rollout=true (the workers a rollout restarts at a time); "
                               "with rollout=false only the node settings are stored: leave it out, or give "
                               "it to the rollout")
        current, recorded = effective_settings(self.view, record)
        requested = resolve(self.view, current, request)
        refusals = validate(self.view, current, requested, request.rollout, request.max_unavailable)
        if refusals:
            raise refused(refusals, request)

        stored_mu = stored_max_unavailable(record)
        new_mu = request.max_unavailable if request.max_unavailable is not None else stored_mu
        settings_changed = not recorded or not same_settings(current, requested) or new_mu != stored_mu

        lock_after = lock_before
        # Taking the lock is bookkeeping of the run, not a change of the cluster: a rerun of a
        # rollout with nothing to store reports no change (Molecule's idempotence check).
        stored = False
        if not self.check_mode:
            if request.rollout:
                # Judged on the read above (one read less); the write is conditional on its version.
                lock_after = lock.acquire(seen=lock_before, absent=lock_before is None)
                try:
                    if settings_changed or lock_after.taken_over_from or (record is not None and record.cancel):
                        record = self._store(record, current if recorded else None, requested, new_mu, lock_after)
                        stored = True
                except CksError as exc:
                    raise self._give_back(lock, exc, release=not ours)
            elif settings_changed:
                record = self._store(record, current if recorded else None, requested, new_mu, None)
                stored = True

        changed = stored or (self.check_mode and settings_changed)
        self.record, self.lock_info = record, lock_after
        result = self._result(request, record, current, requested, recorded, new_mu, lock_after, changed)
        return result

    # -- steps ---------------------------------------------------------------------------------

    def _check_state(self, request: SettingsRequest) -> None:
        state = self.view.state
        if state in OPERATION_STATES:
            raise CksError(f"cluster {self.view.name} is {state}: a CKS operation is running on it (or it is going "
                           "away), and it may be creating or changing nodes; nothing was stored. Run again once it "
                           "is Running, Alert or Stopped", cluster=self.view.name, state=state)
        if request.rollout and state not in ROLLOUT_STATES:
            raise InvalidInput("rollout", True, f"cluster {self.view.name} is {state}; a rollout starts only from "
                               "Running or Alert (store the settings with rollout=false, or start the cluster)")

    def _store(self, basis: Optional[Record], judged: Optional[Settings], requested: Settings,
               max_unavailable: Optional[int], lock: Optional[LockInfo]) -> Record:
        """Compare-and-set the settings over the record read at the start.

        Someone else's write of the cancel flag or the last error is kept (the write is redone over
        it); a change of the stored settings themselves means what was validated is stale: refuse.
        """
        current = basis
        for _attempt in range(5):
            now_stored = stored_settings(current)
            if (judged is None) != (now_stored is None) or (
                    judged is not None and now_stored is not None and not same_settings(judged, now_stored)):
                raise CksError("the stored node settings were changed by someone else while this call validated "
                               "its own; nothing was stored: run again to judge the new ones")
            record = replace(current) if current is not None else Record()
            record.settings = settings_data(requested, max_unavailable)
            if lock is not None:
                if lock.taken_over_from:
                    record.previous_holder_stopped = lock.taken_over_from
                if record.cancel and cancel_older_than_lock(record.updated, lock.acquire_time):
                    # A cancel left from before this rollout took the lock; one asked for since
                    # (while the settings are being stored) stays and stops it before its first batch.
                    record.cancel = False
            try:
                return self.store.write(record, current.resource_version if current is not None else None)
            except RecordConflict as exc:
                current = exc.current
        raise CksError(f"the rollout record {NAMESPACE}/{RECORD_NAME} kept changing while the "
                       "settings were stored; nothing was stored, run again")

    def _give_back(self, lock: Lock, failure: CksError, release: bool) -> CksError:
        """Storing failed after the lock was taken: release it and keep the failure as the last error."""
        text = f"the rollout did not start: storing the node settings failed: {failure.msg}"
        released = False
        if release:
            try:
                released = lock.release()
            except CksError:
                released = False
        try:
            self.store.update(lambda r: setattr(r, "last_error", text))
        except CksError:
            pass  # the record cannot be written either; the error below says what happened
        if not release:
            where = "the lock was kept: this run held it before this call"
        elif released:
            where = "the lock was released"
        else:
            where = "the lock could not be released; it expires by itself after lock_duration"
        return CksError(f"{text}; {where}", **failure.details)

    def _cancel(self, request: SettingsRequest) -> dict[str, Any]:
        """Set the cancel flag of the running rollout; of one that is not running, say so and what to do instead."""
        record = self.store.read()
        info = self.lock_factory(None, None).read()
        running = info is not None and info.held
        already = record is not None and record.cancel
        result: dict[str, Any] = {
            "changed": False, "cluster": self._cluster(), "cancel_requested": already,
            "lock": lock_dict(info), "last_error": record.last_error if record else None,
        }
        if not running or info is None:
            result["msg"] = not_running_message(info)
            return result
        if request.lock_holder and info.holder != request.lock_holder:
            # A fleet cancelling its own clusters must not stop another job's rollout of one of them
            # (a second slice handed the same cluster): that rollout is not the one being cancelled.
            result["msg"] = f"the lock is held by {info.holder}, not by {request.lock_holder}: its rollout is not cancelled"
            return result
        if already:
            result["msg"] = f"a cancel is already asked of the rollout of {info.holder}"
            return result
        if not self.check_mode:
            record = self.store.set_cancel()
        result.update(changed=True, cancel_requested=True,
                      msg=f"the rollout of {info.who()} stops before its next batch (the batch in progress finishes, "
                          f"then it releases). If it does not (its controller is gone with its host: the lock is then "
                          f"no longer renewed), free the lock with ansible-playbook cloudstack.cks.unlock "
                          f"-e rollout_cluster=<cluster> -e rollout_holder={info.holder}")
        return result

    # -- result --------------------------------------------------------------------------------

    def _cluster(self) -> dict[str, Any]:
        return {"id": self.view.id, "name": self.view.name, "state": self.view.state}

    def _result(self, request: SettingsRequest, record: Optional[Record], current: Settings,
                requested: Settings, recorded: bool, max_unavailable: Optional[int],
                lock: Optional[LockInfo], changed: bool) -> dict[str, Any]:
        effective_mu = max_unavailable or 1
        counts = plan(self.view, requested, effective_mu).out_of_date
        after = describe(self.view, requested)
        before = describe(self.view, current)
        result: dict[str, Any] = {
            "changed": changed,
            "cluster": self._cluster(),
            "settings": after,
            "previous_settings": before,
            "first_use": not recorded,
            "max_unavailable": effective_mu,
            "rollout": request.rollout,
            "lock": lock_dict(lock),
            "cancel_requested": bool(record.cancel) if record is not None else False,
            "last_error": record.last_error if record is not None else None,
        }
        for t in NODE_TYPES:
            result[OUT_OF_DATE_KEYS[t]] = counts.get(t, 0)
        if self.diff:
            result["diff"] = {
                "before_header": "recorded node settings" if recorded
                else "node settings copied from the cluster (nothing recorded yet)",
                "after_header": "node settings to record",
                "before": dict(before, max_unavailable=(stored_max_unavailable(record) if recorded else None)),
                "after": dict(after, max_unavailable=max_unavailable),
            }
        return result


def node_settings(session: ClusterSession, params: Mapping[str, Any], check_mode: bool = False) -> dict[str, Any]:
    """cks_node_settings: parse the options, then read / validate / store (see the module's docs)."""
    request = SettingsRequest.from_params(params)
    service = NodeSettingsService(session.view(), session.store, session.lock, check_mode=check_mode,
                                  diff=session.diff)
    return service.run(request)


def not_running_message(info: Optional[LockInfo]) -> str:
    """Why there is nothing to cancel, and what to do instead."""
    if info is None or not info.holder:
        return ("no rollout is running on this cluster (the lock is free): nothing to cancel; the next rollout starts "
                "at once. The status playbook tells how the last one ended")
    why = info.gone or f"its lock expired: last renewed {info.renew_time}, for {info.duration_seconds}s"
    return (f"no rollout is running on this cluster: the lock was left by {info.who()}, which stopped without its "
            f"release ({why}); nothing to cancel. The next rollout takes the lock over at once and puts back what "
            "it left; the status playbook shows what that is")
