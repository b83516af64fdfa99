"""The fleet rollout (playbooks/fleet.yml) against cks-sim with many clusters (tests/sim/examples/fleet.yml),
with a static inventory of cluster hosts shaped as the cloudstack.cks.clusters inventory plugin gives them
(one host per cluster, by name, with the cluster's ``id``).

1. Six clusters, ``fleet_parallel: 3``, one whose PDB never allows an eviction: the five others converge,
   the blocked one fails alone (nothing of it stopped, nothing left cordoned), never more than three
   clusters in flight; a rerun after the PDB is fixed rolls the blocked one and skips the others after
   their plan.
2. AWX job slicing: three ansible-runner jobs at the same time over nine clusters (three each, as AWX
   slices an inventory), each cluster rolled exactly once; a fourth job handed a cluster of a running
   slice (a mistake) is kept apart by the cluster's lock: "skipped: locked by awx-job-...".

Asserted on the simulator (VM offerings, the timeline of stops and starts, Kubernetes nodes, the
invariants), and on the fleet report only for what it says about each cluster.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest
import rollout_helpers as rh
from cks_sim.harness import wait_until
from fleet_helpers import AWX_PROJECT, FAST, NEW_OFFERING, fleet_vars, inventory, stops_per_node, unschedulable, workers
from helpers import ANSIBLE_PLAYBOOK, COLLECTIONS, PYTHON, ClusterSim, running_sim

pytestmark = pytest.mark.timeout(1800)


@pytest.fixture()
def fleet_sim() -> Iterator[ClusterSim]:
    with running_sim("fleet.yml") as sim:
        yield sim


def run_fleet(sim: ClusterSim, inv: Path, variables: dict[str, Any], work: Path, forks: int) -> tuple[int, str, dict[str, Any]]:
    report_path = work / f"report-{len(list(work.glob('report-*')))}.json"
    vars_path = work / "vars.json"
    vars_path.write_text(json.dumps(dict(variables, fleet_report_path=str(report_path))), encoding="utf-8")
    env = rh.playbook_env(sim, str(work))
    proc = subprocess.run([ANSIBLE_PLAYBOOK, "cloudstack.cks.fleet", "-i", str(inv), "-e", f"@{vars_path}",
                           "--forks", str(forks)], env=env, cwd=str(work), capture_output=True, text=True, timeout=1500,
                          check=False)
    report = json.loads(report_path.read_text(encoding="utf-8")) if report_path.exists() else {}
    return proc.returncode, proc.stdout + proc.stderr, report


def most_clusters_in_flight(items: list[dict[str, Any]], cluster_ids: set[str]) -> int:
    """The most clusters with a node between its first and last event of the rollout at one time."""
    spans: dict[str, list[float]] = {}
    for item in items:
        if item.get("cluster") in cluster_ids:
            span = spans.setdefault(item["cluster"], [item["t"], item["t"]])
            span[0], span[1] = min(span[0], item["t"]), max(span[1], item["t"])
    edges = sorted([(start, 1) for start, _end in spans.values()] + [(end, -1) for _start, end in spans.values()],
                   key=lambda x: (x[0], x[1]))
    most = now = 0
    for _t, step in edges:
        now += step
        most = max(most, now)
    return most


def test_fleet_of_six_three_at_a_time_one_blocked_then_a_rerun_converges(fleet_sim: ClusterSim, tmp_path: Path) -> None:
    sim = fleet_sim
    names = [f"fleet-0{i}" for i in range(1, 7)]
    blocked = "fleet-04"
    since = rh.sim_time(sim)
    sim.fault(kind="pdb_block", namespace="default", name="web", cluster=sim.cluster(blocked)["id"])
    # Per-cluster hostvars win over the fleet's: the blocked cluster gives up on its drain sooner.
    inv = inventory(sim, names, tmp_path / "inventory.yml", **{blocked: {"rollout_batch_timeout": 25}})
    before = {name: workers(sim, name) for name in names}
    assert all(vm["offering"] != NEW_OFFERING for vms in before.values() for vm in vms.values())

    rc, output, report = run_fleet(sim, inv, fleet_vars(tmp_path, fleet_parallel=3), tmp_path, forks=3)

    assert rc != 0, output[-3000:]  # the job fails: one cluster failed
    outcomes = {entry["cluster"]: entry for entry in report["clusters"]}
    assert set(outcomes) == set(names), output[-3000:]
    assert outcomes[blocked]["outcome"] == "failed", outcomes[blocked]
    assert outcomes[blocked]["last_error"], outcomes[blocked]
    assert outcomes[blocked]["nodes_restarted"] == []
    items = sim.timeline(since)
    stops = stops_per_node(items)
    for name in names:
        if name == blocked:
            continue
        assert outcomes[name]["outcome"] == "rolled", outcomes[name]
        after = workers(sim, name)
        assert {vm["offering"] for vm in after.values()} == {NEW_OFFERING}, (name, after)
        assert sorted(outcomes[name]["nodes_restarted"]) == sorted(before[name]), outcomes[name]
        assert all(stops.get(vm) == 1 for vm in before[name]), (name, stops)
    # The blocked cluster stopped nothing, changed nothing, and left no node cordoned.
    assert not any(vm in stops for vm in before[blocked]), stops
    assert {vm["offering"] for vm in workers(sim, blocked).values()} == {vm["offering"] for vm in before[blocked].values()}
    assert unschedulable(sim, blocked) == []
    ids = {sim.cluster(name)["id"] for name in names}
    in_flight = most_clusters_in_flight(items, ids)
    assert 2 <= in_flight <= 3, in_flight
    assert report["counts"]["rolled"] == 5 and report["counts"]["failed"] == 1
    assert f"{blocked}: failed" in output
    rh.assert_no_invariant_broken(sim)

    # The PDB fixed, the same fleet again: the blocked cluster is rolled, the others skipped after their plan.
    sim.admin("DELETE", "/faults")
    since = rh.sim_time(sim)
    rc, output, report = run_fleet(sim, inv, fleet_vars(tmp_path, fleet_parallel=3), tmp_path, forks=3)
    assert rc == 0, output[-3000:]
    outcomes = {entry["cluster"]: entry for entry in report["clusters"]}
    assert outcomes[blocked]["outcome"] == "rolled", outcomes[blocked]
    assert {outcomes[name]["outcome"] for name in names if name != blocked} == {"up_to_date"}
    stops = stops_per_node(sim.timeline(since))
    assert set(stops) == set(before[blocked]) and set(stops.values()) == {1}, stops
    assert {vm["offering"] for vm in workers(sim, blocked).values()} == {NEW_OFFERING}
    rh.assert_no_invariant_broken(sim)


def test_fleet_stops_starting_clusters_after_max_failed(fleet_sim: ClusterSim, tmp_path: Path) -> None:
    sim = fleet_sim
    names = ["fleet-10", "fleet-11", "fleet-12"]
    # Every cluster would fail on its first node; with one at a time and fleet_max_failed 1, only the first runs.
    for name in names:
        sim.fault(kind="pdb_block", namespace="default", name="web", cluster=sim.cluster(name)["id"])
    try:
        inv = inventory(sim, names, tmp_path / "inventory.yml")
        rc, output, report = run_fleet(sim, inv, fleet_vars(tmp_path, fleet_parallel=1, fleet_max_failed=1,
                                                            rollout_batch_timeout=15), tmp_path, forks=3)
    finally:
        sim.admin("DELETE", "/faults")
    assert rc != 0
    outcomes = {entry["cluster"]: entry["outcome"] for entry in report["clusters"]}
    assert outcomes == {"fleet-10": "failed", "fleet-11": "not_started", "fleet-12": "not_started"}, output[-3000:]
    assert "fleet_max_failed=1" in {e["cluster"]: e for e in report["clusters"]}["fleet-11"]["last_error"]


ansible_runner = pytest.importorskip("ansible_runner")


def runner_job(sim: ClusterSim, data_dir: Path, inv: Path, job_id: int, variables: dict[str, Any]) -> tuple[threading.Thread, Any]:
    """One AWX job (one slice) run as AWX runs it: ansible-runner, its own awx_job_id, the credential's env."""
    data_dir.mkdir(parents=True)
    env = {key: value for key, value in rh.playbook_env(sim, str(data_dir)).items()
           if key.startswith(("ANSIBLE_", "CLOUDSTACK_", "K8S_AUTH_")) or key == "PATH"}
    env.update(ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_PYTHON_INTERPRETER=PYTHON)
    # The job template's project and playbook, as AWX runs them.
    return ansible_runner.run_async(private_data_dir=str(data_dir), project_dir=str(AWX_PROJECT), playbook="fleet.yml",
                                    inventory=str(inv),
                                    extravars=dict(variables, awx_job_id=job_id), envvars=env, forks=3, quiet=True)


def test_three_slices_at_once_roll_each_cluster_once_and_an_overlap_is_kept_apart_by_the_lock(
        fleet_sim: ClusterSim, tmp_path: Path) -> None:
    sim = fleet_sim
    names = [f"fleet-0{i}" for i in range(1, 10)]
    offering = NEW_OFFERING
    needs = {n: sorted(workers(sim, n)) for n in names}
    slices = [names[i::3] for i in range(3)]  # AWX slices hosts round robin
    since = rh.sim_time(sim)
    variables = dict(FAST, fleet_group="cks_clusters", fleet_parallel=3, fleet_work_dir=str(tmp_path / "fleet"),
                     fleet_node_offerings={"worker": offering})
    jobs = []
    for number, hosts in enumerate(slices):
        inv = inventory(sim, hosts, tmp_path / f"slice-{number}.yml")
        jobs.append(runner_job(sim, tmp_path / f"job-{number}", inv, 100 + number,
                               dict(variables, fleet_report_path=str(tmp_path / f"report-{number}.json"))))
    # The mistake: a fourth job handed a cluster of slice 0 while that slice holds its lock.
    overlap = slices[0][0]

    def locked() -> bool:
        with sim.kube_client(overlap) as kube:
            lease = kube.get_lease("kube-system", "cloudstack-cks-rollout")
        return bool(lease and (lease.get("spec") or {}).get("holderIdentity"))
    wait_until(locked, timeout=600, what=f"slice 0 takes the lock of {overlap}", interval=rh.ADMIN_POLL)
    inv = inventory(sim, [overlap], tmp_path / "overlap.yml")
    overlap_job = runner_job(sim, tmp_path / "job-overlap", inv, 200,
                             dict(variables, fleet_report_path=str(tmp_path / "report-overlap.json")))
    for thread, _runner in [*jobs, overlap_job]:
        thread.join(timeout=1500)
    for number, (_thread, runner) in enumerate(jobs):
        assert runner.status == "successful", (number, runner.status, runner.stdout.read()[-3000:])
    reports = [json.loads((tmp_path / f"report-{n}.json").read_text(encoding="utf-8")) for n in range(3)]
    outcomes = {e["cluster"]: e for report in reports for e in report["clusters"]}
    assert set(outcomes) == set(names)
    stops = stops_per_node(sim.timeline(since))
    for name in names:
        assert {vm["offering"] for vm in workers(sim, name).values()} == {offering}, name
        assert outcomes[name]["outcome"] == "rolled", outcomes[name]
        assert all(stops.get(vm) == 1 for vm in needs[name]), (name, stops)
    overlap_report = json.loads((tmp_path / "report-overlap.json").read_text(encoding="utf-8"))
    entry = overlap_report["clusters"][0]
    # Kept apart by the lock while slice 0 rolls the cluster; or, on a fast machine, planned only
    # after slice 0 released it, when there is nothing left to roll. Either way each node of it
    # was stopped once (above): the overlap never rolled it a second time.
    assert entry["outcome"] in ("locked", "up_to_date"), entry
    if entry["outcome"] == "locked":
        assert entry["locked_by"] == "awx-job-100", entry
        assert entry["last_error"] == "skipped: locked by awx-job-100", entry
    else:
        assert entry["last_error"] is None, entry
    assert overlap_job[1].status == "successful"  # a skip is not a failure of that job
    rh.assert_no_invariant_broken(sim)
