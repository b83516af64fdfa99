"""The cycle under the simulator's faults: a stale Ready, a foreign cordon, a PDB that never
allows an eviction, a start refused for capacity (533)."""

from __future__ import annotations

from typing import Any, Callable

from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ROLLOUT_ANNOTATION
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import STOP_ANNOTATION
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.drain import DrainOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.drainer import Drainer
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline

from helpers import ClusterSim, load_raw_spec


def node_events(sim: ClusterSim, node: str) -> list[dict[str, Any]]:
    return [e for e in sim.timeline() if e.get("node") == node]


def index(events: list[dict[str, Any]], **match: Any) -> int:
    return next(i for i, e in enumerate(events) if all(e.get(k) == v for k, v in match.items()))


def large(sim: ClusterSim) -> Settings:
    return Settings(worker=TypeSettings(sim.offering_id("cks-large"), None, None))


def test_a_stale_ready_with_the_old_boot_id_is_not_accepted(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    node = sim.names("worker")[0]
    old_boot = sim.view().node(node).boot_id
    # After the start the node shows Ready=True with its old boot ID for 200 simulated seconds.
    sim.fault(kind="stale_ready", node=node, seconds=200)

    result = sim.cycle([node], large(sim))

    assert result.error is None, result.error
    verify = next(s for s in result.results[0].steps if s.name == "verify")
    new_boot = sim.view().node(node).boot_id
    assert new_boot != old_boot and new_boot in verify.detail
    events = node_events(sim, node)
    started = index(events, event="start_requested")
    booted = index(events, event="boot")
    uncordoned = index(events, event="uncordoned")
    # Ready never left True (the stale one), yet the uncordon waited for the new boot.
    assert not any(e.get("event") == "notready" for e in events[started:booted])
    assert started < booted < uncordoned
    assert sim.invariants() == []


def test_a_node_cordoned_by_someone_else_stays_cordoned(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    node = sim.names("worker")[0]
    sim.fault(kind="foreign_cordon", node=node)
    assert sim.view().node(node).cordoned_by_others

    result = sim.cycle([node], large(sim))

    assert result.error is None, result.error
    outcome = result.results[0]
    assert outcome.cordoned_by_others
    steps = {s.name: s.outcome for s in outcome.steps}
    assert steps["annotate"] == steps["cordon"] == steps["uncordon"] == "skipped"
    assert steps["drain"] == steps["stop"] == steps["start"] == steps["verify"] == "ok"
    after = sim.view().node(node)
    assert after.offering_name == "cks-large" and after.ready
    assert after.unschedulable and not after.annotated and STOP_ANNOTATION not in after.annotations
    assert not any(e.get("event") == "annotated" for e in node_events(sim, node))

    released = sim.release()
    assert node in released.cordoned_by_others
    assert released.uncordoned == [] and released.left_cordoned == []
    assert sim.view().node(node).unschedulable
    assert sim.invariants() == []


def node_with_pod(sim: ClusterSim, prefix: str) -> str:
    for name in sim.names("worker"):
        if any(p["metadata"]["name"].startswith(prefix) for p in sim.kube.list_pods(name)):
            return name
    raise AssertionError(f"no worker runs a {prefix} pod")


def test_a_pdb_that_never_allows_an_eviction_fails_the_drain(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    node = node_with_pod(sim, "web-")
    sim.fault(kind="pdb_block", namespace="default", name="web")

    result = sim.cycle([node], large(sim), batch_timeout=3)

    assert result.error is not None
    assert result.error.step == "drain" and result.error.node == node
    assert "PodDisruptionBudget default/web" in result.error.msg and "default/web-" in result.error.msg
    left = result.results[0].error["pods_left"]
    assert left and all(p["pdb"] == ["default/web"] for p in left)
    # The node never went down.
    assert not [c for c in sim.calls() if c.get("command") == "stopVirtualMachine"]
    stuck = sim.view().node(node)
    assert stuck.annotated and stuck.unschedulable and STOP_ANNOTATION not in stuck.annotations
    assert sim.invariants() == []


def test_a_start_refused_for_capacity_fails_at_the_start(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    node = sim.names("worker")[0]
    vm_name = sim.view().node(node).vm_name
    sim.fault(kind="start_capacity", vm=vm_name, count=1)

    # Put-back off: the node stays as the refused start left it (the put-back is test_rollout_placement's).
    result = sim.cycle([node], large(sim), options={"put_back_on_refusal": False})

    assert result.error is not None and result.error.step == "start"
    assert "533" in result.error.msg and "startVirtualMachine" in result.error.msg
    assert result.results[0].error["errorcode"] == 533
    steps = {s.name: s.outcome for s in result.results[0].steps}
    assert steps["stop"] == steps["change_offering"] == "ok" and steps["start"] == "failed"
    assert "verify" not in steps and "uncordon" not in steps
    after = sim.view().node(node)
    assert after.vm_state == "Stopped" and after.annotated and after.unschedulable
    assert STOP_ANNOTATION in after.annotations
    assert sim.invariants() == []


def test_a_rerun_after_a_failed_start_resumes_the_stopped_node(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    node = sim.names("worker")[0]
    before = sim.view().node(node)
    sim.fault(kind="start_capacity", vm=before.vm_name, count=1)
    # Put-back off, so that the node is left Stopped for the rerun to resume.
    assert sim.cycle([node], large(sim), options={"put_back_on_refusal": False}).error is not None

    result = sim.cycle([node], large(sim))

    assert result.error is None, result.error
    steps = {s.name: s.outcome for s in result.results[0].steps}
    # Resumed: already annotated and cordoned, VM already stopped, offering already changed.
    assert steps["annotate"] == steps["cordon"] == steps["stop"] == steps["change_offering"] == "skipped"
    assert steps["start"] == steps["verify"] == steps["uncordon"] == "ok"
    after = sim.view().node(node)
    assert after.running and after.ready and not after.unschedulable and not after.annotated
    assert after.boot_id != before.boot_id and after.offering_name == "cks-large"
    assert ROLLOUT_ANNOTATION not in after.annotations
    assert sim.invariants() == []


def test_a_rerun_first_uncordons_the_nodes_that_came_back(cycle_sim: Callable[..., ClusterSim]) -> None:
    """A killed rollout left two restarted workers cordoned. The rerun's next batch takes the other
    two: unless the two that are back go into service first, the pods it evicts have nowhere to go
    and the PodDisruptionBudgets block the drain until the deadline (found by the kill-anywhere trials)."""
    raw = load_raw_spec("small.yml")
    raw["invariants"] = {"max_unavailable": {"control": 1, "etcd": 1, "worker": 2}}
    sim = cycle_sim(raw)
    w0, w1, w2, w3 = sim.names("worker")
    for node in (w0, w1):
        # As the killed run left them: annotated with the boot ID from before their restart,
        # cordoned, and drained (their pods now run on the other two).
        sim.kube.patch_node(node, {"metadata": {"annotations": {ROLLOUT_ANNOTATION: "boot-id-before-the-restart",
                                                                STOP_ANNOTATION: "2026-12-01T00:00:00Z"}},
                                   "spec": {"unschedulable": True}})
    drainer = Drainer(sim.kube, DrainOptions(delete_emptydir_data=True, eviction_retry_interval=0.05,
                                             poll_interval=0.05))
    for node in (w0, w1):
        drainer.drain(node, Deadline(60))
    setup_calls = len(sim.calls())

    result = sim.cycle([w2, w3], large(sim), batch_timeout=60)

    assert result.error is None, result.error
    assert [u["node"] for u in result.uncordoned] == [w0, w1]
    assert all("new boot ID" in u["why"] for u in result.uncordoned)
    view = sim.view()
    for node in (w0, w1):
        assert not view.node(node).unschedulable and not view.node(node).annotated
        assert STOP_ANNOTATION not in view.node(node).annotations
        assert not [e for e in node_events(sim, node) if e.get("event") == "stop_requested"]
    # Back into service before the first eviction of the batch.
    calls = sim.calls()[setup_calls:]
    first_eviction = index(calls, verb="create", resource="pods/eviction")
    uncordons = [i for i, c in enumerate(calls) if c.get("verb") == "patch" and c.get("name") in (w0, w1)]
    assert len(uncordons) == 2 and max(uncordons) < first_eviction
    assert sim.invariants() == []
