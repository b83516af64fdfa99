"""The last of the rollout's rules that once broke, through the real playbook against cks-sim.

Each test fails without the behaviour it covers; the simulator's invariants are checked after each.
"""

from __future__ import annotations

from typing import Any

import pytest
from in_process_sims import stopped_cleanly

pytestmark = pytest.mark.timeout(900)

ANNOTATIONS = ("cloudstack.apache.org/rollout-boot-id", "cloudstack.apache.org/rollout-stop-sent")


# -- 10. an empty boot ID is never written as the annotation ---------------------------------------

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


# -- 5. with external etcd, another control node must be serving the API -----------------------------

def test_a_control_node_is_not_taken_down_while_the_other_ones_api_server_does_not_serve(rollout_sim: Any) -> None:
    """External etcd, two control nodes: the second's kube-apiserver fails its /readyz probe while its
    node stays Ready. Taking the first down would leave no API server: refused before any change."""
    sim = rollout_sim("rollout_extetcd.yml")
    assert sim.view().external_etcd
    first, other = sim.names("control")  # the plan takes control nodes by name
    answer = sim.admin("POST", "/actions", {"action": "set_api_server", "node": other, "serving": False})
    assert answer == {"node": other, "serving": False}
    assert sim.view().node(other).ready  # only its API server is down, not the node
    variables = {"rollout_node_offerings": {"control": "cks-large"}}

    run = sim.rollout(**variables)

    last_error = stopped_cleanly(sim, run)
    assert first in last_error and other in last_error, last_error
    assert "serve the Kubernetes API" in last_error and f"kube-system/kube-apiserver-{other}" in last_error, last_error
    assert [c for c in sim.calls() if c.get("command") == "stopVirtualMachine"] == []
    for record in sim.status()["nodes"]:
        assert record["vm_state"] == "Running" and not record["cordoned"] and not record["annotated"], record
    assert {n["name"] for b in run.report["batches"] for n in [{"name": x} for x in b["nodes"]]} == {first}

    sim.admin("POST", "/actions", {"action": "set_api_server", "node": other, "serving": True})
    rerun = sim.rollout(**variables)
    assert rerun.rc == 0, rerun.output
    rolled = [n for b in rerun.report["batches"] for n in b["nodes"]]
    assert rolled == [first, other], rolled
    sim.assert_converged()


# -- nodes a CKS scale adds later show as out of date and are rolled next ----------------------------

def test_workers_a_cks_scale_adds_later_are_out_of_date_and_the_next_rollout_rolls_exactly_them(rollout_sim: Any) -> None:
    """CKS creates scaled-up workers from its own database (the worker offering it stores, not ours):
    cks_node_outdated names them, and a rollout with the stored settings rolls those two alone."""
    from cs import CloudStack
    from helpers import run_module

    sim = rollout_sim("rollout_small.yml")
    first = sim.rollout(rollout_node_offerings={"worker": "cks-large"})
    assert first.rc == 0, first.output
    sim.assert_converged()
    before = set(sim.names("worker"))
    cs = CloudStack(endpoint=sim.env["cloudstack_endpoint"], key=sim.env["cloudstack_key"],
                    secret=sim.env["cloudstack_secret"], poll_interval=0.02, job_timeout=120)

    scaled = cs.scaleKubernetesCluster(id=sim.cluster_id, size=len(before) + 2, fetch_result=True)

    assert scaled["kubernetescluster"]["state"] == "Running", scaled
    added = sorted(set(sim.names("worker")) - before)
    assert len(added) == 2, added
    args = {"api_url": sim.env["cloudstack_endpoint"], "api_key": sim.env["cloudstack_key"],
            "api_secret": sim.env["cloudstack_secret"], "kubeconfig": sim.env["kubeconfig"],
            "cluster": sim.env["cluster_name"]}
    outdated = run_module("cks_node_outdated", args)
    assert outdated.get("failed") is not True, outdated
    assert sorted(outdated["out_of_date"]) == added, outdated["out_of_date"]
    assert outdated["workernodesoutofdate"] == 2 and outdated["controlnodesoutofdate"] == 0
    for node in outdated["nodes"]:
        if node["name"] in added:
            assert [r["message"] for r in node["reasons"]] == ["offering cks-medium -> cks-large"], node

    run = sim.rollout()  # the stored settings: nothing given

    assert run.rc == 0, run.output
    rolled = sorted(n for b in run.report["batches"] for n in b["nodes"])
    assert rolled == added, rolled
    status = sim.assert_converged()
    assert {n["name"] for n in status["nodes"] if n["node_type"] == "worker"} == before | set(added)
