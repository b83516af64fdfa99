"""A rolling restart with no setting changed (``rollout_restart``, what operators ask of kured):
every node through the same safe cycle (cordon, drain, stop, start, verify, uncordon), in the same
order and under the same rules, through ansible-playbook against cks-sim with real etcd members."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from helpers import load_raw_spec

pytestmark = pytest.mark.timeout(900)


def boot_ids(sim: Any) -> dict[str, str]:
    return {n["metadata"]["name"]: n["status"]["nodeInfo"]["bootID"] for n in sim.kube.list_nodes()}


def test_restart_all_restarts_every_node_with_no_change(rollout_sim: Callable[..., Any]) -> None:
    spec = load_raw_spec("faults_etcd.yml")
    spec["clusters"][0]["workers"] = 3  # three stacked control nodes (etcd members), three workers
    spec["invariants"]["max_unavailable"]["worker"] = 2  # the simulator judges what the batches may take down
    sim = rollout_sim(spec, etcd=True)
    before = boot_ids(sim)
    settings = {n["name"]: (n["offering"], n["root_disk_size"], n["affinity_groups"]) for n in sim.status()["nodes"]}
    assert sim.status()["out_of_date"] == []

    # The dry run shows the restart of each node and why; nothing happens.
    dry = sim.rollout(args=("--check",), rollout_restart="all", rollout_max_unavailable=2)
    assert dry.rc == 0, dry.output
    assert "restart asked, no change" in dry.stdout and boot_ids(sim) == before

    run = sim.rollout(rollout_restart="all", rollout_max_unavailable=2)
    assert run.rc == 0, run.output
    status = sim.assert_converged()  # Ready, schedulable, unannotated, lock free, no invariant broken
    after = boot_ids(sim)
    assert sorted(after) == sorted(before)
    assert [n for n in before if after[n] == before[n]] == []  # every node restarted: a new boot ID
    assert {n["name"]: (n["offering"], n["root_disk_size"], n["affinity_groups"]) for n in status["nodes"]} == settings
    # Control nodes one at a time, then the workers two at a time (the clamp: workers - 1); no change sent.
    batches = [(b["node_type"], len(b["nodes"])) for b in run.report["batches_planned"]]
    assert batches == [("control", 1), ("control", 1), ("control", 1), ("worker", 2), ("worker", 1)], batches
    for node in run.report["nodes"]:
        steps = {s["name"]: s for s in node["steps"]}
        assert node["outcome"] == "done" and steps["stop"]["outcome"] == steps["start"]["outcome"] == "ok", node
        assert steps["change_offering"]["outcome"] == "skipped", node
    stops = [c for c in sim.calls() if c.get("command") == "stopVirtualMachine"]
    assert len(stops) == len(before)
    assert not [c for c in sim.calls() if c.get("command") in ("changeServiceForVirtualMachine", "resizeVolume")]

    # The default (outdated) has nothing to do afterwards: no node is restarted again.
    again = sim.rollout()
    assert again.rc == 0, again.output
    assert boot_ids(sim) == after


def test_restart_selected_needs_a_selection_and_refuses_before_anything(rollout_sim: Callable[..., Any]) -> None:
    sim = rollout_sim("rollout_small.yml", etcd=True)
    before = boot_ids(sim)
    run = sim.rollout(rollout_restart="selected")
    assert run.rc != 0
    assert "restarts the nodes select names: give select too (rollout_select), or restart all" in run.stdout, run.output
    # Refused before the lock: nothing stopped, no lock held.
    assert boot_ids(sim) == before and sim.status()["lock_holder"] is None
    assert not [c for c in sim.calls() if c.get("command") == "stopVirtualMachine"]
    worker = sim.names("worker")[1]
    run = sim.rollout(rollout_restart="selected", rollout_select=f"[?name=='{worker}']")
    assert run.rc == 0, run.output
    after = boot_ids(sim)
    assert [n for n in before if after[n] != before[n]] == [worker]
    sim.assert_converged()
