"""The seed's rules on what a node's cycle does: its affinity groups emptied, the drain's emptyDir default,
a node that reports no boot ID.

Each failed before its fix, through the real module or playbook against cks-sim, invariants checked
after each; test_seed_rules_{refusals,order,node_cycle,release}.py group the seed's rules by behaviour.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import load_raw_spec
from in_process_sims import stopped_cleanly

pytestmark = pytest.mark.timeout(900)

ANNOTATIONS = ("cloudstack.apache.org/rollout-boot-id", "cloudstack.apache.org/rollout-stop-sent")


# -- emptying a type's affinity groups ---------------------------------------------------------------

def _spread_workers_without_dedication() -> dict[str, Any]:
    raw = load_raw_spec("rollout_small.yml")
    cluster = raw["clusters"][0]
    cluster["dedication_group"] = None
    cluster["affinity_groups"] = {"control": [], "worker": ["workers-spread"], "etcd": []}
    return raw


def test_emptying_the_worker_groups_removes_each_workers_last_group(rollout_sim: Any) -> None:
    sim = rollout_sim(_spread_workers_without_dedication())
    workers = sim.names("worker")
    assert _groups(sim) == {w: ["workers-spread"] for w in workers}

    run = sim.rollout(rollout_node_affinity_groups={"worker": []})

    assert run.rc == 0, run.output
    assert sorted(n for b in run.report["batches"] for n in b["nodes"]) == sorted(workers)
    assert _groups(sim) == {w: [] for w in workers}
    updates = [c for c in sim.calls() if c.get("command") == "updateVMAffinityGroup"]
    assert len(updates) == len(workers) and all(c["params"].get("affinitygroupids") == "" for c in updates), updates
    sim.assert_converged()


def _groups(sim: Any, node_type: str = "worker") -> dict[str, list[str]]:
    return {n.name: sorted(g.name for g in n.affinity_groups) for n in sim.view().nodes_of(node_type)}


# -- the drain's emptyDir default is CKS's -----------------------------------------------------------

def _pods(sim: Any, prefix: str) -> dict[str, str]:
    return {f"{p['namespace']}/{p['name']}": p["node"] for p in sim.state()["kube"][sim.env["cluster_id"]]["pods"]
            if p["name"].startswith(prefix)}


def test_the_dry_run_with_the_default_drain_evicts_emptydir_pods_and_names_a_bare_pod(rollout_sim: Any) -> None:
    # KubernetesClusterUpgradeWorker drains each node with `kubectl drain <node> --ignore-daemonsets
    # --delete-emptydir-data` (no --force): emptyDir data goes, a pod without a controller stops the drain.
    sim = rollout_sim("rollout_dry_run.yml")
    ((cache_pod, cache_node),) = _pods(sim, "cache-").items()
    ((debug_pod, debug_node),) = _pods(sim, "debug").items()

    run = sim.rollout(args=("--check",), drop_vars=("rollout_delete_emptydir_data",),
                      rollout_node_offerings={"worker": "cks-large"})

    assert run.rc == 0, run.output
    assert "local storage" not in run.stdout and cache_pod not in run.stdout, run.output
    assert f"{debug_node} drain: stops before any eviction: pods that declare no controller " \
           f"(use force=true to override): {debug_pod}" in run.stdout, run.output
    assert sim.invariants() == []


def test_a_rollout_with_the_default_drain_moves_an_emptydir_pod(rollout_sim: Any) -> None:
    raw = load_raw_spec("rollout_small.yml")
    raw["workloads"].append({"kind": "Deployment", "namespace": "default", "name": "cache", "replicas": 1, "emptyDir": True})
    sim = rollout_sim(raw)
    ((cache_pod, cache_node),) = _pods(sim, "cache-").items()

    run = sim.rollout(drop_vars=("rollout_delete_emptydir_data",), rollout_node_offerings={"worker": "cks-large"})

    assert run.rc == 0, run.output
    assert cache_pod not in _pods(sim, "cache-") and len(_pods(sim, "cache-")) == 1
    sim.assert_converged()


# -- an empty boot ID is never written as the annotation ---------------------------------------------

def test_a_worker_reporting_no_boot_id_is_rolled_and_left_schedulable(rollout_sim: Any) -> None:
    sim = rollout_sim("rollout_small.yml")
    worker = sim.names("worker")[0]
    sim.admin("POST", "/actions", {"action": "set_boot_id", "node": worker, "boot_id": ""})
    assert sim.kube.read_node(worker)["status"]["nodeInfo"]["bootID"] == ""

    run = sim.rollout(rollout_node_offerings={"worker": "cks-large"})

    assert run.rc == 0, run.output
    assert worker in [n for b in run.report["batches"] for n in b["nodes"]]
    node = sim.kube.read_node(worker)
    assert node["status"]["nodeInfo"]["bootID"] != ""  # booted again
    assert not node["spec"].get("unschedulable"), node["spec"]
    sim.assert_converged()


def test_a_worker_reporting_no_boot_id_whose_drain_failed_is_put_back_into_service(rollout_sim: Any) -> None:
    """A node that reports no boot ID is cordoned, its drain fails, and release puts it back.

    Annotated with "" the node would read as cordoned by someone else: release leaves such a node
    cordoned, and every later rollout too, although the rollout cordoned it and it never went down.
    """
    sim = rollout_sim("faults_small.yml")
    workers = sim.names("worker")
    for worker in workers:
        sim.admin("POST", "/actions", {"action": "set_boot_id", "node": worker, "boot_id": ""})
    sim.fault(kind="pdb_block", namespace="default", name="web")

    run = sim.rollout(rollout_batch_timeout=8, rollout_node_offerings={"worker": "cks-large"},
                      rollout_max_unavailable=2)

    last_error = stopped_cleanly(sim, run)
    assert "default/web" in last_error, last_error
    blocked = [n for n in workers if n in last_error.lower()]
    assert blocked, last_error
    for name in blocked:
        raw = sim.kube.read_node(name)
        assert raw["status"]["nodeInfo"]["bootID"] == "", raw["status"]["nodeInfo"]  # never went down
        assert not raw["spec"].get("unschedulable"), (name, raw["spec"], run.output)
        annotations = raw["metadata"].get("annotations") or {}
        assert not set(ANNOTATIONS) & set(annotations), (name, annotations)
    for record in sim.status()["nodes"]:
        assert record["vm_state"] == "Running" and not record["cordoned"] and not record["annotated"], record
    assert sim.invariants() == []
