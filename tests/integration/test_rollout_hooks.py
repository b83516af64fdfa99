"""Per-node hooks through the whole playbook (``playbooks/rollout.yml``) against cks-sim.

``rollout_hook_before_drain`` / ``rollout_hook_after_verify`` name task files that each node of a
batch runs between its cordon and its drain, and between its verify and its uncordon. The hooks
here append one JSON line per run to a log file (the node, the hook, the controller's time, the
``rollout_hook_node`` variable); the tests read that log next to the simulator's timeline (the
same clock, this machine's): order only, no durations. A hook that fails fails its batch like any
other step: release puts the nodes back, the last error names the node and the hook, and no later
batch runs. A hook path that is no file is refused before anything changes.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest
import rollout_helpers as rh

pytestmark = pytest.mark.timeout(900)

SPEC = "rollout_small.yml"  # 1 stacked control node (it cannot lose a node: not rolled), 3 workers
NODE_EVENTS = {"annotated", "cordoned", "uncordoned", "stop_requested", "started", "eviction"}


def hook_file(folder: str, name: str, log: str, fail_on: str = "") -> str:
    """A hook task file: one JSON line per run into ``log``; then it fails on the node ``fail_on``."""
    tasks: list[dict[str, Any]] = [{
        "name": "Note this node in the log",
        "ansible.builtin.shell": ("echo {{ (rollout_hook_node | combine({'t': now().timestamp()}) | to_json) | quote }}"
                                  f" >> {log}"),
        "changed_when": False,
    }]
    if fail_on:
        tasks.append({"name": "Refuse this node", "ansible.builtin.fail": {"msg": "the load balancer refused the change"},
                      "when": f"rollout_hook_node.name == {fail_on!r}"})
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(tasks, fh)  # JSON is YAML
    return path


def read_log(log: str) -> list[dict[str, Any]]:
    if not os.path.exists(log):
        return []
    with open(log, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def first(items: list[dict[str, Any]], event: str, node: str) -> float:
    found = rh.events(items, event, node)
    assert found, f"no {event} of {node}"
    return found[0]["t"]


def touched(items: list[dict[str, Any]], node: str) -> list[str]:
    return [i["event"] for i in items if i.get("node") == node and i.get("event") in NODE_EVENTS]


def test_each_restarted_node_runs_its_hooks_between_cordon_and_drain_and_between_boot_and_uncordon(
        tmp_path: Any) -> None:
    log = str(tmp_path / "hooks.log")
    before = hook_file(str(tmp_path), "before.yml", log)
    after = hook_file(str(tmp_path), "after.yml", log)
    with rh.running_rollout_sim(SPEC, max_unavailable={"worker": 2}) as sim:
        workers = sorted(rh.names(sim, "worker"))
        control = rh.names(sim, "control")
        addresses = {vm["name"].lower(): vm["nic"][0]["ipaddress"]
                     for vm in sim.cloud.list("listVirtualMachines", listall=True)}
        since = time.time()
        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(
            sim, rollout_node_offerings={"worker": "cks-large"}, rollout_max_unavailable=2,
            rollout_hook_before_drain=before, rollout_hook_after_verify=after))
        assert run.rc == 0, run.explain()
        items = sim.timeline(since)
        lines = read_log(log)

        restarted = rh.restarted(items)
        assert sorted(restarted) == workers
        # Batches of min(2, 3 - 1) = 2 workers, then 1.
        assert rh.batches_seen(items, workers) == [workers[0:2], workers[2:3]]
        for node in workers:
            mine = [line for line in lines if line["name"] == node]
            assert [line["hook"] for line in mine] == ["before_drain", "after_verify"], mine
            hook_before, hook_after = (line["t"] for line in mine)
            # cordon -> before_drain -> first eviction and stop; boot and Ready -> after_verify -> uncordon
            assert first(items, "cordoned", node) < hook_before < first(items, "eviction", node)
            assert hook_before < first(items, "stop_requested", node)
            assert first(items, "ready", node) < hook_after < first(items, "uncordoned", node)
            assert first(items, "boot", node) < hook_after
            assert mine[0]["node_type"] == "worker" and mine[0]["ip_address"] == addresses[node]
            assert mine[0]["batch"] == (1 if node in workers[:2] else 2)
            assert mine[0]["batch_nodes"] == (workers[:2] if node in workers[:2] else workers[2:])
        # Each batch's before_drain hooks all ran before any of its nodes was drained.
        batch = workers[:2]
        assert max(line["t"] for line in lines if line["name"] in batch and line["hook"] == "before_drain") < \
            min(first(items, "eviction", node) for node in batch)
        # Nodes not restarted run no hook.
        assert not [line for line in lines if line["name"] not in workers]
        assert not [e for e in items if e.get("node") in control and e.get("event") in NODE_EVENTS]

        # The report: each node once, its hooks among its steps in the order they ran.
        assert run.report is not None
        assert sorted(n["name"] for n in run.report["nodes"]) == workers
        for node in run.report["nodes"]:
            names = [s["name"] for s in node["steps"]]
            assert node["outcome"] == "done", node
            assert names.index("cordon") < names.index("hook_before_drain") < names.index("drain")
            assert names.index("verify") < names.index("hook_after_verify") < names.index("recheck") \
                < names.index("uncordon")
            assert all(s["outcome"] in ("ok", "skipped") for s in node["steps"]), node["steps"]
        assert run.report["hooks"] == {"before_drain": before, "after_verify": after}
        assert [b["outcome"] for b in run.report["batches"]] == ["done", "done"]
        # Each phase's run renewed the lock in one write on the version the run before it left (the
        # start's, which took the lock, then the cordon phase's, the restart's, the previous batch's):
        # six renewals for two batches of three phases, none refused, no batch reading the Lease. The
        # seventh write is the release giving the lock back, one conditional patch after its one read.
        leases = [(c["verb"], c["status"]) for c in sim.calls(since)
                  if c.get("api") == "kubernetes" and c.get("resource") == "leases"]
        taken = leases.index(("create", 201))
        assert leases[taken + 1:] == [("patch", 200)] * 6 + [("get", 200), ("patch", 200)], leases
        rh.assert_no_invariant_broken(sim)
        status = rh.ClusterRecord(sim)
        assert status.holder() is None
        assert all(rh.node_settled(sim, n) for n in rh.kube_nodes(sim).values())


def test_a_failing_before_drain_hook_fails_its_batch_before_any_stop_and_the_rerun_converges(tmp_path: Any) -> None:
    log = str(tmp_path / "hooks.log")
    with rh.running_rollout_sim(SPEC, max_unavailable={"worker": 2}) as sim:
        workers = sorted(rh.names(sim, "worker"))
        refused = workers[1]
        before = hook_file(str(tmp_path), "before.yml", log, fail_on=refused)
        variables = rh.rollout_vars(sim, rollout_node_offerings={"worker": "cks-large"}, rollout_max_unavailable=2)
        since = time.time()
        run = rh.run_playbook(sim, "rollout.yml", dict(variables, rollout_hook_before_drain=before))
        assert run.rc != 0, run.explain()
        items = sim.timeline(since)

        # Both nodes of the first batch ran the hook; nothing of it was drained or stopped.
        assert sorted(line["name"] for line in read_log(log)) == workers[:2]
        assert rh.restarted(items) == []
        assert rh.events(items, "eviction") == []
        # Cordoned by the cordon phase, uncordoned by release (they never went down).
        for node in workers[:2]:
            assert touched(items, node)[-1] == "uncordoned", touched(items, node)
        # No later batch.
        assert touched(items, workers[2]) == []
        assert all(rh.node_settled(sim, n) for n in rh.kube_nodes(sim).values())
        assert {rh.vms(sim)[w]["offering"] for w in workers} == {"cks-medium"}
        record = rh.ClusterRecord(sim)
        assert record.holder() is None
        error = record.data()["lastError"]
        assert f"node {refused}: hook_before_drain failed" in error and before in error, error
        assert "the load balancer refused the change" in error, error
        assert run.report is not None
        assert [b["outcome"] for b in run.report["batches"]] == ["failed"]
        assert run.report["nodes_not_reached"] == workers[2:]
        outcomes = {n["name"]: n["outcome"] for n in run.report["nodes"]}
        assert outcomes == {workers[0]: "cordoned", refused: "failed"}

        # The rerun without the hook converges.
        rerun = rh.run_playbook(sim, "rollout.yml", variables)
        assert rerun.rc == 0, rerun.explain()
        assert {rh.vms(sim)[w]["offering"] for w in workers} == {"cks-large"}
        assert all(rh.node_settled(sim, n) for n in rh.kube_nodes(sim).values())
        assert rh.ClusterRecord(sim).holder() is None
        rh.assert_no_invariant_broken(sim)


def test_a_failing_after_verify_hook_stops_the_rollout_after_its_batch_with_the_node_back(tmp_path: Any) -> None:
    log = str(tmp_path / "hooks.log")
    with rh.running_rollout_sim(SPEC, max_unavailable={"worker": 2}) as sim:
        workers = sorted(rh.names(sim, "worker"))
        refused = workers[0]
        after = hook_file(str(tmp_path), "after.yml", log, fail_on=refused)
        since = time.time()
        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(
            sim, rollout_node_offerings={"worker": "cks-large"}, rollout_max_unavailable=2,
            rollout_hook_after_verify=after))
        assert run.rc != 0, run.explain()
        items = sim.timeline(since)

        # The first batch restarted, both its nodes ran the hook (the other one's too: it is back).
        assert sorted(rh.restarted(items)) == workers[:2]
        lines = read_log(log)
        assert sorted(line["name"] for line in lines) == workers[:2]
        for node in workers[:2]:
            hook_after = next(line["t"] for line in lines if line["name"] == node)
            # Back before the hook; uncordoned after it, by release (the uncordon phase did not run).
            assert first(items, "ready", node) < hook_after < first(items, "uncordoned", node)
        assert touched(items, workers[2]) == []
        vms = rh.vms(sim)
        assert {vms[w]["offering"] for w in workers[:2]} == {"cks-large"} and vms[workers[2]]["offering"] == "cks-medium"
        assert all(rh.node_settled(sim, n) for n in rh.kube_nodes(sim).values())
        record = rh.ClusterRecord(sim)
        assert record.holder() is None
        error = record.data()["lastError"]
        assert f"node {refused}: hook_after_verify failed" in error and after in error, error
        assert run.report is not None
        assert [b["outcome"] for b in run.report["batches"]] == ["failed"]
        nodes = {n["name"]: n for n in run.report["nodes"]}
        assert nodes[refused]["outcome"] == "failed" and nodes[workers[1]]["outcome"] == "restarted"
        assert "recheck" not in [s["name"] for s in nodes[workers[1]]["steps"]]
        assert {u["node"] for u in run.report["uncordoned"]} >= set(workers[:2])
        rh.assert_no_invariant_broken(sim)


def test_a_hook_path_that_is_no_file_is_refused_before_anything_changes(tmp_path: Any) -> None:
    with rh.running_rollout_sim(SPEC) as sim:
        since = time.time()
        missing = str(tmp_path / "no-such-hook.yml")
        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(
            sim, rollout_node_offerings={"worker": "cks-large"}, rollout_hook_after_verify=missing))
        assert run.rc != 0, run.explain()
        assert rh.mutating_calls(sim, since) == [], run.explain()
        assert f"rollout_hook_after_verify={missing}: no such task file" in run.stdout, run.explain()
        record = rh.ClusterRecord(sim)
        assert record.data() == {} and record.lease() == {}


def test_a_hook_that_loses_its_node_to_an_unreachable_host_fails_the_batch(tmp_path: Any) -> None:
    # A task delegated to a host Ansible cannot reach takes the node's host out of the play with no
    # rescue: the hook never records an outcome of its own. The batch must still see it unfinished.
    with rh.running_rollout_sim(SPEC, max_unavailable={"worker": 2}) as sim:
        workers = sorted(rh.names(sim, "worker"))
        lost = workers[0]
        before = str(tmp_path / "before.yml")
        with open(before, "w", encoding="utf-8") as fh:
            json.dump([{"name": "Tell the load balancer", "ansible.builtin.ping": {},
                        "delegate_to": "127.0.0.1", "when": f"rollout_hook_node.name == {lost!r}",
                        "vars": {"ansible_connection": "ssh", "ansible_port": 9,
                                 "ansible_ssh_common_args": "-o ConnectTimeout=3"}}], fh)
        since = time.time()
        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(
            sim, rollout_node_offerings={"worker": "cks-large"}, rollout_max_unavailable=2,
            rollout_hook_before_drain=before))
        assert run.rc != 0, run.explain()
        items = sim.timeline(since)

        assert rh.restarted(items) == [] and rh.events(items, "eviction") == []
        for node in workers[:2]:
            assert touched(items, node)[-1] == "uncordoned", touched(items, node)
        assert touched(items, workers[2]) == []
        assert all(rh.node_settled(sim, n) for n in rh.kube_nodes(sim).values())
        record = rh.ClusterRecord(sim)
        assert record.holder() is None
        error = record.data()["lastError"]
        assert f"node {lost}: hook_before_drain failed" in error and "did not finish" in error, error
