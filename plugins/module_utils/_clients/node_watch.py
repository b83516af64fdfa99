# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""One watch of the cluster's nodes for a whole batch, shared by its node threads.

Without it each node of a batch opened its own watch to see itself come back (five streams for a
batch of five) and the validation listed every node again after the batch. Here one thread runs
``KubeWatcher.until`` on ``/api/v1/nodes`` for the batch, from the view's own list and its
resourceVersion (that list is the start point: no second list), with everything the watcher does:
bookmarks, a relist after 410 Gone, a reconnect on a dropped stream, the batch deadline. Every
event's state is kept as a snapshot; each waiting node thread asks its own check of it (under one
lock) whenever it changes.

A check only ever sees a state the server had: a wait on a lagging watch is later, never wrong
(a node is back only with a boot ID other than every one seen before its stop, so a state from
before the stop cannot pass it).

Should the watch end early (the server refuses watches, an error the watcher does not ride out),
each wait falls back to the client's own ``await_node`` (its own watch, or polling), as before;
the validation then lists.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Mapping, Optional, TypeVar

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube import KubeClient
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube_watch import (
    State,
    WatchStop,
    WatchStopped,
    WatchUnsupported,
    object_key,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, DeadlineExceeded
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline

T = TypeVar("T")
NODES = "/api/v1/nodes"
#: How long the validation waits for the watch to show the batch's last writes before it lists
#: instead: events arrive within moments; longer means the stream is reconnecting.
CATCH_UP_SECONDS = 5.0
#: How long ``stop`` waits for the watch's thread: a shut-down stream ends at once; one whose socket
#: could not be reached ends at its own timeout, a daemon thread nothing waits for.
STOP_SECONDS = 5.0


class NodeWatch:
    """The batch's nodes as one watch shows them. ``start()``, then ``await_node`` from any thread,
    ``stop()`` when the batch is done (it ends the stream at once)."""

    def __init__(self, kube: KubeClient, deadline: Deadline, start: Optional[tuple[State, str]],
                 interval: float) -> None:
        self.kube = kube
        self.deadline = deadline
        self.interval = interval
        self._start = start
        self._stop = WatchStop()
        self._changed = threading.Condition()
        self._state: Optional[State] = None  # the latest snapshot; None until the first list or start
        self._seen: dict[str, set[str]] = {}  # every resourceVersion of each node the watch showed
        self._ended: Optional[str] = None  # why the watch ended early (not stopped by its owner)
        self._thread = threading.Thread(target=self._run, name="node-watch", daemon=True)

    @classmethod
    def for_batch(cls, kube: Any, deadline: Deadline, listed: Optional[Mapping[str, Mapping[str, Any]]],
                  version: str, interval: float) -> Optional[NodeWatch]:
        """A started watch for a batch against ``kube``, or None where the client does not watch
        (a server that refused a watch before, or not a KubeClient). ``listed`` and ``version``:
        the view's list of the nodes and its resourceVersion, the watch's start."""
        if not isinstance(kube, KubeClient) or not kube.watch_supported:
            return None
        start = ({object_key(node): dict(node) for node in listed.values()}, version) if listed and version else None
        watch = cls(kube, deadline, start, interval)
        watch._thread.start()
        return watch

    # -- the watch's own thread ------------------------------------------------------------------

    def _run(self) -> None:
        why = "the batch is done"
        try:
            self.kube.watcher.until(NODES, self._record, self.deadline, "the batch's nodes", interval=self.interval,
                                    start=self._start, stop=self._stop)
        except WatchStopped:
            pass
        except WatchUnsupported as exc:
            # As KubeClient._await does: every later wait of this client polls.
            self.kube.watch_supported = False
            self.kube.retry_log.retried(f"watch {NODES}", f"the server does not watch ({exc}); polling instead", 0.0)
            why = f"the server does not watch: {exc}"
        except DeadlineExceeded as exc:
            why = exc.msg
        except CksError as exc:
            why = exc.msg
        except Exception as exc:  # the thread must always end the waits it serves
            why = f"{type(exc).__name__}: {exc}"
        with self._changed:
            self._ended = why
            self._changed.notify_all()

    def _record(self, state: State) -> bool:
        """The watcher's condition, asked after the list and after every event: keep a snapshot
        (the watcher changes ``state`` in place; the objects in it are replaced, never changed)."""
        with self._changed:
            self._state = dict(state)
            for name, node in state.items():
                version = (node.get("metadata") or {}).get("resourceVersion")
                if version:
                    self._seen.setdefault(name, set()).add(str(version))
            self._changed.notify_all()
        return self._stop.requested.is_set()

    # -- for the node threads --------------------------------------------------------------------

    def await_node(self, name: str, check: Callable[[Optional[dict[str, Any]]], Optional[T]], deadline: Deadline,
                   interval: float, what: str, since: Optional[Mapping[str, Any]] = None) -> T:
        """``KubeClient.await_node``'s contract, from the shared watch. ``since`` is not needed: the
        watch started before any write of the batch, so every change since is in it."""
        with self._changed:
            while self._ended is None:
                if self._state is not None:
                    value = check(self._state.get(name))
                    if value:
                        return value
                if deadline.expired():
                    raise DeadlineExceeded(
                        f"gave up waiting for {what} after {deadline.elapsed():.1f}s (deadline {deadline.seconds:g}s)",
                        what=what, waited=round(deadline.elapsed(), 1), deadline=deadline.seconds)
                self._changed.wait(max(0.05, deadline.remaining()))
        # The shared watch ended early: this wait watches (or polls) on its own, as before it.
        answer: T = self.kube.await_node(name, check, deadline, interval, what, since=since)
        return answer

    def nodes_after(self, written: Mapping[str, str]) -> Optional[list[dict[str, Any]]]:
        """Every node as the watch shows it, once it has shown each write in ``written`` (node name
        -> the resourceVersion the batch's last write of it answered): a state no older than the
        batch's end, what the validation's list stood for. None (list instead) if the watch is not
        streaming or does not show them within ``CATCH_UP_SECONDS``."""
        wait = Deadline(min(CATCH_UP_SECONDS, max(0.0, self.deadline.remaining())))
        with self._changed:
            while True:
                caught_up = all(version in self._seen.get(name, ()) for name, version in written.items())
                if self._ended is not None or self._state is None:
                    return None
                if caught_up and self._stop.streaming:
                    return list(self._state.values())
                if wait.expired():
                    return None
                # A reconnect notifies nobody: look again shortly rather than at the next event.
                self._changed.wait(min(0.1, max(0.01, wait.remaining())))

    def stop(self) -> None:
        """End the watch now and wait for its thread (a stream shut down ends at once)."""
        self._stop.stop()
        self._thread.join(STOP_SECONDS)
