"""The pending taint through the whole playbook (``playbooks/rollout.yml``) against cks-sim.

With ``rollout_taint_pending`` the nodes the plan restarts get
``cloudstack.apache.org/rollout-pending:PreferNoSchedule`` before the first batch; the scheduler
then prefers other nodes for the pods each batch evicts. On a cluster where they have somewhere
else to go (two workers already up to date), no pod scheduled during the rollout lands on a node
whose batch is still to come; without the option some do (so the check can fail). Each node loses
the taint at its uncordon, none has it afterwards; a killed run leaves it on the nodes still
waiting, and the next run's release takes it off even with the option off.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import rollout_helpers as rh
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.marks import PENDING_TAINT_KEY
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import parse_microtime
from cks_sim.harness import wait_until

pytestmark = pytest.mark.timeout(900)

SPEC = "rollout_pending.yml"
WORKERS_LARGER: dict[str, Any] = {"rollout_node_offerings": {"worker": "cks-large"}, "rollout_max_unavailable": 1}
PENDING = f"{PENDING_TAINT_KEY}:PreferNoSchedule"
LOCK_SECONDS = 2
CLOCK_SKEW = 15  # record.DEFAULT_CLOCK_SKEW_SECONDS


def landed_on_a_later_batch(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(pod, node) for each pod a controller got scheduled during the rollout onto a node whose
    batch had not started yet (the node is cordoned later in the timeline)."""
    first_cordon: dict[str, float] = {}
    for item in items:
        if item["event"] == "cordoned":
            first_cordon.setdefault(item["node"], item["t"])
    return [(item["pod"], item["node"]) for item in items
            if item["event"] == "scheduled" and item.get("owner") and item["node"] in first_cordon
            and item["t"] < first_cordon[item["node"]]]


@pytest.mark.parametrize("taint_pending", [True, False], ids=["tainted", "not-tainted"])
def test_evicted_pods_keep_off_the_nodes_still_to_come(rollout_sim: Any, taint_pending: bool) -> None:
    sim = rollout_sim(SPEC)
    rolling = sim.names("worker")[:3]  # the last two have cks-large already
    since = time.time()
    run = sim.rollout(rollout_taint_pending=taint_pending, **WORKERS_LARGER)
    assert run.rc == 0, run.output
    sim.assert_converged()
    items = [e for e in sim.timeline() if e["t"] >= since]
    assert [e["node"] for e in items if e["event"] == "cordoned"] == rolling
    assert [e for e in items if e["event"] == "scheduled" and e.get("owner")], "no pod was rescheduled"
    misplaced = landed_on_a_later_batch(items)
    if taint_pending:
        assert misplaced == []
        tainted = [e for e in items if e["event"] == "tainted" and e["key"] == PENDING_TAINT_KEY]
        untainted = [e for e in items if e["event"] == "untainted" and e["key"] == PENDING_TAINT_KEY]
        first_cordon = next(e["t"] for e in items if e["event"] == "cordoned")
        assert sorted(e["node"] for e in tainted) == sorted(rolling) and all(e["t"] < first_cordon for e in tainted)
        # Each node loses the taint with its uncordon (one write), after it came back.
        for node in rolling:
            booted = next(e for e in items if e["event"] == "boot" and e["node"] == node)
            uncordoned = next(e for e in items if e["event"] == "uncordoned" and e["node"] == node)
            gone = next(e for e in untainted if e["node"] == node)
            assert booted["t"] <= gone["t"] <= uncordoned["t"]
    else:
        # Without the taint the scheduler's spreading sends some of them to a node rolled later.
        assert misplaced, "expected some evicted pods on a node of a later batch without the taint"
    assert not [n for n in rh_nodes(sim) if PENDING in n["taints"]]
    assert sim.invariants() == []


def rh_nodes(sim: Any) -> list[dict[str, Any]]:
    return sim.state()["kube"][sim.cluster_id]["nodes"]


def test_a_killed_run_leaves_the_taint_and_the_next_release_takes_it_off() -> None:
    with rh.running_rollout_sim(SPEC) as sim:
        rolling = rh.names(sim, "worker")[:3]
        variables = rh.rollout_vars(sim, rollout_taint_pending=True, rollout_lock_duration=LOCK_SECONDS,
                                    **WORKERS_LARGER)
        # Nodes take 30 s (real) to turn Ready after a boot: the first batch is surely still waiting.
        sim.action(action="set_config", timings={"boot_to_ready": 3000})
        since = time.time()
        doomed = rh.PlaybookProcess(sim, "rollout.yml", dict(variables, rollout_run_id="run-killed"))
        wait_until(lambda: rh.events(sim.timeline(since), "stop_requested"), 300, "a node to go down", interval=rh.ADMIN_POLL)
        doomed.kill()
        assert doomed.wait().rc == -9
        sim.action(action="set_config", timings={"boot_to_ready": 30})

        # The nodes still waiting their turn keep the taint the killed run put on.
        nodes = rh.kube_nodes(sim)
        victim = rh.restarted(sim.timeline(since))[0]
        waiting = [n for n in rolling if n != victim]
        assert all(PENDING in nodes[n]["taints"] for n in waiting), {n: nodes[n]["taints"] for n in rolling}

        lease = rh.ClusterRecord(sim).lease()
        expires = parse_microtime(lease["renewTime"]).timestamp() + LOCK_SECONDS + CLOCK_SKEW
        time.sleep(max(0.0, expires - time.time()) + 1)
        # The rerun does not ask for the taint; its release takes the leftovers off all the same.
        rerun = rh.run_playbook(sim, "rollout.yml", dict(variables, rollout_taint_pending=False,
                                                         rollout_run_id="run-resume"))
        assert rerun.rc == 0, rerun.explain()
        assert not [name for name, n in rh.kube_nodes(sim).items() if PENDING in n["taints"]]
        assert all(rh.node_settled(sim, n) for n in rh.kube_nodes(sim).values())
        assert {rh.vms(sim)[n]["offering"] for n in rolling} == {"cks-large"}
        assert rh.ClusterRecord(sim).holder() is None
        rh.assert_no_invariant_broken(sim)
