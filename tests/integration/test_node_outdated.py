"""cks_node_outdated through ansible-playbook against cks-sim (real cs and kubernetes clients)."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any, Iterator

import pytest
import requests
from cks_sim.harness import wait_until
from helpers import ClusterSim, run_module, running_sim

from ansible_collections.cloudstack.cks.plugins.module_utils._state import record as records

pytestmark = pytest.mark.timeout(900)

ANNOTATION = "cloudstack.apache.org/rollout-boot-id"


def outdated(sim: ClusterSim, cluster: str = "alpha", check: bool = False, **args: Any) -> dict[str, Any]:
    result = run_module("cks_node_outdated", dict(sim.connection_args(cluster), cluster=cluster, **args), check=check)
    assert result["failed"] is False, result.get("msg")
    return result


def store(sim: ClusterSim, cluster: str = "alpha", **args: Any) -> dict[str, Any]:
    result = run_module("cks_node_settings", dict(sim.connection_args(cluster), cluster=cluster, **args))
    assert result["failed"] is False, result.get("msg")
    return result


def names(sim: ClusterSim, node_type: str, cluster: str = "alpha") -> list[str]:
    cl = next(c for c in sim.state()["cloud"]["clusters"] if c["name"] == cluster)
    return sorted(vm["name"].lower() for vm in cl["vms"] if vm["node_type"] == node_type)


def wait_vm(sim: ClusterSim, vm: str, state: str, timeout: float = 60) -> None:
    wait_until(lambda: any(v["name"].lower() == vm and v["state"] == state
                           for c in sim.state()["cloud"]["clusters"] for v in c["vms"]),
               timeout, f"{vm} to reach {state}", interval=0.05)


def annotate(sim: ClusterSim, node: str, boot_id: str, cordon: bool = True, cluster: str = "alpha") -> None:
    """What a rollout that stopped leaves behind: the annotation, and the node cordoned."""
    kube = sim.kube_client(cluster)
    try:
        kube.patch_node(node, {"metadata": {"annotations": {ANNOTATION: boot_id}},
                               "spec": {"unschedulable": cordon}})
    finally:
        kube.close()


def boot_id(sim: ClusterSim, node: str, cluster: str = "alpha") -> str:
    kube = sim.kube_client(cluster)
    try:
        return kube.read_node(node)["status"]["nodeInfo"]["bootID"]
    finally:
        kube.close()


def by_name(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["name"]: n for n in result["nodes"]}


@pytest.fixture
def sim() -> Iterator[ClusterSim]:
    with running_sim("settings.yml") as handle:
        yield handle


# -- reasons -------------------------------------------------------------------------------------

def test_before_first_use_nothing_is_out_of_date_and_nothing_is_written(sim: ClusterSim) -> None:
    before = sim.world()
    result = outdated(sim, check=True)
    assert result["changed"] is False
    assert result["settings_recorded"] is False
    assert result["settings"]["worker"]["offering"] == "cks-medium"
    assert result["out_of_date"] == [] and result["plan"] == [] and result["serial"] == []
    assert (result["controlnodesoutofdate"], result["workernodesoutofdate"], result["etcdnodesoutofdate"]) == (0, 0, 0)
    assert result["lock_holder"] is None and result["last_error"] is None
    assert sim.world() == before
    node = by_name(result)[names(sim, "worker")[0]]
    assert node["node_type"] == "worker" and node["vm_state"] == "Running" and node["ready"] is True
    assert node["boot_id"] and node["annotated"] is False and node["cordoned_by_others"] is False


def test_each_out_of_date_reason_with_from_and_to(sim: ClusterSim) -> None:
    store(sim, node_offerings={"worker": "cks-large"})
    only_offering = outdated(sim)
    worker = by_name(only_offering)[names(sim, "worker")[0]]
    assert [r["kind"] for r in worker["reasons"]] == ["offering"]
    assert worker["reasons"][0]["from"]["name"] == "cks-medium" and worker["reasons"][0]["to"]["name"] == "cks-large"
    assert worker["reasons"][0]["message"] == "offering cks-medium -> cks-large"

    store(sim, node_offerings={"worker": "cks-medium"}, node_root_disk_sizes={"worker": 30})
    only_disk = by_name(outdated(sim))[names(sim, "worker")[0]]
    assert only_disk["reasons"] == [{"kind": "root_disk", "from": 20, "to": 30, "message": "root disk 20 GB -> 30 GB"}]

    store(sim, node_root_disk_sizes={"worker": 20}, node_affinity_groups={"worker": ["workers-soft"]})
    only_groups = by_name(outdated(sim))[names(sim, "worker")[0]]
    (reason,) = only_groups["reasons"]
    assert reason["kind"] == "affinity_groups"
    # The dedication group is neither compared nor listed: the node keeps it.
    assert [g["name"] for g in reason["from"]] == ["workers-spread"]
    assert [g["name"] for g in reason["to"]] == ["workers-soft"]
    assert only_groups["dedication_groups"] == ["dedicated-admin"]

    store(sim, node_offerings={"worker": "cks-large"}, node_root_disk_sizes={"worker": 30})
    result = outdated(sim)
    assert result["workernodesoutofdate"] == 5 and result["controlnodesoutofdate"] == 0
    assert sorted(result["out_of_date"]) == names(sim, "worker")
    assert {r["kind"] for r in by_name(result)[names(sim, "worker")[2]]["reasons"]} == \
        {"offering", "root_disk", "affinity_groups"}
    assert result["settings_recorded"] is True
    assert result["settings"]["worker"]["offering"] == "cks-large"


def test_a_larger_disk_is_not_out_of_date() -> None:
    spec_nodes = "settings.yml"
    with running_sim(spec_nodes) as sim:
        store(sim, node_root_disk_sizes={"worker": 10})
        result = outdated(sim)
        assert result["workernodesoutofdate"] == 0


# -- the plan ------------------------------------------------------------------------------------

def test_order_control_one_at_a_time_then_workers_stopped_and_annotated_first(sim: ClusterSim) -> None:
    store(sim, node_offerings={"control": "cks-large", "worker": "cks-large"})
    controls, workers = names(sim, "control"), names(sim, "worker")
    stopped, annotated = workers[4], workers[2]
    annotate(sim, annotated, boot_id(sim, annotated))
    sim.action(action="stop_vm", vm=stopped)
    wait_vm(sim, stopped, "Stopped")
    foreign = controls[1]
    sim.fault(kind="foreign_cordon", cluster=sim.cluster()["id"], node=foreign)

    result = outdated(sim, max_unavailable=2)

    # The stopped worker first of all, alone (every other batch's preflight needs its VM Running),
    # then the control nodes one at a time, then the workers, the annotated one first.
    assert [b["node_type"] for b in result["plan"]] == ["worker"] + ["control"] * 3 + ["worker"] * 2
    assert result["plan"][0]["nodes"] == [stopped]
    assert [b["nodes"] for b in result["plan"][1:4]] == [[c] for c in controls]
    worker_order = [n for b in result["plan"][4:] for n in b["nodes"]]
    assert worker_order[0] == annotated
    assert worker_order[1:] == [w for w in workers if w not in (stopped, annotated)]
    assert result["serial"] == [1, 1, 1, 1, 2, 2]
    assert result["hosts"] == [stopped] + controls + worker_order
    assert result["worker_batch_size"] == 2 and result["max_unavailable"] == 2
    nodes = by_name(result)
    assert nodes[stopped]["vm_state"] == "Stopped"
    assert nodes[annotated]["annotated"] is True and nodes[annotated]["cordoned_by_others"] is False
    assert nodes[foreign]["cordoned_by_others"] is True and nodes[foreign]["annotated"] is False


def test_annotated_nodes_that_are_back_and_up_to_date_are_released_not_restarted(sim: ClusterSim) -> None:
    store(sim, node_offerings={"worker": "cks-large"})
    control = names(sim, "control")[0]
    # Annotated with a boot ID from before a restart: it is back (Ready with another boot ID).
    annotate(sim, control, "boot-id-before-the-restart")
    stuck = names(sim, "control")[1]
    annotate(sim, stuck, boot_id(sim, stuck))

    result = outdated(sim)
    assert result["to_release"] == [control]
    assert control not in result["hosts"]
    assert by_name(result)[control]["back"] is True
    # An annotated node that has not restarted is work left, even though it is up to date.
    assert result["plan"][0] == {"node_type": "control", "nodes": [stuck], "canary": False}


def test_max_unavailable_is_clamped_to_workers_minus_one(sim: ClusterSim) -> None:
    store(sim, node_offerings={"worker": "cks-large"})
    result = outdated(sim, max_unavailable=10)
    assert result["max_unavailable"] == 10 and result["worker_batch_size"] == 4
    assert [len(b["nodes"]) for b in result["plan"]] == [4, 1]
    assert result["serial"] == [4, 1]
    given = outdated(sim, max_unavailable=2)
    assert given["serial"] == [2, 2, 1]


def test_select_limits_the_batches_not_the_counts(sim: ClusterSim) -> None:
    store(sim, node_offerings={"control": "cks-large", "worker": "cks-large"})
    workers = names(sim, "worker")
    result = outdated(sim, max_unavailable=3, select="[?node_type=='worker'] | [0:2]")
    assert result["selected"] == workers[:2]
    assert result["plan"] == [{"node_type": "worker", "nodes": workers[:2], "canary": False}]
    assert result["controlnodesoutofdate"] == 3 and result["workernodesoutofdate"] == 5
    # The workers and control nodes left out are still out of date, and named.
    assert result["not_selected"] == names(sim, "control") + workers[2:]
    bad = run_module("cks_node_outdated", dict(sim.connection_args(), cluster="alpha", select="[?"))
    assert bad["failed"] is True and "select=" in bad["msg"]


def test_lock_holder_and_last_error_come_from_the_record(sim: ClusterSim) -> None:
    store(sim, node_offerings={"worker": "cks-large"}, rollout=True, lock_holder="run-7")
    kube = sim.kube_client()
    try:
        records.RecordStore(kube).update(lambda r: setattr(r, "last_error", "node alpha-node-1: drain failed"))
    finally:
        kube.close()
    result = outdated(sim)
    assert result["lock_holder"] == "run-7" and result["lock"]["held"] is True
    assert result["last_error"] == "node alpha-node-1: drain failed"


# -- types that cannot be rolled -------------------------------------------------------------------

@pytest.mark.parametrize("spec, cluster, node_type, why", [
    ("single-control.yml", "solo", "control", "a single control node"),
    ("two-control.yml", "duo", "control", "2 control nodes with stacked etcd"),
    ("two-etcd.yml", "ext", "etcd", "2 etcd nodes"),
])
def test_unrollable_types_are_skipped_with_why_and_the_others_still_planned(spec: str, cluster: str,
                                                                            node_type: str, why: str) -> None:
    with running_sim(spec) as sim:
        store(sim, cluster=cluster, node_offerings={node_type: "cks-large", "worker": "cks-large"})
        result = outdated(sim, cluster=cluster)
        skipped = result["unrollable"]
        assert list(skipped) == [node_type]
        assert why in skipped[node_type]
        assert result["unrollable_error"] == skipped[node_type]
        assert result["node_types"][node_type]["can_lose_a_node"] is False
        assert result[f"{node_type}nodesoutofdate"] == len(names(sim, node_type, cluster))
        # The workers (and, with external etcd, the control nodes) are still planned.
        assert {b["node_type"] for b in result["plan"]} == {"worker"}
        assert sorted(result["hosts"]) == names(sim, "worker", cluster)


def test_with_two_etcd_nodes_the_control_nodes_still_roll() -> None:
    with running_sim("two-etcd.yml") as sim:
        store(sim, cluster="ext", node_offerings={"control": "cks-large", "etcd": "cks-large"})
        result = outdated(sim, cluster="ext")
        assert list(result["unrollable"]) == ["etcd"]
        assert [b["nodes"] for b in result["plan"]] == [[c] for c in names(sim, "control", "ext")]
        assert result["cluster"]["external_etcd"] is True


# -- scale -------------------------------------------------------------------------------------------

def test_a_1000_node_cluster_is_planned_within_the_call_budget() -> None:
    with running_sim("large-1000.yml", ready_timeout=300) as sim:
        store(sim, cluster="big", node_offerings={"worker": "cks-large"})
        since = sim.state()["time"]
        result = outdated(sim, cluster="big", max_unavailable=50)
        calls = sim.calls(since)
        cloud = [c for c in calls if c["api"] == "cloudstack"]
        kube = [c for c in calls if c["api"] == "kubernetes"]
        assert len(cloud) <= 10, [c["command"] for c in cloud]
        assert len(kube) <= 5, [c["path"] for c in kube]
        assert len(result["nodes"]) == 1000
        assert result["workernodesoutofdate"] == 997
        assert result["worker_batch_size"] == 50
        assert sum(result["serial"]) == 997 and len(result["serial"]) == 20

        # Without a kubeconfig option it is fetched from CloudStack: one call more, still in budget.
        args = sim.connection_args("big")
        args.pop("kubeconfig")
        since = sim.state()["time"]
        fetched = run_module("cks_node_outdated", dict(args, cluster="big"))
        assert fetched["failed"] is False, fetched.get("msg")
        calls = sim.calls(since)
        cloud = [c["command"] for c in calls if c["api"] == "cloudstack"]
        assert "getKubernetesClusterConfig" in cloud and len(cloud) <= 10, cloud
        assert len([c for c in calls if c["api"] == "kubernetes"]) <= 5
        assert fetched["workernodesoutofdate"] == 997


# -- etcd's member health --------------------------------------------------------------------

def etcd_leader(etcd: dict[str, Any]) -> str:
    """The name of the member that leads, as each member's status names the leader's ID."""
    tls = {"verify": etcd["ca_cert"], "cert": (etcd["client_cert"], etcd["client_key"]), "timeout": 5}
    ids = {}
    leader = ""
    for member in etcd["members"]:
        status = requests.post(member["client_url"] + "/v3/maintenance/status", json={}, **tls).json()
        ids[status["header"]["member_id"]] = member["name"]
        leader = status["leader"]
    return ids[leader].lower()


def test_a_control_node_whose_etcd_member_died_is_planned_first() -> None:
    with running_sim("small.yml") as sim:
        etcd = sim.env["etcd"]
        options = {"etcd_endpoints": [m["client_url"] for m in etcd["members"]], "etcd_ca_cert": etcd["ca_cert"],
                   "etcd_client_cert": etcd["client_cert"], "etcd_client_key": etcd["client_key"]}
        store(sim, cluster="demo", node_offerings={"control": "cks-large"})
        controls = names(sim, "control", "demo")
        before = outdated(sim, cluster="demo", **options)
        assert [b["nodes"] for b in before["plan"]][:3] == [[c] for c in controls]
        assert before["etcd"] == {"asked": True, "down": [], "message": before["etcd"]["message"], "error": None}

        # The member that leads is killed while another survivor is paused: the one left cannot win
        # an election alone, so every member is judged down until the paused one comes back (3 s
        # later) and they elect a leader. The plan asks again until a voter is healthy, rather than
        # keep the default order from a reading that cannot tell which member died.
        victim = etcd_leader(etcd)
        assert victim in controls
        cluster = next(c for c in sim.state()["cloud"]["clusters"] if c["name"] == "demo")
        paused = next(m for m in sim.state()["etcd"][cluster["id"]]["members"] if m["name"].lower() != victim)
        os.kill(paused["pid"], signal.SIGSTOP)
        try:
            sim.fault(kind="etcd_kill", vm=next(vm["name"] for vm in cluster["vms"] if vm["name"].lower() == victim))
            resume = threading.Timer(3.0, os.kill, (paused["pid"], signal.SIGCONT))
            resume.start()
            after = outdated(sim, cluster="demo", etcd_timeout=1, **options)
        finally:
            os.kill(paused["pid"], signal.SIGCONT)
        assert after["etcd"]["down"] == [victim], after["etcd"]
        # Its member is lost already; while it is down no other member's node may go.
        assert after["etcd"]["asked"] is True, after["etcd"]
        assert [b["nodes"] for b in after["plan"]][:3] == [[victim], *([c] for c in controls if c != victim)]
        assert "its etcd member is not healthy" in next(w["why"] for w in after["work"] if w["name"] == victim)

        # etcd out of reach: still a plan (each batch's preflight asks etcd again), and why not asked.
        unreachable = outdated(sim, cluster="demo", etcd_endpoints=["http://127.0.0.1:9"], etcd_timeout=1)
        assert unreachable["etcd"]["asked"] is False and unreachable["etcd"]["error"]
        assert [b["nodes"] for b in unreachable["plan"]][:3] == [[c] for c in controls]
