"""The CKS state scanner of 4.21+: Alert recovery adds the etcd nodes to kubectl's Ready count.

Follows ``KubernetesClusterManagerImpl.KubernetesClusterStatusScanner.reallyRun`` (an Alert
cluster whose VMs all run is handed to ``KubernetesClusterStartWorker.reconcileAlertCluster``),
which compares ``KubernetesClusterUtil.getKubernetesClusterReadyNodesCount`` plus the cluster's
etcd node count with ``getTotalNodeCount`` (control + worker + etcd).
"""

from __future__ import annotations

from cks_sim.harness import wait_until
from simkit import small_spec


def _etcd_cluster(**cloud: object) -> dict:
    raw = small_spec(cloud=cloud)
    raw["clusters"][0].update(etcd_nodes=1, control_nodes=1, workers=1)
    return raw


def test_a_cluster_with_etcd_nodes_goes_back_to_running(sim_factory):
    handle = sim_factory(spec=_etcd_cluster())
    assert handle.sim.cloud.cloud_opts["scanner_adds_etcd"] is True  # the default for 4.22.1.0
    cs = handle.cs()
    worker = handle.node_vms("worker")[0]
    cs.stopVirtualMachine(id=worker["id"], fetch_result=True)
    wait_until(lambda: handle.cks_cluster()["state"] == "Alert")
    cs.startVirtualMachine(id=worker["id"], fetch_result=True)
    world = handle.sim.kube[handle.env["cluster_id"]]
    wait_until(lambda: world.ready_node_count() == 2)  # the etcd VM is no Kubernetes node
    handle.admin("POST", "/actions", {"action": "scan"})
    assert handle.cks_cluster()["state"] == "Running"


def test_before_4_21_the_etcd_count_kept_it_in_alert(sim_factory):
    handle = sim_factory(spec=_etcd_cluster(version="4.20.1.0"))
    assert handle.sim.cloud.cloud_opts["scanner_adds_etcd"] is False
    cs = handle.cs()
    worker = handle.node_vms("worker")[0]
    cs.stopVirtualMachine(id=worker["id"], fetch_result=True)
    wait_until(lambda: handle.cks_cluster()["state"] == "Alert")
    cs.startVirtualMachine(id=worker["id"], fetch_result=True)
    world = handle.sim.kube[handle.env["cluster_id"]]
    wait_until(lambda: world.ready_node_count() == 2)
    handle.admin("POST", "/actions", {"action": "scan"})
    assert handle.cks_cluster()["state"] == "Alert"


def test_stopping_a_vm_in_error_leaves_it_in_error(sim):
    """``VirtualMachineManagerImpl.advanceStop``: "Stopped called on ... but the state is Error",
    it returns without touching the VM, so the stop job succeeds and the VM stays in Error."""
    vm = sim.node_vms("worker")[0]
    sim.admin("POST", "/actions", {"action": "set_vm_state", "vm": vm["name"], "state": "Error"})
    stopped = sim.cs().stopVirtualMachine(id=vm["id"], fetch_result=True)["virtualmachine"]
    assert stopped["state"] == "Error"
    assert sim.vm(vm["name"])["state"] == "Error"
