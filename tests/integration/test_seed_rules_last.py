"""The last seed items of issue 14, through the real playbook against cks-sim.

Each test fails without the behaviour it covers; the simulator's invariants are checked after each.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_api_faults import stopped_cleanly

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
