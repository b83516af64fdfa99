"""A cancelled or killed job never blocks the next one, and status tells what happened.

1. AWX's cancel through ansible-runner itself (its cancel_callback: Runner.handle_termination SIGKILLs
   ansible-playbook's process group) mid-batch, and the same SIGKILL of the process group by hand: the
   batch's module run lives on in its worker's own session, finishes its batch (no node left Stopped or
   cordoned), releases the rollout itself - the lock is free with the last error "the controller went
   away during batch N of M" - and the next run starts without a refusal.
2. A controller killed with its module runs (its host gone: the lease is made to name another host, as
   one written there would): the next run is refused naming the holder, its controller and when the lock
   ends; ``unlock`` of a live rollout is refused (its batch renews the lease), ``unlock`` naming the dead
   holder takes the lock at once.
After each, the status playbook tells what happened.
"""

from __future__ import annotations

import json
import os
import re
import signal
from typing import Any, Callable

import pytest
import rollout_helpers as rh
from cks_sim.harness import wait_until
from helpers import PYTHON, ClusterSim

pytestmark = pytest.mark.timeout(1200)

ansible_runner = pytest.importorskip("ansible_runner")

CONTROLLER = "cloudstack.apache.org/rollout-controller"


def node_down(sim: ClusterSim, since: float) -> Callable[[], Any]:
    return lambda: rh.events(sim.timeline(since), "stop_requested")


def assert_put_back(sim: ClusterSim) -> None:
    """No node Stopped, cordoned or annotated; the lock free."""
    assert {vm["state"] for vm in rh.vms(sim).values()} == {"Running"}
    assert all(rh.node_settled(sim, n) for n in rh.kube_nodes(sim).values()), rh.kube_nodes(sim)


def released_by_orphan(sim: ClusterSim, record: rh.ClusterRecord, victim: str, since: float) -> str:
    """Waits for the orphaned batch run's release; returns the last error it recorded."""
    try:
        wait_until(lambda: record.holder() is None and "controller went away" in (record.data().get("lastError") or ""),
                   300, "the orphaned batch run to release the rollout", interval=rh.ADMIN_POLL)
    except Exception as exc:  # what was left, to explain the failure
        raise AssertionError(f"{exc}: record {record.data()}, lease {record.lease_object()}, "
                             f"nodes {rh.kube_nodes(sim)}, vms {rh.vms(sim)}") from exc
    items = sim.timeline(since)
    # Its batch reached its safe point first: the node it had stopped was started again.
    assert rh.events(items, "started", victim), items
    assert_put_back(sim)
    return record.data()["lastError"]


def status_text(sim: ClusterSim, variables: dict[str, Any]) -> str:
    run = rh.run_playbook(sim, "status.yml", {"rollout_cluster": variables["rollout_cluster"]})
    assert run.rc == 0, run.explain()
    return run.stdout


def test_ansible_runner_cancel_mid_batch_releases_and_the_next_run_starts(tmp_path: Any) -> None:
    with rh.running_rollout_sim("rollout_small.yml") as sim:
        record = rh.ClusterRecord(sim)
        variables = rh.rollout_vars(sim, rollout_node_offerings={"worker": "cks-large"}, awx_job_id=4711)
        # Nodes take 10 s (real) to turn Ready after a boot: the batch is still at work when ansible-runner,
        # which asks its cancel_callback only between two reads of the job's output, cancels.
        sim.action(action="set_config", timings={"boot_to_ready": 1000})
        data_dir = tmp_path / "job"
        data_dir.mkdir()
        env = rh.playbook_env(sim, str(data_dir))
        env.update(JOB_ID="4711", PATH=os.path.dirname(PYTHON) + os.pathsep + env.get("PATH", ""))
        since = rh.sim_time(sim)
        seen: list[dict[str, Any]] = []

        def cancel() -> bool:
            if not node_down(sim, since)():
                return False
            seen.append(json.loads(record.lease_object()["metadata"]["annotations"][CONTROLLER]))
            return True

        result = ansible_runner.run(private_data_dir=str(data_dir), project_dir=rh.PLAYBOOKS, playbook="rollout.yml",
                                    extravars=variables, envvars=env, quiet=True, cancel_callback=cancel)
        # The lease named the AWX job (JOB_ID, as AWX sets it) and the ansible-playbook it ran.
        assert seen and seen[0]["awx_job"] == "4711" and seen[0]["pid"], seen
        # AWX's cancel: ansible-runner SIGKILLed ansible-playbook's process group mid-batch.
        assert result.status == "canceled", result.status
        victim = node_down(sim, since)()[0]["node"]
        last_error = released_by_orphan(sim, record, victim, since)
        assert re.search(r"the controller went away during batch \d of 3 \(", last_error), last_error
        assert re.match(r"stopped: the controller went away during batch \d of 3$", record.data()["result"])

        status = status_text(sim, variables)
        assert "Last rollout: stopped: the controller went away during batch" in status, status
        assert "Lock: free" in status, status

        rerun = rh.run_playbook(sim, "rollout.yml", dict(variables, awx_job_id=4712))
        assert rerun.rc == 0, rerun.explain()
        assert "holds the lock" not in rerun.stdout
        assert {vm["offering"] for name, vm in rh.vms(sim).items() if name in rh.names(sim, "worker")} == {"cks-large"}
        assert_put_back(sim)
        rh.assert_no_invariant_broken(sim)


def test_sigkill_of_the_process_group_mid_batch_releases_and_the_next_run_starts() -> None:
    with rh.running_rollout_sim("rollout_small.yml") as sim:
        record = rh.ClusterRecord(sim)
        variables = rh.rollout_vars(sim, rollout_node_offerings={"worker": "cks-large"})
        since = rh.sim_time(sim)
        doomed = rh.PlaybookProcess(sim, "rollout.yml", dict(variables, rollout_run_id="run-killed"))
        wait_until(node_down(sim, since), 300, "a node to go down", interval=rh.ADMIN_POLL)
        # The lease says who holds it: this host, the ansible-playbook process and its start time.
        lease = record.lease_object()
        controller = json.loads(lease["metadata"]["annotations"][CONTROLLER])
        assert controller["pid"] == doomed.proc.pid and controller["host"] == os.uname().nodename
        assert controller["started"] and controller["start_ticks"]
        os.killpg(doomed.proc.pid, signal.SIGKILL)  # the process group only: the workers' sessions survive
        assert doomed.wait().rc == -9
        victim = node_down(sim, since)()[0]["node"]
        last_error = released_by_orphan(sim, record, victim, since)
        assert "the controller went away during batch" in last_error, last_error

        cancel = rh.run_playbook(sim, "cancel.yml", {"rollout_cluster": variables["rollout_cluster"]})
        assert cancel.rc == 0 and "no rollout is running" in cancel.stdout, cancel.explain()

        rerun = rh.run_playbook(sim, "rollout.yml", dict(variables, rollout_run_id="run-next"))
        assert rerun.rc == 0, rerun.explain()
        assert_put_back(sim)
        status = status_text(sim, variables)
        assert "Last rollout: done" in status, status
        rh.assert_no_invariant_broken(sim)


def test_host_gone_refuses_naming_the_holder_and_unlock_takes_it_but_never_from_a_live_rollout() -> None:
    with rh.running_rollout_sim("rollout_small.yml") as sim:
        record = rh.ClusterRecord(sim)
        lock_seconds = 30
        variables = rh.rollout_vars(sim, rollout_node_offerings={"worker": "cks-large"}, rollout_lock_duration=lock_seconds)
        # Nodes take 30 s (real) to turn Ready after a boot: the batch is still at work when it is looked at.
        sim.action(action="set_config", timings={"boot_to_ready": 3000})
        since = rh.sim_time(sim)
        doomed = rh.PlaybookProcess(sim, "rollout.yml", dict(variables, rollout_run_id="run-lost"))
        wait_until(node_down(sim, since), 300, "a node to go down", interval=rh.ADMIN_POLL)

        # A live rollout: its batch renews the lease while the unlock watches it, so the unlock is refused.
        live = rh.run_playbook(sim, "unlock.yml", {"rollout_cluster": variables["rollout_cluster"], "rollout_holder": "run-lost"})
        assert live.rc != 0 and "still being renewed" in live.stdout, live.explain()
        assert record.holder() == "run-lost"

        # Its host goes away: every process of it is killed; the lease names a host that is gone.
        doomed.kill()
        doomed.wait()
        sim.action(action="set_config", timings={"boot_to_ready": 30})
        lease = record.lease_object()
        controller = json.loads(lease["metadata"]["annotations"][CONTROLLER])
        controller["host"] = "controller-host-gone"
        lease["metadata"]["annotations"][CONTROLLER] = json.dumps(controller)
        kube = sim.kube_client()
        try:
            kube.replace_lease("kube-system", "cloudstack-cks-rollout", lease)
        finally:
            kube.close()

        refused = rh.run_playbook(sim, "rollout.yml", dict(variables, rollout_run_id="run-next"))
        assert refused.rc != 0
        assert "run-lost" in refused.stdout and "controller-host-gone" in refused.stdout, refused.explain()
        assert "the lock ends at" in refused.stdout and "cloudstack.cks.unlock" in refused.stdout, refused.explain()
        status = status_text(sim, variables)
        assert "held by run-lost" in status and "controller-host-gone" in status, status

        unlocked = rh.run_playbook(sim, "unlock.yml", {"rollout_cluster": variables["rollout_cluster"], "rollout_holder": "run-lost"})
        assert unlocked.rc == 0 and "unlocked the lock of run-lost" in unlocked.stdout, unlocked.explain()
        assert record.holder() is None
        assert "run-lost" in record.data()["lastError"] and "unlocked by the operator" in record.data()["lastError"]
        status = status_text(sim, variables)
        assert "Last rollout: stopped without release" in status and "Lock: free" in status, status

        rerun = rh.run_playbook(sim, "rollout.yml", dict(variables, rollout_run_id="run-next"))
        assert rerun.rc == 0, rerun.explain()
        assert_put_back(sim)
        rh.assert_no_invariant_broken(sim)
