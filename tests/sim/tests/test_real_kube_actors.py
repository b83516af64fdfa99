"""The shared actors as the real backend drives them (real_kube/drive.py), over ``RestClusterApi`` on a
stand-in API server (fake_kube_api.FakeKubeApi): how many requests a pod's start takes, a boot that
meets a conflict, a boot run again after a failed request, and the timers' heap both schedulers use."""

from __future__ import annotations

import random
from typing import Any

import pytest
from cks_sim.core import DEFAULT_TIMINGS, Clock, Faults, Journal, TimerHeap
from cks_sim.kube_node_lifecycle import SILENT_CONTROLLER
from cks_sim.kube_nodes import Kubelets, node_state
from cks_sim.kube_pods import PodLifecycle
from cks_sim.real_kube import drive
from cks_sim.real_kube.api import ApiRefusal
from cks_sim.real_kube.cluster_api import RestClusterApi
from cks_sim.real_kube.drive import ActorSim, ActorTimers, EventRecorder
from fake_kube_api import FakeKubeApi

POD = "/api/v1/namespaces/default/pods/web-1"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/w1"


class TimelessSim:
    """What the actors read of the sim: every timing 0 (a timer is due at once), no fault."""

    def __init__(self) -> None:
        self.clock = Clock(0.0)
        self.timings = dict(DEFAULT_TIMINGS)
        self.faults = Faults()
        self.timeline = Journal()

    def delay(self, timing: str) -> float:
        return self.clock.real(self.timings[timing])


class Actors:
    """One worker's kubelet and its pods, as real_kube/world.py wires them, on one connection."""

    def __init__(self) -> None:
        self.server = FakeKubeApi()
        self.api = RestClusterApi(self.server)
        self.timers = ActorTimers()
        self.nodes = {"w1": node_state({"name": "w1"}, 0, lambda: "boot-0")}
        sim = ActorSim(TimelessSim(), self.timers)
        self.pods = PodLifecycle(self.api, self.nodes, EventRecorder(self.api), sim, "c1", random.Random(1), None,
                                 pods_on=self.api.pods_on, after_change=lambda: None, removed=lambda pod: None)
        self.kubelets = Kubelets(self.api, self.nodes, EventRecorder(self.api), self.pods, sim, "c1", {}, "1.35.4",
                                 reconcile=lambda: None, after_change=lambda: None, on_endpoint_change=[],
                                 heartbeats=SILENT_CONTROLLER)
        self.kubelets.register("w1")

    def bind_pod(self) -> dict[str, Any]:
        """A pod the scheduler bound to w1, as the pods' tick lists it."""
        self.server.create("/api/v1/namespaces/default/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "namespace": "default"},
            "spec": {"nodeName": "w1", "containers": [{"name": "web", "image": "registry.example.com/web:1.0"}]}})
        return self.server.get(POD)

    def started_pod(self) -> dict[str, Any]:
        self.pods.schedule_start(self.bind_pod())
        self.timers.run_due()
        return self.server.get(POD)

    def events(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.server.list("/api/v1/events") if e["reason"] == reason]


def test_a_pod_starts_with_one_read_and_one_status_write() -> None:
    actors = Actors()
    actors.pods.schedule_start(actors.bind_pod())
    before = len(actors.server.requests)
    actors.timers.run_due()
    # The kubelet's status manager: the pod read, its status patched once.
    assert actors.server.requests[before:] == [("GET", POD), ("PUT", f"{POD}/status")]
    status = actors.server.get(POD)["status"]
    assert status["phase"] == "Running"
    assert [c["status"] for c in status["conditions"] if c["type"] == "Ready"] == ["True"]
    assert status["containerStatuses"][0]["state"].keys() == {"running"}


def test_a_write_that_changes_nothing_sends_nothing() -> None:
    actors = Actors()
    pod = actors.api.read("pods", "default", actors.bind_pod()["metadata"]["name"])
    assert pod is not None
    before = len(actors.server.requests)
    assert actors.api.put("pods", pod)["metadata"]["resourceVersion"] == pod["metadata"]["resourceVersion"]
    assert len(actors.server.requests) == before


def test_a_boot_whose_lease_renewal_meets_a_conflict_boots_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # The heartbeat thread's renewal of the Lease came first: the boot's renewal is refused 409. The
    # kubelet's lease controller reads the Lease again and renews it; the boot is not run again.
    monkeypatch.setattr(drive, "RETRY", 0.0)  # a timer run again would be due at the next run_due
    actors = Actors()
    actors.started_pod()
    actors.kubelets.powered_off("w1")
    actors.kubelets.powered_on("w1", 4, 8192)
    actors.server.refuse("PUT", LEASE)
    actors.timers.run_due()
    state = actors.nodes["w1"]
    booted = state.boot_id
    assert state.kubelet_posting and booted != "boot-0"
    assert actors.server.count("PUT", LEASE) == 2  # refused, then sent again at the newer version
    assert len(actors.events("Starting")) == 1 and len(actors.events("NodeReady")) == 1
    actors.timers.run_due()  # the restarted pod's start; the boot is not run again
    assert state.boot_id == booted == actors.server.get("/api/v1/nodes/w1")["status"]["nodeInfo"]["bootID"]
    assert len(actors.events("Starting")) == 1 and len(actors.events("Rebooted")) == 1
    status = actors.server.get(POD)["status"]
    assert status["phase"] == "Running" and status["containerStatuses"][0]["restartCount"] == 1


def test_a_boot_run_again_after_a_failed_request_restarts_each_container_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drive, "RETRY", 0.0)
    actors = Actors()
    actors.started_pod()
    actors.kubelets.powered_off("w1")
    actors.kubelets.powered_on("w1", 4, 8192)
    # The API server fails the NodeReady Event, the boot's last request: the boot's timer runs again.
    create = actors.server.create

    def refuse_node_ready(path: str, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("reason") == "NodeReady" and not actors.events("NodeReady") and not refused:
            refused.append(body)
            raise ApiRefusal(503, "ServiceUnavailable", "the API server is busy")
        return create(path, body)

    refused: list[dict[str, Any]] = []
    monkeypatch.setattr(actors.server, "create", refuse_node_ready)
    actors.timers.run_due()
    assert refused and not actors.events("NodeReady")
    actors.timers.run_due()  # the boot again, then the pod's start
    actors.timers.run_due()
    assert len(actors.events("NodeReady")) == 1
    status = actors.server.get(POD)["status"]
    assert status["phase"] == "Running" and status["containerStatuses"][0]["restartCount"] == 1


def test_the_timer_heap_runs_calls_by_their_time_and_skips_the_cancelled() -> None:
    heap = TimerHeap()
    ran: list[str] = []
    later = heap.schedule(2.0, ran.append, "later")
    heap.schedule(1.0, ran.append, "first")
    cancelled = heap.schedule(1.5, ran.append, "cancelled")
    heap.schedule(1.0, ran.append, "second")  # same time: in the order scheduled
    heap.cancel(cancelled)
    heap.cancel(None)
    assert heap.pop_due(0.0) is None  # nothing due yet
    while (call := heap.pop_due(float("inf"))) is not None:
        fn, args = call
        fn(*args)
    assert ran == ["first", "second", "later"]
    heap.cancel(later)  # run already: nothing to cancel
    assert heap.next_due() is None


def test_a_broken_timer_does_not_stop_the_ones_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # An actor's unforeseen error must not end the actors' thread: the boots and pod starts due after
    # it would wait for ever (a rollout on its node, a budget on its pod).
    monkeypatch.setattr(drive, "RETRY", 0.0)
    timers = ActorTimers()
    ran: list[str] = []

    def broken() -> None:
        raise KeyError("no such node")

    def busy() -> None:
        ran.append("busy")
        if ran.count("busy") == 1:
            raise ApiRefusal(503, "ServiceUnavailable", "the API server is busy")

    timers.schedule(0.0, broken)
    timers.schedule(0.0, busy)
    timers.schedule(0.0, ran.append, "after")
    timers.run_due()
    timers.run_due()  # the busy one again; the broken one is not
    assert ran == ["busy", "after", "busy"]
