"""The spec keys of live scaling (scaleVirtualMachine of a Running VM): per host cluster its
hypervisor and the 4.23 maximums KVMGuru gives a domain, per CKS cluster what its VMs and guests
are. Kept out of spec.py, which is at its size cap; spec.py calls these two functions."""

from __future__ import annotations

import re
from typing import Any

#: HypervisorType names a host cluster may have. upgradeRunningVirtualMachine scales a Running VM
#: live only on XenServer, VMware, Simulator and KVM; the others are refused (431).
HYPERVISORS = ("KVM", "XenServer", "VMware", "Simulator", "Hyperv", "Ovm3", "LXC", "BareMetal")
HOST_CLUSTER_KEYS = ("hypervisor", "kvm_cpu_dynamic_scaling_capacity", "kvm_memory_dynamic_scaling_capacity")
CLUSTER_KEYS = ("dynamically_scalable", "guest_onlines_hotplug", "started_on_version")


class LiveSpecError(ValueError):
    """A live-scaling key of the spec that cannot be used (spec.py turns it into its SpecError)."""


def _bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    raise LiveSpecError(f"{where} must be true or false, got {value!r}")


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise LiveSpecError(f"{where} must be a whole number, got {value!r}")
    return value


def host_cluster_keys(entry: dict[str, Any], where: str) -> dict[str, Any]:
    hypervisor = str(entry.get("hypervisor", "KVM"))
    if hypervisor not in HYPERVISORS:
        raise LiveSpecError(f"{where}.hypervisor must be one of {', '.join(HYPERVISORS)}, got {hypervisor!r}")
    return {
        "hypervisor": hypervisor,
        # 0 (the release's default): the host's own CPU count / memory is the domain's maximum.
        "kvm_cpu_dynamic_scaling_capacity": _int(entry.get("kvm_cpu_dynamic_scaling_capacity", 0),
                                                 f"{where}.kvm_cpu_dynamic_scaling_capacity"),
        "kvm_memory_dynamic_scaling_capacity": _int(entry.get("kvm_memory_dynamic_scaling_capacity", 0),
                                                    f"{where}.kvm_memory_dynamic_scaling_capacity"),
    }


def cluster_keys(entry: dict[str, Any], where: str, cloud_version: str) -> dict[str, Any]:
    started_on = str(entry.get("started_on_version", cloud_version))
    if not re.match(r"^\d+\.\d+", started_on):
        raise LiveSpecError(f"{where}.started_on_version must be a release like 4.22.1.0, got {started_on!r}")
    return {
        # The template's isdynamicallyscalable. CKS asks for dynamic scaling on every node it deploys;
        # the VM gets it only when this, the offering's dynamicscalingenabled and the zone's
        # enable.dynamic.scale.vm agree (UserVmManagerImpl.checkIfDynamicScalingCanBeEnabled).
        "dynamically_scalable": _bool(entry.get("dynamically_scalable", True), f"{where}.dynamically_scalable"),
        # Ubuntu's udev rules online hot-added vCPUs and memory at once; false: they stay offline.
        "guest_onlines_hotplug": _bool(entry.get("guest_onlines_hotplug", True), f"{where}.guest_onlines_hotplug"),
        # The release the running VMs were last started under: their domains have the headroom that
        # release's KVMGuru gave them (none for a fixed offering before 4.23).
        "started_on_version": started_on,
    }


def version_at_least(version: str, wanted: tuple[int, int]) -> bool:
    parts = [int(p) for p in re.findall(r"\d+", version)[:2]]
    return tuple(parts) >= wanted
