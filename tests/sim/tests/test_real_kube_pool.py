"""The real backend's budget of control planes (real_kube/pool.py): which planes start at serve time,
which idle one stops to make room for a plane asked for, and when a spec is refused at all."""

from __future__ import annotations

import pytest
from cks_sim.real_kube.pool import DORMANT, FAILED, RUNNING, Budget, PlanePool, PlaneUse, default_budget, planes_at_start, planes_to_stop
from cks_sim.real_kube.world import APISERVER_MB, CONTROLLERS_MB, too_large


def test_every_plane_starts_at_serve_time_when_they_all_fit() -> None:
    # A spec the machine runs whole behaves as before there was a budget.
    needs = [(f"c{i}", 600) for i in range(12)]
    assert planes_at_start(needs, Budget(memory_mb=18000, planes=12)) == [cluster for cluster, _memory in needs]


def test_the_first_planes_that_fit_start_at_serve_time() -> None:
    needs = [(f"c{i}", 600) for i in range(200)]
    assert planes_at_start(needs, Budget(memory_mb=18000, planes=12)) == [f"c{i}" for i in range(12)]
    assert planes_at_start(needs, Budget(memory_mb=1500, planes=12)) == ["c0", "c1"]
    # A larger cluster that does not fit leaves room for the smaller ones after it.
    assert planes_at_start([("big", 1300), ("a", 600), ("b", 600)], Budget(memory_mb=1300, planes=3)) == ["big"]
    assert planes_at_start([("a", 600), ("big", 1300), ("b", 600)], Budget(memory_mb=1300, planes=3)) == ["a", "b"]


def test_nothing_stops_while_there_is_room() -> None:
    running = [PlaneUse("a", 600, last_used=1.0)]
    assert planes_to_stop(running, 600, Budget(memory_mb=6000, planes=2), now=100.0) == []


def test_the_least_recently_used_idle_plane_stops() -> None:
    running = [PlaneUse("a", 600, last_used=50.0), PlaneUse("b", 600, last_used=10.0), PlaneUse("c", 600, last_used=30.0)]
    assert planes_to_stop(running, 600, Budget(memory_mb=6000, planes=3), now=100.0) == ["b"]
    # Memory as much as the count: a plane of three control nodes needs two idle ones stopped.
    assert planes_to_stop(running, 1500, Budget(memory_mb=2400, planes=10), now=100.0) == ["b", "c"]


def test_a_plane_in_use_or_starting_is_not_stopped() -> None:
    running = [PlaneUse("old-busy", 600, last_used=99.0, open=2), PlaneUse("starting", 600, last_used=0.0, busy=True),
               PlaneUse("idle", 600, last_used=60.0)]
    assert planes_to_stop(running, 600, Budget(memory_mb=6000, planes=3), now=100.0) == ["idle"]
    # None idle: the plane asked for waits.
    assert planes_to_stop(running[:2], 600, Budget(memory_mb=6000, planes=2), now=100.0) is None


def test_a_connection_kept_open_but_quiet_does_not_keep_its_plane() -> None:
    # A client's pool keeps its connection open between requests; it reconnects once it is cut.
    running = [PlaneUse("kept", 600, last_used=10.0, open=1), PlaneUse("talking", 600, last_used=99.0, open=1)]
    assert planes_to_stop(running, 600, Budget(memory_mb=6000, planes=2), now=100.0, quiet=5.0) == ["kept"]


def test_the_default_budget_runs_six_planes_a_core_in_the_available_memory() -> None:
    assert default_budget(18000, cores=2) == Budget(memory_mb=18000, planes=12)
    assert default_budget(18000, cores=2, planes=3) == Budget(memory_mb=18000, planes=3)


def test_a_spec_is_refused_only_when_one_cluster_plane_cannot_fit() -> None:
    one = APISERVER_MB + CONTROLLERS_MB
    assert too_large([1] * 200, available_mb=one) == ""  # they run by turns
    assert too_large([1, 3], available_mb=APISERVER_MB * 3 + CONTROLLERS_MB) == ""
    why = too_large([1, 3], available_mb=one)
    assert why == (f"--kube real runs a control plane for each cluster: the largest (3 control nodes) needs about "
                   f"{APISERVER_MB * 3 + CONTROLLERS_MB} MiB, this machine has {one} MiB available"), why


class _World:
    """What the pool drives of a RealKubeWorld: start (the first time), suspend, resume."""

    def __init__(self, name: str, calls: list[str], fail: bool = False) -> None:
        self.name, self.calls, self.fail = name, calls, fail
        self.plane: object = None
        self.on_power_change = None

    def start(self) -> None:
        self.calls.append(f"start {self.name}")
        if self.fail:
            raise RuntimeError("did not get ready")
        self.plane = object()

    def suspend(self) -> None:
        self.calls.append(f"suspend {self.name}")

    def resume(self) -> None:
        self.calls.append(f"resume {self.name}")

    def can_resume(self) -> bool:
        return True

    def stop(self) -> None:
        self.calls.append(f"stop {self.name}")


class _Timeline:
    def __init__(self) -> None:
        self.events: list[dict[str, object]] = []

    def add(self, **fields: object) -> None:
        self.events.append(fields)


class _Sim:
    def __init__(self) -> None:
        self.timeline = _Timeline()


def test_planes_asked_for_start_by_turns_and_come_back() -> None:
    calls: list[str] = []
    worlds = {name: _World(name, calls, fail=name == "broken") for name in ("a", "b", "c", "broken")}
    pool = PlanePool(_Sim(), worlds, Budget(memory_mb=6000, planes=2), {name: 600 for name in worlds}).start()
    try:
        assert pool.on_demand and sorted(calls) == ["start a", "start b"]
        assert pool.url("c").startswith("https://127.0.0.1:") and pool.url("c") != pool.url("a")
        calls.clear()
        pool.used("a")  # b is now the least recently used
        assert pool.wake("c") is True
        assert calls == ["suspend b", "start c"]
        assert [pool.state(n) for n in ("a", "b", "c")] == [RUNNING, DORMANT, RUNNING]
        calls.clear()
        assert pool.wake("b") is True and calls == ["suspend a", "resume b"]
        calls.clear()
        # A plane that fails to start is stopped and not tried again.
        with pytest.raises(RuntimeError):
            pool.wake("broken")
        assert calls[-2:] == ["start broken", "stop broken"] and pool.state("broken") == FAILED
        assert pool.wake("broken") is False
    finally:
        pool.stop()


def test_a_spec_that_fits_starts_every_plane_and_names_them() -> None:
    calls: list[str] = []
    worlds = {name: _World(name, calls) for name in ("a", "b")}
    pool = PlanePool(_Sim(), worlds, Budget(memory_mb=6000, planes=12), {name: 600 for name in worlds}).start()
    assert not pool.on_demand and sorted(calls) == ["start a", "start b"]
    assert all(w.on_power_change is None for w in worlds.values())
    pool.stop()
