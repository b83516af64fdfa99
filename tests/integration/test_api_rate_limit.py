"""Rollouts on a cloud with CloudStack's API rate limit on (cks-sim ``cloud.api_throttling_*``).

The rollout's key is a domain admin of ROOT (the limit never applies to a root admin,
ApiRateLimitServiceImpl.checkAccess); the tests' own reads use the root admin's key, so only the
rollout's calls are counted. The window is one real second: ``api_throttling_interval`` is in
simulated seconds, ``1 / time_scale`` of them.

1. A four-worker rollout on a cloud limited to 5 calls a second completes: every refusal waited
   out, no failure, no invariant broken.
2. A key that stays refused past the batch deadline: the rollout stops cleanly, its error names the
   limit and the wait; the rerun, the limit lifted, converges.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.timeout(900)

TIME_SCALE = 0.01
ROLLOUT_KEY = {"name": "ops", "domain": "ROOT", "role": "domainadmin", "apikey": "ops-key", "secretkey": "ops-secret"}
WORKERS = {"rollout_node_offerings": {"worker": "cks-large"}, "rollout_max_unavailable": 2}


def limited_sim(rollout_sim: Any, max_calls: int, seconds: float = 1.0) -> Any:
    return rollout_sim("small.yml", time_scale=TIME_SCALE, accounts=[ROLLOUT_KEY],
                       invariants={"max_unavailable": {"worker": 2}},
                       cloud={"api_throttling_max": max_calls, "api_throttling_interval": seconds / TIME_SCALE})


def as_ops() -> dict[str, str]:
    return {"CLOUDSTACK_KEY": ROLLOUT_KEY["apikey"], "CLOUDSTACK_SECRET": ROLLOUT_KEY["secretkey"]}


def cloudstack_calls(sim: Any) -> list[dict[str, Any]]:
    return [c for c in sim.admin("GET", "/calls") if c.get("api") == "cloudstack"]


def test_a_four_worker_rollout_at_five_calls_a_second_completes(rollout_sim: Any) -> None:
    sim = limited_sim(rollout_sim, max_calls=5)
    run = sim.rollout(env=as_ops(), **WORKERS)
    assert run.rc == 0, run.output
    sim.assert_converged()
    calls = [c for c in cloudstack_calls(sim) if c.get("account") == "ops" or c.get("throttled")]
    throttled = [c for c in calls if c.get("throttled")]
    # The limit was met (the test means something), and every refused call was made good.
    assert throttled, "the rollout never met the limit: the test's limit is too high"
    assert {c["status"] for c in throttled} == {429}
    assert all(c["account"] == "ops" for c in throttled)
    # No change was sent twice: each stop and start went through once per worker.
    done = [c for c in cloudstack_calls(sim) if c["status"] == 200]
    for command in ("stopVirtualMachine", "startVirtualMachine", "changeServiceForVirtualMachine"):
        assert len([c for c in done if c["command"] == command]) == 4, command


def test_a_key_refused_past_the_batch_deadline_stops_cleanly_and_the_rerun_converges(rollout_sim: Any) -> None:
    # One call per minute: the plan's first call goes through, the next waits past any batch deadline.
    sim = limited_sim(rollout_sim, max_calls=1, seconds=60)
    run = sim.rollout(env=as_ops(), rollout_batch_timeout=20, **WORKERS)
    assert run.rc != 0, run.output
    status = sim.status()
    assert status["lock_holder"] is None, status["lock"]
    assert sim.invariants() == []
    for node in status["nodes"]:
        assert node["vm_state"] == "Running" and not node["cordoned"], node
    assert "API rate limit" in run.stdout and "please retry after [" in run.stdout, run.output
    assert "deadline" in run.stdout, run.output
    sim.admin("POST", "/actions", {"action": "set_config", "cloud": {"api_throttling_max": -1}})
    rerun = sim.rollout(env=as_ops(), **WORKERS)
    assert rerun.rc == 0, rerun.output
    sim.assert_converged()
