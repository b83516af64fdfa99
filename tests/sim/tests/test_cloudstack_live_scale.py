"""scaleVirtualMachine of a Running VM (a live scale), through the real `cs` client, and what the
guest and the kubelet then show, through the real `kubernetes` client's exec.

CloudStack's rules, read in apache/cloudstack (cks_sim/cloud_live_scale.py names each):
``UserVmManagerImpl.upgradeRunningVirtualMachine`` (``VmServiceOfferingScaleServiceImpl`` on main),
``VirtualMachineManagerImpl.reConfigureVm``, ``LibvirtScaleVmCommandWrapper.execute``,
``KVMGuru.configureVmMemoryAndCpuCores`` and ``UserVmManagerImpl.checkIfDynamicScalingCanBeEnabled``.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from cks_sim.harness import wait_until
from cs import CloudStackApiException
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.stream import stream
from simkit import small_spec


def _live_spec(version: str = "4.23.0.0", dynamic_scale: bool = True, **cluster: Any) -> dict[str, Any]:
    spec = small_spec()
    spec["cloud"] = {"version": version}
    spec["zone"] = dict(spec["zone"], dynamic_scale=dynamic_scale)
    spec["clusters"][0].update(cluster)
    return spec


def _scale_error(sim, vm, offering: str) -> dict[str, Any]:
    with pytest.raises(CloudStackApiException) as caught:
        sim.cs().scaleVirtualMachine(id=vm["id"], serviceofferingid=sim.offering(offering)["id"], fetch_result=True)
    return caught.value.error


def _node_of(vm: dict[str, Any]) -> str:
    return vm["name"].lower()


def test_running_vm_scales_up_live_on_423_with_a_fixed_offering(sim_factory):
    # 4.23 (pull request 12975): no "Fixed Offering" refusal; KVMGuru gave the domain the host's
    # maximums (kvm.*.dynamic.scaling.capacity 0), so the hypervisor adds vCPUs and memory.
    sim = sim_factory(_live_spec())
    vm = sim.node_vms("worker")[0]
    assert vm["isdynamicallyscalable"] is True and vm["hypervisor"] == "KVM"
    scaled = sim.cs().scaleVirtualMachine(id=vm["id"], serviceofferingid=sim.offering("cks-large")["id"],
                                          fetch_result=True)["virtualmachine"]
    assert (scaled["state"], scaled["serviceofferingname"], scaled["cpunumber"], scaled["memory"]) == \
        ("Running", "cks-large", 4, 8192)
    events = [e["event"] for e in sim.timeline() if e.get("node") == _node_of(vm)]
    assert "scaled_live" in events and "stopped" not in events


def test_scale_down_of_a_running_vm_is_refused_word_for_word(sim_factory):
    sim = sim_factory(_live_spec())
    vm = sim.node_vms("worker")[0]
    sim.cs().scaleVirtualMachine(id=vm["id"], serviceofferingid=sim.offering("cks-large")["id"], fetch_result=True)
    error = _scale_error(sim, vm, "cks-medium")
    assert error["errorcode"] == 431
    assert error["errortext"] == (
        'While the VM is running, only scalling up it is supported. New service offering {"memory": 4096, "speed": 2000,'
        ' "cpu": 2} should have at least one value (ram, speed or cpu) greater than the current values {"memory": 8192,'
        ' "speed": 2000, "cpu": 4}.')


def test_before_423_kvm_needs_a_custom_current_offering(sim_factory):
    sim = sim_factory(_live_spec(version="4.22.1.0"))
    error = _scale_error(sim, sim.node_vms("worker")[0], "cks-large")
    assert error["errorcode"] == 431 and 'is a "Fixed Offering"' in error["errortext"]


def test_zone_without_dynamic_scaling_is_refused_and_the_vm_is_not_scalable(sim_factory):
    # checkIfDynamicScalingCanBeEnabled: the zone's enable.dynamic.scale.vm false leaves the VM's
    # flag false at deploy; the zone check (PermissionDeniedException, 531) comes first.
    sim = sim_factory(_live_spec(dynamic_scale=False))
    vm = sim.node_vms("worker")[0]
    assert vm["isdynamicallyscalable"] is False
    error = _scale_error(sim, vm, "cks-large")
    assert (error["errorcode"], error["errortext"]) == (
        531, "Dynamically scaling Instances is disabled for this zone, please contact your admin.")


def test_template_not_dynamically_scalable_leaves_the_vm_without_tools(sim_factory):
    sim = sim_factory(_live_spec(dynamically_scalable=False))
    vm = sim.node_vms("worker")[0]
    assert vm["isdynamicallyscalable"] is False
    error = _scale_error(sim, vm, "cks-large")
    assert error["errorcode"] == 530
    assert error["errortext"].endswith("as it does not have tools to support dynamic scaling.")


def test_domain_started_without_headroom_is_refused_by_the_hypervisor(sim_factory):
    # Started under 4.22 on a fixed offering: KVMGuru wrote no <maxMemory>; LibvirtScaleVmCommandWrapper
    # scales the memory first and refuses, reConfigureVm turns the answer into 530.
    sim = sim_factory(_live_spec(started_on_version="4.22.1.0"))
    vm = sim.node_vms("worker")[0]
    error = _scale_error(sim, vm, "cks-large")
    assert error["errorcode"] == 530
    assert error["errortext"].startswith("Unable to scale vm due to Unable to scale VM")
    assert "is not prepared for dynamic scaling" in error["errortext"]
    assert sim.cs().listVirtualMachines(id=vm["id"])["virtualmachine"][0]["serviceofferingname"] == "cks-medium"
    # A stop and start under 4.23 gives the domain its headroom.
    sim.cs().stopVirtualMachine(id=vm["id"], fetch_result=True)
    sim.cs().startVirtualMachine(id=vm["id"], fetch_result=True)
    scaled = sim.cs().scaleVirtualMachine(id=vm["id"], serviceofferingid=sim.offering("cks-large")["id"],
                                          fetch_result=True)["virtualmachine"]
    assert scaled["cpunumber"] == 4


def test_cluster_capacity_setting_caps_the_domain(sim_factory):
    spec = _live_spec()
    spec["host_clusters"] = [{"name": "c1", "kvm_cpu_dynamic_scaling_capacity": 2}]
    spec["hosts"] = [dict(h, cluster="c1") for h in spec["hosts"]]
    sim = sim_factory(spec)
    error = _scale_error(sim, sim.node_vms("worker")[0], "cks-large")
    assert error["errorcode"] == 530
    assert "requested vcpus is greater than max allowable vcpus for the live domain: 4 > 2" in error["errortext"]


# Hosts of 2 cores: no host can run 4 vCPUs (checkIfHostHasCpuCapability). With 10 hosts the cluster
# stays under its disable threshold, so each of the scale.retry (2) tries finds no host to migrate to;
# upgradeRunningVirtualMachine returns false and ScaleVMCmd fails "Failed to scale the VM". With 8 the
# cluster would cross cluster.cpu.allocated.capacity.disablethreshold (0.85): checkIfClusterCrossesThreshold.
@pytest.mark.parametrize("hosts, text", [(10, "Failed to scale the VM"), (8, "due to insufficient resources.")],
                         ids=["no-host-after-the-retries", "over-the-disable-threshold"])
def test_no_room_for_the_new_size_is_refused(sim_factory, hosts: int, text: str):
    spec = _live_spec()
    spec["hosts"] = [{"name": f"kvm-{i}", "cpu": 2, "cpuspeed": 2000, "memory": 262144} for i in range(1, hosts + 1)]
    sim = sim_factory(spec)
    vm = sim.node_vms("worker")[0]
    error = _scale_error(sim, vm, "cks-large")
    assert error["errorcode"] == 530 and error["errortext"].endswith(text)
    assert sim.cs().listVirtualMachines(id=vm["id"])["virtualmachine"][0]["cpunumber"] == 2


def test_unsupported_hypervisor_is_refused(sim_factory):
    spec = _live_spec()
    spec["host_clusters"] = [{"name": "hv", "hypervisor": "Hyperv"}]
    spec["hosts"] = [dict(h, cluster="hv") for h in spec["hosts"]]
    sim = sim_factory(spec)
    vm = sim.node_vms("worker")[0]
    assert vm["hypervisor"] == "Hyperv"
    error = _scale_error(sim, vm, "cks-large")
    assert (error["errorcode"], error["errortext"]) == (
        431, "Scaling the VM dynamically is not supported for VMs running on Hypervisor [Hyperv].")


# -- the guest and the kubelet -------------------------------------------------------------------

NSENTER = ["nsenter", "--target", "1", "--mount", "--uts", "--ipc", "--net", "--pid", "--"]


def _core(sim) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(k8s_config.new_client_from_config(sim.env["kubeconfig"]))


def _host_pod(core: k8s.CoreV1Api, node: str, privileged: bool = True) -> str:
    name = f"host-{node[-6:]}"
    core.create_namespaced_pod("kube-system", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeName": node, "hostPID": True, "restartPolicy": "Never",
                 "containers": [{"name": "shell", "image": "busybox:1.36.1", "command": ["sleep", "600"],
                                 "securityContext": {"privileged": privileged}}]}})
    wait_until(lambda: core.read_namespaced_pod(name, "kube-system").status.phase == "Running", what="host pod")
    return name


def _exec(core: k8s.CoreV1Api, pod: str, command: list[str]) -> tuple[str, int]:
    resp = stream(core.connect_get_namespaced_pod_exec, pod, "kube-system", command=command,
                  stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
    resp.run_forever(timeout=30)
    out = resp.read_stdout() + resp.read_stderr()
    status = json.loads(resp.peek_channel(3) or "{}")
    return out, 0 if status.get("status") == "Success" else int(
        next((c["message"] for c in status.get("details", {}).get("causes", []) if c.get("reason") == "ExitCode"), 1))


def _capacity(core: k8s.CoreV1Api, node: str) -> tuple[str, str, str]:
    found = core.read_node(node)
    return found.status.capacity["cpu"], found.status.capacity["memory"], found.status.node_info.boot_id


def _scaled_with_a_host_pod(sim) -> tuple[k8s.CoreV1Api, str, str, tuple[str, str, str]]:
    """(client, node, its host pod, its capacity before) after a live scale of the first worker to cks-large."""
    core = _core(sim)
    vm = sim.node_vms("worker")[0]
    node = _node_of(vm)
    before = _capacity(core, node)
    pod = _host_pod(core, node)
    sim.cs().scaleVirtualMachine(id=vm["id"], serviceofferingid=sim.offering("cks-large")["id"], fetch_result=True)
    return core, node, pod, before


def test_kubelet_shows_a_live_scale_only_after_its_restart(sim_factory):
    sim = sim_factory(_live_spec())
    core, node, pod, before = _scaled_with_a_host_pod(sim)
    # The guest onlined the hot-added vCPUs and memory at once; the Node still shows the old ones.
    assert _exec(core, pod, NSENTER + ["nproc"]) == ("4\n", 0)
    assert _exec(core, pod, NSENTER + ["grep", "MemTotal", "/proc/meminfo"])[0].split()[1] == str(8192 * 1024)
    assert _capacity(core, node) == before
    started = time.time()
    out, code = _exec(core, pod, NSENTER + ["systemd-run", "--on-active=1", "--unit=cks-kubelet-restart",
                                            "systemctl", "restart", "kubelet"])
    assert code == 0 and "cks-kubelet-restart.timer" in out
    wait_until(lambda: _capacity(core, node)[0] == "4", what="the new kubelet's capacity")
    cpu, memory, boot = _capacity(core, node)
    assert (memory, boot) == (f"{8192 * 1024}Ki", before[2])  # same boot: no reboot
    events = [e for e in sim.timeline(since=started) if e.get("node") == node]
    assert [e["event"] for e in events if e["event"].startswith("kubelet")] == ["kubelet_stopped", "kubelet_restarted"]
    assert not [e for e in events if e["event"] in ("boot", "pod_deleted")]  # every pod kept running


def test_guest_that_does_not_online_keeps_its_vcpus_offline(sim_factory):
    sim = sim_factory(_live_spec(guest_onlines_hotplug=False))
    core = _core(sim)
    vm = sim.node_vms("worker")[0]
    node = _node_of(vm)
    pod = _host_pod(core, node)
    assert _exec(core, pod, NSENTER + ["cat", "/sys/devices/system/cpu/possible"])[0] == "0-63\n"
    sim.cs().scaleVirtualMachine(id=vm["id"], serviceofferingid=sim.offering("cks-large")["id"], fetch_result=True)
    assert _exec(core, pod, NSENTER + ["nproc"]) == ("2\n", 0)
    # Without hostPID and privileged, nsenter cannot enter PID 1's namespaces.
    plain = _host_pod(core, _node_of(sim.node_vms("worker")[1]), privileged=False)
    assert _exec(core, plain, NSENTER + ["nproc"])[1] == 1


def test_stale_kubelet_fault_keeps_the_old_capacity(sim_factory):
    sim = sim_factory(_live_spec())
    sim.fault(kind="kubelet_stale_capacity")  # every node's kubelet
    core, node, pod, _before = _scaled_with_a_host_pod(sim)
    started = time.time()
    _exec(core, pod, NSENTER + ["systemd-run", "--on-active=1", "systemctl", "restart", "kubelet"])
    wait_until(lambda: any(e["event"] == "kubelet_restarted" for e in sim.timeline(since=started)
                           if e.get("node") == node), what="kubelet restart")
    assert _capacity(core, node)[0] == "2"


def test_restart_from_inside_the_exec_cuts_its_stream_and_the_new_kubelet_finishes_deletions(sim_factory):
    sim = sim_factory(_live_spec())
    core = _core(sim)
    node = _node_of(sim.node_vms("worker")[0])
    pod = _host_pod(core, node)
    started = time.time()
    resp = stream(core.connect_get_namespaced_pod_exec, pod, "kube-system",
                  command=NSENTER + ["systemctl", "restart", "kubelet"],
                  stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
    resp.run_forever(timeout=30)
    assert not resp.peek_channel(3)  # no exit status: the kubelet carrying the stream stopped
    # Deleted while the kubelet is down, the pod stays Terminating until the new kubelet syncs.
    core.delete_namespaced_pod(pod, "kube-system", grace_period_seconds=0)
    wait_until(lambda: not [p for p in core.list_namespaced_pod("kube-system").items if p.metadata.name == pod],
               what="the pod gone after the kubelet restart")
    assert any(e["event"] == "kubelet_restarted" for e in sim.timeline(since=started) if e.get("node") == node)
