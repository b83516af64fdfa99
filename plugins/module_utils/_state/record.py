# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The rollout's state, kept in the cluster next to the nodes it concerns.

- The lock: Lease ``cloudstack-cks-rollout`` in ``kube-system`` (coordination.k8s.io/v1). Taken,
  renewed and released with resourceVersion compare-and-set, so of two rollouts racing for it
  exactly one wins. The API server never expires a lease; expiry is judged here (see ``Lock``).
- The record: ConfigMap ``cloudstack-cks-rollout`` in ``kube-system`` with the stored per-type
  settings, the cancel flag, the last error and the outcome. Written with compare-and-set too.

Nothing else is stored: the work left is what the nodes themselves show (still different,
stopped, or still annotated) - but for a rolling restart with no setting changed, which leaves
nothing on the nodes to tell restarted from not: its round (``restartRound``, each node's boot ID
when it began, ``_decisions.restart_round``).
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Callable, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._clients import processes
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, KubernetesError, LockHeld
from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import StateApi
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.holder import (
    ANNOTATIONS,
    BATCH_ANNOTATION,
    CONTROLLER_ANNOTATION,
    PLAN_ANNOTATION,
    Probe,
    annotation,
    describe_batch,
    holder_gone,
    parse,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._state.lease_info import (  # noqa: F401  (format_microtime, parse_microtime: re-exported)
    Clock,
    LockInfo,
    format_microtime,
    held_refusal,
    parse_microtime,
    utcnow,
)

NAMESPACE = "kube-system"


RECORD_NAME = "cloudstack-cks-rollout"


LOCK_NAME = "cloudstack-cks-rollout"


# Short, as Kubernetes' own leader leases: a batch renews it every third of this while it works
# (``_rollout.batch``), so a long batch keeps it, and a lock whose holder died with its host is free
# about this long (plus the clock skew) after its last renewal.
DEFAULT_LOCK_SECONDS = 90


# How far apart the clocks of two controllers may be (see Lock): NTP keeps them well inside this.
DEFAULT_CLOCK_SKEW_SECONDS = 15


def default_holder_identity() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class RecordConflict(CksError):
    """The record changed since it was read; ``current`` is what it is now."""

    def __init__(self, msg: str, current: Optional[Record] = None) -> None:
        super().__init__(msg)
        self.current = current


class LockLost(CksError):
    """This rollout no longer holds the lock (it expired and another one took it, or it was released)."""


@dataclass
class Record:
    """The rollout record. ``resource_version`` is the ConfigMap's, for compare-and-set."""

    settings: dict[str, Any] = field(default_factory=dict)
    cancel: bool = False
    last_error: Optional[str] = None
    outcome: Optional[str] = None
    # How the last rollout ended ("done", "failed at batch 2 of 5", ...); outcome is the cluster's health.
    result: Optional[str] = None
    updated: Optional[str] = None
    # {"holder", "renew_time", "noticed"} when a rollout found the lock left by one that stopped
    # without releasing it.
    previous_holder_stopped: Optional[dict[str, Any]] = None
    #: The rolling restart under way (``_decisions.restart_round``): its scope and each node's boot ID
    #: when it began, kept until a rollout of that scope finishes, so that a rerun resumes it.
    restart_round: Optional[dict[str, Any]] = None
    resource_version: Optional[str] = None

    def to_data(self) -> dict[str, str]:
        """ConfigMap data: every value a string."""
        data = {
            "settings": json.dumps(self.settings, sort_keys=True),
            "cancel": "true" if self.cancel else "false",
            "lastError": self.last_error or "",
            "outcome": self.outcome or "",
            "result": self.result or "",
            "updated": self.updated or "",
        }
        if self.previous_holder_stopped:
            data["previousHolderStopped"] = json.dumps(self.previous_holder_stopped, sort_keys=True)
        if self.restart_round:
            data["restartRound"] = json.dumps(self.restart_round, sort_keys=True)
        return data

    @classmethod
    def from_configmap(cls, configmap: dict[str, Any]) -> Record:
        data = configmap.get("data") or {}
        try:
            settings = json.loads(data.get("settings") or "{}")
            stopped = json.loads(data["previousHolderStopped"]) if data.get("previousHolderStopped") else None
            restart_round = json.loads(data["restartRound"]) if data.get("restartRound") else None
        except ValueError as exc:
            raise CksError(f"ConfigMap {NAMESPACE}/{RECORD_NAME} holds invalid JSON ({exc}); fix or delete it")
        return cls(
            settings=settings if isinstance(settings, dict) else {},
            cancel=str(data.get("cancel", "")).lower() == "true",
            last_error=data.get("lastError") or None,
            outcome=data.get("outcome") or None,
            result=data.get("result") or None,
            updated=data.get("updated") or None,
            previous_holder_stopped=stopped,
            restart_round=restart_round if isinstance(restart_round, dict) else None,
            resource_version=(configmap.get("metadata") or {}).get("resourceVersion"),
        )


class RecordStore:
    """Reads and writes the record with compare-and-set on its resourceVersion."""

    def __init__(self, kube: StateApi, namespace: str = NAMESPACE, name: str = RECORD_NAME,
                 clock: Clock = utcnow) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self._clock = clock

    def read(self) -> Optional[Record]:
        """The record, or None if there is none yet. Changes nothing."""
        configmap = self.kube.get_configmap(self.namespace, self.name)
        return Record.from_configmap(configmap) if configmap is not None else None

    def write(self, record: Record, expected_resource_version: Optional[str]) -> Record:
        """Store ``record`` if the stored one is still at ``expected_resource_version``.

        None means "there is no record yet": create it. Returns the record as stored (with its new
        resourceVersion); ``RecordConflict`` (with the current record) if someone wrote first.
        """
        stored = replace(record, updated=format_microtime(self._clock()))
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": self.name, "namespace": self.namespace,
                         "labels": {"app.kubernetes.io/managed-by": "cloudstack.cks"}},
            "data": stored.to_data(),
        }
        try:
            if expected_resource_version is None:
                answer = self.kube.create_configmap(self.namespace, body)
            else:
                body["metadata"]["resourceVersion"] = str(expected_resource_version)
                answer = self.kube.replace_configmap(self.namespace, self.name, body)
        except KubernetesError as exc:
            if exc.status == 409 or (exc.status == 404 and expected_resource_version is not None):
                current = self.read()
                why = "it was created meanwhile" if expected_resource_version is None else "it changed meanwhile"
                raise RecordConflict(f"the rollout record {self.namespace}/{self.name} was not written: {why}; "
                                     f"read it again and reapply the change", current=current)
            raise
        return Record.from_configmap(answer)

    def update(self, change: Callable[[Record], None], attempts: int = 5) -> Record:
        """Read, apply ``change`` in place, write; on a conflict start again from the new record."""
        for _attempt in range(max(1, attempts)):
            current = self.read()
            record = current if current is not None else Record()
            change(record)
            try:
                return self.write(record, current.resource_version if current is not None else None)
            except RecordConflict:
                continue
        raise RecordConflict(f"the rollout record {self.namespace}/{self.name} kept changing; "
                             f"gave up after {attempts} attempts", current=self.read())

    def set_cancel(self) -> Record:
        return self.update(lambda record: setattr(record, "cancel", True))


class Lock:
    """The cluster's rollout lock, a Lease taken with compare-and-set.

    Expiry: client-go trusts only its own observation (the same lease unchanged for its
    duration, timed locally). Each Ansible task is a new process, so nothing is observed across
    them; a lease counts as expired when ``renewTime + leaseDurationSeconds + clock_skew`` is past
    on the local clock. That assumes the controllers' clocks (the ones that write renewTime)
    differ by less than ``clock_skew_seconds``; the compare-and-set still makes sure only one
    rollout wins a takeover, whatever the clocks say.
    """

    def __init__(self, kube: StateApi, holder_identity: Optional[str] = None,
                 duration_seconds: int = DEFAULT_LOCK_SECONDS, namespace: str = NAMESPACE, name: str = LOCK_NAME,
                 clock_skew_seconds: float = DEFAULT_CLOCK_SKEW_SECONDS, clock: Clock = utcnow,
                 probe: Probe = processes.running) -> None:
        if int(duration_seconds) < 1:
            raise ValueError("the lock duration must be at least 1 second")
        self.kube = kube
        self.holder_identity = holder_identity or default_holder_identity()
        self.duration_seconds = int(duration_seconds)
        self.namespace = namespace
        self.name = name
        self.clock_skew_seconds = float(clock_skew_seconds)
        self._clock = clock
        # The lease as last read or written: how long it lasts if it cannot be given back.
        self.last_seen: Optional[LockInfo] = None
        # A lease this run read moments ago (``held_lock``): ``renew_at_batch_start`` uses it once.
        self.just_read: Optional[dict[str, Any]] = None
        # The lease's resourceVersion as this holder last wrote it: a renewal patches that version
        # only (one call); a 409 means someone wrote since, and the lease is read and judged.
        self.written_version: Optional[str] = None
        # Cleared by a 403 on the patch (an identity granted update but not patch): read + replace.
        self.patch_allowed = True
        # Whether a recorded process still runs here: a holder whose processes on this host are all
        # gone is taken over at once (``_decisions.holder``).
        self._probe = probe
        #: Written into the lease when this holder takes it: its controller (None: this process's, as
        #: ``processes.controller_identity`` finds it) and the plan's batches (node names).
        self.controller: Optional[dict[str, Any]] = None
        self.plan: Optional[list[Any]] = None
        #: Written at the batch's start by ``renew_at_batch_start``: the module run and the batch's nodes.
        self.batch_run: Optional[dict[str, Any]] = None

    # -- reading -------------------------------------------------------------------------------------

    def read(self) -> Optional[LockInfo]:
        lease = self.kube.get_lease(self.namespace, self.name)
        return self._info(lease) if lease is not None else None

    def _info(self, lease: dict[str, Any], taken_over_from: Optional[dict[str, Any]] = None) -> LockInfo:
        spec = lease.get("spec") or {}
        notes = (lease.get("metadata") or {}).get("annotations") or {}
        controller, batch, plan = (parse(notes.get(name)) for name in (CONTROLLER_ANNOTATION, BATCH_ANNOTATION, PLAN_ANNOTATION))
        controller = controller if isinstance(controller, dict) else None
        batch = batch if isinstance(batch, dict) else None
        gone = None
        if spec.get("holderIdentity") and spec.get("holderIdentity") != self.holder_identity:
            gone = holder_gone(controller, batch, socket.gethostname(), processes.boot_id(), self._probe)
        info = LockInfo(
            holder=spec.get("holderIdentity") or None,
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            transitions=int(spec.get("leaseTransitions") or 0),
            resource_version=(lease.get("metadata") or {}).get("resourceVersion"),
            expired=gone is not None or self._expired(spec),
            taken_over_from=taken_over_from,
            controller=controller,
            batch=batch,
            plan=plan if isinstance(plan, list) else None,
            gone=gone,
        )
        if info.holder:
            self.last_seen = info
        return info

    def _expired(self, spec: dict[str, Any]) -> bool:
        if not spec.get("holderIdentity"):
            return True
        try:
            renewed = parse_microtime(spec.get("renewTime") or spec.get("acquireTime") or "")
        except ValueError:
            return True  # a lease nobody can read the time of protects nothing
        lasts = timedelta(seconds=int(spec.get("leaseDurationSeconds") or 0) + self.clock_skew_seconds)
        return self._clock() > renewed + lasts

    # -- writing -------------------------------------------------------------------------------------

    def _annotations(self, kept: Optional[dict[str, str]] = None) -> dict[str, str]:
        """The lease's annotations as this holder writes them: ``kept`` (the lease's own, when it is
        ours already) with what this run has to say - its controller and plan when it takes the lock,
        its batch when one begins."""
        notes = dict(kept or {})
        if not kept:
            notes[CONTROLLER_ANNOTATION] = annotation(self.controller or processes.controller_identity())
        if self.plan is not None:
            notes[PLAN_ANNOTATION] = annotation(self.plan)
        if self.batch_run is not None:
            notes[BATCH_ANNOTATION] = annotation(self.batch_run)
            # The controller running the batches is the one to watch (it may not be the one that took the lock).
            notes[CONTROLLER_ANNOTATION] = annotation(self.controller or processes.controller_identity())
        return notes

    def _body(self, resource_version: Optional[str], acquire_time: str, transitions: int,
              holder: Optional[str] = None, duration: Optional[int] = None,
              annotations: Optional[dict[str, str]] = None) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace,
                                    "labels": {"app.kubernetes.io/managed-by": "cloudstack.cks"}}
        if annotations:
            metadata["annotations"] = annotations
        if resource_version is not None:
            metadata["resourceVersion"] = str(resource_version)
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": self.holder_identity if holder is None else holder,
                "leaseDurationSeconds": self.duration_seconds if duration is None else duration,
                "acquireTime": acquire_time,
                "renewTime": format_microtime(self._clock()),
                "leaseTransitions": transitions,
            },
        }

    def acquire(self, seen: Optional[LockInfo] = None, absent: bool = False) -> LockInfo:
        """Take the lock, or renew it if this holder has it already.

        An expired lease (or a released one) is taken over; ``taken_over_from`` then names the
        previous holder and its last renewal when it had not released. ``LockHeld`` if another
        rollout holds it.

        ``seen`` (or ``absent``: there was no lease): the lease as this run read it moments ago. The
        first attempt judges that instead of reading again; its write is conditional on that
        version all the same (a create fails if one was made since), so a lease written since the
        read is a 409 and is read again, as if it had been read here.
        """
        for attempt in range(3):
            info = seen if attempt == 0 and (seen is not None or absent) else self.read()
            if info is not None and info.holder:
                self.last_seen = info
            now = format_microtime(self._clock())
            if info is None:
                try:
                    return self._wrote(self.kube.create_lease(self.namespace, self._body(None, now, 0, annotations=self._annotations())))
                except KubernetesError as exc:
                    if exc.status == 409:
                        continue  # created by someone else meanwhile: look again
                    raise
            if info.holder == self.holder_identity:
                body = self._body(info.resource_version, info.acquire_time or now, info.transitions,
                                  annotations=self._annotations(self._kept(info)))
            elif info.holder and not info.expired:
                raise self._held(info)
            else:
                body = self._body(info.resource_version, now, info.transitions + 1, annotations=self._annotations())
            try:
                answer = self.kube.replace_lease(self.namespace, self.name, body)
            except KubernetesError as exc:
                if exc.status in (404, 409):
                    continue  # someone else wrote (or deleted) it between our read and write
                raise
            stopped = None
            if info.holder and info.holder != self.holder_identity:
                stopped = {"holder": info.holder, "renew_time": info.renew_time, "acquire_time": info.acquire_time,
                           "noticed": now, "controller": info.controller,
                           "batch": describe_batch(info.batch, info.plan) or None, "gone": info.gone}
            return self._wrote(answer, taken_over_from=stopped)
        current = self.read()
        if current is not None and current.holder and current.holder != self.holder_identity:
            raise self._held(current)
        raise LockHeld(f"the rollout lock {self.namespace}/{self.name} kept changing while it was being taken; "
                       f"another rollout is starting")

    def _held(self, info: LockInfo) -> LockHeld:
        return held_refusal(info, f"{self.namespace}/{self.name}", self._clock())

    @staticmethod
    def _kept(info: LockInfo) -> dict[str, str]:
        """This holder's own annotations as the lease holds them (kept by a renewal)."""
        kept: dict[str, str] = {}
        for name, value in ((CONTROLLER_ANNOTATION, info.controller), (BATCH_ANNOTATION, info.batch),
                            (PLAN_ANNOTATION, info.plan)):
            if value is not None:
                kept[name] = annotation(value)
        return kept

    def renew(self) -> LockInfo:
        """Extend the lock; ``LockLost`` if another holder has it or a concurrent write won.

        One conditional write when this holder's last write is known and nobody wrote since;
        else the lease is read, judged and replaced.
        """
        if self.written_version is not None and self.patch_allowed:
            info = self._renew_unread(self.written_version)
            if info is not None:
                return info
        return self._renew(self.kube.get_lease(self.namespace, self.name))

    def _batch_note(self) -> Optional[dict[str, Optional[str]]]:
        """The batch annotation to write once, at the batch's start (then None: later renewals leave it)."""
        if self.batch_run is None:
            return None
        note: dict[str, Optional[str]] = {BATCH_ANNOTATION: annotation(self.batch_run),
                                          CONTROLLER_ANNOTATION: annotation(self.controller or processes.controller_identity())}
        self.batch_run = None
        return note

    def _patch_onto(self, version: str, spec: dict[str, Any],
                    annotations: Optional[dict[str, Optional[str]]] = None) -> Optional[dict[str, Any]]:
        """``spec`` as a merge patch onto the version this holder last wrote: the lease as answered, or
        None where the lease must be read and judged instead (409: written since; 403: an identity
        granted update but not patch, as an older Role). A 404 (the lease deleted) is the caller's."""
        metadata: dict[str, Any] = {"resourceVersion": version}
        if annotations:
            metadata["annotations"] = annotations
        try:
            return self.kube.patch_lease(self.namespace, self.name, {"metadata": metadata, "spec": spec})
        except KubernetesError as exc:
            if exc.status == 403:
                self.patch_allowed = False  # the documented RBAC grants patch; an older Role may not
            elif exc.status != 409:
                raise
            self.written_version = None
            return None

    def _renew_unread(self, version: str) -> Optional[LockInfo]:
        """A merge patch of renewTime onto the version this holder wrote; None: read and judge instead."""
        patch: dict[str, Any] = {"renewTime": format_microtime(self._clock())}
        try:
            answer = self._patch_onto(version, patch, self._batch_note())
        except KubernetesError as exc:
            if exc.status == 404:
                raise LockLost(f"the rollout lock {self.namespace}/{self.name} is gone (deleted); stop this rollout")
            raise
        if answer is None:
            return None
        info = self._wrote(answer)
        if info.holder != self.holder_identity:
            # Not ours to keep (a version handed in that was not this holder's): renewTime alone
            # changed, which only lengthens the other holder's lease.
            raise LockLost(f"the rollout lock {self.namespace}/{self.name} is held by {info.holder or 'nobody'} "
                           f"now, not {self.holder_identity}; stop this rollout", holder=info.holder)
        if info.duration_seconds > 0:
            self.duration_seconds = info.duration_seconds  # unread until now: the renewer paces by it
        return info

    def _wrote(self, answer: dict[str, Any], taken_over_from: Optional[dict[str, Any]] = None) -> LockInfo:
        """The lease as a write of this holder left it; its version is what the next renewal patches."""
        self.written_version = (answer.get("metadata") or {}).get("resourceVersion")
        return self._info(answer, taken_over_from=taken_over_from)

    def renew_at_batch_start(self) -> LockInfo:
        """``renew``, from the lease ``held_lock`` read moments ago when there is one (no second read).

        Written at every batch's start, even when renewed moments before: what lies between two
        batches (the role's tasks, hooks, a pause of up to half the duration) is only safe while a
        batch leaves the lease at most a third of its duration old, which the renewer thread
        guarantees only from a fresh write.
        """
        lease, self.just_read = self.just_read, None
        if lease is None:
            return self.renew()
        return self._renew(lease)

    def _release_unread(self, version: str) -> Optional[bool]:
        """The release's lease as ``_body`` writes it, as a merge patch onto ``version``; None: read and judge."""
        now = format_microtime(self._clock())
        try:
            answer = self._patch_onto(version, {"holderIdentity": "", "leaseDurationSeconds": 1,
                                                "acquireTime": now, "renewTime": now},
                                      {name: None for name in ANNOTATIONS})
        except KubernetesError as exc:
            if exc.status == 404:
                return False
            raise
        if answer is None:
            return None
        self.written_version = None
        return True

    def _renew(self, lease: Optional[dict[str, Any]]) -> LockInfo:
        if lease is None:
            raise LockLost(f"the rollout lock {self.namespace}/{self.name} is gone (deleted); stop this rollout")
        info = self._info(lease)
        if info.holder != self.holder_identity:
            raise LockLost(f"the rollout lock {self.namespace}/{self.name} is held by "
                           f"{info.holder or 'nobody'} now, not {self.holder_identity}; stop this rollout",
                           holder=info.holder)
        if info.duration_seconds > 0:
            self.duration_seconds = info.duration_seconds  # kept as the lease says (``held_lock`` may not have read it)
        body = self._body(info.resource_version, info.acquire_time or format_microtime(self._clock()),
                          info.transitions, annotations=self._annotations(self._kept(info)))
        self.batch_run = None  # written now: later renewals keep it as the lease holds it
        try:
            return self._wrote(self.kube.replace_lease(self.namespace, self.name, body))
        except KubernetesError as exc:
            if exc.status in (404, 409):
                raise LockLost(f"the rollout lock {self.namespace}/{self.name} changed while it was being "
                               f"renewed (HTTP {exc.status}); stop this rollout")
            raise

    def release(self) -> bool:
        """Give the lock up if this holder has it (empty holder, as client-go). Idempotent.

        True if it was released now, False if this holder did not hold it. With the version this
        holder last wrote (or read as its own), one write conditional on it; else read and replace.
        """
        if self.written_version is not None and self.patch_allowed:
            released = self._release_unread(self.written_version)
            if released is not None:
                return released
        for _attempt in range(3):
            lease = self.kube.get_lease(self.namespace, self.name)
            if lease is None:
                return False
            info = self._info(lease)
            if info.holder != self.holder_identity:
                return False
            now = format_microtime(self._clock())
            body = self._body(info.resource_version, now, info.transitions, holder="", duration=1)
            try:
                self.kube.replace_lease(self.namespace, self.name, body)
                self.written_version = None
                return True
            except KubernetesError as exc:
                if exc.status in (404, 409):
                    continue
                raise
        return False
