"""Validation between batches, through the whole playbook (``playbooks/rollout.yml``) against cks-sim.

After each batch, inside the batch's own cks_node_cycle run: every node Ready, the API server's
/readyz OK and etcd healthy, N consecutive rounds some seconds apart. Passing, it is seen as N
/readyz reads per batch in the simulator's call log, each a lower bound of the interval after
the previous one, between the batch's last uncordon and the next batch's first cordon. Failing
(/readyz answers 500), it stops the rollout after that batch like a failed batch: the error says
what is unhealthy, release runs (and takes the pending taint off the nodes never reached), no
later batch starts, and the rerun converges once it is fixed.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.marks import PENDING_TAINT_KEY

pytestmark = pytest.mark.timeout(900)

SPEC = "rollout_small.yml"  # 1 stacked control node (it cannot lose a node), 3 workers: 3 batches
WORKERS_LARGER: dict[str, Any] = {"rollout_node_offerings": {"worker": "cks-large"}, "rollout_max_unavailable": 1}


def readyz_reads(sim: Any, since: float) -> list[dict[str, Any]]:
    """The API server /readyz reads (not /readyz/etcd) of the rollout, from the sim's call log."""
    return [c for c in sim.calls() if c.get("api") == "kubernetes" and c.get("path", "").endswith("/readyz")
            and c["t"] >= since]


def node_events(sim: Any, since: float, event: str) -> list[dict[str, Any]]:
    return [e for e in sim.timeline() if e["event"] == event and e["t"] >= since]


def test_two_rounds_a_second_apart_after_every_batch(rollout_sim: Any) -> None:
    sim = rollout_sim(SPEC)
    workers = sim.names("worker")
    since = time.time()
    run = sim.rollout(rollout_validate_count=2, rollout_validate_interval=1, **WORKERS_LARGER)
    assert run.rc == 0, run.output
    sim.assert_converged()

    reads = readyz_reads(sim, since)
    cordons = node_events(sim, since, "cordoned")
    uncordons = node_events(sim, since, "uncordoned")
    assert [e["node"] for e in cordons] == [e["node"] for e in uncordons] and len(cordons) == len(workers) == 3
    assert len(reads) == 2 * len(workers), [r["t"] for r in reads]
    for batch, (uncordoned, (first, second)) in enumerate(zip(uncordons, zip(reads[::2], reads[1::2]))):
        # The batch's node back in service, then its two rounds, then the next batch.
        assert uncordoned["t"] <= first["t"] and second["t"] - first["t"] >= 1.0
        if batch + 1 < len(cordons):
            assert second["t"] <= cordons[batch + 1]["t"]
        assert first["status"] == second["status"] == 200
    for batch in run.report["batches"]:
        assert batch["validation"]["ok"] and batch["validation"]["passes"] == 2, batch
    assert "validated (2/2 passes, 2 rounds)" in run.stdout


def test_readyz_failing_stops_the_rollout_after_the_batch_then_the_rerun_converges(rollout_sim: Any) -> None:
    sim = rollout_sim(SPEC)
    since = time.time()
    sim.fault(kind="kube_error", verb="get", path="/readyz", status=500,
              message="[-]etcd failed: reason withheld\nreadyz check failed")
    # With the pending taint as well: release takes it off the nodes the stopped rollout never reached.
    run = sim.rollout(rollout_validate_interval=0.5, rollout_validate_timeout=2, rollout_taint_pending=True,
                      **WORKERS_LARGER)
    assert run.rc != 0, run.output

    # Only the first batch ran: its node went down and came back, nobody else was touched.
    stopped = [e["node"] for e in node_events(sim, since, "stop_requested")]
    assert len(stopped) == 1, stopped
    first = stopped[0]
    assert [e["node"] for e in node_events(sim, since, "cordoned")] == [first]
    # Validation tried again until its timeout, then gave up.
    assert len(readyz_reads(sim, since)) >= 2

    status = sim.status()
    last_error = status["last_error"]
    assert f"node {first}: validate failed" in last_error, last_error
    assert "did not validate within 2s" in last_error and "/readyz HTTP 500" in last_error, last_error
    # Release ran: lock free, the batch's node back in service and up to date, the report written.
    assert status["lock_holder"] is None
    node = sim.view().node(first)
    assert node.offering_name == "cks-large" and node.ready and not node.unschedulable and not node.annotated
    assert run.report is not None and run.report["last_error"] == last_error
    assert [b["outcome"] for b in run.report["batches"]] == ["failed"]
    assert not run.report["batches"][0]["validation"]["ok"]
    assert len(run.report["nodes_not_reached"]) == 2
    assert sorted(run.report["pending_taint_removed"]) == sorted(run.report["nodes_not_reached"])
    assert not [n for n in sim.kube.list_nodes()
                if any(t["key"] == PENDING_TAINT_KEY for t in n["spec"].get("taints") or [])]
    assert sim.invariants() == []

    sim.clear_faults()
    rerun_since = time.time()
    rerun = sim.rollout(rollout_validate_interval=0.5, rollout_validate_timeout=2, **WORKERS_LARGER)
    assert rerun.rc == 0, rerun.output
    status = sim.assert_converged()
    assert status["last_error"] is None
    restarted = [e["node"] for e in node_events(sim, rerun_since, "stop_requested")]
    assert sorted(restarted) == sorted(set(sim.names("worker")) - {first})
