"""The seed's rules on the release and the status after a rollout: a release changes only what its rollout
set, status tells the truth after a crash, and leads with the failed batch after a failure.

Each failed before its fix, through the real module or playbook against cks-sim, invariants checked
after each; test_seed_rules_{refusals,order,node_cycle,release}.py group the seed's rules by behaviour.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from helpers import run_module

from ansible_collections.cloudstack.cks.plugins.module_utils._state import record as records

pytestmark = pytest.mark.timeout(900)

ANNOTATION = "cloudstack.apache.org/rollout-boot-id"
STATUS_PLAYBOOK = os.path.join(os.path.dirname(__file__), "..", "..", "playbooks", "status.yml")


# -- release changes only what this rollout set ------------------------------------------------------

def test_release_of_a_rollout_whose_lock_was_taken_over_changes_nothing(rollout_sim: Any) -> None:
    sim = rollout_sim("rollout_small.yml")
    worker = sim.names("worker")[0]
    # The rollout that took the lock over after ours expired: it holds the lock, has cordoned a
    # worker (annotated with a boot ID the node no longer has: it is back) and stored its own error.
    records.Lock(sim.kube, holder_identity="run-new", duration_seconds=600).acquire()
    sim.kube.patch_node(worker, {"metadata": {"annotations": {ANNOTATION: "boot-before-run-new"}},
                                 "spec": {"unschedulable": True}})
    store = records.RecordStore(sim.kube)
    store.update(lambda r: (setattr(r, "last_error", "run-new: batch 1 in progress"), setattr(r, "outcome", "Alert")))
    before = store.read()

    result = run_module("cks_node_cycle", {"cluster": sim.env["cluster_name"], "mode": "release",
                                           "lock_holder": "run-old", "rollout": {"last_error": "run-old failed"},
                                           **sim.connection_args()})

    assert result["failed"] is False, result
    assert result["changed"] is False
    assert "run-new holds the lock" in result["msg"], result["msg"]
    assert result["release"]["lock_held_by"]["holder"] == "run-new"
    assert result["release"]["uncordoned"] == [] and result["release"]["outcome"] == "unchanged"
    node = sim.kube.read_node(worker)
    assert node["spec"].get("unschedulable") is True
    assert node["metadata"]["annotations"][ANNOTATION] == "boot-before-run-new"
    after = store.read()
    assert (after.last_error, after.outcome) == (before.last_error, before.outcome) == ("run-new: batch 1 in progress", "Alert")
    assert records.Lock(sim.kube).read().holder == "run-new"
    assert sim.invariants() == []


# -- status after a crash tells the truth ------------------------------------------------------------

def test_status_names_a_rollout_that_stopped_without_release_until_a_release_ran(rollout_sim: Any) -> None:
    from datetime import datetime, timedelta, timezone

    sim = rollout_sim("rollout_small.yml")
    worker = sim.names("worker")[0]
    # A rollout that crashed an hour ago with a worker cordoned: its lock expired long since.
    an_hour_ago = datetime.now(timezone.utc) - timedelta(hours=1)
    records.Lock(sim.kube, holder_identity="run-dead", duration_seconds=60, clock=lambda: an_hour_ago).acquire()
    boot_id = sim.kube.read_node(worker)["status"]["nodeInfo"]["bootID"]
    sim.kube.patch_node(worker, {"metadata": {"annotations": {ANNOTATION: boot_id}}, "spec": {"unschedulable": True}})

    status = sim.rollout(playbook=STATUS_PLAYBOOK)
    assert status.rc == 0, status.output
    assert "A rollout stopped without release: run-dead (since " in status.stdout, status.output
    assert "its lock expired, nobody took it over" in status.stdout and f"nodes it left annotated: {worker}" in status.stdout
    assert "No rollout stopped without release" not in status.stdout

    # The next rollout takes the lock over, rolls the node it left (its boot ID never changed) and releases.
    run = sim.rollout()
    assert run.rc == 0, run.output
    after = sim.rollout(playbook=STATUS_PLAYBOOK)
    assert after.rc == 0, after.output
    assert "No rollout stopped without release" in after.stdout, after.output
    sim.assert_converged()


# -- after a failed rollout the summary and status lead with its result ------------------------------

def test_a_failed_rollout_leads_its_summary_and_status_with_the_failed_batch(rollout_sim: Any) -> None:
    sim = rollout_sim("rollout_small.yml")
    workers = sim.names("worker")
    # One worker's stop fails; the batches before it went through, the cluster is healthy after release.
    sim.fault(kind="job_failure", command="stopVirtualMachine", vm=workers[1], code=530,
              errortext="Unable to stop the VM: the host does not answer", count=1)

    run = sim.rollout(rollout_node_offerings={"worker": "cks-large"})

    assert run.rc != 0, run.output
    failed = next(b["batch"] for b in run.report["batches"] if b["outcome"] == "failed")
    assert run.report["batches"][failed - 1]["nodes"] == [workers[1]]
    assert f"of {sim.env['cluster_name']}: failed at batch {failed} of 3: node {workers[1]}" in run.stdout, run.output
    # The health beside the result is the release's outcome, whatever it is.
    assert f"; cluster health: {run.report['outcome']}" in run.stdout, run.output
    assert run.report["result"] == f"failed at batch {failed} of 3"

    status = sim.rollout(playbook=STATUS_PLAYBOOK)
    assert status.rc == 0, status.output
    line = status.stdout.split("Last rollout: ", 1)[1].splitlines()[0]
    assert line.startswith(f"failed at batch {failed} of 3: node {workers[1]}"), line
    assert f"; cluster health: {run.report['outcome']}" in line, line
    assert sim.invariants() == []
