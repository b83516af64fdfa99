"""A failure reported together with the nodes that can not be rolled, then the rerun that resumes.

The single control node already differs from its type (it can not lose a node: not rolled, and
reported). Two workers fail to start (no capacity, 533) and, with rollout_put_back_on_refusal off,
stay Stopped. One of them is then
started by hand and comes back; the rerun uncordons it without restarting it, takes the other
stopped one first, and rolls the rest.
"""

from __future__ import annotations

import time

import pytest
import rollout_helpers as rh
from cks_sim.harness import wait_until

pytestmark = pytest.mark.timeout(900)


def test_failure_with_unrollable_control_then_rerun_resumes() -> None:
    with rh.running_rollout_sim("rollout_resume.yml", max_unavailable={"worker": 2}) as sim:
        control = rh.names(sim, "control")
        w0, w1, w2, w3 = rh.names(sim, "worker")
        record = rh.ClusterRecord(sim)

        # Run 1: only workers 1 and 2, together; both starts fail.
        sim.fault(kind="start_capacity", count=2)
        since = time.time()
        first = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(
            sim, rollout_node_offerings={"worker": "cks-large"}, rollout_max_unavailable=2,
            rollout_select="[?node_type=='worker'] | [1:3]", rollout_put_back_on_refusal=False))
        assert first.rc != 0, first.explain()
        items = sim.timeline(since)
        assert sorted(rh.restarted(items)) == sorted([w1, w2])
        vms = rh.vms(sim)
        assert vms[w1]["state"] == vms[w2]["state"] == "Stopped"
        assert vms[w0]["state"] == vms[w3]["state"] == "Running"
        assert rh.events(items, "stop_requested", control[0]) == []
        # The last error carries both: the failed start and the control node not rolled.
        error = record.data()["lastError"]
        assert "533" in error or "start" in error, error
        assert control[0] in error, error
        assert record.data()["outcome"] == "Alert"
        assert record.holder() is None
        nodes = rh.kube_nodes(sim)
        assert nodes[w1]["unschedulable"] and rh.ANNOTATION in nodes[w1]["annotations"]

        # Someone starts worker 1 by hand: it comes back with the new offering.
        sim.action(action="start_vm", vm=vms[w1]["name"])
        wait_until(lambda: rh.kube_nodes(sim)[w1]["ready"] == "True"
                   and rh.kube_nodes(sim)[w1]["boot_id"] != nodes[w1]["boot_id"], 60, f"{w1} back", interval=rh.ADMIN_POLL)

        since = time.time()
        second = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(sim, rollout_max_unavailable=1))
        assert second.rc == 0, second.explain()
        items = sim.timeline(since)
        # Worker 1 is uncordoned, not restarted.
        assert rh.events(items, "stop_requested", w1) == [] and rh.events(items, "start_requested", w1) == []
        # Worker 2 (stopped) goes first: started before any other worker is stopped.
        start_w2 = rh.events(items, "start_requested", w2)[0]["t"]
        assert all(start_w2 < i["t"] for i in rh.events(items, "stop_requested"))
        assert sorted(rh.restarted(items)) == sorted([w0, w3])
        vms = rh.vms(sim)
        assert {vms[w]["offering"] for w in (w0, w1, w2, w3)} == {"cks-large"}
        assert {vms[w]["state"] for w in vms} == {"Running"}
        nodes = rh.kube_nodes(sim)
        assert all(rh.node_settled(sim, nodes[w]) for w in (w0, w1, w2, w3))
        # The control node is still reported as not rolled.
        assert control[0] in record.data()["lastError"]
        assert second.report is not None
        assert w1 in [u["node"] for u in second.report["uncordoned"]]
        rh.assert_no_invariant_broken(sim)
