# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Writes the rollout's Events about the nodes it acts on (the words are ``_decisions/node_events.py``'s).

They are written through ``core/v1`` with the fields of the ``events.k8s.io/v1`` API as well
(``eventTime``, ``action``, ``reportingComponent``/``reportingInstance``, ``related``, ``series``), so the
API server serves the same Event in both groups. Not through ``events.k8s.io/v1`` itself: an Event
created there may not carry ``deprecatedFirstTimestamp``/``deprecatedLastTimestamp``/``deprecatedCount``/
``deprecatedSource`` (ValidateEventCreate), and ``kubectl describe`` sorts a Node's Events by
``lastTimestamp`` and shows ``source.component`` as "From": without them the rollout's Events would
show first and in no order. The legacy validation accepts both sets of fields on a core/v1 Event
whose ``eventTime`` is set (the kubelet's recorder writes such Events).

An Event is information, never a step, and never on a step's path: as client-go's EventRecorder and
EventBroadcaster do, ``record`` only queues it (at most ``MAX_QUEUED``; one more is dropped and
counted), with the time it happened, and one background writer sends the queue in order. The
writer correlates as client-go's EventCorrelator does (``_decisions/node_events.Correlator``): a
repeat of an Event this run already wrote is a merge patch of its ``series`` (count +
lastObservedTime) and of ``count``/``lastTimestamp``, repeats queued together are one patch, and a
reason with too many different notes on one node becomes one combined Event. ``flush`` waits for
the queue before the module returns, for at most ``FLUSH_SECONDS`` (less once the batch's deadline
is near), so a dead API server cannot hold the module: what is left is counted as not written.

Each Event is one request (a lost answer costs an Event, not a retry loop); one that cannot be
written is counted and becomes one warning of the module run, and the rollout goes on. After a 403
(no ``create`` on events, see the RBAC page) no further one is sent in this run.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import quote

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node_events import (
    EVENT_NAMESPACE,
    REPORTING_CONTROLLER,
    Correlator,
    NodeEvent,
)

MERGE_PATCH = "application/merge-patch+json"
_COLLECTION = f"/api/v1/namespaces/{EVENT_NAMESPACE}/events"
#: client-go's broadcaster queues 1000 Events and drops what comes beyond.
MAX_QUEUED = 1000
#: How long the module waits for its queued Events before it returns; once the batch's deadline is
#: that near, ``FLUSH_FLOOR`` (the last Events, a failure's among them, are worth a second).
FLUSH_SECONDS = 5.0
FLUSH_FLOOR = 1.0
#: Requests the writer has in flight at once: the Events a batch's nodes tell together (each node
#: back, each uncordoned) at its end are what the module waits for before it returns.
SENDERS = 4


def _times(at: float) -> tuple[str, str]:
    """``at`` as metav1.Time (seconds) and as metav1.MicroTime (six fraction digits), both UTC."""
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at))
    return f"{seconds}Z", f"{seconds}.{int(at % 1 * 1e6):06d}Z"


@dataclass
class _Written:
    name: str
    count: int = 1


@dataclass
class _Occurrences:
    """One Event to write, and how often it happened (first and last time) since the writer last sent."""

    node: str
    uid: Optional[str]
    event: NodeEvent
    first: float
    last: float
    count: int = 1


class NodeEvents:
    """The Events of one module run. ``kube``: the KubeClient (its one-request JSON call is used)."""

    def __init__(self, kube: Any, run: Optional[str] = None, instance: Optional[str] = None) -> None:
        self.kube = kube
        self.run = run
        # client-go's recorders name the instance after the host the controller runs on.
        self.instance = (instance or socket.gethostname() or "controller")[:128]
        self.written = 0
        self.repeats = 0
        self.failed = 0
        self.first_error: Optional[str] = None
        self.denied = False
        self._series: dict[tuple[Any, ...], _Written] = {}
        self._correlator = Correlator()
        self._queue: list[tuple[str, Optional[str], NodeEvent, float]] = []
        self._pending = 0  # recorded, neither written nor failed yet
        self._closed = False
        self._writer: Optional[threading.Thread] = None
        self._last_name = 0
        self._changed = threading.Condition(threading.RLock())

    def record(self, node: str, uid: Optional[str], event: NodeEvent) -> None:
        """Queue ``event`` about Node ``node`` for the writer; never blocks on the API, never raises."""
        with self._changed:
            if self._closed or self.denied or len(self._queue) >= MAX_QUEUED:
                self.failed += 1
                if not self.denied:
                    self.first_error = self.first_error or (
                        "recorded after the module had returned" if self._closed else f"more than {MAX_QUEUED} queued")
                return
            self._queue.append((node, uid, event, time.time()))
            self._pending += 1
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_queued, name="node-events", daemon=True)
                self._writer.start()
            self._changed.notify_all()

    def flush(self, deadline_left: Optional[float] = None) -> None:
        """Wait until the queued Events are written, for at most ``FLUSH_SECONDS`` (``FLUSH_FLOOR`` once
        ``deadline_left``, what the batch has left, is below it); what is left then is counted as not
        written. No Event is taken after it."""
        bound = FLUSH_SECONDS if deadline_left is None else min(FLUSH_SECONDS, max(FLUSH_FLOOR, deadline_left))
        with self._changed:
            if not self.wait(bound):
                self.failed += self._pending
                self.first_error = self.first_error or (
                    f"the API server did not take them within {bound:g}s, before the module returned")
                self._pending = 0
                self._queue.clear()
            self._closed = True
            self._changed.notify_all()

    def wait(self, seconds: float) -> bool:
        """Whether every Event recorded so far was sent (written or failed) within ``seconds``."""
        until = time.monotonic() + seconds
        with self._changed:
            while self._pending and time.monotonic() < until:
                self._changed.wait(until - time.monotonic())
            return not self._pending

    def _write_queued(self) -> None:
        """The background writer: what is queued, in order, until the module has returned."""
        while True:
            with self._changed:
                while not self._queue and not self._closed:
                    self._changed.wait()
                if self._closed:
                    return
                queued, self._queue = self._queue, []
            self._send_round(list(self._grouped(queued).items()))

    def _send_round(self, groups: list[tuple[tuple[Any, ...], _Occurrences]]) -> None:
        """Send one round's Events, ``SENDERS`` at a time: each is a different Event (the repeats of one
        are one item), so their order does not matter (each carries the time it happened, and its name
        sorts by it); a later round's patch of one of them follows its create. Until one Event has
        been written, the first goes alone: a role without create on events is refused once a run,
        not once a sender."""
        if not self.written and groups:
            self._send(*groups[0])
            groups = groups[1:]
        if len(groups) <= 1:
            for key, what in groups:
                self._send(key, what)
            return
        left = list(reversed(groups))

        def sender() -> None:
            while True:
                with self._changed:
                    if not left:
                        return
                    key, what = left.pop()
                self._send(key, what)

        # Daemon threads, not an executor: one stuck on a dead API server must not hold the process's exit.
        senders = [threading.Thread(target=sender, name="node-events-send", daemon=True)
                   for _sender in range(min(SENDERS, len(groups)))]
        for thread in senders:
            thread.start()
        for thread in senders:
            thread.join()

    def _grouped(self, queued: list[tuple[str, Optional[str], NodeEvent, float]]) -> dict[tuple[Any, ...], _Occurrences]:
        """The queued occurrences correlated, the repeats of one Event queued together made one."""
        groups: dict[tuple[Any, ...], _Occurrences] = {}
        for node, uid, event, at in queued:
            key, event = self._correlator.correlate(node, event, at)
            seen = groups.get(key)
            if seen is None:
                groups[key] = _Occurrences(node, uid, event, at, at)
            else:
                seen.count, seen.last = seen.count + 1, at
        return groups

    def _send(self, key: tuple[Any, ...], what: _Occurrences) -> None:
        """Write one Event, or grow its series (a create when it is new or gone past the API's TTL)."""
        written = repeats = 0
        error: Optional[str] = None
        try:
            seen = self._series.get(key)
            if self.denied or self._closed:
                pass  # after a 403, or once the flush gave up: counted, not sent
            elif seen is not None and self._repeat(seen, what.count, what.last):
                repeats = what.count
            else:
                self._series[key] = seen = _Written(self._create(what))
                written = 1
                if what.count > 1 and self._repeat(seen, what.count - 1, what.last):
                    repeats = what.count - 1
        except CksError as exc:
            error = exc.msg
            self.denied = self.denied or exc.details.get("status") == 403
        except Exception as exc:  # an Event is never worth a failed rollout
            error = f"{type(exc).__name__}: {exc}"
        with self._changed:
            if self._closed:
                return  # the flush gave up and counted them
            self.written += written
            self.repeats += repeats
            self.failed += what.count - written - repeats
            self.first_error = self.first_error or error
            self._pending -= what.count
            self._changed.notify_all()

    def _create(self, what: _Occurrences) -> str:
        # As the recorders name theirs: time-ordered per object (and distinct within this run).
        with self._changed:
            self._last_name = max(int(what.first * 1e9), self._last_name + 1)
            name = f"{what.node}.{self._last_name:x}"
        regarding = {"apiVersion": "v1", "kind": "Node", "name": what.node}
        if what.uid:
            regarding["uid"] = what.uid
        # The time it happened, not the time it was sent: describe sorts the story by it.
        stamp, micro = _times(what.first)
        event = what.event
        body: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": EVENT_NAMESPACE},
            "involvedObject": regarding, "reason": event.reason, "message": event.note, "type": event.type,
            "source": {"component": REPORTING_CONTROLLER, "host": self.instance},
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
            "eventTime": micro, "action": event.action, "reportingComponent": REPORTING_CONTROLLER,
            "reportingInstance": self.instance,
        }
        if event.related:
            body["related"] = dict(event.related)
        # The client's one-request call: an Event is sent once, never retried.
        answer = self.kube._json(f"create event {EVENT_NAMESPACE}/{name}", "POST", _COLLECTION, body=body)
        return str((answer.get("metadata") or {}).get("name") or name)

    def _repeat(self, seen: _Written, more: int, at: float) -> bool:
        """Count ``more`` occurrences on the Event (the last at ``at``); False when it is gone (past the API's TTL)."""
        count = seen.count + more
        stamp, micro = _times(at)
        # Both APIs' counts: the series (events.k8s.io) and count + lastTimestamp (what kubectl sorts by).
        patch = {"count": count, "lastTimestamp": stamp, "series": {"count": count, "lastObservedTime": micro}}
        answer = self.kube._json(f"patch event {EVENT_NAMESPACE}/{seen.name}", "PATCH",
                                 f"{_COLLECTION}/{quote(seen.name, safe='')}", body=patch, content_type=MERGE_PATCH,
                                 missing_is_none=True)
        if answer is None:
            return False
        seen.count = count
        return True

    def report(self) -> dict[str, Any]:
        """For the module's result: how many were written, grew a series, could not be written."""
        out: dict[str, Any] = {"written": self.written, "repeats": self.repeats, "failed": self.failed}
        if self.first_error:
            out["error"] = self.first_error
        return out

    def warnings(self) -> list[str]:
        if not self.failed:
            return []
        why = self.first_error or "unknown error"
        hint = (" (grant create and patch on events, see the RBAC page)" if self.denied else "")
        return [f"{self.failed} Kubernetes Event(s) about the nodes could not be written{hint}: {why}; "
                "the rollout went on without them"]


def events_access_warning(kube: Any) -> Optional[str]:
    """Whether this identity may write the Events (``create`` and ``patch`` on events in ``default``),
    asked of the API server (SelfSubjectAccessReview): a warning when it may not, never a refusal
    (the rollout runs the same without them)."""
    missing = []
    for verb in ("create", "patch"):
        try:
            answer = kube.review_access({"namespace": EVENT_NAMESPACE, "verb": verb, "group": "",
                                         "resource": "events"})
        except CksError as exc:
            return f"could not ask whether the rollout may write Events about the nodes: {exc.msg}"
        if not (answer.get("status") or {}).get("allowed"):
            missing.append(verb)
    if not missing:
        return None
    return (f"the rollout may not {' or '.join(missing)} events in {EVENT_NAMESPACE}: it runs, but "
            "kubectl describe node will not show what it did to the nodes (grant create and patch on events, "
            "see docs/rbac.yml)")
