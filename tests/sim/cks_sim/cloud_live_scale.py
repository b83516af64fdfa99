"""scaleVirtualMachine of a Running VM: CloudStack's rules for a live scale, per release, and the
domain maximums a start gives a KVM VM. Read in apache/cloudstack:

- ``UserVmManagerImpl.upgradeRunningVirtualMachine`` (4.22; ``VmServiceOfferingScaleServiceImpl``
  on main): the hypervisor, the offering checks, the same ``dynamicscalingenabled`` on both
  offerings, a scale up only, on KVM a custom current offering (dropped by pull request 12975,
  4.23), the account's limits, the zone's ``enable.dynamic.scale.vm`` (PermissionDenied, 531),
  the VM's flag (530), the cluster's disable threshold (530), then ``scale.retry`` (2) tries of
  "this host has room, else migrate" and ``reConfigureVm``; tries that all fail are 530 "Failed to
  scale the VM".
- ``VirtualMachineManagerImpl.reConfigureVm``: an agent refusal is 530 "Unable to scale vm due to
  <answer>"; ``LibvirtScaleVmCommandWrapper`` scales the memory first (a domain without
  ``<maxMemory>`` is "not prepared for dynamic scaling"), then the vCPUs (libvirt refuses more
  than the domain's ``<vcpu>``).
- ``KVMGuru.configureVmMemoryAndCpuCores`` / ``isVmDynamicScalable`` / ``getVmMaxMemory`` /
  ``getVmMaxCpuCores``: what a start writes as the domain's maximums.

Functions over the world (as placement.py), so CloudWorld's concerns stay as they are.
"""

from __future__ import annotations

from typing import Any, Optional

from . import placement
from .cloud_entities import VM, Host, ServiceOffering
from .cloud_errors import CS_CLOUD_RUNTIME, CS_PERMISSION_DENIED, CloudError, param_error
from .spec_live import version_at_least

LIVE_HYPERVISORS = ("XenServer", "VMware", "Simulator", "KVM")
SCALE_RETRY = 2  # scale.retry
DISABLE_THRESHOLD = 0.85  # cluster.{cpu,memory}.allocated.capacity.disablethreshold


def _cluster_of(cloud: Any, vm: VM) -> Optional[placement.HostCluster]:
    host = cloud.hosts.get(vm.host_id or vm.last_host_id or "")
    return cloud.host_clusters.get(host.cluster_id) if host is not None else None


def hypervisor_of(cloud: Any, vm: VM) -> str:
    cluster = _cluster_of(cloud, vm)
    return cluster.hypervisor if cluster is not None else "KVM"


def record_domain(cloud: Any, vm: VM, host: Host, version: str) -> None:
    """The domain's maximums as that release's KVMGuru wrote them at the VM's start."""
    cpu, memory = cloud.vm_cpu_memory(vm)
    offering = cloud.service_offerings[vm.service_offering_id]
    dynamic = vm.dynamically_scalable and cloud.vm_zone(vm)["dynamic_scale"]
    cluster = cloud.host_clusters.get(host.cluster_id)
    if dynamic and version_at_least(version, (4, 23)):
        vm.domain_max_cpu = cluster.kvm_cpu_capacity if cluster and cluster.kvm_cpu_capacity > 0 else host.cpu
        vm.domain_max_memory = cluster.kvm_memory_capacity if cluster and cluster.kvm_memory_capacity > 0 else host.memory
    elif dynamic and offering.iscustomized:
        # Before 4.23: vm.serviceoffering.{cpu.cores,ram.size}.max (0 by default: the host's).
        vm.domain_max_cpu, vm.domain_max_memory = host.cpu, host.memory
    else:
        vm.domain_max_cpu, vm.domain_max_memory = cpu, memory


def _new_size(new: ServiceOffering, details: dict[str, str]) -> tuple[int, int, int]:
    cpu = int(details["cpuNumber"]) if new.iscustomized and "cpuNumber" in details else new.cpu
    memory = int(details["memory"]) if new.iscustomized and "memory" in details else new.memory
    speed = int(details["cpuSpeed"]) if new.iscustomized and "cpuSpeed" in details else new.cpuspeed
    return cpu, memory, speed


def check_before_job(cloud: Any, vm: VM, new: ServiceOffering, details: dict[str, str]) -> tuple[int, int, int]:
    """upgradeRunningVirtualMachine up to the zone check: the refusals that need no host. Returns the
    new (cpu, memory MiB, speed MHz)."""
    version = cloud.cloud_opts["version"]
    hypervisor = hypervisor_of(cloud, vm)
    if hypervisor not in LIVE_HYPERVISORS:
        raise param_error(f"Scaling the VM dynamically is not supported for VMs running on Hypervisor [{hypervisor}].")
    cloud._check_offering_change(vm, new, details)
    current = cloud.service_offerings[vm.service_offering_id]
    if new.dynamicscalingenabled != current.dynamicscalingenabled:
        raise param_error("Unable to Scale VM: since dynamic scaling enabled flag is not same for new service offering"
                          " and old service offering")
    new_cpu, new_memory, new_speed = _new_size(new, details)
    cur_cpu, cur_memory = cloud.vm_cpu_memory(vm)
    cur_speed = current.cpuspeed
    if (new_speed < cur_speed or new_memory < cur_memory or new_cpu < cur_cpu) or (
            (new_speed, new_memory, new_cpu) == (cur_speed, cur_memory, cur_cpu)):
        raise param_error(
            "While the VM is running, only scalling up it is supported. New service offering {\"memory\": "
            f"{new_memory}, \"speed\": {new_speed}, \"cpu\": {new_cpu}}} should have at least one value (ram, speed or"
            f" cpu) greater than the current values {{\"memory\": {cur_memory}, \"speed\": {cur_speed}, \"cpu\": {cur_cpu}}}.")
    if hypervisor == "KVM" and not current.iscustomized and not version_at_least(version, (4, 23)):
        raise param_error(
            "Unable to live scale VM on KVM when current service offering is a \"Fixed Offering\". KVM needs the tag"
            " \"maxMemory\" to live scale and it is only configured when VM is deployed with a custom service offering"
            " and \"Dynamic Scalable\" is enabled.")
    cloud.check_limit(vm.owner_id, "cpu", new_cpu - cur_cpu)
    cloud.check_limit(vm.owner_id, "memory", new_memory - cur_memory)
    if not cloud.vm_zone(vm)["dynamic_scale"]:
        # The text became "Instances" with the rename of the UI's words (VmServiceOfferingScaleServiceImpl).
        word = "Instances" if version_at_least(version, (4, 23)) else "virtual machines"
        raise CloudError(531, f"Dynamically scaling {word} is disabled for this zone, please contact your admin.",
                         CS_PERMISSION_DENIED)
    if not vm.dynamically_scalable:
        raise CloudError(530, f"Unable to scale {cloud.vm_ref(vm)} as it does not have tools to support dynamic scaling.",
                         CS_CLOUD_RUNTIME)
    return new_cpu, new_memory, new_speed


def _crosses_threshold(cloud: Any, cluster_id: str, cpu_diff: int, memory_diff: int) -> bool:
    """CapacityManagerImpl.checkIfClusterCrossesThreshold, with the disable thresholds' defaults."""
    usage = placement.host_usage(cloud)
    cluster = cloud.host_clusters[cluster_id]
    hosts = [h for h in cloud.hosts.values() if h.cluster_id == cluster_id]
    total_mhz = sum(h.cpu * h.cpuspeed for h in hosts) * cluster.cpu_ratio
    total_mb = sum(h.memory for h in hosts) * cluster.memory_ratio
    used_mhz = sum(usage[h.id][0] for h in hosts) + cpu_diff
    used_mb = sum(usage[h.id][1] for h in hosts) + memory_diff
    return (total_mhz > 0 and used_mhz / total_mhz > DISABLE_THRESHOLD) or (total_mb > 0 and used_mb / total_mb > DISABLE_THRESHOLD)


def _room(cloud: Any, host: Host, mhz: int, memory: int, usage: dict[str, tuple[int, int]]) -> bool:
    cluster = cloud.host_clusters[host.cluster_id]
    used = usage[host.id]
    return (used[0] + mhz <= int(host.cpu * host.cpuspeed * placement.f32(cluster.cpu_ratio))
            and (used[1] + memory) * placement.MB <= int(host.memory * placement.MB * placement.f32(cluster.memory_ratio)))


def scale_running(cloud: Any, vm: VM, new: ServiceOffering, details: dict[str, str], size: tuple[int, int, int]) -> None:
    """The job's part after the checks: room on the host (or a migration), then the hypervisor."""
    new_cpu, new_memory, new_speed = size
    cur_cpu, cur_memory = cloud.vm_cpu_memory(vm)
    current = cloud.service_offerings[vm.service_offering_id]
    cpu_diff, memory_diff = new_cpu * new_speed - cur_cpu * current.cpuspeed, new_memory - cur_memory
    host = cloud.hosts[vm.host_id]
    if _crosses_threshold(cloud, host.cluster_id, cpu_diff, memory_diff):
        raise CloudError(530, f"Unable to scale {cloud.vm_ref(vm)} due to insufficient resources.", CS_CLOUD_RUNTIME)
    tried: set[str] = set()
    for _attempt in range(SCALE_RETRY):
        usage = placement.host_usage(cloud)
        host = cloud.hosts[vm.host_id]
        if host.id not in tried:
            tried.add(host.id)
            if host.cpu >= new_cpu and host.cpuspeed >= new_speed and _room(cloud, host, cpu_diff, memory_diff, usage):
                return _reconfigure(cloud, vm, new, details, new_cpu, new_memory)
        # findHostAndMigrate: another host of the cluster with room for the whole new size; none is
        # an InsufficientServerCapacityException, caught, and the next try.
        target = next((h for h in cloud.hosts.values()
                       if h.id not in tried and h.cluster_id == host.cluster_id and placement.usable(h)
                       and h.cpu >= new_cpu and h.cpuspeed >= new_speed
                       and _room(cloud, h, new_cpu * new_speed, new_memory, usage)), None)
        if target is not None:
            vm.host_id = vm.last_host_id = target.id
            cloud._timeline(vm, "migrated", host=target.name, why="scaleVirtualMachine")
            return _reconfigure(cloud, vm, new, details, new_cpu, new_memory)
    raise CloudError(530, "Failed to scale the VM", CS_CLOUD_RUNTIME)


def _reconfigure(cloud: Any, vm: VM, new: ServiceOffering, details: dict[str, str], cpu: int, memory: int) -> None:
    cur_cpu, cur_memory = cloud.vm_cpu_memory(vm)
    what = (f"VM {{\"name\":\"{vm.instancename}\"}} memory to [{memory * 1024} KiB], CPU cores to [{cpu}]"
            f" and cpu_shares to [{cpu * cloud.service_offerings[new.id].cpuspeed}]")
    refusal = None
    if memory > cur_memory and vm.domain_max_memory <= cur_memory:
        refusal = (f"The VM {{\"name\":\"{vm.instancename}\"}} is not prepared for dynamic scaling. To be prepared, the VM"
                   " must be deployed with a dynamic service offering, VM dynamic scale enabled and global setting"
                   " \"enable.dynamic.scale.vm\" as \"true\". If you changed one of these settings after deploying the"
                   " VM, consider stopping and starting it again to prepared it to dynamic scaling.")
    elif memory > vm.domain_max_memory:
        refusal = (f"unsupported configuration: Attaching memory device with size '{(memory - cur_memory) * 1024}KiB'"
                   f" would exceed domain's maxMemory config size '{vm.domain_max_memory * 1024}KiB'")
    elif cpu > vm.domain_max_cpu:
        refusal = (f"invalid argument: requested vcpus is greater than max allowable vcpus for the live domain:"
                   f" {cpu} > {vm.domain_max_cpu}")
    if refusal is not None:
        raise CloudError(530, f"Unable to scale vm due to Unable to scale {what} due to [{refusal}].", CS_CLOUD_RUNTIME)
    previous = cloud.service_offerings[vm.service_offering_id]
    cloud._apply_offering(vm, new, details)
    cloud._timeline(vm, "scaled_live", offering=new.name, previous=previous.name, cpu=cpu, memory=memory)
    if vm.cluster_id:
        cloud.sim.vm_scaled_live(vm.cluster_id, vm.name, cpu, memory)
