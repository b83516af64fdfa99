"""The shared machinery of cks-sim: clock, scheduler, faults, call log, timeline, invariants.

Every world (CloudStack, each cluster's Kubernetes, etcd) and every HTTP layer gets the one
``Sim`` object and goes through it, so that faults, observations and timing behave the same
whichever API a request came in on. All world state is guarded by ``Sim.lock``; scheduled
callbacks run with that lock held.
"""

from __future__ import annotations

import heapq
import itertools
import random
import socket
import threading
import time
from typing import Any, Callable, Optional

from . import kube_requests, request_kinds


class Clock:
    """Simulated durations (in the spec) are multiplied by ``time_scale`` to get real seconds."""

    def __init__(self, time_scale: float) -> None:
        self.time_scale = float(time_scale)

    def real(self, sim_seconds: float) -> float:
        return max(0.0, float(sim_seconds) * self.time_scale)

    @staticmethod
    def now() -> float:
        return time.time()


class TimerHeap:
    """Calls due at a time (``time.monotonic``): scheduled, cancelled, popped once due, in order of
    their time (then of their scheduling). No thread and no lock: its owner runs the calls and keeps
    its own locking (``Scheduler`` under ``Sim.lock``, ``real_kube.drive.ActorTimers`` on the actors'
    thread)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable[..., Any], tuple[Any, ...]]] = []
        #: the handles scheduled and neither run nor cancelled (a cancelled one is skipped when popped)
        self._pending: set[int] = set()
        self._ids = itertools.count(1)

    def schedule(self, delay: float, fn: Callable[..., Any], *args: Any) -> int:
        handle = next(self._ids)
        heapq.heappush(self._heap, (time.monotonic() + max(0.0, delay), handle, fn, args))
        self._pending.add(handle)
        return handle

    def cancel(self, handle: Optional[int]) -> None:
        if handle is not None:
            self._pending.discard(handle)

    def next_due(self) -> Optional[float]:
        """When the earliest call is due (``time.monotonic``), None when none is scheduled."""
        while self._heap and self._heap[0][1] not in self._pending:
            heapq.heappop(self._heap)  # cancelled
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> Optional[tuple[Callable[..., Any], tuple[Any, ...]]]:
        """The earliest call due by ``now``, taken off the heap; None when none is."""
        when = self.next_due()
        if when is None or when > now:
            return None
        _when, handle, fn, args = heapq.heappop(self._heap)
        self._pending.discard(handle)
        return fn, args


class Scheduler:
    """Runs callbacks after a real delay, on one thread, holding the Sim lock."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self._timers = TimerHeap()
        self._cv = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="cks-sim-scheduler", daemon=True)
        self._thread.start()

    def schedule(self, delay: float, fn: Callable[..., Any], *args: Any) -> int:
        with self._cv:
            handle = self._timers.schedule(delay, fn, *args)
            self._cv.notify()
        return handle

    def cancel(self, handle: Optional[int]) -> None:
        with self._cv:
            self._timers.cancel(handle)

    def stop(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._cv:
                due = None
                while not self._stopping and (due := self._timers.pop_due(time.monotonic())) is None:
                    when = self._timers.next_due()
                    self._cv.wait(None if when is None else max(0.0, when - time.monotonic()))
                if self._stopping or due is None:
                    return
            fn, args = due
            try:
                with self._lock:
                    fn(*args)
            except Exception as exc:  # a broken callback must not stop the clock of the whole sim
                import traceback

                traceback.print_exc()
                print(f"cks-sim: scheduled callback {fn!r} failed: {exc}", flush=True)


FAULT_KINDS = {
    # CloudStack
    "cloudstack_error": "next `count` calls of `command` answer HTTP error `code` with `errortext`",
    "lost_answer": "next `count` calls of `command` are carried out, then the connection is dropped before "
                   "the answer (a proxy timing out on a slow backend)",
    "job_failure": "next `count` async jobs of `command` (optionally for VM `vm`) end jobstatus 2 with `code`",
    "start_capacity": "next `count` startVirtualMachine jobs (optionally of VM `vm`) fail with 533",
    # Kubernetes
    "kube_error": "next `count` requests matching `verb` + `resource` (+ `name`, + `path` below the cluster, e.g. "
                  "`/readyz`) answer HTTP `status` (with `retry_after` seconds: the Retry-After header too)",
    "pdb_block": "PDB `namespace`/`name` never allows an eviction",
    "slow_drain": "pods evicted from node `node` (or any) take `seconds` (simulated) to terminate",
    "never_ready": "node `node` never turns Ready after its next boot",
    "stale_ready": "node `node` keeps its old bootID and Ready=True for `seconds` (simulated) after a start",
    "watch_drop": "the next `count` watch streams of `resource` (+ `selector`: 'fieldSelector|labelSelector') "
                  "are cut off without their final chunk, before event `after_events` + 1 or after "
                  "`after_seconds` (real)",
    "watch_expired": "the next `count` watches of `resource` (+ `selector`) answer an ERROR event 410 Expired "
                     "'too old resource version', whatever version they ask for",
    "foreign_cordon": "someone else cordons node `node` now (applied when the fault is added)",
    "kubelet_stale_capacity": "the kubelet of node `node` (or any) keeps posting the capacity it saw at its "
                              "first start after a restart (it never reports hot-added vCPUs or memory)",
    # etcd
    "etcd_kill": "the etcd member of VM `vm` is killed now (its VM stays Running)",
    # both APIs
    "transient": "a `rate` (0..1) of requests to `api` (cloudstack|kubernetes|both) fail: `mode` 5xx or drop",
    "latency": "every request to `api` (cloudstack|kubernetes|both) is delayed by `seconds` (real)",
    # any API, by request kind
    "request_fault": "the next `count` requests of kind `request` (the call log's `request`: `cloudstack "
                     "<command>`, `kubernetes <verb> <resource>`, `etcd <call>`) meet `mode`: `503` (an HTTP 503 "
                     "before it is handled; etcd: etcdctl fails, deadline exceeded), `530` (CloudStack's "
                     "INTERNAL_ERROR answer) or `drop` (carried out, then the connection closed before the answer)",
}


class Faults:
    """Faults on demand. A fault is a dict with ``kind`` and kind-specific fields.

    ``count`` (optional) makes a fault one-shot or N-shot; without it, it lasts until cleared.
    """

    def __init__(self, seed: int = 0) -> None:
        self._lock = threading.Lock()
        self._faults: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self.random = random.Random(seed)
        self.on_added: list[Callable[[dict[str, Any]], None]] = []

    def add(self, fault: dict[str, Any]) -> dict[str, Any]:
        kind = fault.get("kind")
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(sorted(FAULT_KINDS))}")
        if kind == "request_fault":
            request_kinds.check_fault(fault)
        fault = dict(fault, id=next(self._ids), fired=0)
        with self._lock:
            self._faults.append(fault)
        for hook in self.on_added:
            hook(fault)
        return fault

    def remove(self, fault_id: int) -> None:
        with self._lock:
            self._faults = [f for f in self._faults if f["id"] != fault_id]

    def clear(self) -> None:
        with self._lock:
            self._faults = []

    def list(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(f) for f in self._faults]

    @staticmethod
    def _matches(fault: dict[str, Any], match: dict[str, Any]) -> bool:
        # A fault field left out (or None) matches anything; a field given must be equal.
        for key, value in match.items():
            want = fault.get(key)
            if want is not None and want != value:
                return False
        return True

    def peek(self, kind: str, **match: Any) -> Optional[dict[str, Any]]:
        with self._lock:
            for fault in self._faults:
                if fault["kind"] == kind and self._matches(fault, match):
                    return dict(fault)
        return None

    def take(self, kind: str, **match: Any) -> Optional[dict[str, Any]]:
        """Return a matching fault and use up one of its shots."""
        with self._lock:
            for fault in self._faults:
                if fault["kind"] == kind and self._matches(fault, match):
                    fault["fired"] += 1
                    if fault.get("count") is not None:
                        fault["count"] -= 1
                        if fault["count"] <= 0:
                            self._faults.remove(fault)
                    return dict(fault)
        return None

    def transient(self, api: str) -> Optional[str]:
        """``None``, ``"5xx"`` or ``"drop"`` for one request to ``api``."""
        for fault in self.list():
            if fault["kind"] == "transient" and fault.get("api", "both") in (api, "both"):
                with self._lock:
                    hit = self.random.random() < float(fault.get("rate", 0))
                if hit:
                    self.take("transient", id=fault["id"])
                    return fault.get("mode", "5xx")
        return None

    def latency(self, api: str) -> float:
        return sum(
            float(f.get("seconds", 0))
            for f in self.list()
            if f["kind"] == "latency" and f.get("api", "both") in (api, "both")
        )


class Journal:
    """An append-only list of timestamped records (the call log, the timeline, the violations)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[dict[str, Any]] = []

    def add(self, **fields: Any) -> dict[str, Any]:
        item = {"t": time.time(), **fields}
        with self._lock:
            self._items.append(item)
        return item

    def list(self, since: float = 0.0) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(i) for i in self._items if i["t"] >= since]

    def clear(self) -> None:
        with self._lock:
            self._items = []


def drop_connection(environ: dict[str, Any], close: bool = True) -> None:
    """Cut the client's socket under a WSGI request, as a load balancer dropping it would.

    ``close=False`` only shuts it down: a stream's later writes then fail with a BrokenPipeError,
    which werkzeug takes for a dropped connection and does not log as a server error."""
    sock = environ.get("werkzeug.socket")
    if isinstance(sock, socket.socket):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if close:
            sock.close()


class Sim:
    """Holds everything. The worlds are attached by ``server.build_sim``.

    Attributes set by the server:
      ``cloud``   the CloudStack world (``cloud.CloudWorld``)
      ``kube``    dict cluster id -> ``kube.KubeWorld``
      ``etcd``    ``etcd.EtcdManager``
      ``tls``     ``tls.make_tls``'s paths (None: no TLS)
      ``kubeconfig_provider``  cluster id -> kubeconfig text (None: no Kubernetes API served)
      ``spec``    the parsed spec dict
    """

    def __init__(self, spec: dict[str, Any], state_dir: str) -> None:
        self.spec = spec
        self.state_dir = state_dir
        self.lock = threading.RLock()
        self.clock = Clock(spec.get("time_scale", 1.0))
        self.timings: dict[str, float] = dict(DEFAULT_TIMINGS, **(spec.get("timings") or {}))
        self.scheduler = Scheduler(self.lock)
        self.faults = Faults(seed=int(spec.get("seed", 0)))
        self.calls = Journal()
        self.timeline = Journal()
        self.invariants = Journal()
        self.cloud: Any = None
        self.kube: dict[str, Any] = {}
        #: cluster id -> its ``autoscaler.ClusterAutoscaler`` (every CloudManaged cluster has one; it acts when on).
        self.autoscalers: dict[str, Any] = {}
        self.etcd: Any = None
        self.tls: Optional[dict[str, str]] = None
        self.kubeconfig_provider: Optional[Callable[[str], str]] = None
        #: ``rate_limit.ApiRateLimit``, made with the CloudStack API app.
        self.api_rate_limit: Any = None

    def delay(self, timing: str) -> float:
        """Real seconds for one of the spec's named timings."""
        return self.clock.real(self.timings[timing])

    # Hooks the CloudStack world calls when a node VM's power changes. They run under self.lock.
    def vm_powered_off(self, cluster_id: str, vm_name: str) -> None:
        self.timeline.add(node=vm_name.lower(), event="powered_off")
        world = self.kube.get(cluster_id)
        if world is not None and world.has_node(vm_name.lower()):
            world.node_powered_off(vm_name.lower())
        if self.etcd is not None:
            self.etcd.vm_powered_off(vm_name)

    def node_vm_created(self, cluster_id: str, vm_name: str, node_type: str, cpu: int, memory_mb: int) -> None:
        """A node VM CKS created after the cluster was built (a scale-up): its kubelet joins at its first boot."""
        self.timeline.add(node=vm_name.lower(), event="node_vm_created", node_type=node_type)
        world = self.kube.get(cluster_id)
        if world is not None and hasattr(world, "join_node"):
            world.join_node(vm_name.lower(), node_type, cpu, memory_mb)

    def node_vm_removed(self, cluster_id: str, vm_name: str) -> None:
        """CKS removes a node VM (scaleKubernetesCluster nodeids): kubectl delete node, before the VM goes."""
        world = self.kube.get(cluster_id)
        if world is not None and world.has_node(vm_name.lower()):
            kube_requests.remove_node(world, vm_name.lower())

    def vm_powered_on(self, cluster_id: str, vm_name: str, cpu: int, memory_mb: int) -> None:
        self.timeline.add(node=vm_name.lower(), event="powered_on", cpu=cpu, memory=memory_mb)
        world = self.kube.get(cluster_id)
        if world is not None and world.has_node(vm_name.lower()):
            world.node_powered_on(vm_name.lower(), cpu, memory_mb)
        if self.etcd is not None:
            self.etcd.vm_powered_on(vm_name)

    def vm_scaled_live(self, cluster_id: str, vm_name: str, cpu: int, memory_mb: int) -> None:
        """A running node VM got more vCPUs / memory (hotplug): its guest may online them."""
        self.timeline.add(node=vm_name.lower(), event="scaled_live", cpu=cpu, memory=memory_mb)
        world = self.kube.get(cluster_id)
        if world is not None and world.has_node(vm_name.lower()):
            world.node_scaled_live(vm_name.lower(), cpu, memory_mb)

    def stop(self) -> None:
        for world in self.kube.values():
            cache = getattr(getattr(world, "store", None), "watch_cache", None)
            if cache is not None:
                cache.close()  # open watch streams end instead of holding their threads
        self.scheduler.stop()
        if self.etcd is not None:
            self.etcd.stop_all()


# Simulated seconds. `time_scale` turns them into real seconds.
DEFAULT_TIMINGS: dict[str, float] = {
    "api_latency": 0.0,  # added to every API request
    "job_poll_min": 0.0,  # an async job is never done sooner than this
    "stop": 10.0,  # Running -> Stopped
    "start": 15.0,  # Stopped -> Running (the VM, not the node)
    "boot_to_ready": 30.0,  # VM Running -> kubelet posts new bootID and Ready
    "notready_grace": 40.0,  # node-monitor-grace-period: VM off -> Ready Unknown
    "pod_termination": 5.0,  # evicted pod -> gone (unless the pod spec says otherwise)
    "pod_start": 3.0,  # replacement pod -> Running and Ready
    "resize": 2.0,  # resizeVolume job
    "affinity": 1.0,  # updateVMAffinityGroup job
    "live_scale": 2.0,  # scaleVirtualMachine of a Running VM (memory and vCPU hotplug)
    "kubelet_restart": 2.0,  # systemctl restart kubelet -> the new kubelet posts its status
    "scanner_period": 30.0,  # CKS state scanner
}
