"""How the real world drives the shared actors (``kube_nodes.Kubelets``, ``kube_pods.PodLifecycle``):
on its actors' thread, never under ``sim.lock``.

The in-memory world calls the actors under ``sim.lock`` and their timers fire on the sim's
scheduler, under that lock too: there every call is a dict lookup. Here each is an HTTP request, so
the actors are handed a sim (``ActorSim``) whose scheduler is ``ActorTimers``: the timers (a boot's
delay, a kubelet restart) and the CloudStack half's power events, queued under ``sim.lock`` as
timers due at once, all run by the actors' thread at the start of its tick, in order. A timer
whose requests fail (the API server busy or restarting) runs again on the next tick.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
from typing import Any, Callable, Optional

import requests

from ..core import TimerHeap
from ..kube_cluster_api import ClusterApi
from ..kube_helpers import now_time
from ..kube_hidden import NodeState
from ..kube_pods import PodLifecycle
from .api import ApiRefusal, KubeApi
from .cluster_api import RestClusterApi

LOG = logging.getLogger("cks_sim.real_kube")
RETRY = 0.2


class ActorTimers:
    """``schedule(delay, fn, *args)`` and ``cancel(handle)`` as the sim's scheduler offers them (a
    ``core.TimerHeap`` under a lock of its own: they are called from any thread), the calls run by
    ``run_due()`` on the actors' thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._timers = TimerHeap()

    def schedule(self, delay: float, fn: Callable[..., Any], *args: Any) -> int:
        with self._lock:
            return self._timers.schedule(delay, fn, *args)

    def cancel(self, handle: Optional[int]) -> None:
        with self._lock:
            self._timers.cancel(handle)

    def run_due(self, fan_out: Optional[Callable[[list[Callable[[], None]]], None]] = None) -> None:
        """The calls due, in order; with ``fan_out`` those due now handed to it at once (independent
        calls: the pods' timers, each of one pod)."""
        now = time.monotonic()
        due: list[Callable[[], None]] = []
        while True:
            with self._lock:
                call = self._timers.pop_due(now)
            if call is None:
                break
            fn, args = call
            if fan_out is None:
                self._run(fn, args)
            else:
                due.append(functools.partial(self._run, fn, args))
        if due and fan_out is not None:
            fan_out(due)

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        try:
            fn(*args)
        except (ApiRefusal, requests.RequestException) as exc:
            LOG.warning("kubelets: %s (again on the next tick)", exc)
            self.schedule(RETRY, fn, *args)
        except Exception:  # pylint: disable=broad-exception-caught
            # A broken call must not stop the actors' thread (every later boot and pod would wait
            # for it), as a broken callback does not stop the sim's scheduler.
            LOG.exception("kubelets: %r failed", fn)


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

    def __init__(self, api: ClusterApi) -> None:
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


class ThreadClusterApi:
    """``ClusterApi`` whose requests go on the calling thread's own connection (``connection()``, the
    world's per-thread one): the pods' timers of a tick run on the world's pool, a thousand nodes'
    kubelets starting their pods at once. What a call reads and then writes (a pod read, then its
    status put) stays on one thread, so on one ``RestClusterApi``."""

    def __init__(self, connection: Callable[[], KubeApi]) -> None:
        self._connection = connection
        self._local = threading.local()

    def _api(self) -> RestClusterApi:
        connection = self._connection()
        api: Optional[RestClusterApi] = getattr(self._local, "api", None)
        if api is None or api.api is not connection:  # a resumed plane: new connections
            api = self._local.api = RestClusterApi(connection)
        return api

    def read(self, plural: str, namespace: str, name: str) -> Optional[dict[str, Any]]:
        return self._api().read(plural, namespace, name)

    def select(self, plural: str, namespace: Optional[str]) -> list[dict[str, Any]]:
        return self._api().select(plural, namespace)

    def pods_on(self, node: str) -> list[dict[str, Any]]:
        return self._api().pods_on(node)

    def put(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        return self._api().put(plural, obj)

    def remove(self, plural: str, key: tuple[str, str]) -> Optional[dict[str, Any]]:
        return self._api().remove(plural, key)

    def new_uid(self) -> str:
        return str(uuid.uuid4())

    def new_meta(self, name: str, namespace: Optional[str] = None, **extra: Any) -> dict[str, Any]:
        return self._api().new_meta(name, namespace, **extra)


class RealPods:
    """The kubelets' pods on the real backend: ``kube_pods.PodLifecycle`` (the shared actor), told by a
    list each tick what the in-memory API tells it by calling it: the pods the real scheduler (or a
    client, or a kubelet: the mirror pods) bound to a node whose kubelet posts, to start; the pods whose
    deletion the API server began (their deletion timestamp), to kill. A boot's restarts and the kills
    a dead kubelet left are the kubelets' own (``kube_nodes.Kubelets`` calls the lifecycle).

    Also the nodes' Ready as the real node lifecycle controller wrote it (what ``set_ready`` and the
    sim's timeline read), and the Nodes and Pods as the tick read them (the snapshot's)."""

    def __init__(self, lifecycle: PodLifecycle, timers: ActorTimers, nodes: dict[str, NodeState],
                 timeline: Callable[..., None]) -> None:
        self.lifecycle = lifecycle
        self.timers = timers
        self.nodes = nodes
        self.timeline = timeline
        self._terminating: set[str] = set()  # uids handed to the lifecycle to kill
        self._syncing: set[str] = set()  # uids whose Ready is posted again
        #: the Nodes and Pods as the last tick read them (what the sim's snapshot shows)
        self.seen: dict[str, list[dict[str, Any]]] = {"nodes": [], "pods": []}

    def tick(self, api: KubeApi, fan_out: Callable[[list[Callable[[], None]]], None]) -> None:
        """What the kubelets do this tick, from a list of the Nodes and the Pods; their pods' timers due
        run on ``fan_out``'s threads."""
        self._observe_nodes(api)
        self.seen["pods"] = pods = api.list("/api/v1/pods")
        for pod in pods:
            meta = pod["metadata"]
            node = self.nodes.get((pod.get("spec") or {}).get("nodeName") or "")
            if node is None:
                continue
            uid, key = meta["uid"], (meta["namespace"], meta["name"])
            if meta.get("deletionTimestamp"):
                if uid not in self._terminating:  # once its Killing events are written (a busy API: next tick)
                    self.lifecycle.kill(pod, int(meta.get("deletionGracePeriodSeconds") or 0))
                    self._terminating.add(uid)
                continue
            if not node.kubelet_posting or self.lifecycle.timer_pending(key):
                continue
            status = pod.setdefault("status", {})
            if status.get("phase") in (None, "Pending"):
                self.lifecycle.schedule_start(pod)
            elif (status.get("phase") == "Running" and not _ready(pod) and node.ready == "True"
                  and not self.lifecycle.probe_fails(pod) and uid not in self._syncing):
                # The real node lifecycle controller marked it not ready while the node's heartbeats were
                # late (MarkPodsNotReady); the kubelet's next status sync says Ready again.
                self._syncing.add(uid)
                self.timers.schedule(0.0, self._ready_again, key, uid)
        listed = {p["metadata"]["uid"] for p in pods}
        self._terminating &= listed
        self._syncing &= listed
        self.timers.run_due(fan_out)

    def _ready_again(self, key: tuple[str, str], uid: str) -> None:
        self._syncing.discard(uid)
        pod = self.lifecycle.api.read("pods", *key)
        if pod is None or pod["metadata"]["uid"] != uid or "deletionTimestamp" in pod["metadata"]:
            return
        node = self.nodes[pod["spec"]["nodeName"]]
        if node.kubelet_posting and node.ready == "True" and pod["status"].get("phase") == "Running" \
                and not _ready(pod):
            self.lifecycle.set_ready(pod, True)

    def _observe_nodes(self, api: KubeApi) -> None:
        self.seen["nodes"] = api.list("/api/v1/nodes")
        for raw in self.seen["nodes"]:
            node = self.nodes.get(raw["metadata"]["name"])
            if node is None:
                continue
            ready = next((c["status"] for c in (raw.get("status") or {}).get("conditions") or []
                          if c.get("type") == "Ready"), "Unknown")
            if ready != node.ready and node.ready == "True":
                self.timeline("notready", node=node.name, ready=ready)
            node.ready = ready


def _ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])
