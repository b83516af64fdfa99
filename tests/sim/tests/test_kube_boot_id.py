"""A node whose kubelet reports no boot ID: status.nodeInfo.bootID is "".

The kubelet copies cadvisor's MachineInfo.BootID into status.nodeInfo.bootID (kubelet
pkg/kubelet/nodestatus/setters.go, MachineInfo); cadvisor leaves it "" where
/proc/sys/kernel/random/boot_id cannot be read. The next boot reports a new one again.
"""

from __future__ import annotations


def test_a_node_can_report_an_empty_boot_id_until_it_boots_again(sim_factory):
    handle = sim_factory()
    world = next(iter(handle.sim.kube.values()))
    name = sorted(world.nodes)[0]
    answer = handle.admin("POST", "/actions", {"action": "set_boot_id", "node": name, "boot_id": ""})
    assert answer == {"node": name, "boot_id": ""}
    with handle.sim.lock:
        node = world.store.read("nodes", "", name)
        assert node["status"]["nodeInfo"]["bootID"] == ""
