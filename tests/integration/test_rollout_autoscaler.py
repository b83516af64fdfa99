"""A worker rollout of a cluster whose cluster autoscaler is on (playbooks/rollout.yml against cks-sim).

Four 2-CPU workers each run one 1500m pod of ``big`` (budget: one down at a time): a drained pod
fits nowhere else, stays Unschedulable, and the autoscaler scales the cluster up through
scaleKubernetesCluster (Scaling, a new worker with the cluster's CKS offering) while the rollout
goes on. The rollout marks its nodes ``cluster-autoscaler.kubernetes.io/scale-down-disabled`` so
the autoscaler (unneeded time 500 simulated seconds, 5 s here) removes none while it runs, not
even a restarted worker left empty for the rest of the rollout, and does once they are released; the release
takes off only the marks it put on, and names the node the autoscaler added, still on the
cluster's offering, as out of date with why.
"""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Any

import pytest
from cks_sim.harness import wait_until
from helpers import ROOT, load_raw_spec

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.autoscaler import HOLD_ANNOTATION, SCALE_DOWN_DISABLED

pytestmark = pytest.mark.timeout(900)


def _spec() -> dict[str, Any]:
    raw = load_raw_spec("rollout_small.yml", 0.01)
    raw["clusters"][0].update(workers=4, autoscaling={
        "enabled": True, "minsize": 3, "maxsize": 6, "scale_down_unneeded_time": 500, "scale_down_delay_after_add": 0})
    raw["workloads"] = [
        {"kind": "DaemonSet", "namespace": "kube-system", "name": "kube-proxy"},
        {"kind": "Deployment", "namespace": "default", "name": "big", "replicas": 4,
         "requests": {"cpu": "1500m", "memory": "256Mi"}}]
    raw["pdbs"] = [{"namespace": "default", "name": "big", "selector": {"app": "big"}, "maxUnavailable": 1}]
    return raw


def test_a_worker_rollout_with_the_autoscaler_on(rollout_sim: Any) -> None:
    sim = rollout_sim(_spec())
    workers = sim.names("worker")
    assert len(workers) == 4
    # Someone's own marks: "true" stays as it is; "false" comes back after the rollout's "true".
    sim.kube.patch_node(workers[0], {"metadata": {"annotations": {SCALE_DOWN_DISABLED: "true"}}})
    sim.kube.patch_node(workers[1], {"metadata": {"annotations": {SCALE_DOWN_DISABLED: "false"}}})
    since = time.time()

    run = sim.rollout(rollout_node_offerings={"worker": "cks-large"}, rollout_max_unavailable=1)

    ended = time.time()
    # The cluster as the rollout left it, read at once: released, the autoscaler may soon remove nodes.
    nodes = {n["metadata"]["name"]: n["metadata"].get("annotations") or {} for n in sim.kube.list_nodes()}
    offerings = {vm["name"].lower(): vm["serviceofferingname"] for vm in sim.node_vms("worker")}
    assert run.rc == 0, run.output
    during = [e for e in sim.timeline() if since <= e["t"] <= ended]
    # The autoscaler scaled up while the rollout ran, and removed nothing.
    assert [e for e in during if e.get("event") == "autoscaler_scale_up"], "no scale-up happened"
    assert not [e for e in during if e.get("event") in ("autoscaler_scale_down", "vm_expunged", "node_deleted")]
    added = sorted(set(offerings) - set(workers))
    assert added and len(offerings) <= 6
    # Every planned worker is on the new offering.
    assert all(offerings[w] == "cks-large" for w in workers), offerings
    # The node it added came with the cluster's offering and was rolled in a batch after the planned ones.
    assert all(offerings[node] == "cks-large" for node in added), offerings
    total = len(workers) + len(added)
    for node in added:
        assert re.search(rf"Batch (\d+)/{total} worker \[{node}\] done", run.output), run.output
        assert int(re.search(rf"Batch (\d+)/{total} worker \[{node}\] done", run.output).group(1)) > len(workers)
    assert f"nodes it added during the rollout: {', '.join(added)}" in run.output
    assert "cluster autoscaler: on (min 3, max 6 workers)" in run.output
    # The release took off exactly what the rollout put on.
    assert nodes[workers[0]][SCALE_DOWN_DISABLED] == "true"
    assert nodes[workers[1]][SCALE_DOWN_DISABLED] == "false"
    for name, marks in nodes.items():
        assert HOLD_ANNOTATION not in marks, name
        if name not in workers[:2]:
            assert SCALE_DOWN_DISABLED not in marks, name
    assert sim.invariants() == []
    # Released, an underused worker without a mark of its own is the autoscaler's again.
    wait_until(lambda: [e for e in sim.timeline() if e["t"] > ended and e.get("event") == "autoscaler_scale_down"],
               timeout=60, what="a scale-down once the rollout released its nodes")


def test_a_cks_operation_between_two_batches_is_waited_out_and_a_node_it_removed_is_dropped(rollout_sim: Any) -> None:
    sim = rollout_sim("rollout_small.yml")
    cluster_id = sim.cks_cluster()["id"]
    workers = sim.names("worker")
    since = time.time()
    held: dict[str, Any] = {}

    def between_the_first_two_batches() -> None:
        # As the first batch ends (its node uncordoned), CKS holds the cluster (Scaling, as a long scale
        # of the autoscaler's would) until the next batch has asked for it a few times (it is waiting),
        # then removes a worker no batch reached yet.
        first = wait_until(lambda: [e for e in sim.timeline(since) if e.get("event") == "uncordoned"],
                           timeout=120, interval=0.02)[0]
        cloud = sim.sim.cloud
        with sim.sim.lock:
            cloud.set_cluster_state(cloud.clusters[cluster_id], "Scaling", "scaleKubernetesCluster")
        held["since"] = time.time()
        wait_until(lambda: len([c for c in sim.calls(held["since"]) if c.get("command") == "listKubernetesClusters"]) >= 4,
                   timeout=120, interval=0.1, what="the next batch waiting for the cluster")
        with sim.sim.lock:
            cloud.set_cluster_state(cloud.clusters[cluster_id], "Running", "scaleKubernetesCluster")
        cordoned = {e.get("node") for e in sim.timeline() if e["t"] >= since and e.get("event") == "cordoned"}
        held["gone"] = next(w for w in workers if w not in cordoned and w != first["node"])
        vm = next(v for v in sim.node_vms("worker") if v["name"].lower() == held["gone"])
        sim.cs().scaleKubernetesCluster(id=cluster_id, nodeids=vm["id"], fetch_result=True)

    helper = threading.Thread(target=between_the_first_two_batches, daemon=True)
    helper.start()
    run = sim.rollout(rollout_node_offerings={"worker": "cks-large"}, rollout_max_unavailable=1)
    helper.join(timeout=30)

    assert run.rc == 0, run.output
    assert "cluster is Scaling (a CKS operation" in run.output, run.output
    events = [e for e in sim.timeline() if e["t"] >= since]
    states = [(e["t"], e["state"]) for e in events if e.get("event") == "cluster_state"]
    start = next(t for t, state in states if state == "Scaling")
    end = next(t for t, state in states if t > start and state == "Running")
    # No batch started (no node cordoned) while CKS held the cluster.
    assert not [e for e in events if e.get("event") == "cordoned" and start <= e["t"] <= end]
    gone = held["gone"]
    assert f"dropped from the plan, no longer in the cluster (removed by a CKS operation): {gone}" in run.output
    # Counted as no work of this rollout any more, neither left nor skipped.
    assert "nodes done 2, skipped 0, left 0" in run.output, run.output
    assert gone not in sim.names("worker")
    offerings = {vm["name"].lower(): vm["serviceofferingname"] for vm in sim.node_vms("worker")}
    assert set(offerings) == set(workers) - {gone} and set(offerings.values()) == {"cks-large"}, offerings
    assert sim.invariants() == []


def test_the_dry_run_and_status_name_the_autoscaler_and_mark_nothing(rollout_sim: Any) -> None:
    sim = rollout_sim(_spec())
    run = sim.rollout(rollout_node_offerings={"worker": "cks-large"}, args=("--check",))
    assert run.rc == 0, run.output
    assert ("cluster autoscaler: on (min 3, max 6 workers); the rollout marks its nodes scale-down-disabled "
            "until the release") in run.output
    assert not [n for n in sim.kube.list_nodes() if HOLD_ANNOTATION in (n["metadata"].get("annotations") or {})]
    status = sim.rollout(playbook=os.path.join(ROOT, "playbooks", "status.yml"))
    assert status.rc == 0, status.output
    assert "cluster autoscaler: on (min 3, max 6 workers)" in status.output
