# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""``?watch=1`` on the list endpoints, as the API server's watch cache serves it.

What is followed (kubernetes/kubernetes, staging/src/k8s.io/apiserver):

- ``pkg/storage/cacher/watch_cache.go`` ``getAllEventsSinceLocked``: a bounded buffer of the
  latest events (``kube.watch_cache_size``, default 1000). A watch from a resourceVersion older
  than the oldest buffered event minus one gets ``NewResourceExpired("too old resource version:
  %d (%d)")`` (410, reason Expired). ``resourceVersion`` unset or ``"0"`` starts with a synthetic
  ADDED per current object (``getIntervalFromStoreLocked``), then the changes.
- ``pkg/storage/cacher/cacher.go`` ``Watch``: an error there is delivered by an ``errWatcher``
  as ONE ``ERROR`` event carrying the Status, on an HTTP 200 stream; a resourceVersion newer
  than the cache waits up to 3 s (``blockTimeout``) and then fails "Too large resource version".
- ``cacheWatcher.convertToWatchEvent``: with a selector, an object that starts matching comes
  as ADDED, one that stops matching as DELETED, and one that matches neither before nor after
  is not sent.
- ``cacher.go`` bookmarks (``allowWatchBookmarks``): a BOOKMARK whose object has only
  ``metadata.resourceVersion`` every ``bookmarkFrequency`` (one minute; ``kube.
  watch_bookmark_seconds`` simulated) and ~2 s before the watch's deadline.
- ``pkg/endpoints/handlers/watch.go`` ``serveWatch``: chunked JSON, one ``{"type", "object"}``
  per line; the stream ends cleanly at ``timeoutSeconds`` (``get.go`` ``ListResource``: without
  it, a random time between minRequestTimeout 1800 s and twice that).
- ``pkg/apis/meta/internalversion/validation`` ``ValidateListOptions``: ``resourceVersionMatch``
  on a watch is forbidden without ``sendInitialEvents`` (422 Invalid).

What it does not do: ``sendInitialEvents`` (WatchList streaming), and a list at an older exact
resourceVersion (the sim keeps no history of object states, only the event buffer).
"""

from __future__ import annotations

import collections
import json
import random
import threading
import time
from typing import Any, Callable, Iterator, Optional

from .core import drop_connection

DEFAULT_CACHE_SIZE = 1000
DEFAULT_BOOKMARK_SECONDS = 60.0
# cacher.go blockTimeout: how long a watch from a future resourceVersion waits for the cache.
TOO_LARGE_WAIT = 3.0
# The watch loop wakes this often to notice a stopped server or a reached deadline.
WAKE = 0.05


class WatchEvent:
    __slots__ = ("rv", "plural", "type", "key", "text", "prev")

    def __init__(self, rv: int, plural: str, etype: str, key: tuple[str, str], text: str,
                 prev: Optional[str]) -> None:
        self.rv, self.plural, self.type, self.key, self.text, self.prev = rv, plural, etype, key, text, prev


class WatchCache:
    """The latest events of one cluster, all resources, in resourceVersion order."""

    def __init__(self, capacity: int = DEFAULT_CACHE_SIZE) -> None:
        self.capacity = max(1, int(capacity))
        self._events: collections.deque[WatchEvent] = collections.deque(maxlen=self.capacity)
        self._last: dict[tuple[str, tuple[str, str]], str] = {}
        self._changed = threading.Condition()
        self.compacted_to = 0  # events at or below this resourceVersion are gone
        self.closed = False

    def record(self, rv: str, plural: str, etype: str, obj: dict[str, Any]) -> None:
        """Called under sim.lock at every stored change, with the object as it now is."""
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        text = json.dumps(dict(obj.items()))
        prev = self._last.get((plural, key))
        if etype == "DELETED":
            self._last.pop((plural, key), None)
        else:
            self._last[(plural, key)] = text
        with self._changed:
            if len(self._events) == self.capacity:
                self.compacted_to = self._events[0].rv
            self._events.append(WatchEvent(int(rv), plural, etype, key, text, prev))
            self._changed.notify_all()

    def compact(self) -> None:
        """Drop every buffered event (the admin API's ``compact_watch_cache``)."""
        with self._changed:
            if self._events:
                self.compacted_to = self._events[-1].rv
            self._events.clear()
            self._changed.notify_all()

    def oldest(self, current: int) -> int:
        """The oldest resourceVersion a watch can start after (watch_cache.go's ``oldest - 1``)."""
        with self._changed:
            return self._events[0].rv - 1 if self._events else max(self.compacted_to, current)

    def after(self, rv: int, wait: float) -> list[WatchEvent]:
        with self._changed:
            if not self._events or self._events[-1].rv <= rv:
                self._changed.wait(wait)
            return [e for e in self._events if e.rv > rv]

    def close(self) -> None:
        with self._changed:
            self.closed = True
            self._changed.notify_all()


def event_line(etype: str, obj: Any) -> bytes:
    return (json.dumps({"type": etype, "object": obj}) + "\n").encode("utf-8")


def status_object(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


class WatchStream:
    """One watch request: the lines to send, as a generator for the WSGI response."""

    def __init__(self, world: Any, plural: str, kind: str, api_version: str, namespace: Optional[str],
                 matches: Callable[[dict[str, Any]], bool], start_rv: Optional[str], timeout: float,
                 bookmarks: bool, bookmark_period: float, drop: Optional[dict[str, Any]],
                 expire: bool, environ: dict[str, Any]) -> None:
        self.world, self.plural, self.kind, self.api_version = world, plural, kind, api_version
        self.namespace, self.matches = namespace, matches
        self.start_rv, self.timeout, self.bookmarks, self.bookmark_period = start_rv, timeout, bookmarks, bookmark_period
        self.drop, self.expire, self.environ = drop, expire, environ
        self.sent = 0
        # Set for a Table watch (kubectl get -w): turns each event's object into its Table.
        self.as_table: Optional[Callable[[dict[str, Any]], dict[str, Any]]] = None

    def _in_scope(self, event: WatchEvent) -> bool:
        return event.plural == self.plural and (self.namespace is None or event.key[0] == self.namespace)

    def _converted(self, event: WatchEvent) -> Optional[tuple[str, dict[str, Any]]]:
        """cacheWatcher.convertToWatchEvent: the event as this watcher's selectors see it."""
        obj = json.loads(event.text)
        now = event.type != "DELETED" and self.matches(obj)
        before = event.prev is not None and self.matches(json.loads(event.prev))
        if event.type == "DELETED":
            return ("DELETED", obj) if self.matches(obj) else None
        if now and before:
            return "MODIFIED", obj
        if now:
            return "ADDED", obj
        if before:
            return "DELETED", obj
        return None

    def _shown(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self.as_table(obj) if self.as_table is not None else obj

    def _bookmark(self, rv: int) -> bytes:
        return event_line("BOOKMARK", {"kind": self.kind, "apiVersion": self.api_version,
                                       "metadata": {"resourceVersion": str(rv), "creationTimestamp": None}})

    def _cut_now(self) -> bool:
        # A drop fault with after_seconds only cuts on time; otherwise before event after_events + 1.
        if self.drop is None or (self.drop.get("after_seconds") is not None and self.drop.get("after_events") is None):
            return False
        return self.sent >= int(self.drop.get("after_events") or 0)

    def lines(self) -> Iterator[bytes]:
        cache: WatchCache = self.world.store.watch_cache
        lock = self.world.sim.lock
        with lock:
            current = int(self.world.store.current_rv())
            initial: list[dict[str, Any]] = []
            if self.start_rv in (None, "", "0"):
                initial = [o for o in self.world.verbs.select(self.plural, self.namespace) if self.matches(o)]
                initial = json.loads(json.dumps(initial))
                rv = current
            else:
                rv = int(self.start_rv or 0)
            oldest = cache.oldest(current)
        if self.expire or (self.start_rv not in (None, "", "0") and rv < oldest):
            shown = oldest if not self.expire else max(oldest, rv + 1)
            yield event_line("ERROR", status_object(410, "Expired", f"too old resource version: {rv} ({shown})"))
            return
        if rv > current:
            waited = time.monotonic() + TOO_LARGE_WAIT
            while int(self.world.store.current_rv()) < rv and time.monotonic() < waited:
                time.sleep(WAKE)
            if int(self.world.store.current_rv()) < rv:
                message = f"Too large resource version: {rv}, current: {self.world.store.current_rv()}"
                details = {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                           "retryAfterSeconds": 1}
                yield event_line("ERROR", {**status_object(504, "Timeout", message), "details": details})
                return
        started = time.monotonic()
        end = started + self.timeout
        next_bookmark = self._next_bookmark(end)
        for obj in initial:
            if self._cut_now():
                drop_connection(self.environ, close=False)
                return
            self.sent += 1
            yield event_line("ADDED", self._shown({"kind": self.kind, "apiVersion": self.api_version, **obj}))
        while not cache.closed:
            now = time.monotonic()
            if now >= end:
                return
            if self.bookmarks and now >= next_bookmark:
                yield self._bookmark(rv)
                next_bookmark = self._next_bookmark(end)
            for event in cache.after(rv, min(WAKE, max(0.0, end - now))):
                rv = event.rv
                if not self._in_scope(event):
                    continue
                converted = self._converted(event)
                if converted is None:
                    continue
                if self._cut_now():
                    drop_connection(self.environ, close=False)
                    return
                self.sent += 1
                etype, obj = converted
                yield event_line(etype, self._shown({"kind": self.kind, "apiVersion": self.api_version, **obj}))
            if self.drop is not None and self.drop.get("after_seconds") is not None and \
                    time.monotonic() >= started + float(self.drop["after_seconds"]):
                drop_connection(self.environ, close=False)
                return

    def _next_bookmark(self, end: float) -> float:
        # cacher.go nextBookmarkTime: every bookmarkFrequency, and once shortly before the deadline.
        now = time.monotonic()
        before_end = end - min(2.0, self.timeout / 4)
        periodic = now + self.bookmark_period
        return before_end if now < before_end < periodic else periodic


def default_timeout() -> float:
    """get.go ListResource: a watch without timeoutSeconds lasts minRequestTimeout to twice that."""
    return 1800.0 * (1 + random.random())
