"""How the real world drives the shared actors (``kube_nodes.Kubelets``): on its actors' thread, never
under ``sim.lock``.

The in-memory world calls the actors under ``sim.lock`` and their timers fire on the sim's
scheduler, under that lock too: there every call is a dict lookup. Here each is an HTTP request, so
the actors are handed a sim (``ActorSim``) whose scheduler is ``ActorTimers``: the timers (a boot's
delay, a kubelet restart) and the CloudStack half's power events, queued under ``sim.lock`` as
timers due at once, all run by the actors' thread at the start of its tick, in order. A timer
whose requests fail (the API server busy or restarting) runs again on the next tick.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
import uuid
from typing import Any, Callable, Optional

import requests

from ..kube_helpers import now_time
from .api import ApiRefusal
from .cluster_api import RestClusterApi

LOG = logging.getLogger("cks_sim.real_kube")
RETRY = 0.2


class ActorTimers:
    """``schedule(delay, fn, *args)`` and ``cancel(handle)`` as the sim's scheduler offers them, the
    calls run by ``run_due()`` on the actors' thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._heap: list[tuple[float, int, Callable[..., Any], tuple[Any, ...]]] = []
        self._cancelled: set[int] = set()
        self._ids = itertools.count(1)

    def schedule(self, delay: float, fn: Callable[..., Any], *args: Any) -> int:
        with self._lock:
            handle = next(self._ids)
            heapq.heappush(self._heap, (time.monotonic() + max(delay, 0.0), handle, fn, args))
            return handle

    def cancel(self, handle: Optional[int]) -> None:
        if handle is not None:
            with self._lock:
                self._cancelled.add(handle)

    def run_due(self) -> None:
        now = time.monotonic()
        while True:
            with self._lock:
                if not self._heap or self._heap[0][0] > now:
                    return
                _when, handle, fn, args = heapq.heappop(self._heap)
                if handle in self._cancelled:
                    self._cancelled.discard(handle)
                    continue
            try:
                fn(*args)
            except (ApiRefusal, requests.RequestException) as exc:
                LOG.warning("kubelets: %s (again on the next tick)", exc)
                self.schedule(RETRY, fn, *args)


class ActorSim:
    """The sim as the shared actors see it on the real backend: its clock, timings, faults and
    timeline, with ``ActorTimers`` as the scheduler."""

    def __init__(self, sim: Any, timers: ActorTimers) -> None:
        self._sim = sim
        self.scheduler = timers

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sim, name)


class EventRecorder:
    """The kubelets' Events written through the API (``kube_recorder.Recorder``'s ``record``, the
    legacy recorder's shape)."""

    def __init__(self, api: RestClusterApi) -> None:
        self.api = api

    def record(self, namespace: str, involved: dict[str, Any], etype: str, reason: str, message: str,
               component: str, host: Optional[str] = None, action: Optional[str] = None) -> None:
        stamp = now_time()
        source = {"component": component, **({"host": host} if host else {})}
        self.api.put("events", {
            "apiVersion": "v1", "kind": "Event",
            "metadata": self.api.new_meta(f"{involved['name']}.{uuid.uuid4().hex[:16]}", namespace),
            "involvedObject": involved, "reason": reason, "message": message, "type": etype,
            "source": source, "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
            "reportingComponent": component, "reportingInstance": host or ""})


class RunnerPods:
    """The kubelets' pods on the real backend: ``actors.PodRunner``'s tick restarts a booted node's pods
    (their boot ID changed) and confirms the deletions its kubelet waited for, so a boot hands it none."""

    def __init__(self) -> None:
        self.on_node: Callable[[str], list[dict[str, Any]]] = _no_pods

    def confirm_kill(self, key: tuple[str, str], uid: str) -> None:
        pass

    def restart(self, pod: dict[str, Any], ready_node: bool) -> None:
        pass

    def awaits_kubelet(self, key: tuple[str, str]) -> bool:
        return False


def _no_pods(name: str) -> list[dict[str, Any]]:  # pylint: disable=unused-argument
    return []
