"""Whole rollouts (``ansible-playbook playbooks/rollout.yml``) run with a CloudStack 4.23 API key pair
whose own rules leave out a command the rollout needs, or that ends during the rollout.

A command outside a key pair's rules is answered 432 by ``DynamicRoleBasedAPIAccessChecker.checkAccess``
(cks-sim follows it, cks_sim/api_keys.py): once a node is stopped that would leave it down. So the
rollout asks listApis before the lock and refuses naming each command and the node type that needs
it; nothing in the cloud changes. specs/rollout_placement.yml's domain admin ``ops`` gets key pairs.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import yaml
from rollout_helpers import SPECS

pytestmark = pytest.mark.timeout(900)

SPREAD = {"worker": ["ops-spread"]}
CHANGES = ("stopVirtualMachine", "updateVMAffinityGroup", "changeServiceForVirtualMachine", "startVirtualMachine",
           "resizeVolume")
#: What a rollout reads and the node cycle's changes but the groups' (updateVMAffinityGroup).
NO_GROUPS = ["list*", "get*", "queryAsyncJobResult", "stopVirtualMachine", "startVirtualMachine",
             "changeServiceForVirtualMachine", "resizeVolume"]


def spec(end: datetime) -> dict[str, Any]:
    with open(os.path.join(SPECS, "rollout_placement.yml"), encoding="utf-8") as fh:
        raw = yaml.safe_load(fh)
    raw["cloud"] = {"version": "4.23.0.0"}
    raw["accounts"][0]["keys"] = [
        {"name": "no-groups", "apikey": "ops-no-groups", "secretkey": "ops-no-groups-secret", "rules": NO_GROUPS},
        {"name": "short-lived", "apikey": "ops-short", "secretkey": "ops-short-secret",
         "rules": NO_GROUPS + ["updateVMAffinityGroup"], "enddate": end.strftime("%Y-%m-%dT%H:%M:%S+0000")},
    ]
    return raw


def key(name: str) -> dict[str, str]:
    return {"CLOUDSTACK_KEY": f"ops-{name}", "CLOUDSTACK_SECRET": f"ops-{name}-secret"}


def changes_sent(sim: Any, since: float) -> list[str]:
    return [c["command"] for c in sim.calls() if c.get("api") == "cloudstack" and c.get("t", since) >= since
            and c.get("command") in CHANGES]


def test_a_key_whose_rules_leave_out_update_vm_affinity_group_is_refused_before_the_lock(rollout_sim: Any) -> None:
    sim = rollout_sim(spec(datetime.now(timezone.utc) + timedelta(days=30)))
    since = time.time()

    run = sim.rollout(env=key("no-groups"), rollout_node_affinity_groups=SPREAD)

    assert run.rc != 0, run.output
    out = run.stdout
    assert "Refused before the lock (nothing changed)" in out, run.output
    assert "the API key pair no-groups may not call every command the rollout sends" in out, out
    assert "updateVMAffinityGroup (needed by the worker node(s)" in out, out
    assert "stopVirtualMachine" not in out.split("may not call", 1)[1].split("Give the key", 1)[0], out
    assert changes_sent(sim, since) == []
    cluster = next(c for c in sim.state()["cloud"]["clusters"] if c["name"] == "ops-k8s")
    assert all(vm["state"] == "Running" for vm in cluster["vms"])
    asked = [c for c in sim.calls() if c.get("api") == "cloudstack" and c.get("t", since) >= since
             and c.get("command") == "listApis"]
    assert len(asked) == 1 and asked[0]["status"] == 200, asked
    status = sim.status()
    assert status["lock_holder"] is None and status["work_left"] == []


def test_without_a_group_change_the_same_key_may_roll_out_and_a_key_ending_soon_is_warned(rollout_sim: Any) -> None:
    end = datetime.now(timezone.utc) + timedelta(minutes=20)
    sim = rollout_sim(spec(end))
    since = time.time()

    dry = sim.rollout(env=key("no-groups"), args=("--check",), rollout_node_offerings={"worker": "cks-large"})
    assert dry.rc == 0, dry.output
    assert "Refused before the lock" not in dry.output and "expires at" not in dry.output, dry.output

    warned = sim.rollout(env=key("short"), args=("--check",), rollout_node_affinity_groups=SPREAD)
    assert warned.rc == 0, warned.output
    assert f"API key pair short-lived expires at {end.strftime('%Y-%m-%dT%H:%M:%S+0000')}" in warned.output, warned.output
    assert "within the rollout's longest expected time" in warned.output, warned.output
    assert changes_sent(sim, since) == []
    # listUserKeys answers with every key pair's secret: none of them goes anywhere.
    for run in (dry, warned):
        assert not any(s in run.output for s in ("ops-short-secret", "ops-no-groups-secret", "ops-secret")), run.output
