"""The records of cks-sim's CloudStack world: hosts, offerings, storage pools, affinity groups,
volumes, VMs, networks, public IPs, port forwarding rules, CKS clusters and async jobs, with
CloudStack's date format. Plain data: ``cloud_state`` declares the tables that hold them, the
``cloud_*`` concern modules hold the rules that change them."""

from __future__ import annotations

import json
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Optional

GB = 1 << 30


def iso(ts: float) -> str:
    """CloudStack's date format: 2025-05-20T08:00:00+0000."""
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S%z")


@dataclass
class Host:
    id: str
    name: str
    cpu: int
    memory: int  # MB
    cpuspeed: int
    state: str
    ipaddress: str
    created: str
    zone_id: str = ""
    resourcestate: str = "Enabled"  # ResourceState: Enabled, Disabled, Maintenance, ...
    cluster_id: str = ""  # the host cluster (placement.HostCluster), with its overcommit ratios


@dataclass
class DiskOffering:
    id: str
    name: str
    size: int  # GB, 0 = customised
    iscustomized: bool
    disksizestrictness: bool
    displaytext: str
    created: str
    compute_only: bool = False  # implicit per service offering; listDiskOfferings never shows it
    tags: Optional[str] = None
    storagetype: str = "shared"  # DiskOffering.isUseLocalStorage

    def tag_list(self) -> list[str]:
        return [t.strip() for t in (self.tags or "").split(",") if t.strip()]


@dataclass
class StoragePool:
    id: str
    name: str
    scope: str  # shared | local (ScopeType.HOST)
    tags: Optional[str]


@dataclass
class ServiceOffering:
    id: str
    name: str
    cpu: int
    memory: int
    cpuspeed: int
    rootdisksize: int
    disk_offering_id: str
    diskofferingstrictness: bool
    dynamicscalingenabled: bool
    iscustomized: bool
    displaytext: str
    state: str
    created: str


@dataclass
class AffinityGroup:
    id: str
    name: str
    type: str
    description: Optional[str]
    dedicated_host_ids: list[str]
    owner_id: str = ""
    domain_level_id: Optional[str] = None  # a domain-level group (ACLType.Domain) of that domain
    # dedicateCluster / dedicatePod / dedicateZone: what else is dedicated to the group (a pod's ID
    # is its zone's: the sim has one pod per zone).
    dedicated_cluster_ids: list[str] = field(default_factory=list)
    dedicated_pod_ids: list[str] = field(default_factory=list)
    dedicated_zone_ids: list[str] = field(default_factory=list)

    def dedicated(self) -> list[tuple[str, str]]:
        """(resource type, ID) of each dedication to the group, as dedicatedresources names them."""
        return ([("Zone", z) for z in self.dedicated_zone_ids] + [("Pod", p) for p in self.dedicated_pod_ids]
                + [("Cluster", c) for c in self.dedicated_cluster_ids] + [("Host", h) for h in self.dedicated_host_ids])

    def ref(self, number: int) -> str:
        # AffinityGroupVO.toString(), as permission texts quote it.
        return "AffinityGroup " + json.dumps({"id": number, "name": self.name, "type": self.type, "uuid": self.id},
                                             separators=(",", ":"))


@dataclass
class Volume:
    id: str
    name: str
    vm_id: str
    type: str
    size: int  # bytes
    disk_offering_id: str
    state: str
    created: str
    storage_id: str


@dataclass
class VM:
    id: str
    name: str
    instancename: str
    number: int
    state: str
    service_offering_id: str
    affinity_group_ids: list[str]
    created: str
    created_ms: int
    ipaddress: str
    network_id: str
    nic_id: str
    macaddress: str
    cluster_id: Optional[str] = None
    node_type: Optional[str] = None
    is_etcd: bool = False
    is_external: bool = False
    etcd_member_name: Optional[str] = None  # the member's --name when it is not the VM's
    host_id: Optional[str] = None
    last_host_id: Optional[str] = None
    stopped_at: float = 0.0  # monotonic time the VM last reached Stopped
    # False while a node VM CKS adds (a scale-up) has not run yet, and once CKS removes it: neither
    # is a node taken out of service (the too_many_unavailable invariant does not count it).
    in_service: bool = True
    lastupdated: str = ""
    details: dict[str, str] = field(default_factory=dict)
    custom_cpu: Optional[int] = None
    custom_memory: Optional[int] = None
    # VMInstanceVO.isDynamicallyScalable, and the vCPUs / MiB the running domain may grow to (the
    # <vcpu> and <maxMemory> KVMGuru wrote when it was last started; 0 while it is not running).
    dynamically_scalable: bool = True
    domain_max_cpu: int = 0
    domain_max_memory: int = 0
    keypair: Optional[str] = None
    owner_id: str = ""
    queue: deque = field(default_factory=deque)
    active_job: Optional[Job] = None


@dataclass
class Network:
    id: str
    name: str
    cidr: str
    gateway: str
    cluster_id: Optional[str]


@dataclass
class PublicIp:
    id: str
    ipaddress: str
    network_id: str
    issourcenat: bool
    created: str


@dataclass
class PortForwardingRule:
    id: str
    ip_id: str
    publicport: int
    privateport: int
    vm_id: str
    network_id: str


@dataclass
class Cluster:
    id: str
    name: str
    description: str
    state: str
    clustertype: str
    version_id: str
    version_name: str
    semver: str
    service_offering_id: str
    type_offering_ids: dict[str, str]
    control_nodes: int
    workers: int
    etcd_nodes: int
    cpunumber: int
    memory: int
    keypair: Optional[str]
    network_id: str
    ip_id: str
    created: str
    vm_ids: list[str]
    root_disk_size: int
    template_id: str
    template_name: str
    autoscaling: bool = False
    minsize: int = 0
    maxsize: int = 0
    #: The spec's ``autoscaling`` timings for the cluster's autoscaler (autoscaler.DEFAULTS otherwise).
    autoscaler_options: Optional[dict[str, Any]] = None
    owner_id: str = ""
    zone_id: str = ""
    # What CKS keeps for the VMs it creates later (a scale-up): the disk offering of the root disk
    # (the spec's), the storage pool, and the account's ExplicitDedication group.
    root_disk_offering: Optional[str] = None
    storage_pool_id: Optional[str] = None
    dedication_group_id: Optional[str] = None


@dataclass
class Job:
    id: str
    cmd: str
    instance_type: Optional[str]
    instance_id: Optional[str]
    created: float
    not_before: float  # monotonic: reported pending until then (timing job_poll_min)
    status: int = 0
    result_code: int = 0
    result: Optional[dict[str, Any]] = None
    completed: Optional[float] = None
    caller_id: str = ""
    cancelled: bool = False  # by a management server restart: nothing may complete it any more

    def visible_status(self) -> int:
        if self.status != 0 and time.monotonic() < self.not_before:
            return 0
        return self.status
