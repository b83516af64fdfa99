"""What a rollout restarts and in which order: each out-of-date reason (explicit dedication groups
kept), starting from Alert, external etcd first, then control one at a time, then workers; a
type that can not lose a node (2 etcd nodes) refused, while no-op settings are accepted; and etcd
and control both skipped (out of date from stored settings) while the workers still roll."""

from __future__ import annotations

import time

import pytest
import rollout_helpers as rh

pytestmark = pytest.mark.timeout(900)


def test_each_reason_from_alert_keeps_the_dedication_group() -> None:
    with rh.running_rollout_sim("rollout_reasons.yml") as sim:
        w0, w1, w2, w3 = rh.names(sim, "worker")
        sim.action(action="set_cluster_state", cluster=sim.env["cluster_id"], state="Alert")
        assert rh.cluster_state(sim) == "Alert"
        since = time.time()
        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(
            sim, rollout_node_offerings={"worker": "cks-medium"}, rollout_node_root_disk_sizes={"worker": 20},
            rollout_node_affinity_groups={"worker": ["workers-spread"]}))
        assert run.rc == 0, run.explain()
        items = sim.timeline(since)

        # Only the three nodes that differ were restarted, each with only its own change.
        assert sorted(rh.restarted(items)) == sorted([w0, w1, w2])
        assert [i["node"] for i in rh.events(items, "offering_changed")] == [w0]
        assert [i["node"] for i in rh.events(items, "volume_resized")] == [w1]
        assert [i["node"] for i in rh.events(items, "affinity_updated")] == [w2]
        for node in rh.names(sim, "control") + [w3]:
            assert rh.events(items, "stop_requested", node) == []

        vms = rh.vms(sim)
        for worker in (w0, w1, w2, w3):
            assert vms[worker]["offering"] == "cks-medium"
            assert vms[worker]["root_gb"] == 20
            # The dedication group CKS added is kept next to the type's groups.
            assert sorted(vms[worker]["affinity_groups"]) == ["dedicated-admin", "workers-spread"]
        assert all(rh.node_settled(sim, n) for n in rh.kube_nodes(sim).values())
        assert rh.ClusterRecord(sim).holder() is None
        rh.assert_no_invariant_broken(sim)


def _intervals(items: list[dict], nodes: list[str]) -> list[tuple[float, float]]:
    out = []
    for node in nodes:
        found = rh.down_intervals(items, node)
        assert len(found) == 1, (node, found)
        out.extend(found)
    return sorted(out)


def test_external_etcd_then_control_one_at_a_time_then_workers() -> None:
    with rh.running_rollout_sim("rollout_extetcd.yml") as sim:
        etcd, control, workers = rh.names(sim, "etcd"), rh.names(sim, "control"), rh.names(sim, "worker")
        assert (len(etcd), len(control), len(workers)) == (3, 2, 2)
        since = time.time()
        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(
            sim, rollout_node_offerings={"etcd": "cks-large", "control": "cks-large", "worker": "cks-large"},
            rollout_max_unavailable=2))
        assert run.rc == 0, run.explain()
        items = sim.timeline(since)

        etcd_down, control_down, worker_down = (_intervals(items, n) for n in (etcd, control, workers))
        # One at a time within etcd and control: each interval ends before the next starts.
        for intervals in (etcd_down, control_down, worker_down):
            assert all(a[1] <= b[0] for a, b in zip(intervals, intervals[1:])), intervals
        # Types in order: the last etcd node is up before the first control node goes down, ...
        assert etcd_down[-1][1] <= control_down[0][0]
        assert control_down[-1][1] <= worker_down[0][0]
        # Workers: min(2, workers - 1) = 1 at a time.
        assert rh.max_down_at_once(items, workers) == 1
        assert {vm["offering"] for vm in rh.vms(sim).values()} == {"cks-large"}
        assert rh.events(items, "etcd_quorum_lost") == []
        rh.assert_no_invariant_broken(sim)


def test_two_etcd_nodes_refused_but_noop_settings_accepted() -> None:
    with rh.running_rollout_sim("rollout_two_etcd.yml") as sim:
        before = sim.world()
        since = time.time()
        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(sim, rollout_node_offerings={"etcd": "cks-large"}))
        assert run.rc != 0, run.explain()
        assert "node_offerings.etcd" in run.stdout, run.explain()
        assert rh.mutating_calls(sim, since) == []
        assert sim.world() == before

        # The same offering the etcd nodes have already: nothing to restart, accepted.
        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(sim, rollout_node_offerings={"etcd": "cks-medium"}))
        assert run.rc == 0, run.explain()
        assert rh.events(sim.timeline(since), "stop_requested") == []
        assert rh.ClusterRecord(sim).settings()["etcd"]["offering_id"]
        assert rh.ClusterRecord(sim).holder() is None
        rh.assert_no_invariant_broken(sim)


def test_etcd_and_control_both_skipped_while_the_workers_roll() -> None:
    with rh.running_rollout_sim("rollout_skipped.yml") as sim:
        control, etcd, workers = rh.names(sim, "control"), rh.names(sim, "etcd"), rh.names(sim, "worker")
        assert len(control) == 1 and len(etcd) == 2
        # Stored without a rollout (accepted for any type): every node is out of date now.
        stored = rh.run_playbook(sim, "settings.yml", {
            "rollout_cluster": sim.env["cluster_name"],
            "rollout_node_offerings": {"control": "cks-large", "etcd": "cks-large", "worker": "cks-large"}})
        assert stored.rc == 0, stored.explain()

        since = time.time()
        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(sim))
        assert run.rc == 0, run.explain()
        items = sim.timeline(since)
        assert sorted(rh.restarted(items)) == workers
        for node in control + etcd:
            assert rh.events(items, "stop_requested", node) == []
        vms = rh.vms(sim)
        assert {vms[w]["offering"] for w in workers} == {"cks-large"}
        assert {vms[n]["offering"] for n in control + etcd} == {"cks-medium"}

        # Both types are reported, each with its nodes and why, in the record and the report.
        error = rh.ClusterRecord(sim).data()["lastError"]
        for node in control + etcd:
            assert node in error, error
        assert "single control node" in error and "2 etcd nodes" in error, error
        assert run.report is not None
        assert sorted(run.report["not_rolled"]) == ["control", "etcd"]
        assert rh.ClusterRecord(sim).holder() is None
        rh.assert_no_invariant_broken(sim)
