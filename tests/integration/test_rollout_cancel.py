"""Cancel: cancel.yml while the rollout runs stops it between two batches; a cancel asked for
after the lock was taken, while the settings are being stored, stops it before its first batch."""

from __future__ import annotations

import time

import pytest
import rollout_helpers as rh
from cks_sim.harness import wait_until
from helpers import run_module

pytestmark = pytest.mark.timeout(900)


def test_cancel_between_batches() -> None:
    with rh.running_rollout_sim("rollout_small.yml") as sim:
        workers = rh.names(sim, "worker")
        # Evicted pods take 20 s (real) to go: batch 1 is still running when the cancel lands.
        sim.fault(kind="slow_drain", seconds=2000)
        since = time.time()
        rollout = rh.PlaybookProcess(sim, "rollout.yml", rh.rollout_vars(
            sim, rollout_node_offerings={"worker": "cks-large"}, rollout_run_id="run-to-cancel"))
        wait_until(lambda: rh.events(sim.timeline(since), "cordoned"), 300, "batch 1 to start", interval=rh.ADMIN_POLL)
        cancel = rh.run_playbook(sim, "cancel.yml", {"rollout_cluster": sim.env["cluster_name"]})
        assert cancel.rc == 0, cancel.explain()
        assert rh.ClusterRecord(sim).data()["cancel"] == "true"
        run = rollout.wait()
        assert run.rc == 0, run.explain()
        items = sim.timeline(since)

        # Batch 1 finished, no batch started after the cancel.
        assert rh.restarted(items) == workers[:1]
        vms = rh.vms(sim)
        assert vms[workers[0]]["offering"] == "cks-large"
        assert {vms[w]["offering"] for w in workers[1:]} == {"cks-medium"}
        assert all(rh.node_settled(sim, n) for n in rh.kube_nodes(sim).values())
        record = rh.ClusterRecord(sim)
        assert record.holder() is None
        assert "cancel" in record.data()["lastError"]
        assert run.report is not None and run.report["cancelled"] is True
        assert run.report["nodes_not_reached"] == workers[1:]
        # How it ended leads the summary and the status, the health beside it (an operator reads the outcome first).
        assert run.report["result"] == "cancelled before batch 2 of 3"
        assert "cancelled before batch 2 of 3; cluster health: Running" in run.stdout, run.explain()
        status = rh.run_playbook(sim, "status.yml", {"rollout_cluster": sim.env["cluster_name"]})
        assert status.rc == 0, status.explain()
        assert "Last rollout: cancelled before batch 2 of 3; cluster health: Running" in status.stdout, status.explain()
        rh.assert_no_invariant_broken(sim)


def test_cancel_while_the_settings_are_stored_stops_before_the_first_batch() -> None:
    with rh.running_rollout_sim("rollout_small.yml") as sim:
        env = sim.module_env()
        cluster = sim.env["cluster_name"]
        # The rollout's run has taken the lock; before its settings are stored, a cancel comes in.
        taken = run_module("cks_node_settings", {"cluster": cluster, "rollout": True, "lock_holder": "run-r"}, env=env)
        assert not taken["failed"], taken
        cancelled = run_module("cks_node_settings", {"cluster": cluster, "cancel_rollout": True}, env=env)
        assert not cancelled["failed"] and cancelled["changed"], cancelled
        since = time.time()
        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(
            sim, rollout_node_offerings={"worker": "cks-large"}, rollout_run_id="run-r"))
        assert run.rc == 0, run.explain()
        assert rh.events(sim.timeline(since), "stop_requested") == []
        assert rh.events(sim.timeline(since), "cordoned") == []
        record = rh.ClusterRecord(sim)
        assert record.holder() is None
        assert "cancel" in record.data()["lastError"]
        # The settings were stored all the same: the workers are out of date, for the next rollout.
        assert record.settings()["worker"]["offering_id"] != record.settings()["control"]["offering_id"]
        rh.assert_no_invariant_broken(sim)
