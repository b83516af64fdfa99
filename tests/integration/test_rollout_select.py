"""rollout_select: one worker pool (the workers in the affinity group workers-soft) and the control
node are selected. Only the pool's workers restart, in plan order (by name) and at most
min(max_unavailable, all workers - 1) at a time; the single control node is still not rolled (it
cannot lose a node, selected or not); the workers left out stay out of date in the report and in
cks_node_outdated's status, and are named as not selected."""

from __future__ import annotations

import time
from typing import Any

import pytest
import rollout_helpers as rh
from helpers import run_module

pytestmark = pytest.mark.timeout(900)

POOL = "[?node_type=='control' || contains(affinity_groups, 'workers-soft')]"


def test_select_one_pool_keeps_order_clamp_and_quorum_and_reports_the_rest() -> None:
    with rh.running_rollout_sim("rollout_pools.yml", max_unavailable={"worker": 2}) as sim:
        (control,) = rh.names(sim, "control")
        workers = sorted(rh.names(sim, "worker"))
        vms = rh.vms(sim)
        pool = [w for w in workers if "workers-soft" in vms[w]["affinity_groups"]]
        others = [w for w in workers if w not in pool]
        assert len(pool) == 3 and pool != workers[:3]
        since = time.time()
        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(
            sim, rollout_node_offerings={"worker": "cks-large"}, rollout_max_unavailable=2, rollout_select=POOL))
        assert run.rc == 0, run.explain()
        items = sim.timeline(since)

        # Only the pool, in name order, 2 at a time (the clamp counts every worker: min(2, 6 - 1)).
        assert sorted(rh.restarted(items)) == pool
        assert rh.batches_seen(items, workers) == [pool[:2], pool[2:]]
        assert rh.events(items, "stop_requested", control) == []
        for worker in others:
            assert rh.events(items, "cordoned", worker) == [] and rh.events(items, "stop_requested", worker) == []
        vms = rh.vms(sim)
        assert {vms[w]["offering"] for w in pool} == {"cks-large"}
        assert {vms[w]["offering"] for w in others} == {"cks-medium"}

        # The left-out workers are still out of date, everywhere the operator looks.
        report = run.report
        assert report is not None
        assert report["selected"] == [control] + pool
        assert report["not_selected"] == others
        assert report["out_of_date_after"]["worker"] == {"nodes": 6, "out_of_date": 3}
        assert sorted(report["still_out_of_date"]) == sorted(others + [control])
        assert control in report["not_rolled"]["control"]
        assert report["nodes_not_reached"] == []
        status = sim_status(sim)
        assert status["workernodesoutofdate"] == 3 and status["controlnodesoutofdate"] == 1
        assert [n for b in status["plan"] for n in b["nodes"]] == others
        assert f"Not selected (rollout_select), still out of date: {', '.join(others)}" in run.stdout
        assert rh.ClusterRecord(sim).holder() is None
        rh.assert_no_invariant_broken(sim)


def sim_status(sim: rh.ClusterSim) -> dict[str, Any]:
    """What the status playbook reads (cks_node_outdated), run as a module against the sim."""
    result = run_module("cks_node_outdated", dict(sim.connection_args(), cluster=sim.env["cluster_name"]))
    assert result["failed"] is False, result.get("msg")
    return result
