"""The rollout's refusals and the settings-only path, through the playbooks, on one shared sim.

Every refusal must leave the simulated cloud exactly as it was: no VM, node, record or lock
written (asserted on GET /state, the call log and the Lease), whatever the playbook printed.
"""

from __future__ import annotations

import time
from typing import Any, Iterator

import pytest
import rollout_helpers as rh
from helpers import ClusterSim, run_module

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def sim() -> Iterator[ClusterSim]:
    with rh.running_rollout_sim("rollout_small.yml") as handle:
        yield handle


def _refused(sim: ClusterSim, variables: dict[str, Any]) -> rh.PlaybookRun:
    """Run rollout.yml, expect it refused, and prove nothing changed anywhere."""
    before = sim.world()
    holder_before = rh.ClusterRecord(sim).lease()
    since = time.time()
    run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(sim, **variables))
    assert run.rc != 0, run.explain()
    assert rh.mutating_calls(sim, since) == [], run.explain()
    assert sim.world() == before
    assert rh.ClusterRecord(sim).lease() == holder_before
    assert rh.events(sim.timeline(since), "stop_requested") == []
    rh.assert_no_invariant_broken(sim)
    return run


REFUSALS = {
    "max_unavailable 0": ({"rollout_node_offerings": {"worker": "cks-large"}, "rollout_max_unavailable": 0},
                          "max_unavailable"),
    "disk shrink": ({"rollout_node_root_disk_sizes": {"worker": 10}}, "node_root_disk_sizes.worker"),
    "strict offering": ({"rollout_node_offerings": {"worker": "cks-strict"}}, "node_offerings.worker"),
    "unknown node type": ({"rollout_node_offerings": {"gpu": "cks-large"}}, "gpu"),
    "dedication group": ({"rollout_node_affinity_groups": {"worker": ["dedicated-admin"]}}, "dedicated-admin"),
    "single control node changed": ({"rollout_node_offerings": {"control": "cks-large"}}, "node_offerings.control"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refused_settings_change_nothing(sim: ClusterSim, case: str) -> None:
    variables, named = REFUSALS[case]
    run = _refused(sim, variables)
    # The refusal names what to change (the operator's only clue).
    assert named in run.stdout, run.explain()


def test_rollout_refused_outside_running_or_alert(sim: ClusterSim) -> None:
    sim.action(action="set_cluster_state", cluster=sim.env["cluster_id"], state="Scaling")
    try:
        run = _refused(sim, {"rollout_node_offerings": {"worker": "cks-large"}})
        assert "Scaling" in run.stdout, run.explain()
    finally:
        sim.action(action="set_cluster_state", cluster=sim.env["cluster_id"], state="Running")


def test_rollout_refused_while_another_holds_the_lock(sim: ClusterSim) -> None:
    taken = run_module("cks_node_settings", {"cluster": sim.env["cluster_name"], "rollout": True,
                                             "lock_holder": "awx-job-41", "lock_duration": 600},
                       env=sim.module_env())
    assert not taken["failed"], taken
    try:
        lease = rh.ClusterRecord(sim).lease()
        assert lease["holderIdentity"] == "awx-job-41"
        run = _refused(sim, {"rollout_node_offerings": {"worker": "cks-large"}})
        # Named: who holds it and since when.
        assert "awx-job-41" in run.stdout and lease["acquireTime"] in run.stdout, run.explain()
    finally:
        released = run_module("cks_node_cycle", {"cluster": sim.env["cluster_name"], "mode": "release",
                                                 "lock_holder": "awx-job-41"}, env=sim.module_env())
        assert not released["failed"], released
    assert rh.ClusterRecord(sim).holder() is None


def test_settings_only_store_and_restart_nothing(sim: ClusterSim) -> None:
    since = time.time()
    workers = rh.names(sim, "worker")
    run = rh.run_playbook(sim, "settings.yml", {"rollout_cluster": sim.env["cluster_name"],
                                                "rollout_node_offerings": {"worker": "cks-large"},
                                                "rollout_node_root_disk_sizes": {"worker": 10}})
    assert run.rc == 0, run.explain()
    # rollout=false accepts a size a rollout would refuse (it applies to nodes created later).
    stored = rh.ClusterRecord(sim).settings()
    assert stored["worker"]["root_disk_gb"] == 10
    assert stored["worker"]["offering_id"] != stored["control"]["offering_id"]
    assert rh.ClusterRecord(sim).holder() is None
    cloud_writes = [c for c in rh.mutating_calls(sim, since) if c["api"] == "cloudstack"]
    assert cloud_writes == []
    assert all(rh.vms(sim)[w]["offering"] == "cks-medium" for w in workers)
    assert rh.events(sim.timeline(since), "stop_requested") == []
    status = rh.run_playbook(sim, "status.yml", {"rollout_cluster": sim.env["cluster_name"]})
    assert status.rc == 0 and "worker 3" in status.stdout, status.explain()


def test_connection_from_variables_never_on_a_command_line(sim: ClusterSim) -> None:
    """rollout_api_* variables instead of a credential: the modules get them as arguments, and the
    secret shows up in no process's command line while the playbook runs."""
    secret = sim.env["cloudstack_secret"]
    status = rh.PlaybookProcess(sim, "status.yml", {
        "rollout_cluster": sim.env["cluster_name"], "rollout_api_url": sim.env["cloudstack_endpoint"],
        "rollout_api_key": sim.env["cloudstack_key"], "rollout_api_secret": secret}, credential=False)
    seen: list[str] = []
    while status.proc.poll() is None:
        seen.extend(line for line in rh.command_lines(rh.descendants(status.proc.pid)) if secret in line)
        time.sleep(0.05)
    run = status.wait()
    assert run.rc == 0, run.explain()
    assert "Cluster " + sim.env["cluster_name"] in run.stdout
    assert seen == []
    assert secret not in run.stdout


def test_failed_store_gives_the_lock_back_and_keeps_the_error(sim: ClusterSim) -> None:
    """Storing the settings fails after the lock was taken: the lock is released, the failure is
    kept as the last error, and a later refused rollout leaves that error as it is."""
    record = rh.ClusterRecord(sim)
    sim.fault(kind="kube_error", verb="update", resource="configmaps", status=500, count=1)
    try:
        since = time.time()
        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(sim, rollout_node_root_disk_sizes={"worker": 30},
                                                                  rollout_run_id="run-store-fails"))
    finally:
        sim.admin("DELETE", "/faults")
    assert run.rc != 0, run.explain()
    assert rh.events(sim.timeline(since), "stop_requested") == []
    lease = record.lease()
    assert not lease.get("holderIdentity"), lease
    error = record.data().get("lastError", "")
    assert "storing the node settings failed" in error, record.data()
    _refused(sim, {"rollout_node_offerings": {"worker": "cks-large"}, "rollout_max_unavailable": 0})
    assert record.data().get("lastError") == error
