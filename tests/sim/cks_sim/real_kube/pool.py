"""Control planes on demand, within a budget: ``cks-sim serve --kube real`` of more clusters than the
machine runs at once (inventory-200.yml's two hundred).

    pool = PlanePool(sim, worlds, default_budget()).start()   # the planes that fit start now
    pool.url(cluster_id)        # what the cluster's kubeconfig names
    pool.stop()

When every cluster's plane fits the budget (every example but inventory-200.yml, on a 2-core machine
with 24 GiB), they all start at serve time and the kubeconfigs name their planes, as before: nothing
else here runs. When they do not, the first ones (in the spec's order) start at serve time while the
budget lasts, and each cluster's kubeconfig names an endpoint of its own here (``_Fronts``: one
thread over every cluster's listening socket, TLS passing through as through the planes' own
balancers). A connection to a cluster whose plane is not running waits while the plane starts (the
client sees a slower first answer), then is passed to it. To make room, the least recently used idle
plane is stopped first (``planes_to_stop``): its processes and its kubelets' threads stop, its
storage (the cluster's etcd members, or the plane's own etcd's data directory) stays, so nothing in
the API is lost; when it starts again its kubelets renew their leases at once, before the new node
lifecycle controller's grace can run out, so no node goes NotReady for the restart. A VM stopped or
started in CloudStack while its cluster's plane is stopped takes effect at once on the kubelets'
flags and wakes the plane (CloudStack's scanner and the collection would read the API next).

The budget has two sides, both measured (docs/docsite/rst/development.rst, *The real control
plane*): memory (``world.plane_memory_mb`` per cluster, against the memory available at serve time)
and CPU: an idle plane with its kubelets takes about a tenth of a core (API server 0.05, the
actors' ticks 0.03, etcd 0.015, controllers 0.02), so PLANES_PER_CORE of them run at once.
"""

from __future__ import annotations

import logging
import os
import selectors
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import urlsplit

from .balancer import BUFFER, CONNECT_TIMEOUT, _close
from .plane import PlaneError

LOG = logging.getLogger("cks_sim.real_kube")
#: Idle planes running at once per core (fleet.yml's twelve took 1.2 of 2 cores idle).
PLANES_PER_CORE = 6
#: A plane whose endpoint passed no byte for this long counts as idle though a connection is open
#: (a client's pool keeps its connections open between requests; it reconnects once cut).
QUIET_SECONDS = 5.0
#: How long a connection waits for a plane to become idle and be stopped, when the budget is full
#: of planes in use; then it is closed, as a balancer with no server behind it does.
ROOM_TIMEOUT = 120.0
#: Planes being made room for and started at once (as REAL_KUBE_STARTS at serve time).
WAKE_THREADS = 4

NOT_STARTED, RUNNING, DORMANT, FAILED = "not started", "running", "dormant", "failed"


# -- the decisions (pure) ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Budget:
    """What the running planes may hold together: memory (MiB) and how many run at once."""

    memory_mb: int
    planes: int


@dataclass(frozen=True)
class PlaneUse:
    """A running (or starting) plane, as the choice of which to stop sees it."""

    cluster: str
    memory_mb: int
    #: monotonic time its endpoint last passed a byte (or its plane started)
    last_used: float
    #: connections open through its endpoint
    open: int = 0
    #: starting or stopping now: never chosen
    busy: bool = False


def planes_at_start(needs: list[tuple[str, int]], budget: Budget) -> list[str]:
    """The clusters (of ``needs``: cluster, MiB, in the order they start) whose planes start at serve
    time: all of them when they fit the budget together, else those that fit, in order."""
    chosen: list[str] = []
    used = 0
    for cluster, memory_mb in needs:
        if len(chosen) < budget.planes and used + memory_mb <= budget.memory_mb:
            chosen.append(cluster)
            used += memory_mb
    return chosen


def planes_to_stop(running: list[PlaneUse], needed_mb: int, budget: Budget, now: float,
                   quiet: float = QUIET_SECONDS) -> Optional[list[str]]:
    """The planes to stop, least recently used first, so that one more of ``needed_mb`` fits the
    budget beside the others ([]: it fits now); None: it cannot until more of them are idle. A plane
    is idle with no connection open through its endpoint, or none that passed a byte for ``quiet``
    seconds; one starting or stopping never is."""
    used, count = sum(p.memory_mb for p in running), len(running)

    def fits() -> bool:
        return count + 1 <= budget.planes and used + needed_mb <= budget.memory_mb

    idle = sorted((p for p in running if not p.busy and (p.open == 0 or now - p.last_used >= quiet)),
                  key=lambda p: p.last_used)
    chosen: list[str] = []
    for plane in idle:
        if fits():
            break
        chosen.append(plane.cluster)
        used, count = used - plane.memory_mb, count - 1
    return chosen if fits() else None


def default_budget(available_mb: int, cores: Optional[int] = None, planes: int = 0) -> Budget:
    """The memory available, and ``planes`` at once (0: PLANES_PER_CORE per core, at least one)."""
    cores = cores or os.cpu_count() or 1
    return Budget(memory_mb=available_mb, planes=planes if planes > 0 else max(1, PLANES_PER_CORE * cores))


# -- running them -----------------------------------------------------------------------------------

@dataclass
class _Plane:
    world: Any  # world.RealKubeWorld
    memory_mb: int
    state: str = NOT_STARTED
    last_used: float = 0.0
    open: int = 0
    busy: bool = False


class PlanePool:
    """Every cluster's plane, started at serve time within ``budget`` and the others on demand."""

    def __init__(self, sim: Any, worlds: dict[str, Any], budget: Budget, memory_mb: dict[str, int],
                 first: Optional[list[str]] = None, starts: int = WAKE_THREADS) -> None:
        self.sim = sim
        self.budget = budget
        #: the order planes start at serve time: ``first`` (clusters whose bring-up must happen at
        #: serve time: their etcd members stop after it), then the spec's order
        order = [c for c in (first or []) if c in worlds] + [c for c in worlds if c not in (first or [])]
        self.planes = {cid: _Plane(worlds[cid], memory_mb[cid]) for cid in order}
        self.starts = starts
        self.on_demand = False
        self._lock = threading.Condition()
        self._wakes: dict[str, threading.Lock] = {cid: threading.Lock() for cid in self.planes}
        self._fronts: Optional[_Fronts] = None
        self._waker = ThreadPoolExecutor(WAKE_THREADS, thread_name_prefix="cks-sim-wake")
        self._stopping = False

    def start(self) -> PlanePool:
        initial = planes_at_start([(cid, p.memory_mb) for cid, p in self.planes.items()], self.budget)
        self.on_demand = len(initial) < len(self.planes)
        with ThreadPoolExecutor(max(1, min(self.starts, len(initial))), thread_name_prefix="cks-sim-plane") as pool:
            started = [pool.submit(self._start, cid) for cid in initial]
            # Every start ends before the first failure is raised: the server's stop() then stops them all.
            failed = [error for error in (s.exception() for s in started) if error is not None]
        if failed:
            raise failed[0]
        if self.on_demand:  # from here on a plane starts on a request, or on a VM's power change
            for plane in self.planes.values():
                plane.world.on_power_change = self.request_wake
            self._fronts = _Fronts(self).start()
            self.sim.timeline.add(event="kube_planes_on_demand", clusters=len(self.planes), at_start=len(initial),
                                  budget_mb=self.budget.memory_mb, budget_planes=self.budget.planes)
        return self

    def url(self, cluster_id: str) -> Optional[str]:
        """The endpoint the cluster's kubeconfig names."""
        if self._fronts is not None:
            return self._fronts.url(cluster_id)
        plane = self.planes[cluster_id].world.plane
        return plane.url if plane is not None else None

    def state(self, cluster_id: str) -> str:
        return self.planes[cluster_id].state

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            self._lock.notify_all()
        if self._fronts is not None:
            self._fronts.stop()
        self._waker.shutdown(wait=True, cancel_futures=True)
        for lock in self._wakes.values():
            with lock:  # a plane starting ends its start before the worlds stop (none starts after)
                pass

    # -- waking and stopping ------------------------------------------------------------------------

    def request_wake(self, cluster_id: str) -> None:
        """Wake the cluster's plane on a thread of the pool's (callers hold ``sim.lock``)."""
        if self.planes[cluster_id].state == RUNNING:
            return
        try:
            self._waker.submit(self._wake_logged, cluster_id)
        except RuntimeError:  # stopping
            pass

    def _wake_logged(self, cluster_id: str) -> None:
        try:
            self.wake(cluster_id)
        except Exception:  # pylint: disable=broad-exception-caught
            LOG.exception("the plane of %s did not start", cluster_id)

    def wake(self, cluster_id: str) -> bool:
        """The cluster's plane running, stopping least recently used idle ones to make room (blocks
        while it starts); False: it cannot run (no control node's VM runs, the budget stays full of
        planes in use, or the sim is stopping)."""
        plane = self.planes[cluster_id]
        with self._wakes[cluster_id]:
            if plane.state == RUNNING:
                return True
            if plane.state == FAILED or (plane.state == DORMANT and not plane.world.can_resume()):
                return False
            if not self._make_room(cluster_id):
                return False
            try:
                self._start(cluster_id)
            except BaseException:
                # Half started (a process that did not get ready, workloads that did not settle): stopped,
                # and not tried again (its start's log says why).
                plane.world.stop()
                with self._lock:
                    plane.busy, plane.state = False, FAILED
                    self._lock.notify_all()
                self.sim.timeline.add(cluster=cluster_id, event="kube_plane_failed")
                raise
            return True

    def _make_room(self, cluster_id: str) -> bool:
        """Reserve the budget for ``cluster_id`` (counted as running, busy), stopping planes for it."""
        plane = self.planes[cluster_id]
        deadline = time.monotonic() + ROOM_TIMEOUT
        with self._lock:
            while True:
                if self._stopping:
                    return False
                running = [PlaneUse(cid, p.memory_mb, p.last_used, p.open, p.busy)
                           for cid, p in self.planes.items() if p.state == RUNNING or p.busy]
                chosen = planes_to_stop(running, plane.memory_mb, self.budget, time.monotonic())
                if chosen is not None:
                    break
                if time.monotonic() > deadline:
                    self.sim.timeline.add(cluster=cluster_id, event="kube_plane_no_room", planes=len(running))
                    return False
                self._lock.wait(1.0)
            for cid in chosen:
                self.planes[cid].busy = True
            plane.busy = True
        for cid in chosen:
            self._suspend(cid)
        return True

    def _start(self, cluster_id: str) -> None:
        plane = self.planes[cluster_id]
        with self._lock:
            plane.busy = True
        began = time.monotonic()
        if plane.state == NOT_STARTED:
            plane.world.start()
        else:
            plane.world.resume()
            self.sim.timeline.add(cluster=cluster_id, event="kube_plane_resumed",
                                  seconds=round(time.monotonic() - began, 2))
        with self._lock:
            plane.state, plane.busy, plane.last_used = RUNNING, False, time.monotonic()
            self._lock.notify_all()

    def _suspend(self, cluster_id: str) -> None:
        plane = self.planes[cluster_id]
        try:
            plane.world.suspend()
        finally:
            with self._lock:
                plane.state, plane.busy = DORMANT, False
                self._lock.notify_all()
        self.sim.timeline.add(cluster=cluster_id, event="kube_plane_stopped_idle")

    # -- the endpoints' use -------------------------------------------------------------------------

    def used(self, cluster_id: str, opened: int = 0) -> None:
        with self._lock:
            plane = self.planes[cluster_id]
            plane.open += opened
            plane.last_used = time.monotonic()
            if opened < 0:
                self._lock.notify_all()

    def target(self, cluster_id: str) -> Optional[tuple[str, int]]:
        """Where the plane's own endpoint listens now (host, port); None while it does not run."""
        plane = self.planes[cluster_id]
        control = plane.world.plane
        if plane.state != RUNNING or control is None:
            return None
        parts = urlsplit(control.url)
        return str(parts.hostname), int(parts.port or 443)


class _Fronts:
    """Every cluster's endpoint while planes run on demand: one listening socket each, one thread
    accepting on all; a connection wakes the cluster's plane, then is passed through to it."""

    def __init__(self, pool: PlanePool, host: str = "127.0.0.1") -> None:
        self.pool = pool
        self.host = host
        self._selector = selectors.DefaultSelector()
        self._ports: dict[str, int] = {}
        self._listeners: list[socket.socket] = []
        self._stopping = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def url(self, cluster_id: str) -> str:
        return f"https://{self.host}:{self._ports[cluster_id]}"

    def start(self) -> _Fronts:
        for cid in self.pool.planes:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.bind((self.host, 0))
            listener.listen(128)
            listener.setblocking(False)
            self._ports[cid] = int(listener.getsockname()[1])
            self._listeners.append(listener)
            self._selector.register(listener, selectors.EVENT_READ, cid)
        self._thread = threading.Thread(target=self._accept, name="cks-sim-plane-fronts", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for listener in self._listeners:
            listener.close()
        self._selector.close()
        with self._open_lock:
            for sock in list(self._open):
                _close(sock)
            self._open.clear()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            for key, _events in self._selector.select(timeout=0.2):
                try:
                    client, _address = key.fileobj.accept()  # type: ignore[union-attr]
                except OSError:
                    continue
                client.setblocking(True)
                threading.Thread(target=self._serve, args=(client, key.data), daemon=True,
                                 name=f"cks-sim-front-{key.data[:8]}").start()

    def _serve(self, client: socket.socket, cluster_id: str) -> None:
        pool = self.pool
        pool.used(cluster_id, +1)
        upstream = None
        try:
            try:
                woken = pool.wake(cluster_id)
            except (PlaneError, OSError) as exc:
                LOG.warning("the plane of %s did not start: %s", cluster_id, exc)
                woken = False
            target = pool.target(cluster_id) if woken else None
            if target is not None:
                try:
                    upstream = socket.create_connection(target, timeout=CONNECT_TIMEOUT)
                except OSError:
                    upstream = None
            if upstream is None or self._stopping.is_set():
                return  # as a balancer with no server behind it: accepted, then closed
            upstream.settimeout(None)
            with self._open_lock:
                self._open.update((client, upstream))
            back = threading.Thread(target=self._pump, args=(upstream, client, cluster_id), daemon=True,
                                    name=f"cks-sim-front-{cluster_id[:8]}-back")
            back.start()
            self._pump(client, upstream, cluster_id)
            back.join()
        finally:
            with self._open_lock:
                self._open.discard(client)
                if upstream is not None:
                    self._open.discard(upstream)
            _close(client)
            if upstream is not None:
                _close(upstream)
            pool.used(cluster_id, -1)

    def _pump(self, source: socket.socket, sink: socket.socket, cluster_id: str) -> None:
        """As balancer._pump, each chunk marking the cluster's plane as used."""
        try:
            while True:
                data = source.recv(BUFFER)
                if not data:
                    break
                self.pool.used(cluster_id)
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            _close(source)
            _close(sink)
