"""Canary: with rollout_canary, the first worker is restarted alone before the workers widen to the
clamped batch size; a canary that fails stops the rollout with no other worker touched.

Batches are read from the simulator's timeline (``rollout_helpers.batches_seen``)."""

from __future__ import annotations

import time

import pytest
import rollout_helpers as rh

pytestmark = pytest.mark.timeout(900)

# What the timeline records when a rollout touches a node itself (not its pods moving).
NODE_EVENTS = {"annotated", "cordoned", "uncordoned", "stop_requested", "stopped", "offering_changed",
               "volume_resized", "affinity_updated", "start_requested", "started"}


def test_canary_alone_then_batches_of_the_clamped_size() -> None:
    with rh.running_rollout_sim("rollout_pools.yml", max_unavailable={"worker": 2}) as sim:
        workers = sorted(rh.names(sim, "worker"))
        since = time.time()
        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(
            sim, rollout_node_offerings={"worker": "cks-large"}, rollout_max_unavailable=2, rollout_canary=True))
        assert run.rc == 0, run.explain()
        items = sim.timeline(since)

        # The first worker in plan order alone, then min(2, 6 - 1) = 2 at a time, in name order.
        assert rh.batches_seen(items, workers) == [workers[0:1], workers[1:3], workers[3:5], workers[5:6]]
        assert rh.restarted(items)[:1] == [workers[0]]
        # The canary was back (started and uncordoned) before any other worker was cordoned.
        canary_back = rh.events(items, "uncordoned", workers[0])[0]["t"]
        assert all(canary_back <= i["t"] for w in workers[1:] for i in rh.events(items, "cordoned", w))
        assert rh.max_down_at_once(items, workers) == 2
        assert {rh.vms(sim)[w]["offering"] for w in workers} == {"cks-large"}
        assert run.report is not None
        assert [b["canary"] for b in run.report["batches_planned"]] == [True, False, False, False]
        assert run.report["canary"] is True
        rh.assert_no_invariant_broken(sim)


def test_a_failed_canary_stops_the_rollout_with_no_other_worker_touched() -> None:
    with rh.running_rollout_sim("rollout_pools.yml", max_unavailable={"worker": 2}) as sim:
        workers = sorted(rh.names(sim, "worker"))
        canary = workers[0]
        # No capacity for the canary's start (533), whatever is retried.
        sim.fault(kind="start_capacity", vm=rh.vms(sim)[canary]["name"])
        since = time.time()
        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(
            sim, rollout_node_offerings={"worker": "cks-large"}, rollout_max_unavailable=2, rollout_canary=True))
        assert run.rc != 0, run.explain()
        items = sim.timeline(since)

        assert rh.restarted(items) == [canary]
        for worker in workers[1:]:
            touched = [i["event"] for i in items if i.get("node") == worker and i.get("event") in NODE_EVENTS]
            assert touched == [], (worker, touched)
        vms = rh.vms(sim)
        assert vms[canary]["state"] == "Stopped"
        assert {vms[w]["offering"] for w in workers[1:]} == {"cks-medium"}
        record = rh.ClusterRecord(sim)
        assert record.holder() is None
        error = record.data()["lastError"]
        assert canary in error and ("533" in error or "start" in error), error
        assert run.report is not None
        assert [b["outcome"] for b in run.report["batches"]] == ["failed"]
        assert run.report["nodes_not_reached"] == workers[1:]
        rh.assert_no_invariant_broken(sim)
