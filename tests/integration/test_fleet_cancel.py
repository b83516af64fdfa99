"""The fleet's dry run and the cancel of a fleet job, against cks-sim with many clusters
(tests/sim/examples/fleet.yml).

1. ``ansible-playbook cloudstack.cks.fleet --check``: each cluster's rollout runs as its own dry run;
   nothing changes in any cluster (no CloudStack or Kubernetes write, no lock, no record, no node
   annotated or cordoned) and the fleet report gives each cluster's plan (out-of-date nodes per
   type, the batches).
2. A fleet job cancelled as AWX cancels (SIGTERM to ansible-playbook, its pid only) while its
   clusters roll: ansible-playbook passes the signal to its workers (TaskQueueManager._signal_handler,
   WorkerProcess._term), each cluster's cks_fleet_rollout asks its rollout to stop as cancel.yml does,
   the rollouts finish their batch and release. Afterwards no process of the job is left, no
   cluster is locked, no node is cordoned, and a rerun converges, each node restarted once.
3. The same through ansible-runner (AWX's engine), whose cancel SIGKILLs ansible-playbook's process
   group (ansible_runner.runner.Runner.handle_termination): the workers' own sessions survive it, so
   each cks_fleet_rollout sees its controller gone and cancels its rollout the same way.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
import rollout_helpers as rh
from cks_sim.harness import wait_until
from fleet_helpers import AWX_PROJECT, NEW_OFFERING, fleet_vars, inventory, stops_per_node, unschedulable, workers
from helpers import ANSIBLE_PLAYBOOK, COLLECTIONS, PYTHON, ClusterSim, running_sim

pytestmark = pytest.mark.timeout(1500)

NAMES = ["fleet-01", "fleet-02", "fleet-03"]
#: Set in the job's environment, which every process of it inherits (the rollouts' runs too): how a
#: test finds the processes a cancelled job left.
MARK = "CKS_FLEET_TEST_MARK"


@pytest.fixture()
def fleet_sim() -> Iterator[ClusterSim]:
    with running_sim("fleet.yml") as sim:
        yield sim


def processes_marked(mark: str) -> list[int]:
    found = []
    needle = f"{MARK}={mark}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def lock_holders(sim: ClusterSim) -> dict[str, Any]:
    holders = {}
    for name in NAMES:
        with sim.kube_client(name) as kube:
            lease = kube.get_lease(*rh.RECORD)
        holders[name] = ((lease or {}).get("spec") or {}).get("holderIdentity") or None
    return holders


def annotated(sim: ClusterSim, name: str) -> list[str]:
    kube = sim.state()["kube"][sim.cluster(name)["id"]]
    return [node["name"] for node in kube["nodes"] if rh.ANNOTATION in (node.get("annotations") or {})]


def fleet_command(inv: Path, vars_path: Path, *args: str) -> list[str]:
    return [ANSIBLE_PLAYBOOK, "cloudstack.cks.fleet", "-i", str(inv), "-e", f"@{vars_path}", "--forks", "3", *args]


def test_fleet_check_mode_changes_nothing_and_reports_each_clusters_plan(fleet_sim: ClusterSim, tmp_path: Path) -> None:
    sim = fleet_sim
    inv = inventory(sim, NAMES, tmp_path / "inventory.yml")
    before = {name: workers(sim, name) for name in NAMES}
    report_path = tmp_path / "report.json"
    vars_path = tmp_path / "vars.json"
    vars_path.write_text(json.dumps(fleet_vars(tmp_path, fleet_parallel=3, fleet_report_path=str(report_path))), encoding="utf-8")
    since = rh.sim_time(sim)
    proc = subprocess.run(fleet_command(inv, vars_path, "--check"), env=rh.playbook_env(sim, str(tmp_path)), cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=900, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    report = json.loads(report_path.read_text(encoding="utf-8"))
    outcomes = {entry["cluster"]: entry for entry in report["clusters"]}
    assert set(outcomes) == set(NAMES)
    for name in NAMES:
        entry = outcomes[name]
        assert entry["outcome"] == "would_roll", entry
        assert entry["plan"]["out_of_date"] == {"control": 0, "etcd": 0, "worker": 2}, entry
        planned = [node for batch in entry["plan"]["batches"] for node in batch["nodes"]]
        assert sorted(planned) == sorted(before[name]), entry
        assert {batch["node_type"] for batch in entry["plan"]["batches"]} == {"worker"}
        assert entry["nodes_restarted"] == []
        assert f"{name}: would_roll, out of date: worker 2" in output
    # Nothing changed anywhere: no write to CloudStack or Kubernetes but the access reviews the
    # dry run asks (a SelfSubjectAccessReview is a create that stores nothing), no lock, no record.
    writes = [call for call in rh.mutating_calls(sim, since)
              if "selfsubjectaccessreview" not in json.dumps(call).lower()]
    assert writes == [], writes
    assert lock_holders(sim) == {name: None for name in NAMES}
    for name in NAMES:
        with sim.kube_client(name) as kube:
            assert kube.get_configmap(*rh.RECORD) is None, name
        assert annotated(sim, name) == [] and unschedulable(sim, name) == []
        assert workers(sim, name) == before[name]
    assert stops_per_node(sim.timeline(since)) == {}
    rh.assert_no_invariant_broken(sim)


def cancel_vars(tmp_path: Path, report_path: Path) -> dict[str, Any]:
    # A pause between the batches keeps each rollout running long enough to be cancelled in the middle.
    return fleet_vars(tmp_path, fleet_parallel=3, fleet_report_path=str(report_path), fleet_cancel_timeout=240,
                      rollout_pause_seconds=15)


def wait_for_a_node_in_flight(sim: ClusterSim, since: float) -> None:
    wait_until(lambda: stops_per_node(sim.timeline(since)), timeout=600, what="the fleet stops a first node", interval=rh.ADMIN_POLL)


def assert_cancelled_cleanly(sim: ClusterSim, mark: str, report_path: Path, before: dict[str, dict[str, Any]], since: float) -> None:
    wait_until(lambda: not processes_marked(mark), timeout=300, what="every process of the cancelled job ends", interval=1)
    assert lock_holders(sim) == {name: None for name in NAMES}
    for name in NAMES:
        assert unschedulable(sim, name) == [], name
        assert annotated(sim, name) == [], name
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["cancelled"] is True
    outcomes = {entry["cluster"]: entry for entry in report["clusters"]}
    assert set(outcomes) == set(NAMES), report
    # The three ended close together, each rewriting the report: the one left is every cluster's own outcome.
    written = [json.loads(path.read_text(encoding="utf-8")) for path in report_path.parent.glob("fleet/*/*/outcome.json")]
    assert {found["cluster"]: found["outcome"] for found in written} == {name: entry["outcome"] for name, entry in outcomes.items()}, report
    assert report["started"] and report["summary"][0].startswith(f"Fleet {report['run_id']}: 3 cluster(s)"), report
    # Each cluster was running when the job was cancelled: it stopped before its second batch (or, if
    # its first batch was its last, it ended well); none was left in the middle of a node.
    assert {entry["outcome"] for entry in outcomes.values()} <= {"cancelled", "rolled"}, report
    assert any(entry["outcome"] == "cancelled" for entry in outcomes.values()), report
    for entry in outcomes.values():
        if entry["outcome"] == "cancelled":
            assert "the fleet's job was cancelled" in entry["last_error"], entry
            assert "was stopped" not in entry["last_error"], entry  # it ended within the bound by itself
    stops = stops_per_node(sim.timeline(since))
    assert all(count == 1 for count in stops.values()), stops
    assert set(stops) < {vm for vms in before.values() for vm in vms}, stops  # not every node: the cancel stopped some
    rh.assert_no_invariant_broken(sim)


def assert_a_rerun_converges(sim: ClusterSim, inv: Path, tmp_path: Path, before: dict[str, dict[str, Any]], since: float) -> None:
    report_path = tmp_path / "rerun.json"
    vars_path = tmp_path / "rerun-vars.json"
    vars_path.write_text(json.dumps(fleet_vars(tmp_path, fleet_parallel=3, fleet_report_path=str(report_path))), encoding="utf-8")
    proc = subprocess.run(fleet_command(inv, vars_path), env=rh.playbook_env(sim, str(tmp_path)), cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    stops = stops_per_node(sim.timeline(since))
    for name in NAMES:
        assert {vm["offering"] for vm in workers(sim, name).values()} == {NEW_OFFERING}, name
        assert all(stops.get(vm) == 1 for vm in before[name]), (name, stops)  # the cancelled ones were not restarted twice
        assert unschedulable(sim, name) == []
    rh.assert_no_invariant_broken(sim)


def test_a_fleet_job_cancelled_with_sigterm_stops_its_rollouts_cleanly_and_a_rerun_converges(
        fleet_sim: ClusterSim, tmp_path: Path) -> None:
    sim = fleet_sim
    inv = inventory(sim, NAMES, tmp_path / "inventory.yml")
    before = {name: workers(sim, name) for name in NAMES}
    report_path = tmp_path / "report.json"
    vars_path = tmp_path / "vars.json"
    vars_path.write_text(json.dumps(cancel_vars(tmp_path, report_path)), encoding="utf-8")
    mark = uuid.uuid4().hex
    env = dict(rh.playbook_env(sim, str(tmp_path)), **{MARK: mark})
    since = rh.sim_time(sim)
    with open(tmp_path / "fleet.log", "w", encoding="utf-8") as log:
        proc = subprocess.Popen(fleet_command(inv, vars_path), env=env, cwd=str(tmp_path), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            wait_for_a_node_in_flight(sim, since)
            proc.send_signal(signal.SIGTERM)  # the pid only, as AWX signals ansible-playbook
            proc.wait(timeout=60)
            assert_cancelled_cleanly(sim, mark, report_path, before, since)
        finally:
            for pid in processes_marked(mark):
                os.kill(pid, signal.SIGKILL)
    assert_a_rerun_converges(sim, inv, tmp_path, before, since)


ansible_runner = pytest.importorskip("ansible_runner")


def test_a_fleet_job_cancelled_through_ansible_runner_stops_its_rollouts_cleanly(fleet_sim: ClusterSim, tmp_path: Path) -> None:
    sim = fleet_sim
    inv = inventory(sim, NAMES, tmp_path / "inventory.yml")
    before = {name: workers(sim, name) for name in NAMES}
    report_path = tmp_path / "report.json"
    mark = uuid.uuid4().hex
    env = {key: value for key, value in rh.playbook_env(sim, str(tmp_path)).items()
           if key.startswith(("ANSIBLE_", "CLOUDSTACK_", "K8S_AUTH_")) or key == "PATH"}
    env.update({"ANSIBLE_COLLECTIONS_PATH": COLLECTIONS, "ANSIBLE_PYTHON_INTERPRETER": PYTHON, MARK: mark})
    since = rh.sim_time(sim)
    cancel = {"now": False}
    (tmp_path / "job").mkdir()
    thread, runner = ansible_runner.run_async(
        private_data_dir=str(tmp_path / "job"), project_dir=str(AWX_PROJECT), playbook="fleet.yml", inventory=str(inv),
        extravars=dict(cancel_vars(tmp_path, report_path), awx_job_id=300), envvars=env, forks=3, quiet=True,
        cancel_callback=lambda: cancel["now"])
    try:
        wait_for_a_node_in_flight(sim, since)
        cancel["now"] = True  # AWX's cancel: ansible-runner SIGKILLs ansible-playbook's process group
        thread.join(timeout=120)
        assert runner.status == "canceled", runner.status
        started = time.monotonic()
        assert_cancelled_cleanly(sim, mark, report_path, before, since)
        assert time.monotonic() - started < 300
    finally:
        for pid in processes_marked(mark):
            os.kill(pid, signal.SIGKILL)
    assert_a_rerun_converges(sim, inv, tmp_path, before, since)
