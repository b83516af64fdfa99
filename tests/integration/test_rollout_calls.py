"""What a small rollout costs the CloudStack management server (every call is load on it), counted from cks-sim's
call log: at most 12 CloudStack calls per rolled node, the catalog (offerings, disk offerings,
affinity groups) listed once per rollout, one or two queryAsyncJobResult per job when the jobs are
as quick as the first poll, and the per-batch reads of the cluster and its kubeconfig once per module
run, not again by the steps."""

from __future__ import annotations

import time
from collections import Counter

import pytest
import rollout_helpers as rh

pytestmark = pytest.mark.timeout(900)

CATALOG = ("listServiceOfferings", "listDiskOfferings", "listAffinityGroups")
JOBS = ("stopVirtualMachine", "startVirtualMachine", "resizeVolume", "updateVMAffinityGroup")
# The bound, in the bench rollouts and here.
CALLS_PER_NODE = 12


def test_a_small_rollout_stays_within_the_cloudstack_call_budget() -> None:
    with rh.running_rollout_sim("rollout_pools.yml", max_unavailable={"worker": 3}) as sim:
        workers = sorted(rh.names(sim, "worker"))
        since = time.time()
        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(
            sim, rollout_node_offerings={"worker": "cks-large"}, rollout_max_unavailable=3))
        assert run.rc == 0, run.explain()
        calls = Counter(c["command"] for c in sim.calls(since) if c.get("api") == "cloudstack")
        rolled = len(rh.restarted(sim.timeline(since)))
        assert rolled == len(workers) == 6

        total = sum(calls.values())
        assert total / rolled <= CALLS_PER_NODE, (total / rolled, dict(calls))
        assert {c: calls[c] for c in CATALOG} == {c: 1 for c in CATALOG}, dict(calls)
        # Each rolled node: one stop, one offering change, one start; no resize or group change asked.
        assert calls["stopVirtualMachine"] == calls["startVirtualMachine"] == rolled
        assert calls["changeServiceForVirtualMachine"] == rolled
        # A stop takes 0.1 s and a start 0.15 s here: the first batch's jobs are polled at the poll
        # interval and found ended; the next batch's are probed in the middle of what those took, one
        # poll each or two when still running there (job_polls: the slack shrinks for a few more
        # polls), never one every poll interval (a little slack for a loaded machine).
        jobs = sum(calls[c] for c in JOBS)
        assert jobs <= calls["queryAsyncJobResult"] <= 1.5 * jobs + 2, dict(calls)
        # The verify takes the VM from the start's answer: no VM is listed by id after its start.
        by_id = [c for c in sim.calls(since) if c.get("command") == "listVirtualMachines"
                 and "id" in (c.get("params") or {})]
        assert by_id == []
        assert {rh.vms(sim)[w]["offering"] for w in workers} == {"cks-large"}
        rh.assert_no_invariant_broken(sim)


def test_a_rollout_of_one_worker_a_batch_polls_each_stop_once_or_twice() -> None:
    """Fewer job polls: a rollout of one worker a batch hands what each batch's jobs took to the next batch's
    module run (job_seconds, [after, by]), which aims its first poll by it: each stop costs one poll,
    two when a probe finds it still running, never one every interval. (How the slack shrinks job
    after job is shown with the client alone in test_clients_cloudstack.py, where the margins are
    seconds; here the sim's stops take 0.1 s, too short to tell from a busy machine's delays.)"""
    with rh.running_rollout_sim("rollout_pools.yml", max_unavailable={"worker": 1}) as sim:
        since = time.time()
        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(
            sim, rollout_node_offerings={"worker": "cks-large"}, rollout_max_unavailable=1))
        assert run.rc == 0, run.explain()
        calls = sim.calls(since)
        stops = [c["jobid"] for c in calls if c.get("command") == "stopVirtualMachine" and c.get("jobid")]
        polls = [sum(1 for c in calls if c.get("command") == "queryAsyncJobResult"
                     and (c.get("params") or {}).get("jobid") == jobid) for jobid in stops]
        assert len(polls) == 6, polls
        assert min(polls) >= 1 and max(polls) <= 3 and sum(polls) <= 10, polls
        rh.assert_no_invariant_broken(sim)
