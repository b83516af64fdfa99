"""More of the rollout's rules that once broke (after test_seed_rules.py), through the real playbook or module against cks-sim.

Each test fails without its fix; the simulator's invariants are checked after each.
"""

from __future__ import annotations

from typing import Any

import pytest
from in_process_sims import load_raw_spec

pytestmark = pytest.mark.timeout(900)


# -- 4. an etcd member whose name no node bears is its node's by its peer address ------------------

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


# -- 9. a wrongly typed variable fails naming it and the type expected -----------------------------

@pytest.fixture(scope="module")
def typed_sim(module_rollout_sim: Any) -> Any:
    return module_rollout_sim("faults_small.yml", etcd=False)


@pytest.mark.parametrize("variables, expected", [
    ({"rollout_max_unavailable": "two"}, ["rollout_max_unavailable='two': must be an int"]),
    ({"rollout_canary": "maybe"}, ["rollout_canary='maybe': must be a bool (true or false)"]),
    ({"rollout_batch_timeout": "soon", "rollout_pause_seconds": 1.5},
     ["rollout_batch_timeout='soon': must be a float", "rollout_pause_seconds=1.5: must be an int"]),
    ({"rollout_node_offerings": 5}, ["rollout_node_offerings=5: must be a mapping of node type", "got a number"]),
])
def test_a_wrongly_typed_variable_names_itself_and_the_type_and_changes_nothing(
        typed_sim: Any, variables: dict[str, Any], expected: list[str]) -> None:
    sim = typed_sim
    before = {k: v for k, v in sim.state().items() if k not in ("time", "faults")}
    since = sim.admin("GET", "/state")["time"]

    run = sim.rollout(**variables)

    assert run.rc != 0, run.output
    for text in expected:
        assert text in run.stdout, run.output
    # Not the role's whole argument spec: no other variable's description, no spec dump.
    assert "argument_spec_data" not in run.output and "Seconds one batch may take" not in run.output, run.output
    assert "_AnsibleTagged" not in run.output
    calls = sim.admin("GET", f"/calls?since={since}")
    calls = calls.get("calls", calls) if isinstance(calls, dict) else calls
    assert [c for c in calls if c.get("api") == "cloudstack"] == [], calls  # refused before any call
    assert {k: v for k, v in sim.state().items() if k not in ("time", "faults")} == before
    assert sim.invariants() == []


def test_a_secret_of_the_wrong_type_is_never_shown() -> None:
    from ansible_collections.cloudstack.cks.plugins.filter.variable_types import options_of, type_errors

    options = dict(options_of("plan"))
    options["rollout_api_secret"] = dict(options["rollout_api_secret"], type="int")  # a type a text secret fails
    errors = type_errors({"rollout_api_secret": "s3cr3t-value"}, options)
    assert errors == ["rollout_api_secret=(hidden): must be an int (a whole number such as 2)"]


# -- 10. a direct cks_node_cycle call clamps max_unavailable as the role does ------------------------

def test_a_direct_cycle_of_every_worker_is_clamped_to_workers_minus_one_and_refused_before_the_drain(
        cycle_sim: Any) -> None:
    from helpers import run_module

    from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings
    from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import Lock, Record, RecordStore

    sim = cycle_sim("small.yml")
    workers = sim.names("worker")
    assert len(workers) >= 2, workers
    RecordStore(sim.kube).write(Record(settings=Settings(worker=TypeSettings(sim.offering_id("cks-large"), None, None))
                                       .to_dict()), None)
    Lock(sim.kube, holder_identity="run-c", duration_seconds=300).acquire()
    args = {"api_url": sim.env["cloudstack_endpoint"], "api_key": sim.env["cloudstack_key"],
            "api_secret": sim.env["cloudstack_secret"], "kubeconfig": sim.env["kubeconfig"],
            "cluster": sim.env["cluster_name"], "poll_interval": 0.05, "batch_timeout": 120,
            "nodes": workers, "max_unavailable": len(workers) + 3, "lock_holder": "run-c"}

    result = run_module("cks_node_cycle", args)

    # The role would plan min(max_unavailable, workers - 1): every worker at once is refused.
    assert result.get("failed") is True, result
    assert f"{len(workers)} workers at once" in result["msg"] and f"at most {len(workers) - 1}" in result["msg"], result["msg"]
    assert [c for c in sim.calls() if c.get("command") == "stopVirtualMachine"] == []
    assert not any(sim.view().node(w).unschedulable for w in workers)
    assert sim.invariants() == []


# -- 10. an empty boot ID is never written as the annotation ---------------------------------------

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
