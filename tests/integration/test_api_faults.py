"""Whole rollouts (``ansible-playbook playbooks/rollout.yml``) against cks-sim with injected faults.

Every rollout here must end in one of two ways: success, or a clean stop whose last error (in the
rollout record, what ``status.yml`` shows, and in the report) says what went wrong. Either way no
node is lost, no PodDisruptionBudget is broken and the lock is not left held; then the faults are
cleared and a rerun of the same rollout converges: every node up to date, Running, Ready,
schedulable and unannotated, the lock free, and ``GET /invariants`` empty.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Optional

import pytest
from in_process_sims import WORKERS_LARGER, named_worker, rerun_converges, stopped_cleanly

SPEC = "faults_small.yml"


def worker_names(sim: Any) -> list[str]:
    return sim.names("worker")


def vm_name(sim: Any, node: str) -> str:
    return sim.view().node(node).vm_name


@pytest.mark.parametrize("mode", ["5xx", "drop"])
def test_transient_errors_on_both_apis(rollout_sim: Any, mode: str) -> None:
    sim = rollout_sim(SPEC)
    sim.fault(kind="transient", api="both", rate=0.05, mode=mode)
    run = sim.rollout(**WORKERS_LARGER)
    # Reads are retried; a change whose answer was lost is re-read, never blindly repeated. The
    # rollout either rides it out or stops cleanly naming the failed call.
    if run.rc != 0:
        last_error = stopped_cleanly(sim, run)
        assert any(word in last_error.lower() for word in ("503", "unavailable", "connection", "aborted",
                                                           "reset", "disconnected")), last_error
    else:
        assert sim.invariants() == []
    transient = [c for c in sim.calls() if c.get("dropped") or c.get("status") == 503]
    assert transient, "the fault never fired: the test proves nothing"
    rerun_converges(sim, **WORKERS_LARGER)


def test_slow_apis(rollout_sim: Any) -> None:
    sim = rollout_sim(SPEC)
    sim.fault(kind="latency", api="both", seconds=0.05)
    run = sim.rollout(**WORKERS_LARGER)
    assert run.rc == 0, run.output
    sim.assert_converged()


def test_stop_job_fails(rollout_sim: Any) -> None:
    sim = rollout_sim(SPEC)
    sim.fault(kind="job_failure", command="stopVirtualMachine", code=530,
              errortext="Unable to stop the VM: the hypervisor did not answer", count=1)
    run = sim.rollout(**WORKERS_LARGER)
    last_error = stopped_cleanly(sim, run)
    node = named_worker(sim, last_error)
    assert "stop" in last_error.lower(), last_error
    assert "hypervisor did not answer" in last_error, last_error
    # The node whose stop failed is still Running: release judged it never went down and uncordoned it.
    assert sim.view().node(node).vm_state == "Running"
    rerun_converges(sim, **WORKERS_LARGER)


def test_start_fails_with_insufficient_capacity(rollout_sim: Any) -> None:
    sim = rollout_sim(SPEC)
    sim.fault(kind="start_capacity", count=1)
    # Put-back off: the node is left as the refused start found it (the put-back, on by default, is
    # test_rollout_placement's).
    run = sim.rollout(**WORKERS_LARGER, rollout_put_back_on_refusal=False)
    last_error = stopped_cleanly(sim, run)
    node = named_worker(sim, last_error)
    assert "533" in last_error, last_error
    # The VM is left Stopped with its new offering and its node cordoned: the rerun starts it first.
    status = sim.status()
    record = next(n for n in status["nodes"] if n["name"] == node)
    assert record["vm_state"] == "Stopped" and record["cordoned"] and record["annotated"], record
    assert status["plan"][0]["nodes"][0] == node
    rerun_converges(sim, **WORKERS_LARGER)


def test_node_never_ready(rollout_sim: Any) -> None:
    sim = rollout_sim(SPEC)
    for worker in sim.names("worker"):
        sim.fault(kind="never_ready", node=worker)
    run = sim.rollout(rollout_batch_timeout=15, **WORKERS_LARGER)
    last_error = stopped_cleanly(sim, run)
    node = [n for n in sim.names("worker") if n in last_error.lower()][0]
    assert "ready" in last_error.lower(), last_error
    # The node came back NotReady: it stays cordoned and annotated for the rerun.
    record = next(n for n in sim.status()["nodes"] if n["name"] == node)
    assert record["cordoned"] and record["annotated"] and not record["ready"], record
    # Clearing the fault is not enough for the sim's kubelet: it needs another boot, which the
    # rerun gives it (the annotated node goes first and is cycled again).
    rerun_converges(sim, **WORKERS_LARGER)


def test_stale_ready_is_not_taken_for_the_new_boot(rollout_sim: Any) -> None:
    sim = rollout_sim(SPEC)
    before = {n["name"]: n["boot_id"] for n in sim.status()["nodes"]}
    for worker in sim.names("worker"):
        sim.fault(kind="stale_ready", node=worker, seconds=60)
    run = sim.rollout(**WORKERS_LARGER)
    assert run.rc == 0, run.output
    status = sim.assert_converged()
    for node in status["nodes"]:
        if node["node_type"] == "worker":
            assert node["boot_id"] and node["boot_id"] != before[node["name"]], node
            result = next(n for n in run.report["nodes"] if n["name"] == node["name"])
            assert [s["name"] for s in result["steps"]][-2:] == ["verify", "uncordon"], result


def test_drain_blocked_by_a_pdb(rollout_sim: Any) -> None:
    sim = rollout_sim(SPEC)
    sim.fault(kind="pdb_block", namespace="default", name="web")
    run = sim.rollout(rollout_batch_timeout=8, **WORKERS_LARGER)
    last_error = stopped_cleanly(sim, run)
    assert "web" in last_error and ("disruption" in last_error.lower() or "pdb" in last_error.lower()), last_error
    # The drain never stopped a VM: every node is Running and Ready, none left cordoned.
    status = sim.status()
    for record in status["nodes"]:
        assert record["vm_state"] == "Running" and record["ready"] and not record["cordoned"], record
    assert not [e for e in sim.timeline() if e.get("event") == "stop_requested"]
    rerun_converges(sim, **WORKERS_LARGER)


@pytest.mark.parametrize("victim_at", ["next", "last"])
def test_etcd_member_dies_while_a_control_node_is_cycled(rollout_sim: Any, victim_at: str) -> None:
    sim = rollout_sim("faults_etcd.yml")
    variables = {"rollout_node_offerings": {"control": "cks-large"}}
    controls = sim.names("control")
    run_box: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: run_box.setdefault("run", sim.rollout(**variables)))
    worker.start()
    # Wait until the first control node is on its way down, then kill the etcd member of another
    # one: with 3 members, one stopping by plan and one dead, etcd has lost its quorum until the
    # first one is back.
    deadline = time.monotonic() + 300
    cycled: Optional[str] = None
    while cycled is None and time.monotonic() < deadline and worker.is_alive():
        stops = [e for e in sim.timeline() if e.get("event") == "stop_requested"]
        if stops:
            cycled = stops[0]["node"]
        time.sleep(0.05)
    assert cycled in controls, "no control node was stopped"
    order = [b["nodes"][0] for b in sim.status()["plan"]]
    assert order[0] == cycled and len(order) == 3, order
    victim = order[1] if victim_at == "next" else order[2]
    sim.fault(kind="etcd_kill", vm=vm_name(sim, victim))
    worker.join(600)
    run = run_box["run"]

    def killed(violation: dict[str, Any]) -> bool:
        # The quorum the injected kill itself lost (one member stopped by plan, one killed).
        return violation.get("kind") == "etcd_quorum_lost" and violation.get("cause") == f"{victim} killed"

    if victim_at == "next":
        # The dead member's node is the next batch: the others hold the quorum, so it is cycled
        # (its VM's restart restarts the member) and the rollout succeeds.
        assert run.rc == 0, run.output
        sim.assert_converged(killed)
    else:
        # The next control node cannot go: the quorum preflight refuses it, naming the dead member.
        last_error = stopped_cleanly(sim, run, killed)
        assert "quorum" in last_error and victim in last_error and order[1] in last_error, last_error
        assert sim.view().node(order[1]).vm_state == "Running"
        # The rerun plans the node of the dead member first (etcd reports it unhealthy): the
        # others hold the quorum while it restarts, and its restart brings the member back.
        since = time.time()
        rerun_converges(sim, killed, **variables)
        restarted = [e["node"] for e in sim.timeline() if e.get("event") == "stop_requested" and e["t"] >= since]
        assert restarted[:2] == [victim, order[1]], restarted
    members = sim.server.sim.etcd.endpoints(sim.cluster_id)["members"]
    assert all(m["running"] for m in members), members
