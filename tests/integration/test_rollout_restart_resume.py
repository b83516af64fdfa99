"""A rolling restart (``rollout_restart: all``) killed part-way, then run again: the rerun resumes the
restart round the record keeps (each node's boot ID when the restart began) and restarts only the
nodes not restarted since; a restart run after the round finished restarts every node again.

Through ansible-playbook against cks-sim; the controller is SIGKILLed as a crash would kill it (as in
test_rollout_crash), during the pause after its first batch."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import pytest
import rollout_helpers as rh
from cks_sim.harness import wait_until

pytestmark = pytest.mark.timeout(900)

# The pause after each batch (the kill lands in the first one); the lock lasts twice as long, as the
# role requires of a pause.
PAUSE_SECONDS = 30


def stops_per_node(sim: Any, since: float) -> Counter[str]:
    """stopVirtualMachine sent per VM (by node name) since ``since``, as the sim's /calls logged them."""
    by_id = {vm["id"]: name for name, vm in rh.vms(sim).items()}
    return Counter(by_id.get((c.get("params") or {}).get("id"), "?") for c in sim.calls(since)
                   if c.get("api") == "cloudstack" and c.get("command") == "stopVirtualMachine")


def boot_ids(sim: Any) -> dict[str, str]:
    return {n["metadata"]["name"]: n["status"]["nodeInfo"]["bootID"] for n in sim.kube.list_nodes()}


def test_killed_restart_all_resumes_without_restarting_a_node_twice() -> None:
    with rh.running_rollout_sim("rollout_small.yml") as sim:
        workers = rh.names(sim, "worker")
        record = rh.ClusterRecord(sim)
        variables = rh.rollout_vars(sim, rollout_restart="all", rollout_pause_seconds=PAUSE_SECONDS,
                                    rollout_lock_duration=2 * PAUSE_SECONDS)
        before = boot_ids(sim)
        since = rh.sim_time(sim)

        doomed = rh.PlaybookProcess(sim, "rollout.yml", dict(variables, rollout_run_id="run-killed"))
        # Killed in the pause after its first batch: that batch's worker restarted and back in service.
        wait_until(lambda: "Pause before the next batch" in doomed.output(), 600, "the pause after batch 1",
                   interval=rh.ADMIN_POLL)
        doomed.kill()
        assert doomed.wait().rc == -9
        first = rh.restarted(sim.timeline(since))
        assert first == [workers[0]], first
        # The round the killed run began is in the record: every node's boot ID when it began.
        stored = json.loads(record.data()["restartRound"])
        assert stored["scope"] == "all" and stored["run_id"] == "run-killed"
        assert stored["boot_ids"] == before

        # The rerun's dry run says which node it resumes without restarting.
        dry = rh.run_playbook(sim, "rollout.yml", dict(variables, rollout_run_id="run-dry"), args=("--check",))
        assert dry.rc == 0, dry.explain()
        assert f"resumes the round begun {stored['started']} by run-killed" in dry.stdout, dry.explain()
        assert f"restarted since it began, not again: {workers[0]}" in dry.stdout, dry.explain()

        # The rerun takes over the lock (the killed controller's processes are gone) and resumes.
        rerun = rh.run_playbook(sim, "rollout.yml", dict(variables, rollout_run_id="run-resume", rollout_pause_seconds=0))
        assert rerun.rc == 0, rerun.explain()
        assert rerun.report is not None and rerun.report["previous_rollout_stopped"]["holder"] == "run-killed"
        assert stops_per_node(sim, since) == Counter({w: 1 for w in workers}), sim.calls(since)
        after = boot_ids(sim)
        assert [w for w in workers if after[w] == before[w]] == []  # each worker restarted, once
        rh.assert_no_invariant_broken(sim)
        assert all(rh.node_settled(sim, n) for n in rh.kube_nodes(sim).values())  # none left cordoned
        assert record.holder() is None
        # Every batch ran: the round is over.
        assert "restartRound" not in record.data()

        # A restart started later on purpose is a new round: every worker again.
        again_since = rh.sim_time(sim)
        time.sleep(0.1)
        again = rh.run_playbook(sim, "rollout.yml", dict(variables, rollout_run_id="run-again", rollout_pause_seconds=0))
        assert again.rc == 0, again.explain()
        assert "restart all: a new round" in again.stdout, again.explain()
        assert stops_per_node(sim, again_since) == Counter({w: 1 for w in workers})
        rh.assert_no_invariant_broken(sim)
        assert all(rh.node_settled(sim, n) for n in rh.kube_nodes(sim).values())
