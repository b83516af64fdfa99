"""Gen 1 to gen 2, worker batching with the clamp, the capacity recount and the report.

A cluster created before node types had settings of their own (no per-type offerings): changing
the workers copies the cluster's offering to the other types first, so the control node stays
as it is. 5 workers with max_unavailable 10 go 4 at a time (clamped to workers - 1).
"""

from __future__ import annotations

import time

import pytest
import rollout_helpers as rh

pytestmark = pytest.mark.timeout(900)


def test_gen1_cluster_rolls_its_workers_four_at_a_time() -> None:
    # The simulator flags more than 4 workers down at once as a broken invariant.
    with rh.running_rollout_sim("rollout_gen1.yml", max_unavailable={"worker": 4}) as sim:
        workers = rh.names(sim, "worker")
        control = rh.names(sim, "control")
        since = time.time()
        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(
            sim, rollout_node_offerings={"worker": "cks-large"}, rollout_max_unavailable=10))
        assert run.rc == 0, run.explain()
        items = sim.timeline(since)

        # Only the workers went down, 4 at once at most, and all of them once.
        assert sorted(rh.restarted(items)) == sorted(workers)
        # A batch of 4 is out of service together; never more than 4 down at once.
        assert rh.max_cordoned_at_once(items, workers) == 4
        assert rh.max_down_at_once(items, workers) <= 4
        first_four_up = max(i["t"] for i in rh.events(items, "started") if i["node"] in rh.restarted(items)[:4])
        last = rh.restarted(items)[4]
        assert rh.events(items, "stop_requested", last)[0]["t"] > first_four_up
        for node in control:
            assert rh.events(items, "stop_requested", node) == []

        # Gen 2: each type has settings of its own; the control type got the cluster's offering.
        record = rh.ClusterRecord(sim)
        settings = record.settings()
        assert settings["control"]["offering_id"] and settings["worker"]["offering_id"]
        assert settings["control"]["offering_id"] != settings["worker"]["offering_id"]
        vms = rh.vms(sim)
        assert {vms[w]["offering"] for w in workers} == {"cks-large"}
        assert {vms[c]["offering"] for c in control} == {"cks-medium"}
        assert all(rh.node_settled(sim, n) for n in rh.kube_nodes(sim).values())
        assert record.holder() is None and record.data()["outcome"] == "Running"
        assert record.data()["lastError"] == ""

        # The capacity recount: the cores and memory of the VMs' actual offerings.
        assert run.report is not None
        cores = sum(vm["cpu"] for vm in vms.values())
        memory = sum(vm["memory"] for vm in vms.values())
        assert run.report["capacity"]["cores"] == cores and run.report["capacity"]["memory_mb"] == memory
        assert cores == 2 + 5 * 4
        # CloudStack's own numbers go stale: nothing outside the management server updates them.
        assert run.report["capacity"]["cloudstack_cores"] != cores

        # The report: per node its steps with times, what changed, the counts before and after.
        assert run.report["out_of_date_before"]["worker"] == {"nodes": 5, "out_of_date": 5}
        assert run.report["out_of_date_after"]["worker"] == {"nodes": 5, "out_of_date": 0}
        # Within a batch the nodes go in parallel: compare each batch as a set.
        expected = [sorted(rh.restarted(items)[:4]), rh.restarted(items)[4:]]
        assert [sorted(b["nodes"]) for b in run.report["batches"]] == expected
        node = run.report["nodes"][0]
        assert node["outcome"] == "done" and node["changes"]["offering"] == {
            "from": "cks-medium", "to": "cks-large", "from_id": node["changes"]["offering"]["from_id"],
            "to_id": settings["worker"]["offering_id"]}
        assert [s["name"] for s in node["steps"]][:4] == ["annotate", "cordon", "drain", "stop"]
        assert all(s["started"].endswith("Z") for s in node["steps"])
        rh.assert_no_invariant_broken(sim)

        # The outcome afterwards, with status.yml.
        status = rh.run_playbook(sim, "status.yml", {"rollout_cluster": sim.env["cluster_name"]})
        assert status.rc == 0 and "Last rollout: done; cluster health: Running" in status.stdout, status.explain()
