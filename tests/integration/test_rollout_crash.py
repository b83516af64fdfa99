"""Lock, crash, resume: a controller SIGKILLed mid-batch stops renewing its lock; once the lease
has expired the next rollout takes over, reports that the previous one stopped without release,
and converges. And the lock stays renewed through a batch longer than the lock lasts."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import rollout_helpers as rh
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions import settings as planning
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import LockHeld
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import Lock, parse_microtime
from cks_sim.harness import wait_until

pytestmark = pytest.mark.timeout(900)

LOCK_SECONDS = 2
# record.DEFAULT_CLOCK_SKEW_SECONDS: how long past its duration a lease still counts as held.
CLOCK_SKEW = 15


def test_killed_controller_then_rerun_after_the_lease_expired_converges() -> None:
    with rh.running_rollout_sim("rollout_small.yml") as sim:
        workers = rh.names(sim, "worker")
        record = rh.ClusterRecord(sim)
        variables = rh.rollout_vars(sim, rollout_node_offerings={"worker": "cks-large"},
                                    rollout_lock_duration=LOCK_SECONDS)
        # Nodes take 30 s (real) to turn Ready after a boot while the controller is killed, so
        # the batch is surely still waiting for its node then.
        sim.action(action="set_config", timings={"boot_to_ready": 3000})
        since = time.time()
        doomed = rh.PlaybookProcess(sim, "rollout.yml", dict(variables, rollout_run_id="run-killed"))
        wait_until(lambda: rh.events(sim.timeline(since), "stop_requested"), 300, "a node to go down", interval=rh.ADMIN_POLL)
        doomed.kill()
        killed = doomed.wait()
        assert killed.rc == -9
        sim.action(action="set_config", timings={"boot_to_ready": 30})

        # The killed holder stops renewing; its node is left down, cordoned and annotated.
        lease = record.lease()
        assert lease["holderIdentity"] == "run-killed"
        time.sleep(LOCK_SECONDS + 1)
        assert record.lease()["renewTime"] == lease["renewTime"]
        victim = rh.restarted(sim.timeline(since))[0]
        node = rh.kube_nodes(sim)[victim]
        assert node["unschedulable"] and rh.ANNOTATION in node["annotations"]

        expires = parse_microtime(lease["renewTime"]).timestamp() + LOCK_SECONDS + CLOCK_SKEW
        time.sleep(max(0.0, expires - time.time()) + 1)
        rerun = rh.run_playbook(sim, "rollout.yml", dict(variables, rollout_run_id="run-resume"))
        assert rerun.rc == 0, rerun.explain()

        # The takeover is reported by the rerun; its release then clears the record's flag (so
        # status tells of a rollout that stopped without release only until a release has run).
        assert not record.data().get("previousHolderStopped")
        assert rerun.report is not None and rerun.report["previous_rollout_stopped"]["holder"] == "run-killed"
        vms = rh.vms(sim)
        assert {vms[w]["offering"] for w in workers} == {"cks-large"}
        assert {vm["state"] for vm in vms.values()} == {"Running"}
        assert all(rh.node_settled(sim, n) for n in rh.kube_nodes(sim).values())
        assert record.holder() is None and record.data()["outcome"] == "Running"
        rh.assert_no_invariant_broken(sim)


def _slow_worker_batch(cycle_sim: Any) -> tuple[Any, str, Any]:
    sim = cycle_sim("rollout_small.yml", etcd=False)
    view = sim.view()
    worker = sim.names("worker")[0]
    settings = planning.Settings.from_dict({
        "control": {"offering_id": sim.offering_id("cks-medium")},
        "worker": {"offering_id": sim.offering_id("cks-large")},
    })
    assert view is not None
    # Evicted pods take 5 s (real) to go: the batch outlasts the 2 s lock many times over.
    sim.fault(kind="slow_drain", seconds=500)
    return sim, worker, settings


def test_lock_renewed_while_a_batch_outlasts_it(cycle_sim: Any) -> None:
    sim, worker, settings = _slow_worker_batch(cycle_sim)
    ours = Lock(sim.kube, holder_identity="run-long", duration_seconds=LOCK_SECONDS, clock_skew_seconds=0)
    ours.acquire()
    refusals: list[str] = []
    stop = threading.Event()

    def contender() -> None:
        # Another rollout trying to take over the whole time the batch runs.
        other = Lock(sim.kube, holder_identity="run-other", duration_seconds=LOCK_SECONDS, clock_skew_seconds=0)
        while not stop.wait(0.5):
            try:
                other.acquire()
                refusals.append("TAKEN")
                return
            except LockHeld:
                refusals.append("held")

    thread = threading.Thread(target=contender, daemon=True)
    thread.start()
    started = time.time()
    result = sim.cycle([worker], settings, lock=ours)
    stop.set()
    thread.join()
    assert not result.failed, result.error
    assert time.time() - started > 2 * LOCK_SECONDS
    assert "TAKEN" not in refusals and len(refusals) >= 4
    assert Lock(sim.kube).read().holder == "run-long"


def test_batch_fails_when_the_lock_is_lost_meanwhile(cycle_sim: Any) -> None:
    sim, worker, settings = _slow_worker_batch(cycle_sim)
    ours = Lock(sim.kube, holder_identity="run-a", duration_seconds=LOCK_SECONDS, clock_skew_seconds=0)
    ours.acquire()

    def steal() -> None:
        time.sleep(1.0)
        lease = sim.kube.get_lease("kube-system", "cloudstack-cks-rollout")
        lease["spec"]["holderIdentity"] = "run-b"
        sim.kube.replace_lease("kube-system", "cloudstack-cks-rollout", lease)

    thief = threading.Thread(target=steal, daemon=True)
    thief.start()
    result = sim.cycle([worker], settings, lock=ours)
    thief.join()
    # The node already down was finished rather than abandoned, then the batch failed.
    assert [r.outcome for r in result.results] == ["done"]
    assert result.failed and result.error.step == "lock"
    assert "run-b" in result.error.msg
