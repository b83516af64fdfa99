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

An Event is information, never a step: one that cannot be written is counted and becomes one
warning of the module run, and the rollout goes on. Each is one request, sent once (a lost answer
costs an Event, not a retry loop); after a 403 (no ``create`` on events, see the RBAC page) no
further one is sent in this run. A repeat of an Event this run already wrote is a merge patch of its
``series`` (count + lastObservedTime) and of ``count``/``lastTimestamp``, as client-go's recorders
aggregate, not a new Event per retry.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import quote

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node_events import EVENT_NAMESPACE, REPORTING_CONTROLLER, NodeEvent

MERGE_PATCH = "application/merge-patch+json"
_COLLECTION = f"/api/v1/namespaces/{EVENT_NAMESPACE}/events"


def _times() -> tuple[str, str]:
    """Now as metav1.Time (seconds) and as metav1.MicroTime (six fraction digits), both UTC."""
    now = time.time()
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
    return f"{seconds}Z", f"{seconds}.{int(now % 1 * 1e6):06d}Z"


@dataclass
class _Written:
    name: str
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
        self._series: dict[tuple[str, tuple[str, str, str, str]], _Written] = {}
        self._mutex = threading.Lock()

    def record(self, node: str, uid: Optional[str], event: NodeEvent) -> None:
        """Write ``event`` about Node ``node`` (or grow its series); never raises."""
        with self._mutex:
            if self.denied:
                self.failed += 1
                return
            key = (node, event.key)
            try:
                seen = self._series.get(key)
                if seen is not None and self._repeat(seen):
                    self.repeats += 1
                    return
                self._series[key] = _Written(self._create(node, uid, event))
                self.written += 1
            except CksError as exc:
                self.failed += 1
                self.first_error = self.first_error or exc.msg
                self.denied = exc.details.get("status") == 403
            except Exception as exc:  # an Event is never worth a failed rollout
                self.failed += 1
                self.first_error = self.first_error or f"{type(exc).__name__}: {exc}"

    def _create(self, node: str, uid: Optional[str], event: NodeEvent) -> str:
        name = f"{node}.{time.time_ns():x}"  # as the recorders name theirs: time-ordered per object
        regarding = {"apiVersion": "v1", "kind": "Node", "name": node}
        if uid:
            regarding["uid"] = uid
        stamp, micro = _times()
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

    def _repeat(self, seen: _Written) -> bool:
        """Count one more occurrence on the Event; False when it is gone (past the API's TTL)."""
        count = seen.count + 1
        stamp, micro = _times()
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
