"""rollout_pause_seconds: a timed wait after each batch that succeeded, except the last, with no
prompt (AWX). The simulator's timeline shows the gap: from the last node of a batch uncordoned to
the first node of the next cordoned is at least the pause (a lower bound, not a timing)."""

from __future__ import annotations

import time

import pytest
import rollout_helpers as rh

pytestmark = pytest.mark.timeout(900)

PAUSE = 4


def test_pause_between_batches_but_not_after_the_last() -> None:
    with rh.running_rollout_sim("rollout_pools.yml", max_unavailable={"worker": 3}) as sim:
        workers = sorted(rh.names(sim, "worker"))
        since = time.time()
        # stdin closed: a pause that prompted would fail or hang; a timed one just waits.
        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(
            sim, rollout_node_offerings={"worker": "cks-large"}, rollout_max_unavailable=3,
            rollout_pause_seconds=PAUSE))
        assert run.rc == 0, run.explain()
        items = sim.timeline(since)
        first, second = workers[:3], workers[3:]
        assert sorted(rh.restarted(items)) == workers

        last_back = max(i["t"] for w in first for i in rh.events(items, "uncordoned", w))
        next_out = min(i["t"] for w in second for i in rh.events(items, "cordoned", w))
        assert next_out - last_back >= PAUSE, (last_back, next_out)
        # Two batches of 3 (min(3, 6 - 1)): the second one started after the first was back whole.
        assert rh.max_cordoned_at_once(items, workers) == 3
        assert run.stdout.count(f"Pausing for {PAUSE} seconds") == 1, run.explain()
        assert run.report is not None and run.report["pause_seconds"] == PAUSE
        rh.assert_no_invariant_broken(sim)


def test_a_pause_the_lock_would_not_outlast_is_refused_before_the_lock_is_taken() -> None:
    with rh.running_rollout_sim("rollout_pools.yml") as sim:
        before = sim.world()
        since = time.time()
        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(
            sim, rollout_node_offerings={"worker": "cks-large"}, rollout_pause_seconds=400, rollout_lock_duration=600))
        assert run.rc != 0, run.explain()
        assert "rollout_pause_seconds=400" in run.stdout and "rollout_lock_duration" in run.stdout, run.explain()
        assert rh.mutating_calls(sim, since) == []
        assert sim.world() == before
