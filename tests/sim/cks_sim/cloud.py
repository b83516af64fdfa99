"""The CloudStack world of cks-sim: zone, hosts, offerings, affinity groups, VMs, volumes,
CKS clusters, async jobs, placement and the CKS state scanner.

The rules here follow the management server (``UserVmManagerImpl``, ``VolumeApiServiceImpl``,
``AffinityGroupServiceImpl``, ``KubernetesClusterManagerImpl``; facts in
``shared/reference/cloudstack-api.md``): a rule that refuses something here refuses it there.
Everything runs under ``sim.lock``; the HTTP layer (``cloudstack_api``) takes the lock, calls a
method, and renders what it gets back with the ``*_view`` methods.
"""

from __future__ import annotations

import json
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from . import placement
from . import spec as specmod
from .core import Sim
from .owners import Account, Directory, OwnerError

GB = 1 << 30

# cserrorcode values (CSExceptionErrorCode) for the exception classes the rules raise.
CS_INVALID_PARAMETER = 4350
CS_CLOUD_RUNTIME = 4250
CS_PERMISSION_DENIED = 4365
CS_INSUFFICIENT_CAPACITY = 4335
CS_SERVER_API = 9999

NOT_STOPPED_HINT = "make sure the virtual machine is stopped"


class CloudError(Exception):
    """A refusal in CloudStack's terms: HTTP/API error code, cserrorcode and text."""

    def __init__(self, code: int, text: str, cserrorcode: int = CS_INVALID_PARAMETER) -> None:
        super().__init__(text)
        self.code = code
        self.text = text
        self.cserrorcode = cserrorcode


def param_error(text: str) -> CloudError:
    return CloudError(431, text, CS_INVALID_PARAMETER)


def iso(ts: float) -> str:
    """CloudStack's date format: 2025-05-20T08:00:00+0000."""
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S%z")


# --- entities -------------------------------------------------------------------------------


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
    busy: bool = False


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
    lastupdated: str = ""
    details: dict[str, str] = field(default_factory=dict)
    custom_cpu: Optional[int] = None
    custom_memory: Optional[int] = None
    keypair: Optional[str] = None
    owner_id: str = ""
    queue: deque = field(default_factory=deque)
    active_job: Optional["Job"] = None


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


JAVA_CLASSES = {
    "stopVirtualMachine": "org.apache.cloudstack.api.command.admin.vm.StopVMCmdByAdmin",
    "startVirtualMachine": "org.apache.cloudstack.api.command.admin.vm.StartVMCmdByAdmin",
    "rebootVirtualMachine": "org.apache.cloudstack.api.command.admin.vm.RebootVMCmdByAdmin",
    "scaleVirtualMachine": "org.apache.cloudstack.api.command.admin.vm.ScaleVMCmdByAdmin",
    "resizeVolume": "org.apache.cloudstack.api.command.admin.volume.ResizeVolumeCmdByAdmin",
    "updateVMAffinityGroup": "org.apache.cloudstack.api.command.admin.affinitygroup.UpdateVMAffinityGroupCmdByAdmin",
    "createTags": "org.apache.cloudstack.api.command.user.tag.CreateTagsCmd",
    "deleteTags": "org.apache.cloudstack.api.command.user.tag.DeleteTagsCmd",
}

TAGGABLE_TYPES = {
    t.lower(): t
    for t in ("UserVm", "Volume", "Network", "PublicIpAddress", "PortForwardingRule", "Template", "ISO",
              "Snapshot", "Vpc", "ServiceOffering", "DiskOffering", "Zone", "Project", "LoadBalancer",
              "FirewallRule", "SecurityGroup", "Nic", "AffinityGroup")
}


# --- the world ------------------------------------------------------------------------------


class CloudWorld:
    """All CloudStack state of the sim, with the rules of the commands that change it."""

    def __init__(self, sim: Sim, spec: dict[str, Any]) -> None:
        self.sim = sim
        self.spec = spec
        self.ids = specmod.IdFactory(spec["seed"])
        self.account = spec["account"]
        self.account_id = self.ids.uuid()
        self.user_id = self.ids.uuid()
        self.domain_id = self.ids.uuid()
        self.directory = Directory(spec, self.ids.uuid, self.account_id, self.user_id, self.domain_id)
        # The account of the request being served (the API layer sets it under sim.lock);
        # the scheduler's work runs as the spec's own account.
        self.caller: Account = self.directory.primary
        self.cloud_opts = spec["cloud"]
        self.max_unavailable = spec["invariants"]["max_unavailable"]
        base_ms = specmod.created_ms(spec)
        self._clock_ms = base_ms
        self.zone_id = self.ids.uuid()
        self.zone_name = spec["zone"]["name"]
        self.dynamic_scale = spec["zone"]["dynamic_scale"]
        # Every zone by id, the first (``zone_id``) first; the others' ids come only when a spec has them,
        # so a one-zone spec keeps the ids it always had.
        self.zones: dict[str, dict[str, Any]] = {self.zone_id: dict(spec["zone"], id=self.zone_id)}
        for extra in spec.get("zones", [spec["zone"]])[1:]:
            zone_id = self.ids.uuid()
            self.zones[zone_id] = dict(extra, id=zone_id)
        self.zone_by_name = {z["name"]: z["id"] for z in self.zones.values()}
        self.storage_id = self.ids.uuid()
        self.storage_pools: dict[str, StoragePool] = {}
        for number, pool in enumerate(spec["storage_pools"]):
            pool_id = self.storage_id if number == 0 else self.ids.uuid()
            self.storage_pools[pool_id] = StoragePool(pool_id, pool["name"], pool["scope"], pool["tags"])
        self.template_id = self.ids.uuid()
        self.hosts: dict[str, Host] = {}
        self.host_clusters: dict[str, placement.HostCluster] = {}
        # Hosts, host clusters and dedications added by the spec or at run time take their IDs from
        # their own sequence, so the IDs of everything else stay what they always were.
        self.side_ids = specmod.IdFactory(spec["seed"], "hosts")
        self.dedication_ids: dict[tuple[str, str], str] = {}
        self.disk_offerings: dict[str, DiskOffering] = {}
        self.service_offerings: dict[str, ServiceOffering] = {}
        self.affinity_groups: dict[str, AffinityGroup] = {}
        self.vms: dict[str, VM] = {}
        self.vm_by_name: dict[str, VM] = {}
        self.volumes: dict[str, Volume] = {}
        self.root_volume: dict[str, Volume] = {}
        self.networks: dict[str, Network] = {}
        self.public_ips: dict[str, PublicIp] = {}
        self.pf_rules: dict[str, PortForwardingRule] = {}
        self.clusters: dict[str, Cluster] = {}
        self.tags: dict[str, list[dict[str, Any]]] = {}  # resource id -> tags
        self.jobs: dict[str, Job] = {}
        self.versions: dict[str, dict[str, Any]] = {}
        self._vm_numbers = 10
        self._down: dict[tuple[str, str], set[str]] = {}
        self._scanner_handle: Optional[int] = None
        self._vm_json_cache: dict[str, tuple[tuple, str]] = {}
        self._build(spec)

    # -- construction ------------------------------------------------------------------------

    @property
    def is_admin(self) -> bool:
        """The caller is a root admin: the full VM view, listHosts, admin-only parameters."""
        return self.caller.role == "admin"

    def owner_error(self, err: OwnerError) -> "CloudError":
        return CloudError(err.code, err.text, err.cserrorcode)

    def check_access(self, owner_id: str, entity_ref: str) -> None:
        """@ACL(OperateEntry) on the command's id: the caller must be allowed the owner's resources."""
        try:
            self.directory.check_access(self.caller, owner_id, entity_ref)
        except OwnerError as err:
            raise self.owner_error(err) from None

    def list_scope(self, values: dict[str, Any]) -> Callable[[str], bool]:
        try:
            return self.directory.list_scope(self.caller, values)
        except OwnerError as err:
            raise self.owner_error(err) from None

    def _tick_ms(self, step: int = 1500) -> int:
        self._clock_ms += step
        return self._clock_ms

    def _stamp(self) -> str:
        return iso(self._tick_ms(250) / 1000)

    def _build(self, spec: dict[str, Any]) -> None:
        for c in spec.get("host_clusters", []):
            zone_id = self.zone_by_name[c["zone"]]
            cluster = placement.HostCluster(self.side_ids.uuid(), c["name"], zone_id, zone_id,
                                            c["cpu_overcommit_ratio"], c["memory_overcommit_ratio"])
            self.host_clusters[cluster.id] = cluster
        for h in spec["hosts"]:
            self.add_host(h, host_id=self.ids.uuid(), created=self._stamp())
        for d in spec["disk_offerings"]:
            off = DiskOffering(self.ids.uuid(), d["name"], d["size"], d["iscustomized"], d["disksizestrictness"],
                               d["displaytext"], self._stamp(), tags=d.get("tags"), storagetype=d["storagetype"])
            self.disk_offerings[off.id] = off
        disk_by_name = {d.name: d for d in self.disk_offerings.values()}
        for s in spec["service_offerings"]:
            if s["diskoffering"]:
                disk_id = disk_by_name[s["diskoffering"]].id
            else:
                # Since 4.17 every compute offering has a disk offering; without a linked one it
                # is an implicit compute-only offering named after it (hidden from listDiskOfferings).
                implicit = DiskOffering(self.ids.uuid(), s["name"], s["rootdisksize"], s["rootdisksize"] == 0, False,
                                        s["displaytext"], self._stamp(), compute_only=True, tags=s["tags"],
                                        storagetype=s["storagetype"])
                self.disk_offerings[implicit.id] = implicit
                disk_id = implicit.id
            off = ServiceOffering(self.ids.uuid(), s["name"], s["cpu"], s["memory"], s["cpuspeed"], s["rootdisksize"],
                                  disk_id, s["diskofferingstrictness"], s["dynamicscalingenabled"], s["iscustomized"],
                                  s["displaytext"], s["state"], self._stamp())
            self.service_offerings[off.id] = off
        host_by_name = {h.name: h for h in self.hosts.values()}
        for g in spec["affinity_groups"]:
            group = AffinityGroup(self.ids.uuid(), g["name"], g["type"], g.get("description"),
                                  [host_by_name[n].id for n in g["hosts"]])
            if g.get("domain"):
                # A domain-level group (dedication to a domain, or created with domainid only):
                # kept by the account that made it, usable in that domain.
                group.owner_id = self.directory.primary.id
                group.domain_level_id = self.directory.domain_named(g["domain"]).id
            else:
                group.owner_id = self.directory.owner_id(g)
            self.affinity_groups[group.id] = group
            for host_id in group.dedicated_host_ids:
                self.dedication_ids[(group.id, host_id)] = self.side_ids.uuid()
        for index, c in enumerate(spec["clusters"]):
            self._build_cluster(c, index)

    def add_host(self, h: dict[str, Any], host_id: Optional[str] = None, created: Optional[str] = None) -> Host:
        """A host of the spec, or one added at run time (admin API add_host)."""
        zone_id = self.zone_by_name[h.get("zone", self.zone_name)]
        cluster_name = h.get("cluster") or specmod.default_host_cluster(self.zones[zone_id]["name"], list(self.zone_by_name))
        cluster = next((c for c in self.host_clusters.values() if c.name == cluster_name), None)
        if cluster is None:
            # The zone's implicit cluster: its ID is the zone's, as the sim always showed it.
            cluster = placement.HostCluster(zone_id, cluster_name, zone_id, zone_id)
            self.host_clusters[cluster.id] = cluster
        host = Host(host_id or self.side_ids.uuid(), h["name"], h["cpu"], h["memory"], h["cpuspeed"], h["state"],
                    f"10.0.0.{11 + len(self.hosts)}", created or iso(time.time()), zone_id,
                    h.get("resourcestate", "Enabled"), cluster.id)
        self.hosts[host.id] = host
        return host

    def offering_by_name(self, name: str) -> ServiceOffering:
        return next(o for o in self.service_offerings.values() if o.name == name)

    def group_by_name(self, name: str) -> AffinityGroup:
        return next(g for g in self.affinity_groups.values() if g.name == name)

    def _version(self, semver: str) -> dict[str, Any]:
        for version in self.versions.values():
            if version["semanticversion"] == semver:
                return version
        version = {"id": self.ids.uuid(), "name": f"v{semver}", "semanticversion": semver}
        self.versions[version["id"]] = version
        return version

    def _build_cluster(self, c: dict[str, Any], index: int) -> None:
        cluster_id = c["id"] or self.ids.uuid()
        version = self._version(c["kubernetes_version"])
        # A next patch release, so upgradeKubernetesCluster has a target.
        major, minor, patch = (c["kubernetes_version"].split(".") + ["0", "0"])[:3]
        if patch.isdigit():
            self._version(f"{major}.{minor}.{int(patch) + 1}")
        default_offering = self.offering_by_name(c["offering"])
        type_offerings = {t: self.offering_by_name(n) for t, n in c["node_offerings"].items()}
        cidr = c.get("guest_cidr") or f"10.1.{index}.0/24"
        network = Network(self.ids.uuid(), f"{c['name']}-network", cidr, f"{cidr.rsplit('.', 1)[0]}.1", cluster_id)
        self.networks[network.id] = network
        ip = PublicIp(self.ids.uuid(), f"203.0.113.{10 + index}", network.id, True, self._stamp())
        self.public_ips[ip.id] = ip
        cluster = Cluster(
            id=cluster_id, name=c["name"], description=c["description"], state=c["state"], clustertype=c["clustertype"],
            version_id=version["id"], version_name=version["name"], semver=c["kubernetes_version"],
            service_offering_id=default_offering.id,
            type_offering_ids={t: o.id for t, o in type_offerings.items()},
            control_nodes=c["control_nodes"], workers=c["workers"] + c["external_nodes"], etcd_nodes=c["etcd_nodes"],
            cpunumber=0, memory=0, keypair=c["keypair"], network_id=network.id, ip_id=ip.id, created=self._stamp(),
            vm_ids=[], root_disk_size=c["root_disk_size"], template_id=self.template_id,
            template_name=f"cks-ubuntu-{c['kubernetes_version']}",
        )
        cluster.owner_id = self.directory.owner_id(c)
        cluster.zone_id = self.zone_by_name[c.get("zone", self.zone_name)]
        cluster.root_disk_offering = c["root_disk_offering"]
        cluster.storage_pool_id = next(p.id for p in self.storage_pools.values() if p.name == c["storage_pool"])
        cluster.dedication_group_id = self.group_by_name(c["dedication_group"]).id if c["dedication_group"] else None
        self.clusters[cluster.id] = cluster
        prefix = specmod.node_name_prefix(c["name"], cluster_id)
        overrides = {(o["type"], o["index"]): o for o in c["nodes"]}
        plan: list[tuple[str, int, str, bool]] = []
        # CKS deploys etcd nodes first, then control nodes, then workers (map order = creation order).
        for i in range(c["etcd_nodes"]):
            plan.append(("etcd", i, specmod.etcd_vm_name(c["name"], i + 1, self._tick_ms()), False))
        for i in range(c["control_nodes"]):
            plan.append(("control", i, specmod.control_vm_name(prefix, self._tick_ms()), False))
        for i in range(c["workers"] + c["external_nodes"]):
            plan.append(("worker", i, specmod.worker_vm_name(prefix, self._tick_ms()), i >= c["workers"]))
        ssh_index = 0
        for node_type, i, name, external in plan:
            override = overrides.get((node_type, i), {})
            offering = self.offering_by_name(override["offering"]) if "offering" in override else \
                type_offerings.get(node_type, default_offering)
            groups = [self.group_by_name(n).id for n in override.get("affinity_groups", c["affinity_groups"][node_type])]
            if c["dedication_group"]:
                dedication = self.group_by_name(c["dedication_group"]).id
                if dedication not in groups:
                    groups.insert(0, dedication)
            vm = self._new_vm(name, offering, groups, network, cluster, node_type, external,
                              override.get("root_disk_size", c["root_disk_size"]), c["root_disk_offering"],
                              pool_id=next(p.id for p in self.storage_pools.values() if p.name == c["storage_pool"]))
            vm.etcd_member_name = override.get("etcd_member_name")
            cluster.cpunumber += offering.cpu
            cluster.memory += offering.memory
            state = override.get("state", "Running")
            if state == "Running" and cluster.state not in ("Stopped", "Created"):
                host = self._place(vm, considerlasthost=False)
                if host is None:
                    raise specmod.SpecError(
                        f"clusters: not enough host capacity (or affinity room) to place {vm.name}; add hosts"
                        " (e.g. scale.hosts)")
                vm.host_id = vm.last_host_id = host.id
                vm.state = "Running"
            else:
                vm.state = "Stopped" if state != "Error" else "Error"
                vm.stopped_at = time.monotonic() - 10 * 365 * 86400
            port = 50000 + i + 1 if node_type == "etcd" else 2222 + ssh_index
            if node_type != "etcd":
                ssh_index += 1
            rule = PortForwardingRule(self.ids.uuid(), ip.id, port, 22, vm.id, network.id)
            self.pf_rules[rule.id] = rule

    def _new_vm(self, name: str, offering: ServiceOffering, groups: list[str], network: Network,
                cluster: Optional[Cluster], node_type: Optional[str], external: bool, root_gb: int,
                root_disk_offering: Optional[str], pool_id: Optional[str] = None) -> VM:
        self._vm_numbers += 1
        number = self._vm_numbers
        created_ms = int(name.rsplit("-", 1)[-1], 16) if cluster else self._tick_ms()
        host_octet = 10 + len([v for v in self.vms.values() if v.network_id == network.id])
        vm = VM(
            id=self.ids.uuid(), name=name, instancename=f"i-2-{number}-VM", number=number, state="Stopped",
            service_offering_id=offering.id, affinity_group_ids=list(groups), created=iso(created_ms / 1000),
            created_ms=created_ms, ipaddress=f"{network.cidr.rsplit('.', 1)[0]}.{host_octet % 250}",
            network_id=network.id, nic_id=self.ids.uuid(), macaddress="02:00:%02x:%02x:%02x:%02x" % (
                (number >> 24) & 255, (number >> 16) & 255, (number >> 8) & 255, number & 255),
            cluster_id=cluster.id if cluster else None, node_type=node_type, is_etcd=node_type == "etcd",
            is_external=external, keypair=cluster.keypair if cluster else None,
            owner_id=cluster.owner_id if cluster else self.directory.primary.id,
        )
        vm.lastupdated = vm.created
        if cluster:
            vm.details = {"controlNodeLoginUser": "cloud", "rootdisksize": str(root_gb)}
        self.vms[vm.id] = vm
        self.vm_by_name[vm.name] = vm
        if cluster:
            cluster.vm_ids.append(vm.id)
        if root_disk_offering and offering.rootdisksize == 0 and not offering.diskofferingstrictness:
            disk_id = next(d.id for d in self.disk_offerings.values() if d.name == root_disk_offering and not d.compute_only)
        else:
            disk_id = offering.disk_offering_id
        disk = self.disk_offerings[disk_id]
        size_gb = offering.rootdisksize or (disk.size if not disk.iscustomized else root_gb)
        volume = Volume(self.ids.uuid(), f"ROOT-{number}", vm.id, "ROOT", size_gb * GB, disk_id, "Ready", vm.created,
                        pool_id or self.storage_id)
        self.volumes[volume.id] = volume
        self.root_volume[vm.id] = volume
        return vm

    # -- lookups -----------------------------------------------------------------------------

    @staticmethod
    def invalid_uuid(name: str, value: str) -> CloudError:
        return param_error(
            f"Invalid parameter {name} value={value} due to incorrect long value format, or entity does not exist"
            " or due to incorrect parameter annotation for the field in api cmd class.")

    def _existing(self, table: dict[str, Any], uuid: str, param: str) -> Any:
        """The object with that uuid, or the 431 CloudStack gives for an unknown one."""
        found = table.get(uuid)
        if found is None:
            raise self.invalid_uuid(param, uuid)
        return found

    def get_vm(self, vm_id: str, param: str = "id") -> VM:
        return self._existing(self.vms, vm_id, param)

    def find_vm(self, name_or_id: str) -> VM:
        vm = self.vms.get(name_or_id) or self.vm_by_name.get(name_or_id)
        if vm is None:
            lowered = name_or_id.lower()
            vm = next((v for v in self.vms.values() if v.name.lower() == lowered), None)
        if vm is None:
            raise KeyError(f"no VM named {name_or_id!r}")
        return vm

    def get_service_offering(self, offering_id: str, param: str = "serviceofferingid") -> ServiceOffering:
        return self._existing(self.service_offerings, offering_id, param)

    def get_disk_offering(self, offering_id: str, param: str = "diskofferingid") -> DiskOffering:
        return self._existing(self.disk_offerings, offering_id, param)

    def get_volume(self, volume_id: str, param: str = "id") -> Volume:
        return self._existing(self.volumes, volume_id, param)

    def get_cluster(self, cluster_id: str, param: str = "id") -> Cluster:
        return self._existing(self.clusters, cluster_id, param)

    def _powered_on(self, vm: VM) -> None:
        """Tell the node model a cluster VM booted, with the cpu and memory of its current offering."""
        if vm.cluster_id:
            cpu, memory = self.vm_cpu_memory(vm)
            self.sim.vm_powered_on(vm.cluster_id, vm.name, cpu, memory)

    def vm_cpu_memory(self, vm: VM) -> tuple[int, int]:
        offering = self.service_offerings[vm.service_offering_id]
        return (vm.custom_cpu or offering.cpu, vm.custom_memory or offering.memory)

    @staticmethod
    def vm_ref(vm: VM) -> str:
        # VMInstanceVO.toString() as it shows up in the server's messages.
        return (f'VM instance {{"id":{vm.number},"instanceName":"{vm.instancename}","name":"{vm.name}",'
                f'"state":"{vm.state}","type":"User","uuid":"{vm.id}"}}')

    # -- async jobs --------------------------------------------------------------------------

    def new_job(self, cmd: str, instance_type: Optional[str], instance_id: Optional[str]) -> Job:
        now = time.monotonic()
        job = Job(self.ids.uuid(), cmd, instance_type, instance_id, time.time(), now + self.sim.delay("job_poll_min"),
                  caller_id=self.caller.id)
        self.jobs[job.id] = job
        return job

    def _complete(self, job: Job, result: dict[str, Any]) -> None:
        if job.cancelled:
            return
        job.status, job.result_code, job.result, job.completed = 1, 0, result, time.time()

    def _fail(self, job: Job, code: int, text: str) -> None:
        if job.cancelled:
            return
        job.status, job.result_code, job.completed = 2, code, time.time()
        job.result = {"uuidList": [], "errorcode": code, "errortext": text}

    def cancel_jobs_of_dead_server(self) -> list[str]:
        """AsyncJobManagerImpl.cleanupLeftOverJobs when a management server (re)starts: every job
        it was running is FAILED with INTERNAL_ERROR (530) and the plain text "job cancelled
        because of management server restart or shutdown", which ApiSerializerHelper cannot
        read back, so queryAsyncJobResult shows no jobresult. Queued VM work is dropped; what
        the hypervisor was already doing (a stop, a start) still ends as it would."""
        cancelled = []
        for job in self.jobs.values():
            if job.status == 0:
                job.status, job.result_code, job.completed = 2, 530, time.time()
                job.result = None
                job.cancelled = True
                cancelled.append(job.id)
        for vm in self.vms.values():
            vm.queue = deque((job, body) for job, body in vm.queue if not job.cancelled)
        return cancelled

    def _run_vm_job(self, vm: VM, job: Job, body: Callable[[Job, Callable[[], None]], None]) -> Job:
        """Queue ``body`` behind the VM's running job, as CloudStack's VM work queue does."""
        vm.queue.append((job, body))
        if vm.active_job is None:
            self._next_vm_job(vm)
        return job

    def _next_vm_job(self, vm: VM) -> None:
        if not vm.queue:
            vm.active_job = None
            return
        job, body = vm.queue.popleft()
        if job.cancelled:
            return self._next_vm_job(vm)
        vm.active_job = job

        def done() -> None:
            vm.active_job = None
            self._next_vm_job(vm)

        try:
            body(job, done)
        except CloudError as err:
            self._fail(job, err.code, err.text)
            done()

    def _job_fault(self, command: str, vm: VM) -> Optional[dict[str, Any]]:
        return self.sim.faults.take("job_failure", command=command, vm=vm.name)

    def _fail_from_fault(self, job: Job, fault: dict[str, Any]) -> None:
        self._fail(job, int(fault.get("code", 530)), str(fault.get("errortext", f"Job {job.cmd} failed (cks-sim fault)")))

    # -- VM power ----------------------------------------------------------------------------

    def stop_vm(self, vm: VM, command: str = "stopVirtualMachine", forced: bool = False) -> Job:
        job = self.new_job(command, "VirtualMachine", vm.id)
        self._timeline(vm, "stop_requested", forced=forced)

        def body(job: Job, done: Callable[[], None]) -> None:
            # VirtualMachineManagerImpl.advanceStop returns at once for a Stopped VM, and for an
            # Error one ("Stopped called on ... but the state is Error"): the job succeeds and
            # the VM stays in Error.
            if vm.state in ("Stopped", "Error"):
                self._complete(job, {"virtualmachine": self.vm_view(vm)})
                return done()
            fault = self._job_fault(command, vm)
            previous = vm.state
            self._set_state(vm, "Stopping")

            def finish() -> None:
                if fault is not None:
                    self._set_state(vm, previous if previous != "Stopping" else "Running")
                    self._fail_from_fault(job, fault)
                else:
                    self._power_off(vm)
                    self._complete(job, {"virtualmachine": self.vm_view(vm)})
                done()

            self.sim.scheduler.schedule(self.sim.delay("stop"), finish)

        return self._run_vm_job(vm, job, body)

    def _power_off(self, vm: VM) -> None:
        vm.host_id = None
        vm.stopped_at = time.monotonic()
        self._set_state(vm, "Stopped")
        self._timeline(vm, "stopped")
        if vm.cluster_id:
            self.sim.vm_powered_off(vm.cluster_id, vm.name)

    def start_vm(self, vm: VM, command: str = "startVirtualMachine", hostid: Optional[str] = None,
                 considerlasthost: bool = True) -> Job:
        job = self.new_job(command, "VirtualMachine", vm.id)
        self._timeline(vm, "start_requested")

        def body(job: Job, done: Callable[[], None]) -> None:
            if vm.state == "Running" and command == "startVirtualMachine":
                # UserVmManagerImpl.startVirtualMachine refuses before anything else (an
                # InvalidParameterValueException, 431 through ApiAsyncJobDispatcher).
                raise param_error(f"The virtual machine {vm.id} ({vm.name}) is already running")
            if vm.state == "Running":
                self._complete(job, {"virtualmachine": self.vm_view(vm)})
                return done()
            if vm.state == "Error":
                raise CloudError(530, f"Unable to start {self.vm_ref(vm)}: it is in Error state", CS_CLOUD_RUNTIME)
            capacity = self.sim.faults.take("start_capacity", vm=vm.name)
            # The plan is made when the start job begins; the host is claimed only when the VM is up.
            # Two starts that overlap both plan against the same picture, so two members of one strict
            # anti-affinity group can land on one host (apache/cloudstack issue 9110).
            host = None if capacity else self._place(vm, considerlasthost, hostid)
            self._timeline(vm, "start_began", job=job.id, host=host.name if host else None)
            if host is None:
                # VirtualMachineManagerImpl.orchestrateStart: InsufficientServerCapacityException with
                # areAffinityGroupsAssociated (any group); StartVMCmd.execute appends the hint to it.
                text = f"Unable to create a deployment for {self.vm_ref(vm)}"
                if vm.affinity_group_ids:
                    text += ", Please check the affinity groups provided, there may not be sufficient capacity to follow them"

                def refuse() -> None:
                    self._fail(job, 533, text)
                    self._timeline(vm, "start_ended", job=job.id, ok=False, errorcode=533)
                    done()

                self.sim.scheduler.schedule(self.sim.delay("start") / 10, refuse)
                return
            fault = self._job_fault(command, vm)
            self._set_state(vm, "Starting")

            def finish() -> None:
                if fault is not None:
                    self._set_state(vm, "Stopped")
                    self._fail_from_fault(job, fault)
                    self._timeline(vm, "start_ended", job=job.id, ok=False, errorcode=int(fault.get("code", 530)))
                else:
                    vm.host_id = vm.last_host_id = host.id
                    self._set_state(vm, "Running")
                    self._timeline(vm, "started", host=host.name)
                    self._timeline(vm, "start_ended", job=job.id, ok=True, host=host.name)
                    placement.record_broken_affinity(self, vm)
                    self._powered_on(vm)
                    self._complete(job, {"virtualmachine": self.vm_view(vm)})
                done()

            self.sim.scheduler.schedule(self.sim.delay("start"), finish)

        return self._run_vm_job(vm, job, body)

    def reboot_vm(self, vm: VM) -> Job:
        job = self.new_job("rebootVirtualMachine", "VirtualMachine", vm.id)

        def body(job: Job, done: Callable[[], None]) -> None:
            if vm.state != "Running":
                raise CloudError(530, f"Unable to reboot {self.vm_ref(vm)}: it is not Running", CS_CLOUD_RUNTIME)
            self._timeline(vm, "reboot_requested")
            if vm.cluster_id:
                self.sim.vm_powered_off(vm.cluster_id, vm.name)

            def finish() -> None:
                self._powered_on(vm)
                self._complete(job, {"virtualmachine": self.vm_view(vm)})
                done()

            self.sim.scheduler.schedule(self.sim.delay("start"), finish)

        return self._run_vm_job(vm, job, body)

    def set_vm_state(self, vm: VM, state: str) -> None:
        """Admin action: force a state (e.g. Error), as a hypervisor crash would."""
        if state not in ("Running", "Stopped", "Error"):
            raise ValueError("state must be Running, Stopped or Error")
        if state == "Running" and vm.state != "Running":
            host = self._place(vm, True)
            if host is None:
                raise ValueError(f"no host can take {vm.name}")
            vm.host_id = vm.last_host_id = host.id
            self._set_state(vm, "Running")
            self._powered_on(vm)
        elif state in ("Stopped", "Error") and vm.state != state:
            was_on = vm.state in ("Running", "Stopping", "Starting")
            vm.host_id = None
            vm.stopped_at = time.monotonic()
            self._set_state(vm, state)
            if was_on and vm.cluster_id:
                self.sim.vm_powered_off(vm.cluster_id, vm.name)

    def _set_state(self, vm: VM, state: str) -> None:
        vm.state = state
        vm.lastupdated = iso(time.time())
        if vm.cluster_id and vm.node_type:
            self._check_unavailable(vm)

    def _timeline(self, vm: VM, event: str, **fields: Any) -> None:
        if vm.cluster_id:
            self.sim.timeline.add(node=vm.name.lower(), event=event, vm=vm.name, cluster=vm.cluster_id, **fields)

    def _check_unavailable(self, vm: VM) -> None:
        key = (vm.cluster_id or "", vm.node_type or "")
        down = self._down.setdefault(key, set())
        before = len(down)
        if vm.state == "Running":
            down.discard(vm.name)
        else:
            down.add(vm.name)
        limit = self.max_unavailable.get(vm.node_type or "", 1)
        if len(down) > limit and len(down) > before:
            self.sim.invariants.add(kind="too_many_unavailable", cluster=vm.cluster_id, node_type=vm.node_type,
                                    down=sorted(n.lower() for n in down), limit=limit)

    # -- placement ---------------------------------------------------------------------------

    def host_usage(self) -> dict[str, tuple[int, int]]:
        """Allocated (cpu MHz, memory MB) per host."""
        return placement.host_usage(self)

    def _place(self, vm: VM, considerlasthost: bool, hostid: Optional[str] = None) -> Optional[Host]:
        """DeploymentPlanningManagerImpl.planDeployment (placement.plan); None means 533."""
        return placement.plan(self, vm, considerlasthost, hostid)

    # -- offering and disk changes -----------------------------------------------------------

    def _check_offering_change(self, vm: VM, new: ServiceOffering, details: dict[str, str]) -> None:
        current = self.service_offerings[vm.service_offering_id]
        if not new.iscustomized and current.id == new.id:
            raise param_error(f"Not upgrading vm {self.vm_ref(vm)} since it already has the requested service offering ({new.name})")
        if new.state != "Active":
            raise param_error(f"Unable to upgrade virtual machine {self.vm_ref(vm)}: service offering {new.name} is not active")
        self._check_storage_fit(vm, current, new)
        if current.diskofferingstrictness != new.diskofferingstrictness:
            raise param_error("Unable to Scale VM, since disk offering strictness flag is not same for new service offering and old service offering")
        if current.diskofferingstrictness and current.disk_offering_id != new.disk_offering_id:
            raise param_error("Unable to Scale VM, since disk offering id associated with the old service offering is not same for new service offering")
        if new.iscustomized:
            missing = [k for k in ("cpuNumber", "memory") if k not in details]
            if missing:
                raise param_error("Need to specify custom parameter values cpu, cpu speed and memory when using custom offering")

    def usage(self, kind: str, owner_id: str, resource: str) -> int:
        """The resource count of an account or a domain (tree): cores, MiB, bytes of primary storage.

        resource.count.running.vms.only is false by default: stopped VMs count as well.
        """
        directory = self.directory
        if kind == "account":
            owners = {owner_id}
        else:
            owners = {a.id for a in directory.accounts.values() if directory.in_subtree(a.domain_id, owner_id)}
        if resource == "primarystorage":
            return sum(v.size for v in self.volumes.values() if self.vms[v.vm_id].owner_id in owners)
        total = 0
        for vm in self.vms.values():
            if vm.owner_id in owners:
                cpu, memory = self.vm_cpu_memory(vm)
                total += cpu if resource == "cpu" else memory
        return total

    def check_limit(self, owner_id: str, resource: str, amount: int) -> None:
        try:
            self.directory.check_limit(owner_id, resource, amount, self.usage)
        except OwnerError as err:
            raise self.owner_error(err) from None

    def _check_offering_limits(self, vm: VM, new: ServiceOffering, details: dict[str, str]) -> None:
        """ResourceLimitManagerImpl.checkVmResourceLimitsForServiceOfferingChange: only growth counts."""
        cpu, memory = self.vm_cpu_memory(vm)
        new_cpu = int(details["cpuNumber"]) if new.iscustomized and "cpuNumber" in details else new.cpu
        new_memory = int(details["memory"]) if new.iscustomized and "memory" in details else new.memory
        self.check_limit(vm.owner_id, "cpu", new_cpu - cpu)
        self.check_limit(vm.owner_id, "memory", new_memory - memory)

    def _check_storage_fit(self, vm: VM, current: ServiceOffering, new: ServiceOffering) -> None:
        """VirtualMachineManagerImpl.checkIfCanUpgrade: the storage scope, then the tag subset."""
        new_disk = self.disk_offerings[new.disk_offering_id]
        root = self.root_volume.get(vm.id)
        on_local = root is not None and self.storage_pools[root.storage_id].scope == "local"
        # checkIfNewOfferingStorageScopeMatchesStoragePool
        if new_disk.storagetype == "local" and not on_local:
            raise param_error(f"Unable to upgrade virtual machine {self.vm_ref(vm)}, target offering use local storage but"
                              " the storage pool where the volume is allocated is a shared storage.")
        if new_disk.storagetype != "local" and on_local:
            raise param_error(f"Unable to upgrade virtual machine {self.vm_ref(vm)}, target offering use shared storage but"
                              " the storage pool where the volume is allocated is a local storage.")
        # match.storage.pool.tags.with.disk.offering (true): VolumeApiServiceImpl.
        # doesNewDiskOfferingHasTagsAsOldDiskOffering, the old offering's tags within the new one's.
        old_tags = self.disk_offerings[current.disk_offering_id].tag_list()
        new_tags = new_disk.tag_list()
        if old_tags and (not new_tags or not set(old_tags) <= set(new_tags)):
            raise param_error(
                "Unable to upgrade virtual machine; the current service offering  should have tags as subset of the new"
                f" service offering tags. Current service offering tags: [{', '.join(old_tags)}]; new service offering"
                f" tags: [{', '.join(new_tags)}]")

    def _apply_offering(self, vm: VM, new: ServiceOffering, details: dict[str, str]) -> None:
        old = self.service_offerings[vm.service_offering_id]
        vm.service_offering_id = new.id
        vm.custom_cpu = int(details["cpuNumber"]) if new.iscustomized else None
        vm.custom_memory = int(details["memory"]) if new.iscustomized else None
        # allow.diskoffering.change.during.scale.vm is false by default: the ROOT disk is untouched.
        self._timeline(vm, "offering_changed", offering=new.name, previous=old.name)

    def change_service(self, vm: VM, new: ServiceOffering, details: dict[str, str]) -> VM:
        """changeServiceForVirtualMachine: synchronous, Stopped VMs only."""
        if vm.state != "Stopped":
            raise param_error(f"Unable to upgrade virtual machine {self.vm_ref(vm)}  in state {vm.state}; {NOT_STOPPED_HINT}")
        self._check_offering_change(vm, new, details)
        # UpgradeVMCmd turns the ResourceAllocationException into RESOURCE_ALLOCATION_ERROR (535).
        self._check_offering_limits(vm, new, details)
        self._apply_offering(vm, new, details)
        return vm

    def scale_vm(self, vm: VM, new: ServiceOffering, details: dict[str, str]) -> Job:
        job = self.new_job("scaleVirtualMachine", "VirtualMachine", vm.id)

        def body(job: Job, done: Callable[[], None]) -> None:
            fault = self._job_fault("scaleVirtualMachine", vm)
            if vm.state == "Stopped":
                self._check_offering_change(vm, new, details)
                self._check_offering_limits(vm, new, details)
                apply = True
            elif vm.state == "Running":
                current = self.service_offerings[vm.service_offering_id]
                self._check_offering_change(vm, new, details)
                if not self.vm_zone(vm)["dynamic_scale"]:
                    raise param_error("Dynamic scaling is not enabled for the zone (enable.dynamic.scale.vm); stop the VM to change its offering")
                if not current.iscustomized:
                    raise param_error(f"Unable to scale {self.vm_ref(vm)}: on KVM only a VM with a custom (dynamic) offering can be scaled while Running")
                if current.dynamicscalingenabled != new.dynamicscalingenabled:
                    raise param_error("Unable to Scale VM: dynamic scaling flags of the old and new offerings differ")
                apply = True
            else:
                raise param_error(f"Unable to scale {self.vm_ref(vm)} in state {vm.state}")

            def finish() -> None:
                if fault is not None:
                    self._fail_from_fault(job, fault)
                elif apply:
                    self._apply_offering(vm, new, details)
                    self._complete(job, {"virtualmachine": self.vm_view(vm)})
                done()

            self.sim.scheduler.schedule(self.sim.delay("affinity"), finish)

        return self._run_vm_job(vm, job, body)

    def resize_volume(self, volume: Volume, size_gb: Optional[int], shrinkok: bool,
                      new_offering: Optional[DiskOffering]) -> Job:
        vm = self.vms[volume.vm_id]
        job = self.new_job("resizeVolume", "Volume", volume.id)

        def body(job: Job, done: Callable[[], None]) -> None:
            try:
                new_size, offering_id = self._check_resize(vm, volume, size_gb, shrinkok, new_offering)
            except CloudError as err:
                if err.code != 431:
                    raise
                # ResizeVolumeCmd.execute turns every InvalidParameterValueException of
                # VolumeApiServiceImpl.resizeVolume into UNSUPPORTED_ACTION_ERROR.
                raise CloudError(432, err.text, CS_INVALID_PARAMETER) from None
            fault = self._job_fault("resizeVolume", vm)
            volume.state = "Resizing"

            def finish() -> None:
                volume.state = "Ready"
                if fault is not None:
                    self._fail_from_fault(job, fault)
                else:
                    old = volume.size
                    volume.size = new_size
                    volume.disk_offering_id = offering_id
                    if volume.type == "ROOT" and vm.cluster_id:
                        vm.details["rootdisksize"] = str(new_size // GB)
                    self._timeline(vm, "volume_resized", size_gb=new_size // GB, previous_gb=old // GB)
                    self._complete(job, {"volume": self.volume_view(volume)})
                done()

            self.sim.scheduler.schedule(self.sim.delay("resize"), finish)

        # Volume work is serialised with the owning VM's work, as the VM work queue does.
        return self._run_vm_job(vm, job, body)

    def _check_resize(self, vm: VM, volume: Volume, size_gb: Optional[int], shrinkok: bool,
                      new_offering: Optional[DiskOffering]) -> tuple[int, str]:
        """VolumeApiServiceImpl.resizeVolume's refusals, in its order. Returns (bytes, offering id)."""
        if size_gb is not None and size_gb < 0:
            raise param_error(f"Invalid size {size_gb}")
        if volume.state not in ("Ready", "Allocated"):
            raise param_error(f"Volume should be in ready or allocated state before attempting a resize. Volume {volume.id} is in state {volume.state}.")
        current = self.disk_offerings[volume.disk_offering_id]
        service = self.service_offerings[vm.service_offering_id]
        if new_offering is None or new_offering.id == current.id:
            if size_gb is None:
                raise param_error("No new size or disk offering given: nothing to resize")
            if current.disksizestrictness:
                raise param_error(f"Resize of volume {volume.id} is not allowed, since disk size is strictly fixed as per the disk offering")
            if volume.type == "ROOT" and current.compute_only and current.size > 0:
                raise param_error(
                    "Failed to resize Root volume. The service offering of this Volume has been configured with a root"
                    " disk size; on such case a Root Volume can only be resized when changing to another Service Offering"
                    " with a Root disk size. For more details please check out the Official Resizing Volumes documentation.")
            if current.iscustomized and not 1 <= size_gb <= 1024:
                raise param_error(f"Volume size must be between 1 GB and 1024 GB (custom.diskoffering.size.min/max), got {size_gb} GB")
            new_size = size_gb * GB
            offering_id = current.id
        else:
            if current.disksizestrictness != new_offering.disksizestrictness:
                raise param_error("Volume's disk offering and the new disk offering differ in disk size strictness")
            if current.disksizestrictness and current.size != new_offering.size:
                raise param_error(f"Resize of volume {volume.id} is not allowed, since disk size is strictly fixed as per the disk offering")
            if volume.type == "ROOT" and service.diskofferingstrictness:
                raise param_error(f"Cannot resize ROOT volume [{volume.id}] with new disk offering since existing disk offering"
                                  " is strictly assigned to the ROOT volume.")
            if new_offering.compute_only:
                raise self.invalid_uuid("diskofferingid", new_offering.id)
            if new_offering.iscustomized:
                if size_gb is None:
                    raise param_error("Custom disk offering: a size is needed")
                new_size = size_gb * GB
            else:
                if size_gb is not None:
                    raise param_error("Cannot specify a size with a disk offering that is not customized")
                new_size = new_offering.size * GB
            if volume.type == "ROOT" and new_size != volume.size and vm.state != "Stopped":
                raise param_error(f"Cannot resize ROOT volume {volume.id} with a new disk offering while its VM is not Stopped; {NOT_STOPPED_HINT}")
            offering_id = new_offering.id
        if new_size < volume.size:
            if not shrinkok:
                raise param_error(
                    f"Going from existing size of {volume.size} to size of {new_size} would shrink the volume."
                    "Need to sign off by supplying the shrinkok parameter with value of true.")
            # KVM ROOT volumes are QCOW2 files; CloudStack refuses to shrink those once created.
            raise param_error(f"Unable to shrink volumes of type QCOW2 (volume {volume.id})")
        if vm.state not in ("Stopped", "Running"):
            raise param_error(f"Cannot resize volume {volume.id}: its VM is in state {vm.state}")
        # checkResourceLimit(owner, primary_storage, newSize - currentSize); ResizeVolumeCmd
        # answers the ResourceAllocationException with RESOURCE_ALLOCATION_ERROR (535).
        self.check_limit(vm.owner_id, "primarystorage", new_size - volume.size)
        return new_size, offering_id

    def group_ref(self, group: AffinityGroup) -> str:
        return group.ref(list(self.affinity_groups).index(group.id) + 1)

    def check_affinity_acl(self, vm: VM, group_ids: list[str]) -> None:
        """ParamProcessWorker.doAccessChecks for updateVMAffinityGroup, before any job: the VM's
        owner, then every group named by id (``@ACL`` on affinitygroupids, UseEntry)."""
        self.check_access(vm.owner_id, self.vm_ref(vm))
        for group_id in group_ids:
            group = self.affinity_groups[group_id]
            try:
                self.directory.check_group_access(self.caller, group.owner_id, group.domain_level_id, self.group_ref(group))
            except OwnerError as err:
                raise self.owner_error(err) from None

    def update_affinity(self, vm: VM, group_ids: Optional[list[str]], group_names: Optional[list[str]]) -> Job:
        job = self.new_job("updateVMAffinityGroup", "VirtualMachine", vm.id)
        caller = self.caller

        def body(job: Job, done: Callable[[], None]) -> None:
            # UpdateVMAffinityGroupCmd.execute, then AffinityGroupServiceImpl.updateVMAffinityGroups.
            if group_ids is not None and group_names is not None:
                raise param_error("affinitygroupids parameter is mutually exclusive with affinitygroupnames parameter")
            if group_ids is None and group_names is None:
                raise param_error("affinitygroupids parameter or affinitygroupnames parameter must be given")
            if group_names is not None:
                ids = []
                owner = self.directory.accounts[vm.owner_id]
                for name in group_names:
                    # ApiResponseHelper.getAffinityGroupId: by name among the VM owner's groups.
                    group = next((g for g in self.affinity_groups.values()
                                  if g.name == name and g.owner_id == vm.owner_id and g.domain_level_id is None), None)
                    if group is None:
                        raise param_error(f"Unable to find group by name {name} for account {owner.number}")
                    ids.append(group.id)
            else:
                ids = list(group_ids or [])
            if vm.state != "Stopped":
                raise param_error(f"Unable update affinity groups of the virtual machine {self.vm_ref(vm)} in state {vm.state};"
                                  f" {NOT_STOPPED_HINT} and not in an error state before updating.")
            for group_id in ids:
                group = self.affinity_groups[group_id]
                if caller.role == "admin":
                    # Root admin has access to both, but they must have the same owner; a
                    # PermissionDeniedException in a job ends it with 530 (ApiAsyncJobDispatcher).
                    if group.owner_id != vm.owner_id:
                        raise CloudError(530, f"Affinity Group {self.group_ref(group)} does not belong to the VM's account",
                                         CS_PERMISSION_DENIED)
                else:
                    try:
                        self.directory.check_group_access(caller, group.owner_id, group.domain_level_id,
                                                          self.group_ref(group))
                    except OwnerError as err:
                        raise CloudError(530, err.text, err.cserrorcode) from None
            fault = self._job_fault("updateVMAffinityGroup", vm)

            def finish() -> None:
                if fault is not None:
                    self._fail_from_fault(job, fault)
                else:
                    previous = [self.affinity_groups[g].name for g in vm.affinity_group_ids]
                    vm.affinity_group_ids = list(dict.fromkeys(ids))
                    self._timeline(vm, "affinity_updated", groups=[self.affinity_groups[g].name for g in vm.affinity_group_ids],
                                   previous=previous)
                    self._complete(job, {"virtualmachine": self.vm_view(vm)})
                done()

            self.sim.scheduler.schedule(self.sim.delay("affinity"), finish)

        return self._run_vm_job(vm, job, body)

    # -- tags --------------------------------------------------------------------------------

    def _tag_type(self, resourcetype: str) -> str:
        canonical = TAGGABLE_TYPES.get(resourcetype.lower())
        if canonical is None:
            raise param_error(f"Invalid resource type {resourcetype}")
        return canonical

    def _resource_exists(self, resourcetype: str, resource_id: str) -> bool:
        table = {"UserVm": self.vms, "Volume": self.volumes, "Network": self.networks,
                 "PublicIpAddress": self.public_ips, "PortForwardingRule": self.pf_rules,
                 "ServiceOffering": self.service_offerings, "DiskOffering": self.disk_offerings,
                 "AffinityGroup": self.affinity_groups}.get(resourcetype)
        return table is not None and resource_id in table

    def _quick_job(self, cmd: str, work: Callable[[], dict[str, Any]]) -> Job:
        job = self.new_job(cmd, None, None)

        def finish() -> None:
            try:
                self._complete(job, work())
            except CloudError as err:
                self._fail(job, err.code, err.text)

        self.sim.scheduler.schedule(self.sim.delay("affinity") / 10, finish)
        return job

    def create_tags(self, resource_ids: list[str], resourcetype: str, tags: list[dict[str, str]],
                    customer: Optional[str]) -> Job:
        def work() -> dict[str, Any]:
            kind = self._tag_type(resourcetype)
            for rid in resource_ids:
                if not self._resource_exists(kind, rid):
                    raise param_error(f"Unable to find resource by id {rid} and type {kind}")
            for tag in tags:
                if not tag.get("value"):
                    raise param_error(f"Value for the key {tag.get('key')} is either null or empty")
            for rid in resource_ids:
                for tag in tags:
                    if any(t["key"] == tag["key"] for t in self.tags.get(rid, [])):
                        raise CloudError(530, f"tag {tag['key']} already on {kind} with id {rid}", CS_CLOUD_RUNTIME)
            for rid in resource_ids:
                for tag in tags:
                    self.tags.setdefault(rid, []).append({
                        "key": tag["key"], "value": tag["value"], "resourceid": rid, "resourcetype": kind,
                        **self.owner_fields(self.caller.id), **({"customer": customer} if customer else {}),
                    })
            return {"success": True}

        return self._quick_job("createTags", work)

    def delete_tags(self, resource_ids: list[str], resourcetype: str, tags: Optional[list[dict[str, str]]]) -> Job:
        def work() -> dict[str, Any]:
            kind = self._tag_type(resourcetype)
            doomed = []
            for rid in resource_ids:
                for tag in self.tags.get(rid, []):
                    if tag["resourcetype"] != kind:
                        continue
                    if tags and not any(
                        t.get("key") == tag["key"] and (not t.get("value") or t["value"].lower() == tag["value"].lower())
                        for t in tags
                    ):
                        continue
                    doomed.append(tag)
            if not doomed:
                raise param_error("Unable to find any tags which conform to specified delete parameters")
            for tag in doomed:
                self.tags[tag["resourceid"]].remove(tag)
            return {"success": True}

        return self._quick_job("deleteTags", work)

    # -- CKS cluster operations --------------------------------------------------------------

    def cluster_vms(self, cluster: Cluster) -> list[VM]:
        return [self.vms[v] for v in cluster.vm_ids]

    def set_cluster_state(self, cluster: Cluster, state: str, reason: str = "") -> None:
        if cluster.state != state:
            previous = cluster.state
            cluster.state = state
            self.sim.timeline.add(cluster=cluster.id, event="cluster_state", state=state, previous=previous, reason=reason)

    def _cluster_job(self, cmd: str, cluster: Cluster, work: Callable[[Job], None]) -> Job:
        job = self.new_job(cmd, "KubernetesCluster", cluster.id)
        try:
            work(job)
        except CloudError as err:
            self.sim.scheduler.schedule(0, self._fail, job, err.code, err.text)
        return job

    def _wait_vms(self, jobs: list[Job], then: Callable[[bool], None]) -> None:
        def check() -> None:
            if all(j.status != 0 for j in jobs):
                then(all(j.status == 1 for j in jobs))
            else:
                self.sim.scheduler.schedule(max(self.sim.delay("stop") / 10, 0.005), check)

        check()

    def start_cluster(self, cluster: Cluster) -> Job:
        def work(job: Job) -> None:
            if cluster.state == "Running":
                self.sim.scheduler.schedule(0, lambda: self._complete(job, {"kubernetescluster": self.cluster_view(cluster)}))
                return
            if cluster.state not in ("Stopped", "Created"):
                raise CloudError(530, f"Kubernetes cluster : {cluster.name} is in state {cluster.state} and can not be started", CS_CLOUD_RUNTIME)
            self.set_cluster_state(cluster, "Starting", "startKubernetesCluster")
            jobs = [self.start_vm(vm, "startKubernetesCluster") for vm in self.cluster_vms(cluster)]

            def then(ok: bool) -> None:
                self.set_cluster_state(cluster, "Running" if ok else "Alert", "startKubernetesCluster")
                if ok:
                    self._complete(job, {"kubernetescluster": self.cluster_view(cluster)})
                else:
                    self._fail(job, 530, f"Failed to start Kubernetes cluster : {cluster.name}")

            self._wait_vms(jobs, then)

        return self._cluster_job("startKubernetesCluster", cluster, work)

    def stop_cluster(self, cluster: Cluster) -> Job:
        def work(job: Job) -> None:
            if cluster.state == "Stopped":
                self.sim.scheduler.schedule(0, lambda: self._complete(job, {"success": True}))
                return
            if cluster.state not in ("Running", "Alert"):
                raise CloudError(530, f"Kubernetes cluster : {cluster.name} is in state {cluster.state} and can not be stopped", CS_CLOUD_RUNTIME)
            self.set_cluster_state(cluster, "Stopping", "stopKubernetesCluster")
            jobs = [self.stop_vm(vm, "stopKubernetesCluster") for vm in self.cluster_vms(cluster)]

            def then(ok: bool) -> None:
                self.set_cluster_state(cluster, "Stopped" if ok else "Alert", "stopKubernetesCluster")
                if ok:
                    self._complete(job, {"success": True})
                else:
                    self._fail(job, 530, f"Failed to stop Kubernetes cluster : {cluster.name}")

            self._wait_vms(jobs, then)

        return self._cluster_job("stopKubernetesCluster", cluster, work)

    def scale_cluster(self, cluster: Cluster, offering: Optional[ServiceOffering],
                      node_offerings: dict[str, ServiceOffering], size: Optional[int]) -> Job:
        def work(job: Job) -> None:
            if cluster.clustertype != "CloudManaged":
                raise CloudError(530, f"Kubernetes cluster {cluster.name} is not CloudManaged and can not be scaled", CS_PERMISSION_DENIED)
            if cluster.state not in ("Created", "Running", "Stopped"):
                raise CloudError(530, f"Kubernetes cluster {cluster.name} is in state {cluster.state} and can not be scaled", CS_PERMISSION_DENIED)
            targets = {t: node_offerings.get(t) or offering for t in ("control", "worker", "etcd")}
            changes = {}
            for vm in self.cluster_vms(cluster):
                target = targets.get(vm.node_type or "worker")
                if target is not None and target.id != vm.service_offering_id:
                    changes.setdefault(vm.node_type, []).append(vm)
            if changes and cluster.state == "Running":
                raise CloudError(530, "Scaling the offering of a Running Kubernetes cluster is not supported on KVM", CS_CLOUD_RUNTIME)
            grow = 0
            if size is not None and size != cluster.workers:
                if size < cluster.workers:
                    raise CloudError(530, f"cks-sim: scaling Kubernetes cluster {cluster.name} down (size {size} below its "
                                     f"{cluster.workers} workers) is not simulated: CKS would drain, delete and expunge "
                                     "its last workers", CS_CLOUD_RUNTIME)
                if cluster.state != "Running":
                    raise CloudError(530, f"cks-sim: adding workers to Kubernetes cluster {cluster.name} in state "
                                     f"{cluster.state} is not simulated (only a Running cluster's)", CS_CLOUD_RUNTIME)
                grow = size - cluster.workers

            def finish() -> None:
                for node_type, vms in changes.items():
                    target = targets[node_type]
                    for vm in vms:
                        self._apply_offering(vm, target, {})
                    cluster.type_offering_ids[node_type] = target.id
                if offering is not None:
                    cluster.service_offering_id = offering.id
                cluster.cpunumber = sum(self.vm_cpu_memory(v)[0] for v in self.cluster_vms(cluster))
                cluster.memory = sum(self.vm_cpu_memory(v)[1] for v in self.cluster_vms(cluster))
                self._complete(job, {"kubernetescluster": self.cluster_view(cluster)})

            if grow:
                self.set_cluster_state(cluster, "Scaling", "scaleKubernetesCluster")
                self._scale_up(cluster, job, grow)
                return
            self.sim.scheduler.schedule(self.sim.delay("affinity"), finish)

        return self._cluster_job("scaleKubernetesCluster", cluster, work)

    def _scale_up(self, cluster: Cluster, job: Job, count: int) -> None:
        """KubernetesClusterScaleWorker.scaleUpKubernetesClusterSize: one worker VM after the other
        (KubernetesClusterResourceModifierActionWorker.provisionKubernetesClusterNodeVms: create,
        start, next), then wait until every node is Ready (KubernetesClusterUtil
        .validateKubernetesClusterReadyNodesCount), then the new size and the cluster Running."""
        added: list[VM] = []

        def failed(text: str) -> None:
            # logTransitStateToFailedIfNeededAndThrow: OperationFailed moves Scaling to Alert.
            self.set_cluster_state(cluster, "Alert", "scaleKubernetesCluster")
            self._fail(job, 530, text)

        def next_vm(left: int) -> None:
            if left == 0:
                wait_ready()
                return
            vm = self._new_cks_worker(cluster)
            added.append(vm)
            started = self.start_vm(vm, "scaleKubernetesCluster", considerlasthost=False)
            self._wait_vms([started], lambda ok: next_vm(left - 1) if ok else failed(
                f"Scaling failed for Kubernetes cluster : {cluster.name}, unable to provision node VM in the cluster"))

        def wait_ready() -> None:
            world = self.sim.kube.get(cluster.id)
            nodes = getattr(world, "nodes", {})
            if any(getattr(nodes.get(vm.name.lower()), "ready", "True") != "True" for vm in added):
                self.sim.scheduler.schedule(max(self.sim.delay("stop") / 10, 0.005), wait_ready)
                return
            cluster.workers += len(added)
            cluster.cpunumber = sum(self.vm_cpu_memory(v)[0] for v in self.cluster_vms(cluster))
            cluster.memory = sum(self.vm_cpu_memory(v)[1] for v in self.cluster_vms(cluster))
            self.set_cluster_state(cluster, "Running", "scaleKubernetesCluster")
            self._complete(job, {"kubernetescluster": self.cluster_view(cluster)})

        next_vm(count)

    def _new_cks_worker(self, cluster: Cluster) -> VM:
        """createKubernetesNode as CKS runs it for a scale-up: ``<prefix>-node-<hex ms>``, the
        offering CKS stores for WORKER (getServiceOfferingForNodeTypeOnCluster, else the cluster's),
        the cluster's one node root disk size (rootdisksize), and the affinity groups
        getMergedAffinityGroupIds(WORKER, ...) gives: the account's ExplicitDedication group alone
        (4.22 keeps no per-type groups). Nothing an outside tool applied to the other nodes."""
        name = specmod.worker_vm_name(specmod.node_name_prefix(cluster.name, cluster.id), self._tick_ms())
        offering = self.service_offerings[cluster.type_offering_ids.get("worker") or cluster.service_offering_id]
        groups = [cluster.dedication_group_id] if cluster.dedication_group_id else []
        vm = self._new_vm(name, offering, groups, self.networks[cluster.network_id], cluster, "worker", False,
                          cluster.root_disk_size, cluster.root_disk_offering, pool_id=cluster.storage_pool_id)
        # provisionSshPortForwardingRules: the next free public port from 2222 to the VM's port 22.
        used = {r.publicport for r in self.pf_rules.values() if r.ip_id == cluster.ip_id}
        port = next(p for p in range(2222, 65536) if p not in used)
        rule = PortForwardingRule(self.ids.uuid(), cluster.ip_id, port, 22, vm.id, cluster.network_id)
        self.pf_rules[rule.id] = rule
        cpu, memory = self.vm_cpu_memory(vm)
        self.sim.node_vm_created(cluster.id, vm.name, "worker", cpu, memory)
        return vm

    def upgrade_cluster(self, cluster: Cluster, version_id: str) -> Job:
        def work(job: Job) -> None:
            version = self.versions.get(version_id)
            if version is None:
                raise self.invalid_uuid("kubernetesversionid", version_id)
            if cluster.state != "Running":
                raise CloudError(530, f"Kubernetes cluster {cluster.name} is not in Running state", CS_CLOUD_RUNTIME)
            self.set_cluster_state(cluster, "Upgrading", "upgradeKubernetesCluster")

            def finish() -> None:
                cluster.version_id, cluster.version_name, cluster.semver = version["id"], version["name"], version["semanticversion"]
                self.set_cluster_state(cluster, "Running", "upgradeKubernetesCluster")
                self._complete(job, {"kubernetescluster": self.cluster_view(cluster)})

            self.sim.scheduler.schedule(self.sim.delay("start"), finish)

        return self._cluster_job("upgradeKubernetesCluster", cluster, work)

    # -- CKS state scanner -------------------------------------------------------------------

    def start_scanner(self) -> None:
        self._scanner_handle = self.sim.scheduler.schedule(self.sim.delay("scanner_period"), self._scan)

    def _scan(self) -> None:
        try:
            self.scan_once()
        finally:
            self._scanner_handle = self.sim.scheduler.schedule(max(self.sim.delay("scanner_period"), 0.001), self._scan)

    def expected_ready(self, cluster: Cluster) -> int:
        count = cluster.control_nodes + cluster.workers
        if self.cloud_opts["scanner_counts_etcd"]:
            count += cluster.etcd_nodes
        return count

    def scan_once(self) -> None:
        """KubernetesClusterStatusScanner: one pass over the CloudManaged clusters."""
        for cluster in self.clusters.values():
            if cluster.clustertype != "CloudManaged":
                continue
            states = [vm.state for vm in self.cluster_vms(cluster)]
            if cluster.state == "Running" and any(s != "Running" for s in states):
                self.set_cluster_state(cluster, "Alert", "a node VM is not Running")
            elif cluster.state == "Stopped" and any(s != "Stopped" for s in states):
                self.set_cluster_state(cluster, "Alert", "a node VM is not Stopped")
            elif cluster.state == "Alert":
                if states and all(s == "Running" for s in states):
                    world = self.sim.kube.get(cluster.id)
                    # CKS also needs the API server's /version to answer before it trusts the count.
                    api_up = world is not None and getattr(world, "api_available", lambda: True)()
                    ready = world.ready_node_count() if api_up else -1
                    if api_up and self.cloud_opts["scanner_adds_etcd"]:
                        # KubernetesClusterStartWorker.reconcileAlertCluster (4.21+): etcd nodes
                        # are no Kubernetes nodes, so their count is added to kubectl's.
                        ready += cluster.etcd_nodes
                    if ready == self.expected_ready(cluster):
                        self.set_cluster_state(cluster, "Running", "all nodes Ready")
                elif states and all(s == "Stopped" for s in states):
                    self.set_cluster_state(cluster, "Stopped", "all node VMs Stopped")

    # -- views (CloudStack response objects) -------------------------------------------------

    def owner_fields(self, owner_id: str) -> dict[str, Any]:
        return self.directory.owner_fields(owner_id)

    def tag_views(self, resource_id: str) -> list[dict[str, Any]]:
        return [dict(t) for t in self.tags.get(resource_id, [])]

    def vm_view(self, vm: VM, details: Optional[set[str]] = None, embedded: bool = False) -> dict[str, Any]:
        """A UserVmResponse. ``details`` None means all; ``embedded`` is CKS's nics-only entry."""
        want = (lambda key: True) if details is None or "all" in details else (lambda key: key in details)
        network = self.networks[vm.network_id]
        view: dict[str, Any] = {
            "id": vm.id, "name": vm.name, "displayname": vm.name, **self.owner_fields(vm.owner_id),
            "userid": self.directory.accounts[vm.owner_id].user_id,
            "username": self.directory.accounts[vm.owner_id].name, "created": vm.created,
            "lastupdated": vm.lastupdated, "state": vm.state, "haenable": False, "zoneid": self.vm_zone(vm)["id"],
            "zonename": self.vm_zone(vm)["name"], "hypervisor": "KVM", "isdynamicallyscalable": True, "arch": "x86_64",
            "passwordenabled": False, "rootdeviceid": 0, "rootdevicetype": "ROOT", "ostypeid": self.template_id,
            "osdisplayname": "Ubuntu 22.04 LTS", "vmtype": "cksnode" if vm.cluster_id else "User",
            "deleteprotection": False, "displayvm": True,
        }
        if self.is_admin:
            view["instancename"] = vm.instancename
            if vm.host_id:
                view["hostid"] = vm.host_id
                view["hostname"] = self.hosts[vm.host_id].name
        if vm.keypair:
            view["keypairs"] = vm.keypair
        if vm.active_job is not None:
            view["jobid"] = vm.active_job.id
            view["jobstatus"] = 0
        if not embedded:
            view["details"] = dict(vm.details)
        if embedded or want("nics"):
            view["nic"] = [{
                "id": vm.nic_id, "networkid": network.id, "networkname": network.name,
                "netmask": "255.255.255.0", "gateway": network.gateway, "ipaddress": vm.ipaddress,
                "isdefault": True, "macaddress": vm.macaddress, "traffictype": "Guest", "type": "Isolated",
                "broadcasturi": "vlan://100", "isolationuri": "vlan://100", "deviceid": "0",
                "virtualmachineid": vm.id, "secondaryip": [], "extradhcpoption": [],
            }]
        if embedded:
            view["affinitygroup"] = []
            view["securitygroup"] = []
            view["tags"] = self.tag_views(vm.id)
            return view
        if want("servoff"):
            offering = self.service_offerings[vm.service_offering_id]
            cpu, memory = self.vm_cpu_memory(vm)
            view.update(serviceofferingid=offering.id, serviceofferingname=offering.name, cpunumber=cpu,
                        cpuspeed=offering.cpuspeed, memory=memory)
        if want("tmpl"):
            cluster = self.clusters.get(vm.cluster_id or "")
            name = cluster.template_name if cluster else "ubuntu"
            view.update(templateid=self.template_id, templatename=name, templatedisplaytext=name,
                        templatetype="USER", templateformat="QCOW2")
        if want("diskoff"):
            root = self.root_volume.get(vm.id)
            if root is not None:
                disk = self.disk_offerings[root.disk_offering_id]
                view.update(diskofferingid=disk.id, diskofferingname=disk.name)
        if want("affgrp"):
            view["affinitygroup"] = [
                {"id": g.id, "name": g.name, **self.owner_fields(g.owner_id),
                 **({"description": g.description} if g.description else {})}
                for g in (self.affinity_groups[i] for i in vm.affinity_group_ids)
            ]
        if want("secgrp"):
            view["securitygroup"] = []
        if want("stats") and vm.state == "Running":
            view.update(cpuused="3%", networkkbsread=0, networkkbswrite=0, diskkbsread=0, diskkbswrite=0,
                        diskioread=0, diskiowrite=0, memorykbs=self.vm_cpu_memory(vm)[1] * 1024)
        if want("group"):
            pass  # the nodes belong to no instance group
        view["tags"] = self.tag_views(vm.id)
        return view

    def vm_json(self, vm: VM, details: Optional[set[str]] = None) -> str:
        """``vm_view`` serialised, cached until anything it shows changes (1,000-VM lists stay fast)."""
        root = self.root_volume.get(vm.id)
        key = (
            vm.state, vm.lastupdated, vm.host_id, vm.active_job.id if vm.active_job else None, vm.service_offering_id,
            vm.custom_cpu, vm.custom_memory, tuple(vm.affinity_group_ids), root.disk_offering_id if root else None,
            tuple(sorted(vm.details.items())), tuple((t["key"], t["value"]) for t in self.tags.get(vm.id, ())),
            frozenset(details) if details else None, self.is_admin,
        )
        cached = self._vm_json_cache.get(vm.id)
        if cached is not None and cached[0] == key:
            return cached[1]
        text = json.dumps(self.vm_view(vm, details), separators=(",", ":"))
        self._vm_json_cache[vm.id] = (key, text)
        return text

    def volume_view(self, volume: Volume) -> dict[str, Any]:
        vm = self.vms[volume.vm_id]
        disk = self.disk_offerings[volume.disk_offering_id]
        service = self.service_offerings[vm.service_offering_id]
        view = {
            "id": volume.id, "name": volume.name, "zoneid": self.vm_zone(vm)["id"], "zonename": self.vm_zone(vm)["name"],
            "type": volume.type, "deviceid": 0, "virtualmachineid": vm.id, "vmname": vm.name,
            "vmdisplayname": vm.name, "vmstate": vm.state, "vmtype": "User", "provisioningtype": "thin",
            "size": volume.size, "virtualsize": volume.size, "physicalsize": volume.size // 3,
            "created": volume.created, "state": volume.state, **self.owner_fields(vm.owner_id),
            "storagetype": self.storage_pools[volume.storage_id].scope, "hypervisor": "KVM",
            "storageid": volume.storage_id, "storage": self.storage_pools[volume.storage_id].name,
            "diskofferingid": disk.id, "diskofferingname": disk.name, "diskofferingdisplaytext": disk.displaytext,
            "destroyed": False, "isextractable": False, "quiescevm": False, "supportsstoragesnapshot": False,
            "displayvolume": True, "path": volume.id, "chaininfo": "", "hasannotations": False,
            "tags": self.tag_views(volume.id),
        }
        if volume.type == "ROOT":
            view.update(serviceofferingid=service.id, serviceofferingname=service.name,
                        serviceofferingdisplaytext=service.displaytext)
        if vm.host_id and self.is_admin:
            view.update(clusterid=self.zone_id, clustername="cluster-1", podid=self.zone_id, podname="pod-1")
        return view

    def service_offering_view(self, offering: ServiceOffering) -> dict[str, Any]:
        disk = self.disk_offerings[offering.disk_offering_id]
        return {
            "id": offering.id, "name": offering.name, "displaytext": offering.displaytext, "cpunumber": offering.cpu,
            "cpuspeed": offering.cpuspeed, "memory": offering.memory, "created": offering.created,
            "storagetype": disk.storagetype, "provisioningtype": "thin", "offerha": False, "limitcpuuse": False,
            **({"storagetags": disk.tags} if disk.tags else {}),
            "isvolatile": False, "issystem": False, "defaultuse": False, "iscustomized": offering.iscustomized,
            "iscustomizediops": False, "rootdisksize": offering.rootdisksize, "diskofferingid": disk.id,
            "diskofferingname": disk.name, "diskofferingdisplaytext": disk.displaytext,
            "diskofferingstrictness": offering.diskofferingstrictness,
            "dynamicscalingenabled": offering.dynamicscalingenabled, "state": offering.state,
            "hasannotations": False, "encryptroot": False, "purgeresources": False, "cacheMode": "none",
            "hypervisorsnapshotreserve": 0,
        }

    def disk_offering_view(self, offering: DiskOffering) -> dict[str, Any]:
        view = {
            "id": offering.id, "name": offering.name, "displaytext": offering.displaytext,
            "disksize": offering.size, "created": offering.created, "iscustomized": offering.iscustomized,
            "disksizestrictness": offering.disksizestrictness, "storagetype": offering.storagetype, "provisioningtype": "thin",
            "encrypt": False, "displayoffering": True, "suitableforvirtualmachine": True, "iscustomizediops": False,
            "hasannotations": False, "state": "Active", "cacheMode": "none",
        }
        if offering.tags:
            view["tags"] = offering.tags
        return view

    def affinity_group_view(self, group: AffinityGroup) -> dict[str, Any]:
        view = {
            "id": group.id, "name": group.name, "type": group.type, **self.owner_fields(group.owner_id),
            "virtualmachineIds": [vm.id for vm in self.vms.values() if group.id in vm.affinity_group_ids],
        }
        if group.description:
            view["description"] = group.description
        if group.type == "ExplicitDedication":
            view["dedicatedresources"] = [
                {"resourceid": h, "resourcename": self.hosts[h].name, "resourcetype": "Host"} for h in group.dedicated_host_ids
            ]
        return view

    def host_view(self, host: Host, usage: tuple[int, int], details: Optional[set[str]] = None) -> dict[str, Any]:
        return placement.host_view(self, host, usage, details)

    def vm_zone(self, vm: VM) -> dict[str, Any]:
        """The zone a VM lives in: its cluster's (a VM without one is in the first zone)."""
        cluster = self.clusters.get(vm.cluster_id or "")
        return self.zones[cluster.zone_id if cluster and cluster.zone_id else self.zone_id]

    def network_zone(self, network_id: str) -> dict[str, Any]:
        cluster = self.clusters.get(self.networks[network_id].cluster_id or "")
        return self.zones[cluster.zone_id if cluster and cluster.zone_id else self.zone_id]

    def zone_view(self, zone_id: Optional[str] = None) -> dict[str, Any]:
        zone = self.zones[zone_id or self.zone_id]
        return {
            "id": zone["id"], "name": zone["name"], "networktype": "Advanced", "allocationstate": "Enabled",
            "localstorageenabled": False, "securitygroupsenabled": False, "dns1": "8.8.8.8", "internaldns1": "10.0.0.2",
            "guestcidraddress": "10.1.0.0/16", "type": "Core", "dhcpprovider": "VirtualRouter",
            "hasannotations": False, "ismultiarch": False, "routedmodeenabled": False, "tags": [],
        }

    def cluster_view(self, cluster: Cluster) -> dict[str, Any]:
        offering = self.service_offerings[cluster.service_offering_id]
        network = self.networks[cluster.network_id]
        ip = self.public_ips[cluster.ip_id]
        zone = self.zone_view(cluster.zone_id or None)
        view: dict[str, Any] = {
            "id": cluster.id, "name": cluster.name, "description": cluster.description, "created": cluster.created,
            "clustertype": cluster.clustertype, "state": cluster.state, "zoneid": zone["id"], "zonename": zone["name"],
            **self.owner_fields(cluster.owner_id),
            "serviceofferingid": offering.id, "serviceofferingname": offering.name,
            "templateid": cluster.template_id, "templatename": cluster.template_name,
            "controlnodes": cluster.control_nodes, "masternodes": cluster.control_nodes, "size": cluster.workers,
            "etcdnodes": cluster.etcd_nodes,
            # Strings, as stored in the cluster record (and stale once anyone but CKS changes a VM).
            "cpunumber": str(cluster.cpunumber), "memory": str(cluster.memory),
            "kubernetesversionid": cluster.version_id, "kubernetesversionname": cluster.version_name,
            "networkid": network.id, "associatednetworkname": network.name, "ipaddress": ip.ipaddress,
            "ipaddressid": ip.id, "endpoint": f"https://{ip.ipaddress}:6443/",
            "consoleendpoint": f"https://{ip.ipaddress}/kubernetes-dashboard", "autoscalingenabled": cluster.autoscaling,
            "minsize": cluster.minsize, "maxsize": cluster.maxsize, "csienabled": False, "hasannotations": False,
        }
        if cluster.keypair:
            view["keypair"] = cluster.keypair
        for node_type, offering_id in cluster.type_offering_ids.items():
            typed = self.service_offerings[offering_id]
            view[f"{node_type}offeringid"] = typed.id
            view[f"{node_type}offeringname"] = typed.name
        if cluster.etcd_nodes:
            view["etcdips"] = {ip.id: ip.ipaddress}
        entries = []
        for vm in self.cluster_vms(cluster):
            entry = self.vm_view(vm, embedded=True)
            entry.update(isexternalnode=vm.is_external, isetcdnode=vm.is_etcd,
                         kubernetesnodeversion=cluster.semver)
            entries.append(entry)
        view["virtualmachines"] = entries
        return view

    def job_view(self, job: Job) -> dict[str, Any]:
        status = job.visible_status()
        owner = self.directory.accounts.get(job.caller_id) or self.directory.primary
        domain = self.directory.domains[owner.domain_id]
        view: dict[str, Any] = {
            "jobid": job.id, "cmd": JAVA_CLASSES.get(job.cmd, job.cmd), "jobstatus": status, "jobprocstatus": 0,
            "jobresultcode": job.result_code if status else 0, "created": iso(job.created),
            "userid": owner.user_id, "accountid": owner.id, "account": owner.name,
            "domainid": domain.id, "domainpath": domain.path, "managementserverid": self.zone_id,
            "managementservername": "cks-sim",
        }
        if job.instance_type:
            view["jobinstancetype"] = job.instance_type
            view["jobinstanceid"] = job.instance_id
        if status:
            if job.result is not None:
                view["jobresulttype"] = "object"
                view["jobresult"] = self._restricted(job.result)
            view["completed"] = iso(job.completed or time.time())
        return view

    def _restricted(self, result: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
        """ResponseView.Restricted for a caller that is not a root admin: no host, no instance name."""
        if self.is_admin or not result or "virtualmachine" not in result:
            return result
        vm = {k: v for k, v in result["virtualmachine"].items() if k not in ("hostid", "hostname", "instancename")}
        return dict(result, virtualmachine=vm)

    # -- snapshot ----------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        usage = self.host_usage()
        return {
            "zone": {"id": self.zone_id, "name": self.zone_name},
            "zones": [{"id": z["id"], "name": z["name"]} for z in self.zones.values()],
            "hosts": [{"id": h.id, "name": h.name, "cpu": h.cpu, "memory": h.memory, "state": h.state,
                       "resourcestate": h.resourcestate, "cluster": self.host_clusters[h.cluster_id].name,
                       "cpu_used_mhz": usage[h.id][0], "memory_used": usage[h.id][1]} for h in self.hosts.values()],
            "clusters": [{
                "id": c.id, "name": c.name, "state": c.state,
                "vms": [{
                    "id": vm.id, "name": vm.name, "node_type": vm.node_type, "state": vm.state,
                    "host": self.hosts[vm.host_id].name if vm.host_id else None,
                    "offering": self.service_offerings[vm.service_offering_id].name,
                    "cpu": self.vm_cpu_memory(vm)[0], "memory": self.vm_cpu_memory(vm)[1],
                    "root_gb": self.root_volume[vm.id].size // GB,
                    "affinity_groups": [self.affinity_groups[g].name for g in vm.affinity_group_ids],
                    "isetcdnode": vm.is_etcd, "isexternalnode": vm.is_external,
                } for vm in self.cluster_vms(c)],
            } for c in self.clusters.values()],
            "jobs_pending": sum(1 for j in self.jobs.values() if j.status == 0),
        }

    def vms_of_cluster_spec(self, cluster: Cluster) -> list[dict[str, Any]]:
        """The node list handed to KubeWorld (etcd VMs are not Kubernetes nodes)."""
        out = []
        for vm in self.cluster_vms(cluster):
            if vm.is_etcd:
                continue
            cpu, memory = self.vm_cpu_memory(vm)
            out.append({"name": vm.name.lower(), "node_type": vm.node_type, "cpu": cpu, "memory_mb": memory,
                        "vm_running": vm.state == "Running"})
        return out

    def etcd_members(self, cluster: Cluster) -> tuple[list[str], str]:
        """VM names of the etcd members and the mode: external etcd nodes, else stacked on control."""
        etcd = [vm.name for vm in self.cluster_vms(cluster) if vm.is_etcd]
        if etcd:
            return etcd, "external"
        return [vm.name for vm in self.cluster_vms(cluster) if vm.node_type == "control"], "stacked"
