"""CloudStack's deployment planner in cks-sim: which host a starting VM goes to, or none (533).

Read in apache/cloudstack (4.19-4.22):

- ``DeploymentPlanningManagerImpl.planDeployment``: disabled hosts avoided (``avoidDisabledHosts``),
  ``checkForNonDedicatedResources`` (a zone dedicated to another account, or to a domain the
  owner is not in, fails the deployment unless the owner is a root admin; a VM without an
  ExplicitDedication group avoids every dedicated pod, cluster and host, whoever they are
  dedicated to), the affinity processors' avoid set, then the last host first
  when ``considerlasthost`` is not false, the host is not avoided, Up, and has capacity; otherwise
  the planner's first fit.
- ``FirstFitAllocator`` (hosts Up and Enabled only) with ``CapacityManagerImpl.checkIfHostHasCapacity``
  (used + requested <= total x the cluster's ``cpuOvercommitRatio`` / ``memoryOvercommitRatio``;
  CPU in MHz: cores x speed) and ``checkIfHostHasCpuCapability`` (enough cores, fast enough).
- ``HostAntiAffinityProcessor``: the hosts of the group's other VMs are avoided, and the last host
  of one stopped less than ``vm.capacity.release.interval`` ago.
- ``HostAffinityProcessor``: once a member runs, only its host(s).
- ``NonStrictHostAntiAffinityProcessor`` / ``NonStrictHostAffinityProcessor``: host priorities only.
- ``ExplicitDedicationProcessor``: only the hosts dedicated to the VM's dedication group (the
  hosts themselves, or those of its dedicated clusters, pods and zones).
- ``HostJoinDaoImpl.newHostResponse``: what ``listHosts`` shows (capacities with overprovisioning,
  percentages through ``DecimalFormat("#.##")``).

Not modelled: listHosts' ``events`` (the host state machine's possible events), reserved capacity of stopped VMs (``capacity.skipcounting.hours``), host tags,
the planners' cluster ordering (one cluster is one list here).
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from typing import TYPE_CHECKING, Any, Optional

from .cloud_errors import CS_CLOUD_RUNTIME, CloudError

if TYPE_CHECKING:  # pragma: no cover
    from .cloud import VM, CloudWorld, Host
    from .cloud_entities import AffinityGroup

MB = 1 << 20
# Host states the planner deploys on: Status.Up and ResourceState.Enabled.
USABLE_STATE = "Up"
USABLE_RESOURCE_STATE = "Enabled"


@dataclass
class HostCluster:
    """A CloudStack cluster of hypervisor hosts (not a CKS cluster) and its overcommit ratios."""

    id: str
    name: str
    zone_id: str
    pod_id: str
    cpu_ratio: float = 1.0
    memory_ratio: float = 1.0
    hypervisor: str = "KVM"
    # kvm.cpu.dynamic.scaling.capacity / kvm.memory.dynamic.scaling.capacity (cluster scope, 4.23):
    # 0 or less is the host's own.
    kvm_cpu_capacity: int = 0
    kvm_memory_capacity: int = 0


def f32(value: float) -> float:
    """The value as a Java float (HostJoinDaoImpl computes the percentages in float)."""
    return float(struct.unpack("f", struct.pack("f", value))[0])


def java_decimal(value: float) -> str:
    """``new DecimalFormat("#.##").format(value)``: at most two decimals, half-even, no trailing zeros."""
    text = format(Decimal(value).quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def percent(used: float, total: float) -> str:
    """``decimalFormat.format((float) used / total * 100.0f) + "%"``."""
    if total == 0:
        return "NaN%" if used == 0 else "\u221e%"
    return java_decimal(f32(f32(f32(used) / f32(total)) * f32(100.0))) + "%"


# -- capacity --------------------------------------------------------------------------------


def vm_demand(cloud: CloudWorld, vm: VM) -> tuple[int, int, int, int]:
    """(cores, speed MHz, cpu MHz, memory MB) the VM asks for (offering or its custom values)."""
    cores, memory = cloud.vm_cpu_memory(vm)
    speed = cloud.service_offerings[vm.service_offering_id].cpuspeed
    return cores, speed, cores * speed, memory


def host_usage(cloud: CloudWorld) -> dict[str, tuple[int, int]]:
    """Allocated (cpu MHz, memory MB) per host: the VMs holding a host (Starting, Running, Stopping)."""
    usage = {h: [0, 0] for h in cloud.hosts}
    for vm in cloud.vms.values():
        if vm.host_id in usage and vm.state in ("Starting", "Running", "Stopping", "Migrating"):
            _cores, _speed, mhz, memory = vm_demand(cloud, vm)
            usage[vm.host_id][0] += mhz
            usage[vm.host_id][1] += memory
    return {h: (u[0], u[1]) for h, u in usage.items()}


def has_capacity(cloud: CloudWorld, host: Host, vm: VM, used: tuple[int, int]) -> bool:
    """checkIfHostHasCpuCapability and checkIfHostHasCapacity (free capacity, with the ratios)."""
    cores, speed, mhz, memory = vm_demand(cloud, vm)
    if host.cpu < cores or host.cpuspeed < speed:
        return False
    cluster = cloud.host_clusters[host.cluster_id]
    # totalCpu = (long) (actualTotalCpu * cpuOvercommitRatio), the same for memory (bytes).
    total_mhz = int(host.cpu * host.cpuspeed * f32(cluster.cpu_ratio))
    total_bytes = int(host.memory * MB * f32(cluster.memory_ratio))
    return used[0] + mhz <= total_mhz and (used[1] + memory) * MB <= total_bytes


def usable(host: Host) -> bool:
    return host.state == USABLE_STATE and host.resourcestate == USABLE_RESOURCE_STATE


def group_holds(cloud: CloudWorld, group: AffinityGroup, host: Host) -> bool:
    """Whether ``host`` is among what is dedicated to ``group`` (itself, its cluster, pod or zone)."""
    cluster = cloud.host_clusters[host.cluster_id]
    return (host.id in group.dedicated_host_ids or host.cluster_id in group.dedicated_cluster_ids
            or cluster.pod_id in group.dedicated_pod_ids or host.zone_id in group.dedicated_zone_ids)


def dedicated_hosts(cloud: CloudWorld) -> set[str]:
    """The hosts checkForNonDedicatedResources avoids for a VM without a dedication group: those
    dedicated themselves or through their cluster or pod (a zone's dedication is checked apart)."""
    out = set()
    for group in cloud.affinity_groups.values():
        if group.type != "ExplicitDedication":
            continue
        for host in cloud.hosts.values():
            if (host.id in group.dedicated_host_ids or host.cluster_id in group.dedicated_cluster_ids
                    or cloud.host_clusters[host.cluster_id].pod_id in group.dedicated_pod_ids):
                out.add(host.id)
    return out


def check_dedicated_zone(cloud: CloudWorld, vm: VM, zone_id: str) -> None:
    """checkForNonDedicatedResources' zone rule: a zone dedicated to another account, or to a
    domain whose group the owner's domain may not use, fails the deployment (CloudRuntimeException,
    530 from the start job); a root admin's VM is not checked."""
    owner = cloud.directory.accounts[vm.owner_id]
    if owner.role == "admin":
        return
    for group in cloud.affinity_groups.values():
        if group.type != "ExplicitDedication" or zone_id not in group.dedicated_zone_ids:
            continue
        zone = cloud.zones[zone_id]["name"]
        if group.domain_level_id is None:
            if group.owner_id != owner.id:
                raise CloudError(530, f"Failed to deploy VM, Zone {zone} not available for the user account {owner.ref()}",
                                 CS_CLOUD_RUNTIME)
        elif not cloud.directory.in_subtree(owner.domain_id, group.domain_level_id):
            # isAffinityGroupAvailableInDomain: the group's domain or one above the owner's.
            raise CloudError(530, f"Failed to deploy VM, Zone {zone} not available for the user domain {owner.ref()}",
                             CS_CLOUD_RUNTIME)


def resource_name(cloud: CloudWorld, kind: str, resource_id: str) -> str:
    if kind == "Host":
        return cloud.hosts[resource_id].name
    if kind == "Cluster":
        return cloud.host_clusters[resource_id].name
    return "pod-1" if kind == "Pod" else str(cloud.zones[resource_id]["name"])


# -- the planner -----------------------------------------------------------------------------


def plan(cloud: CloudWorld, vm: VM, considerlasthost: bool, hostid: Optional[str] = None) -> Optional[Host]:
    """The host planDeployment picks for ``vm`` now, or None (the start fails 533)."""
    usage = host_usage(cloud)
    zone_id = cloud.vm_zone(vm)["id"]
    in_zone = [h for h in cloud.hosts.values() if h.zone_id == zone_id]
    # avoidDisabledHosts; FirstFitAllocator lists Up and Enabled hosts only.
    avoid = {h.id for h in in_zone if not usable(h)}
    check_dedicated_zone(cloud, vm, zone_id)
    groups = [cloud.affinity_groups[g] for g in vm.affinity_group_ids]
    dedications = [g for g in groups if g.type == "ExplicitDedication"]
    if not dedications:
        # checkForNonDedicatedResources: a user VM without a dedication group keeps off dedicated hosts.
        avoid |= dedicated_hosts(cloud)
    if hostid:
        # planDeployment with a host given: that host unless avoided (dedication, disabled); the
        # affinity processors run only after this branch, so they do not apply.
        host = next((h for h in in_zone if h.id == hostid and h.id not in avoid), None)
        return host if host is not None and has_capacity(cloud, host, vm, usage[host.id]) else None
    priority: dict[str, int] = {h.id: 0 for h in in_zone}
    release = cloud.sim.clock.real(cloud.cloud_opts["capacity_release_interval"])
    now = time.monotonic()
    for group in groups:
        if group.type == "ExplicitDedication":
            if group.dedicated():
                avoid |= {h.id for h in in_zone if not group_holds(cloud, group, h)}
            continue
        peers = [p for p in cloud.vms.values() if p.id != vm.id and group.id in p.affinity_group_ids]
        peer_hosts = {p.host_id for p in peers if p.host_id}
        if group.type == "host anti-affinity":
            recent = {p.last_host_id for p in peers if not p.host_id and p.state in ("Stopped", "Starting")
                      and p.last_host_id and now - p.stopped_at < release}
            avoid |= peer_hosts | recent
        elif group.type == "host affinity":
            if peer_hosts:
                avoid |= {h.id for h in in_zone if h.id not in peer_hosts}
        elif group.type == "non-strict host anti-affinity":
            for h in peer_hosts:
                if h in priority:
                    priority[h] += 1
        elif group.type == "non-strict host affinity":
            for h in priority:
                if peer_hosts and h not in peer_hosts:
                    priority[h] += 1
    candidates = [h for h in in_zone if h.id not in avoid]
    if considerlasthost and vm.last_host_id:
        last = next((h for h in candidates if h.id == vm.last_host_id), None)
        if last is not None and has_capacity(cloud, last, vm, usage[last.id]):
            return last
    candidates.sort(key=lambda h: priority.get(h.id, 0))
    for host in candidates:
        if has_capacity(cloud, host, vm, usage[host.id]):
            return host
    return None


def record_broken_affinity(cloud: CloudWorld, vm: VM) -> None:
    """An invariant when a VM now Running breaks a strict group it is in: a member of its host
    anti-affinity group on its host, or one of its host affinity group on another host (what the
    start race can do; CloudStack does not check this after the fact)."""
    for group_id in vm.affinity_group_ids:
        group = cloud.affinity_groups[group_id]
        if group.type not in ("host anti-affinity", "host affinity"):
            continue
        peers = [p for p in cloud.vms.values() if p.id != vm.id and group_id in p.affinity_group_ids
                 and p.state == "Running" and p.host_id]
        if group.type == "host anti-affinity":
            broken = [p for p in peers if p.host_id == vm.host_id]
        else:
            broken = [p for p in peers if p.host_id != vm.host_id]
        if broken:
            cloud.sim.invariants.add(
                kind="anti_affinity_broken" if group.type == "host anti-affinity" else "affinity_broken",
                group=group.name, vm=vm.name, host=cloud.hosts[vm.host_id or ""].name,
                others={p.name: cloud.hosts[p.host_id or ""].name for p in broken})


# -- listHosts -------------------------------------------------------------------------------


def host_view(cloud: CloudWorld, host: Host, used: tuple[int, int], details: Optional[set[str]] = None) -> dict[str, Any]:
    """HostJoinDaoImpl.newHostResponse for a Routing host, as listHosts gives it to a root admin."""
    details = details or {"all"}
    cluster = cloud.host_clusters[host.cluster_id]
    zone = cloud.zones[host.zone_id]
    view: dict[str, Any] = {
        "id": host.id, "name": host.name, "type": "Routing", "state": host.state, "resourcestate": host.resourcestate,
        "ipaddress": host.ipaddress, "zoneid": host.zone_id, "podid": cluster.pod_id, "clusterid": cluster.id,
        "hypervisor": "KVM", "version": cloud.cloud_opts["version"], "created": host.created,
        "cpusockets": 2, "cpuspeed": host.cpuspeed, "arch": "x86_64",
        # The host's cores times the cluster's cpuOvercommitRatio, cut to an int.
        "cpunumber": int(host.cpu * f32(cluster.cpu_ratio)),
        "lastpinged": "1970-01-20T00:00:00+0000", "managementserverid": cloud.zone_id,
        "managementservername": "cks-sim", "islocalstorageactive": False, "hasannotations": False,
        "outofbandmanagement": {"enabled": False, "powerstate": "Disabled"},
    }
    if details & {"all", "capacity", "stats", "events"}:
        view.update(zonename=zone["name"], podname="pod-1", clustername=cluster.name, clustertype="CloudManaged")
    if details & {"all", "capacity"}:
        cpu_mhz, mem_mb = used
        mem = mem_mb * MB
        mem_total = f32(f32(host.memory * MB) * f32(cluster.memory_ratio))
        cpu_total = f32(f32(host.cpu * host.cpuspeed) * f32(cluster.cpu_ratio))
        allocated = percent(cpu_mhz, cpu_total)
        view.update(
            memorytotal=int(mem_total), memorywithoverprovisioning=java_decimal(mem_total),
            memoryallocated=mem, memoryallocatedbytes=mem, memoryallocatedpercentage=percent(mem, mem_total),
            hahost=False, hypervisorversion="8.2.0",
            cpuallocatedvalue=cpu_mhz, cpuallocated=allocated, cpuallocatedpercentage=allocated,
            cpuallocatedwithoverprovisioning=allocated, cpuwithoverprovisioning=java_decimal(cpu_total),
        )
    if host.state != "Up":
        view["disconnected"] = host.created
    return view


def cluster_view(cloud: CloudWorld, cluster: HostCluster) -> dict[str, Any]:
    """ApiResponseHelper.createClusterResponse (listClusters, a root admin's command)."""
    zone = cloud.zones[cluster.zone_id]
    return {
        "id": cluster.id, "name": cluster.name, "zoneid": cluster.zone_id, "zonename": zone["name"],
        "podid": cluster.pod_id, "podname": "pod-1", "hypervisortype": "KVM", "clustertype": "CloudManaged",
        "allocationstate": "Enabled", "managedstate": "Managed", "arch": "x86_64",
        "cpuovercommitratio": java_ratio(cluster.cpu_ratio), "memoryovercommitratio": java_ratio(cluster.memory_ratio),
    }


def java_ratio(value: float) -> str:
    """A cluster detail as stored: the ratio's text (``Float.toString``-like, 1.0 not 1)."""
    text = repr(float(value))
    return text


def dedicated_views(cloud: CloudWorld, kind: str) -> list[dict[str, Any]]:
    """DedicatedResourceManagerImpl.createDedicate{Host,Cluster,Pod,Zone}Response for each dedication
    of ``kind`` (Host, Cluster, Pod, Zone): the resource, its owner (domain, and account unless
    dedicated to a domain) and the group."""
    key = kind.lower()
    out = []
    for group in cloud.affinity_groups.values():
        if group.type != "ExplicitDedication":
            continue
        for found, resource_id in group.dedicated():
            if found != kind:
                continue
            entry: dict[str, Any] = {"id": cloud.dedication_ids[(group.id, resource_id)], f"{key}id": resource_id,
                                     f"{key}name": resource_name(cloud, kind, resource_id), "affinitygroupid": group.id}
            if group.domain_level_id:
                domain = cloud.directory.domains[group.domain_level_id]
                entry.update(domainid=domain.id, domainname=domain.name)
            else:
                owner = cloud.directory.accounts[group.owner_id]
                domain = cloud.directory.domains[owner.domain_id]
                entry.update(domainid=domain.id, domainname=domain.name, accountid=owner.id, accountname=owner.name)
            out.append(entry)
    return out
