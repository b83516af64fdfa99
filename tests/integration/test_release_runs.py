"""release after success, a drain failure, a start failure, a cancel and an early exception: each
run twice, the same end state both times (nodes, record, lock)."""

from __future__ import annotations

from typing import Any, Callable

from helpers import ClusterSim

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import StepFailed
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ROLLOUT_ANNOTATION, STOP_ANNOTATION
from ansible_collections.cloudstack.cks.plugins.module_utils._services.cycle import node_cycle
from ansible_collections.cloudstack.cks.plugins.module_utils._services.session import ClusterSession
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import Lock, RecordStore


def end_state(sim: ClusterSim) -> dict[str, Any]:
    """What release is responsible for: cordons, annotations, the record, the lock holder."""
    view = sim.view()
    record = RecordStore(sim.kube).read()
    lock = Lock(sim.kube, "observer").read()
    return {
        "nodes": {n.name: (n.unschedulable, n.rollout_boot_id, STOP_ANNOTATION in n.annotations)
                  for n in view.nodes if n.is_kubernetes_node},
        "outcome": record.outcome if record else None,
        "last_error": record.last_error if record else None,
        "lock_holder": lock.holder if lock else None,
    }


def taken_lock(sim: ClusterSim, holder: str = "run-1") -> Lock:
    lock = Lock(sim.kube, holder_identity=holder, duration_seconds=300)
    lock.acquire()
    return lock


def large(sim: ClusterSim) -> Settings:
    return Settings(worker=TypeSettings(sim.offering_id("cks-large"), None, None))


def test_release_after_success_twice(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    lock = taken_lock(sim)
    cs_cores = sim.view().recorded_cores
    node = sim.names("worker")[0]
    assert sim.cycle([node], large(sim), lock=lock).error is None

    first = sim.release(lock=lock)
    state = end_state(sim)
    second = sim.release(lock=lock)

    assert end_state(sim) == state
    assert first.outcome == second.outcome == "Running"
    assert first.last_error is None and state["last_error"] is None and state["outcome"] == "Running"
    assert first.lock_released and not second.lock_released and state["lock_holder"] is None
    assert first.uncordoned == [] and first.left_cordoned == []
    assert not second.changed
    # One worker went from 2 to 4 cores: the recount sees it, CloudStack's own number does not.
    view = sim.view()
    assert first.cores == sum(n.cpu for n in view.nodes) == 7 * 2 + 2
    assert first.cloudstack_cores == cs_cores
    assert sim.invariants() == []


def node_with_pod(sim: ClusterSim, prefix: str) -> str:
    for name in sim.names("worker"):
        if any(p["metadata"]["name"].startswith(prefix) for p in sim.kube.list_pods(name)):
            return name
    raise AssertionError(f"no worker runs a {prefix} pod")


def test_release_after_a_drain_failure_twice(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    lock = taken_lock(sim)
    node = node_with_pod(sim, "web-")
    sim.fault(kind="pdb_block", namespace="default", name="web")
    failed = sim.cycle([node], large(sim), lock=lock, batch_timeout=3)
    assert failed.error is not None and failed.error.step == "drain"

    first = sim.release(last_error=failed.error.msg, lock=lock)
    state = end_state(sim)
    second = sim.release(last_error=failed.error.msg, lock=lock)

    assert end_state(sim) == state
    # It never went down: back into service, annotation gone.
    assert [u["node"] for u in first.uncordoned] == [node] and "never went down" in first.uncordoned[0]["why"]
    assert second.uncordoned == [] and not second.changed
    assert state["nodes"][node] == (False, None, False)
    assert "default/web" in state["last_error"] and state["outcome"] == "Running"
    assert state["lock_holder"] is None
    assert sim.invariants() == []


def test_release_after_a_start_failure_twice(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    lock = taken_lock(sim)
    node = sim.names("worker")[0]
    sim.fault(kind="start_capacity", vm=sim.view().node(node).vm_name, count=1)
    # Put-back off: the node is left Stopped, which is what the release has to judge here.
    failed = sim.cycle([node], large(sim), lock=lock, options={"put_back_on_refusal": False})
    assert failed.error is not None and failed.error.step == "start"

    first = sim.release(last_error=failed.error.msg, lock=lock)
    state = end_state(sim)
    second = sim.release(last_error=failed.error.msg, lock=lock)

    assert end_state(sim) == state
    assert first.uncordoned == [] and [x["node"] for x in first.left_cordoned] == [node]
    assert "Stopped" in first.left_cordoned[0]["why"]
    assert first.outcome == second.outcome == "Alert" and state["outcome"] == "Alert"
    assert "533" in state["last_error"] and f"left cordoned: {node}" in state["last_error"]
    unschedulable, boot_id, stop_sent = state["nodes"][node]
    assert unschedulable and boot_id and stop_sent
    assert state["lock_holder"] is None and not second.changed

    # The next rollout resumes the node; its release then clears the error.
    lock = taken_lock(sim, "run-2")
    assert sim.cycle([node], large(sim), lock=lock).error is None
    cleared = sim.release(lock=lock)
    assert cleared.outcome == "Running" and cleared.last_error is None
    assert end_state(sim)["nodes"][node] == (False, None, False)
    assert sim.invariants() == []


def test_release_after_a_cancel_twice(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    lock = taken_lock(sim)
    first_worker, second_worker = sim.names("worker")[:2]
    assert sim.cycle([first_worker], large(sim), lock=lock).error is None
    RecordStore(sim.kube).set_cancel()

    # The next batch, as cks_node_cycle runs it, refuses to start once the flag is set.
    params = {"cluster": sim.cluster_id, "nodes": [second_worker], "settings": large(sim).to_dict(),
              "lock_holder": "run-1", "poll_interval": 0.05}
    try:
        node_cycle(ClusterSession.of(params, sim.cloud, sim.kube), params)
        raise AssertionError("a batch started after the cancel")
    except StepFailed as exc:
        assert exc.details.get("cancelled") is True and "cancel" in exc.msg
    cancelled = "cancelled by the operator (cancel_rollout) before batch 2; run the rollout again to resume"

    first = sim.release(last_error=cancelled, lock=lock)
    state = end_state(sim)
    second = sim.release(last_error=cancelled, lock=lock)

    assert end_state(sim) == state
    assert first.outcome == second.outcome == "Running" and state["outcome"] == "Running"
    assert state["last_error"] == cancelled
    assert first.lock_released and not second.lock_released and state["lock_holder"] is None
    assert first.uncordoned == [] == first.left_cordoned and not second.changed
    assert all(not cordoned and boot_id is None for cordoned, boot_id, _stop in state["nodes"].values())
    # The batch that never started left its node as it was: still out of date, for the rerun.
    view = sim.view()
    assert view.node(first_worker).offering_id == sim.offering_id("cks-large")
    assert view.node(second_worker).offering_id != sim.offering_id("cks-large")
    assert not [c for c in sim.calls() if c.get("command") == "stopVirtualMachine"
                and c.get("params", {}).get("id") == view.node(second_worker).vm_id]
    assert sim.invariants() == []


def test_release_after_an_early_exception_twice(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    lock = taken_lock(sim)
    skipped = ["control nodes not restarted: demo-control-x (offering cks-medium -> cks-large): a single control node"]

    first = sim.release(last_error="the plan could not be made: boom", skipped=skipped, lock=lock)
    state = end_state(sim)
    second = sim.release(last_error="the plan could not be made: boom", skipped=skipped, lock=lock)

    assert end_state(sim) == state
    assert state["last_error"] == f"the plan could not be made: boom; {skipped[0]}"
    assert state["outcome"] == "Running" and state["lock_holder"] is None
    assert first.lock_released and not second.lock_released and not second.changed
    assert all(not cordoned for cordoned, _boot_id, _stop_sent in state["nodes"].values())
    assert sim.invariants() == []


def test_release_never_touches_a_lock_held_by_another_rollout(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    taken_lock(sim, "someone-else")
    mine = Lock(sim.kube, holder_identity="run-1")
    result = sim.release(lock=mine)
    assert not result.lock_released
    assert end_state(sim)["lock_holder"] == "someone-else"
    assert sim.invariants() == []


def test_a_lost_lock_stops_the_batch_before_anything_changes(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    taken_lock(sim, "someone-else")
    node = sim.names("worker")[0]
    result = sim.cycle([node], large(sim), lock=Lock(sim.kube, holder_identity="run-1"))
    assert result.error is not None and result.error.step == "preflight"
    assert "someone-else" in result.error.msg
    assert ROLLOUT_ANNOTATION not in sim.view().node(node).annotations
    assert not [c for c in sim.calls() if c.get("command") == "stopVirtualMachine"]
    assert sim.invariants() == []
