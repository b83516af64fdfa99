"""The Kubernetes API inside the whole cks-sim: CloudStack power changes drive the nodes."""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from cks_sim.harness import wait_until
from kubekit import assert_known_fields, node_ready


def _core(handle: Any) -> k8s.CoreV1Api:
    # The kubeconfig file cks-sim wrote, exactly as a user (or the collection) would load it.
    return k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=handle.env["kubeconfig"]))


def test_stop_change_start_through_cloudstack_boots_node_with_new_offering(sim: Any) -> None:
    core = _core(sim)
    worker = sim.node_vms("worker")[0]
    name = worker["name"].lower()
    node = core.read_node(name)
    old_boot = node.status.node_info.boot_id
    assert node_ready(node) == "True" and node.status.capacity["cpu"] == str(worker["cpunumber"])
    cs = sim.cs()
    cs.stopVirtualMachine(id=worker["id"], fetch_result=True)
    wait_until(lambda: node_ready(core.read_node(name)) == "Unknown")
    assert sim.sim.kube[sim.env["cluster_id"]].ready_node_count() == len(core.list_node().items) - 1
    large = sim.offering("cks-large")
    cs.changeServiceForVirtualMachine(id=worker["id"], serviceofferingid=large["id"])
    cs.startVirtualMachine(id=worker["id"], fetch_result=True)
    node = wait_until(lambda: (n := core.read_node(name)).status.node_info.boot_id != old_boot
                      and node_ready(n) == "True" and n)
    assert node.status.capacity["cpu"] == str(large["cpunumber"])
    assert node.status.capacity["memory"] == f"{large['memory'] * 1024}Ki"
    events = [e["event"] for e in sim.admin("GET", "/timeline") if e.get("node") == name]
    assert events.index("powered_off") < events.index("notready") < events.index("powered_on") < events.index("boot")


def test_kube_state_in_admin_snapshot_and_foreign_cordon_fault(sim: Any) -> None:
    core = _core(sim)
    worker = sim.node_vms("worker")[1]["name"].lower()
    sim.admin("POST", "/faults", {"kind": "foreign_cordon", "node": worker})
    assert core.read_node(worker).spec.unschedulable is True
    state = sim.admin("GET", "/state")
    nodes = {n["name"]: n for n in state["kube"][sim.env["cluster_id"]]["nodes"]}
    assert nodes[worker]["unschedulable"] and nodes[worker]["foreign_cordon"]
    pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={worker}")
    assert pods.items
    raw = core.api_client.sanitize_for_serialization(core.read_node(worker))
    assert_known_fields(raw, "V1Node")
