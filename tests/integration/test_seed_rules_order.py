"""The seed's rules on which nodes roll, in what order, and when a batch may start: stopped nodes first,
etcd members matched to their nodes, workers a CKS scale adds, the checks before a control node goes down.

Each failed before its fix, through the real module or playbook against cks-sim, invariants checked
after each; test_seed_rules_{refusals,order,node_cycle,release}.py group the seed's rules by behaviour.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from helpers import load_raw_spec, run_module
from in_process_sims import stopped_cleanly

pytestmark = pytest.mark.timeout(900)


# -- a stopped node goes first of all, whatever its type ---------------------------------------------

def stop_vm(sim: Any, name: str, timeout: float = 60) -> None:
    sim.admin("POST", "/actions", {"action": "stop_vm", "vm": name})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = {vm["name"].lower(): vm["state"] for c in sim.state()["cloud"]["clusters"] for vm in c["vms"]}
        if state.get(name.lower()) == "Stopped":
            return
        time.sleep(0.1)
    raise AssertionError(f"{name} did not stop")


def test_a_stopped_worker_goes_before_an_out_of_date_control_type_and_the_rollout_converges(rollout_sim: Any) -> None:
    sim = rollout_sim("rollout_extetcd.yml")
    worker = sim.names("worker")[0]
    controls = sim.names("control")
    stop_vm(sim, worker)
    since = time.time()

    run = sim.rollout(rollout_node_offerings={"control": "cks-large"})

    assert run.rc == 0, run.output
    batches = [b["nodes"] for b in run.report["batches"]]
    assert batches[0] == [worker], batches
    assert sorted(n for b in batches[1:] for n in b) == controls, batches
    started = [e["node"] for e in sim.timeline() if e["event"] == "started" and e["t"] >= since]
    assert started[0] == worker and sorted(started[1:]) == controls, started
    sim.assert_converged()


# -- etcd members: CKS keeps the cluster name's case; a renamed member is its node's by peer address ---

def test_external_etcd_of_a_cluster_named_with_capitals_rolls(rollout_sim: Any) -> None:
    raw = load_raw_spec("rollout_extetcd.yml")
    raw["clusters"][0]["name"] = "ExtCaps"
    sim = rollout_sim(raw)
    members = [m["name"] for m in sim.env["etcd"]["members"]]
    assert all(m.startswith("ExtCaps-etcd-") for m in members), members

    run = sim.rollout(rollout_node_offerings={"etcd": "cks-large"})

    assert run.rc == 0, run.output
    assert sorted(n for b in run.report["batches"] for n in b["nodes"]) == sorted(m.lower() for m in members)
    sim.assert_converged()


def test_an_etcd_member_renamed_by_hand_is_matched_to_its_node_by_peer_address_and_rolled(rollout_sim: Any) -> None:
    raw = load_raw_spec("rollout_extetcd.yml")
    # A loopback guest network: the sim's members listen on their VM's IP, so peer URLs carry it as on CKS.
    raw["clusters"][0]["guest_cidr"] = "127.0.31.0/24"
    raw["clusters"][0]["nodes"] = [{"type": "etcd", "index": 1, "etcd_member_name": "etcd-replaced-by-hand"}]
    sim = rollout_sim(raw)
    members = {m["name"] for m in sim.env["etcd"]["members"]}
    etcd_nodes = {n.lower() for n in sim.names("etcd")}
    assert "etcd-replaced-by-hand" in members and "etcd-replaced-by-hand" not in etcd_nodes
    renamed = sorted(etcd_nodes - {m.lower() for m in members})
    assert len(renamed) == 1, (members, etcd_nodes)

    run = sim.rollout(rollout_node_offerings={"etcd": "cks-large"})

    # Matched by name only, the renamed node's batch was refused ("not etcd member name(s)").
    assert run.rc == 0, run.output
    rolled = [n for b in run.report["batches"] for n in b["nodes"]]
    assert sorted(rolled) == sorted(etcd_nodes), rolled
    sim.assert_converged()
    assert sim.invariants() == []


# -- nodes a CKS scale adds later show as out of date and are rolled next ----------------------------

def test_workers_a_cks_scale_adds_later_are_out_of_date_and_the_next_rollout_rolls_exactly_them(rollout_sim: Any) -> None:
    """CKS creates scaled-up workers from its own database (the worker offering it stores, not ours):
    cks_node_outdated names them, and a rollout with the stored settings rolls those two alone."""
    from cs import CloudStack
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
    args = dict(sim.connection_args(), cluster=sim.env["cluster_name"])
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


# -- control nodes with external etcd get the seed's checks, and another must serve the API ----------

def test_a_control_batch_with_external_etcd_is_refused_when_readyz_etcd_fails(rollout_sim: Any) -> None:
    sim = rollout_sim("rollout_extetcd.yml")
    since = time.time()
    sim.fault(kind="kube_error", verb="get", path="/readyz/etcd", status=500,
              message="[-]etcd failed: reason withheld\nreadyz check failed")

    run = sim.rollout(rollout_node_offerings={"control": "cks-large"})

    assert run.rc != 0, run.output
    assert "/readyz/etcd HTTP 500" in run.stdout, run.output
    assert [e for e in sim.timeline() if e["event"] in ("cordoned", "stop_requested") and e["t"] >= since] == []
    assert sim.invariants() == []


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
