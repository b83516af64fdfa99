"""The CKS state scanner: Running -> Alert while a node VM is down, back once all nodes are Ready."""

from __future__ import annotations

import pytest
from cs import CloudStackApiException

from cks_sim.harness import wait_until
from simkit import small_spec


def test_cluster_goes_to_alert_and_back(sim):
    cs = sim.cs()
    vm = sim.node_vms("worker")[0]
    cs.stopVirtualMachine(id=vm["id"], fetch_result=True)
    wait_until(lambda: sim.cks_cluster()["state"] == "Alert")
    # While Alert, CKS refuses to scale or upgrade the cluster.
    with pytest.raises(CloudStackApiException) as caught:
        cs.scaleKubernetesCluster(id=sim.env["cluster_id"], size=5, fetch_result=True)
    assert caught.value.error["errorcode"] == 530
    cs.startVirtualMachine(id=vm["id"], fetch_result=True)
    wait_until(lambda: sim.cks_cluster()["state"] == "Running")
    world = sim.sim.kube[sim.env["cluster_id"]]
    assert world.ready_node_count() == 7
    events = [e for e in sim.admin("GET", "/timeline") if e.get("event") == "cluster_state"]
    assert [e["state"] for e in events] == ["Alert", "Running"]


def test_alert_stays_while_a_node_is_not_ready(sim):
    cs = sim.cs()
    vm = sim.node_vms("worker")[0]
    world = sim.sim.kube[sim.env["cluster_id"]]
    cs.stopVirtualMachine(id=vm["id"], fetch_result=True)
    wait_until(lambda: sim.cks_cluster()["state"] == "Alert")
    wait_until(lambda: world.ready_node_count() == 6)  # after the node-monitor grace period
    sim.admin("POST", "/faults", {"kind": "never_ready", "node": vm["name"].lower()})
    cs.startVirtualMachine(id=vm["id"], fetch_result=True)
    for _scan in range(3):  # every VM runs, but the Ready count is short: the scanner keeps Alert
        assert sim.admin("POST", "/actions", {"action": "scan"})["clusters"][sim.env["cluster_id"]] == "Alert"
    sim.admin("DELETE", "/faults")
    cs.stopVirtualMachine(id=vm["id"], fetch_result=True)
    cs.startVirtualMachine(id=vm["id"], fetch_result=True)
    wait_until(lambda: sim.cks_cluster()["state"] == "Running")


def test_scanner_ignores_clusters_in_a_cks_operation(sim):
    sim.admin("POST", "/actions", {"action": "set_cluster_state", "cluster": "demo", "state": "Scaling"})
    vm = sim.node_vms("worker")[0]
    sim.cs().stopVirtualMachine(id=vm["id"], fetch_result=True)
    answer = sim.admin("POST", "/actions", {"action": "scan"})
    assert answer["clusters"][sim.env["cluster_id"]] == "Scaling"
    with pytest.raises(CloudStackApiException):
        sim.cs().upgradeKubernetesCluster(id=sim.env["cluster_id"],
                                          kubernetesversionid=sim.cks_cluster()["kubernetesversionid"], fetch_result=True)


def _etcd_spec(counts_etcd: bool, adds_etcd: bool = False) -> dict:
    raw = small_spec(cloud={"scanner_counts_etcd": counts_etcd, "scanner_adds_etcd": adds_etcd})
    raw["clusters"][0]["etcd_nodes"] = 1
    raw["clusters"][0]["control_nodes"] = 1
    raw["clusters"][0]["workers"] = 1
    return raw


def test_etcd_nodes_in_the_ready_count_keep_the_cluster_in_alert(sim_factory):
    """Before 4.21 the scanner compared Ready nodes with control+worker+etcd; etcd VMs are no
    Kubernetes nodes (``scanner_adds_etcd: false``)."""
    handle = sim_factory(spec=_etcd_spec(counts_etcd=True))
    cs = handle.cs()
    [etcd_vm] = [vm for vm in handle.vms() if "-etcd-" in vm["name"]]
    assert etcd_vm["name"].startswith("demo-etcd-1-")
    embedded = {vm["name"]: vm for vm in handle.cks_cluster()["virtualmachines"]}
    assert embedded[etcd_vm["name"]]["isetcdnode"] is True
    worker = handle.node_vms("worker")[0]
    cs.stopVirtualMachine(id=worker["id"], fetch_result=True)
    wait_until(lambda: handle.cks_cluster()["state"] == "Alert")
    cs.startVirtualMachine(id=worker["id"], fetch_result=True)
    world = handle.sim.kube[handle.env["cluster_id"]]
    wait_until(lambda: world.ready_node_count() == 2)
    handle.admin("POST", "/actions", {"action": "scan"})
    assert handle.cks_cluster()["state"] == "Alert"


def test_without_etcd_in_the_count_the_cluster_recovers(sim_factory):
    handle = sim_factory(spec=_etcd_spec(counts_etcd=False))
    cs = handle.cs()
    worker = handle.node_vms("worker")[0]
    cs.stopVirtualMachine(id=worker["id"], fetch_result=True)
    wait_until(lambda: handle.cks_cluster()["state"] == "Alert")
    cs.startVirtualMachine(id=worker["id"], fetch_result=True)
    wait_until(lambda: handle.cks_cluster()["state"] == "Running")


def test_stop_and_start_of_the_whole_cluster(sim):
    cs = sim.cs()
    cs.stopKubernetesCluster(id=sim.env["cluster_id"], fetch_result=True)
    assert sim.cks_cluster()["state"] == "Stopped"
    assert {vm["state"] for vm in sim.vms()} == {"Stopped"}
    with pytest.raises(CloudStackApiException) as caught:
        cs.getKubernetesClusterConfig(id="not-a-uuid")
    assert caught.value.error["errorcode"] == 431
    cs.startKubernetesCluster(id=sim.env["cluster_id"], fetch_result=True)
    assert sim.cks_cluster()["state"] == "Running"
    assert {vm["state"] for vm in sim.vms()} == {"Running"}
