# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The joined view of a CKS cluster: each node is a CloudStack VM plus its Kubernetes node.

``build_view`` is a pure function from the raw API dicts (CloudStack list responses and
Kubernetes Node objects in API JSON form), so every decision made on a view can be tested
without a cloud. ``_model.loader.ClusterLoader`` fetches those dicts with a fixed number of list calls,
whatever the size of the cluster: reading node settings per VM would not scale and would
hammer the management server.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput

CONTROL = "control"


WORKER = "worker"


ETCD = "etcd"


#: Rollout order: external etcd first, then the control plane, then the workers.
NODE_TYPES: tuple[str, ...] = (ETCD, CONTROL, WORKER)


ROLLOUT_ANNOTATION = "cloudstack.apache.org/rollout-boot-id"


#: The annotation's value for a node that reported no boot ID when it was cordoned. An empty value
#: would read as no annotation: the node would look cordoned by someone else and stay cordoned.
#: Boot IDs are UUIDs, so any boot ID reported later differs from it.
NO_BOOT_ID = "none-reported"


#: Set (value: the time) right before the cycle sends stopVirtualMachine; removed with the boot-ID
#: one. Release tells by it a node that never went down from one whose Ready may be stale.
STOP_ANNOTATION = "cloudstack.apache.org/rollout-stop-sent"


DEDICATION = "ExplicitDedication"


#: Taints the node-lifecycle controller puts on a node it has lost: with them a Ready=True is not Ready.
UNHEALTHY_TAINTS = frozenset({"node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"})


# CKS names control VMs <prefix>-control-<hex>; clusters from before 4.16 used -master.
_CONTROL_NAME = re.compile(r"-(control|master)(-[0-9a-f]+)?$")


UUID_PATTERN = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)


_EMPTY: Mapping[str, str] = MappingProxyType({})


def _empty() -> Mapping[str, Any]:
    return _EMPTY


@dataclass(frozen=True)
class AffinityGroup:
    id: str
    name: str
    type: str
    # Its owner as listAffinityGroups names it (None where the group was not listed): who may
    # send it in updateVMAffinityGroup depends on it (AffinityGroupAccessChecker).
    # Not compared: a group is the same group whoever lists it.
    account: Optional[str] = field(default=None, compare=False)
    domain_id: Optional[str] = field(default=None, compare=False)
    domain_path: Optional[str] = field(default=None, compare=False)
    project_id: Optional[str] = field(default=None, compare=False)
    project: Optional[str] = field(default=None, compare=False)

    @property
    def owner(self) -> str:
        """The owner in an operator's words: ``account alice`` or ``project platform``."""
        if self.project_id:
            return f"project {self.project or self.project_id}"
        return f"account {self.account}" if self.account else "an owner not listed"

    @property
    def is_dedication(self) -> bool:
        """CKS adds the ExplicitDedication group itself; it is never compared and always kept."""
        return self.type == DEDICATION


@dataclass(frozen=True)
class Offering:
    """A service offering (listServiceOfferings)."""

    id: str
    name: str
    cpu: int
    memory_mb: int
    rootdisksize_gb: int = 0  # > 0: the offering fixes the root disk size
    disk_offering_id: Optional[str] = None
    disk_offering_strict: bool = False  # diskofferingstrictness
    customized: bool = False
    state: str = "Active"
    storage_type: str = "shared"  # shared | local: where its volumes may live
    storage_tags: tuple[str, ...] = ()
    cpu_speed_mhz: int = 0  # per core; what the deployment planner counts a VM's CPU in


@dataclass(frozen=True)
class DiskOffering:
    """A disk offering (listDiskOfferings; compute-only ones are never listed)."""

    id: str
    name: str
    size_gb: int
    customized: bool
    strict: bool  # disksizestrictness: disks made from it cannot be resized


@dataclass(frozen=True)
class Node:
    """One node of the cluster: its VM, root volume and (for control and worker) Kubernetes node."""

    name: str  # Kubernetes node name = VM name in lowercase
    vm_id: str
    vm_name: str
    node_type: str  # control | worker | etcd
    vm_state: str
    offering_id: Optional[str]
    offering_name: Optional[str]
    cpu: int
    memory_mb: int
    root_volume_id: Optional[str]
    root_disk_gb: Optional[int]  # None: no ROOT volume visible, the disk is not compared
    root_disk_offering_id: Optional[str]
    root_disk_strict: bool
    offering_root_gb: int
    affinity_groups: tuple[AffinityGroup, ...]
    host_id: Optional[str]
    k8s_present: bool = False
    ready: bool = False
    not_ready_why: str = ""  # what makes it not Ready ("Ready=Unknown, NodeStatusUnknown"; a taint)
    boot_id: Optional[str] = None
    unschedulable: bool = False
    rollout_boot_id: Optional[str] = None
    annotations: Mapping[str, str] = field(default_factory=_empty, hash=False)
    labels: Mapping[str, str] = field(default_factory=_empty, hash=False)
    taint_keys: frozenset[str] = frozenset()
    ip_address: Optional[str] = None
    external: bool = False  # added with addNodesToKubernetesCluster
    root_storage_type: Optional[str] = None  # shared | local: the ROOT volume's pool (listVolumes storagetype)
    # What the kubelet reports (status.capacity): None when not reported. Beside ``cpu`` and
    # ``memory_mb`` (the VM's), it shows a kubelet that has not seen a live scale yet.
    kubelet_cpu: Optional[int] = None
    kubelet_memory: Optional[str] = None  # the quantity as reported ("8388608Ki")

    @property
    def running(self) -> bool:
        return self.vm_state == "Running"

    @property
    def annotated(self) -> bool:
        """Carries the annotation of a rollout that cordoned it."""
        return self.rollout_boot_id is not None

    @property
    def back(self) -> bool:
        """Ready with a boot ID other than the one recorded before the stop.

        A Ready condition alone proves nothing: it may be the one from before the stop.
        """
        return (self.annotated and self.ready and self.boot_id is not None
                and self.boot_id != self.rollout_boot_id)

    @property
    def cordoned_by_others(self) -> bool:
        """Cordoned, but not by a rollout: never touched."""
        return self.unschedulable and not self.annotated

    @property
    def is_kubernetes_node(self) -> bool:
        return self.node_type != ETCD

    @property
    def dedication_group_ids(self) -> tuple[str, ...]:
        return tuple(g.id for g in self.affinity_groups if g.is_dedication)

    @property
    def chosen_group_ids(self) -> frozenset[str]:
        """The groups an operator chose (dedication groups left out)."""
        return frozenset(g.id for g in self.affinity_groups if not g.is_dedication)


@dataclass(frozen=True)
class ClusterView:
    id: str
    name: str
    state: str  # the CKS cluster state
    offering_id: Optional[str]  # the cluster-wide serviceofferingid
    node_offerings: Mapping[str, str]  # per type, where CloudStack reports one
    nodes: tuple[Node, ...]
    external_etcd: bool
    offerings: Mapping[str, Offering]
    disk_offerings: Mapping[str, DiskOffering]
    affinity_groups: Mapping[str, AffinityGroup]
    account: Optional[str] = None
    domain_id: Optional[str] = None
    project_id: Optional[str] = None
    zone_id: Optional[str] = None
    network_id: Optional[str] = None
    endpoint: Optional[str] = None
    recorded_cores: Optional[int] = None  # CloudStack's own (possibly stale) cpunumber
    recorded_memory_mb: Optional[int] = None
    #: Kubernetes nodes that match no VM of the cluster, name -> Ready.
    unmatched_k8s_nodes: Mapping[str, bool] = field(default_factory=_empty, hash=False)
    #: The Node objects as the view's list returned them, by lower-case name: a batch's first look
    #: at its nodes (its writes carry their resourceVersion, so a change since is a 409, not lost).
    k8s_objects: Mapping[str, Mapping[str, Any]] = field(default_factory=_empty, hash=False, compare=False)
    #: The resourceVersion of that list ("" if unknown): the batch's watch of its nodes starts there.
    k8s_version: str = field(default="", hash=False, compare=False)

    def nodes_of(self, node_type: str) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.node_type == node_type)

    @cached_property
    def _nodes_by_name(self) -> Mapping[str, Node]:
        # Planning looks every node of the cluster up by name: a scan each time made it quadratic
        # (3,000 nodes cost 0.73 s in this lookup alone). The first node of a name wins, as
        # the scan had it.
        index: dict[str, Node] = {}
        for node in self.nodes:
            index.setdefault(node.name, node)
        return MappingProxyType(index)

    def find_node(self, name: str) -> Optional[Node]:
        return self._nodes_by_name.get(name.lower())

    def node(self, name: str) -> Node:
        found = self.find_node(name)
        if found is None:
            raise InvalidInput("node", name, f"not a node of cluster {self.name}; its nodes are "
                               f"{', '.join(n.name for n in self.nodes) or 'none'}")
        return found

    def offering_name(self, offering_id: Optional[str]) -> str:
        if offering_id is None:
            return "none"
        offering = self.offerings.get(offering_id)
        return offering.name if offering else offering_id

    def group(self, group_id: str) -> Optional[AffinityGroup]:
        """A group by id, from listAffinityGroups or, failing that, from a node that has it."""
        group = self.affinity_groups.get(group_id)
        if group is not None:
            return group
        for node in self.nodes:
            for g in node.affinity_groups:
                if g.id == group_id:
                    return g
        return None


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


def _opt_str(value: Any) -> Optional[str]:
    return str(value) if value not in (None, "") else None


def node_type_of(vm: Mapping[str, Any]) -> str:
    """The reference's rule: the API has no control-node flag, so the VM name says it."""
    if _bool(vm.get("isetcdnode")):
        return ETCD
    if _bool(vm.get("isexternalnode")):
        return WORKER
    if _CONTROL_NAME.search(str(vm.get("name", "")).lower()):
        return CONTROL
    return WORKER


def _offering(raw: Mapping[str, Any]) -> Offering:
    return Offering(
        id=str(raw["id"]), name=str(raw.get("name", raw["id"])),
        cpu=_int(raw.get("cpunumber")), memory_mb=_int(raw.get("memory")),
        rootdisksize_gb=_int(raw.get("rootdisksize")),
        disk_offering_id=_opt_str(raw.get("diskofferingid")),
        disk_offering_strict=_bool(raw.get("diskofferingstrictness")),
        customized=_bool(raw.get("iscustomized")),
        state=str(raw.get("state") or "Active"),
        storage_type=str(raw.get("storagetype") or "shared").lower(),
        storage_tags=_tags(raw.get("storagetags")),
        cpu_speed_mhz=_int(raw.get("cpuspeed")),
    )


def _tags(value: Any) -> tuple[str, ...]:
    return tuple(t.strip() for t in str(value or "").split(",") if t.strip())


def _listed_group(raw: Mapping[str, Any]) -> AffinityGroup:
    return AffinityGroup(id=str(raw["id"]), name=str(raw.get("name", raw["id"])), type=str(raw.get("type", "")),
                         account=_opt_str(raw.get("account")), domain_id=_opt_str(raw.get("domainid")),
                         domain_path=_opt_str(raw.get("domainpath")), project_id=_opt_str(raw.get("projectid")),
                         project=_opt_str(raw.get("project")))


def _disk_offering(raw: Mapping[str, Any]) -> DiskOffering:
    return DiskOffering(
        id=str(raw["id"]), name=str(raw.get("name", raw["id"])),
        size_gb=_int(raw.get("disksize")), customized=_bool(raw.get("iscustomized")),
        strict=_bool(raw.get("disksizestrictness")),
    )


def _group(raw: Mapping[str, Any], known: Mapping[str, AffinityGroup]) -> AffinityGroup:
    gid = str(raw["id"])
    listed = known.get(gid)
    if listed is not None:
        return listed
    # Not in listAffinityGroups (a domain-level group, say): the VM's entry may carry the type.
    return AffinityGroup(id=gid, name=str(raw.get("name", gid)), type=str(raw.get("type", "")))


def _root_volumes(volumes: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    gone = {"Destroy", "Destroying", "Expunging", "Expunged"}
    by_vm: dict[str, Mapping[str, Any]] = {}
    for vol in volumes:
        if str(vol.get("type", "")).upper() != "ROOT" or not vol.get("virtualmachineid"):
            continue
        if vol.get("state") in gone:
            continue
        by_vm.setdefault(str(vol["virtualmachineid"]), vol)
    return by_vm


def _default_ip(vm: Mapping[str, Any]) -> Optional[str]:
    nics = vm.get("nic") or []
    for nic in nics:
        if _bool(nic.get("isdefault")) and nic.get("ipaddress"):
            return str(nic["ipaddress"])
    for nic in nics:
        if nic.get("ipaddress"):
            return str(nic["ipaddress"])
    return _opt_str(vm.get("ipaddress"))


@dataclass(frozen=True)
class _KubeNode:
    ready: bool
    not_ready_why: str
    boot_id: Optional[str]
    unschedulable: bool
    annotations: Mapping[str, str]
    labels: Mapping[str, str]
    taint_keys: frozenset[str]
    cpu: Optional[int]
    memory: Optional[str]


def not_ready_why(raw: Mapping[str, Any]) -> str:
    """Why a Kubernetes node does not count as Ready; "" when it does.

    A node counts as Ready when its Ready condition is True and it carries neither taint the node
    lifecycle controller puts on a node it does not trust. kubectl shows such a node as Ready while
    the taint is there (the API server gives every new Node ``not-ready`` until the controller has
    read its condition), so the reason names the taint.
    """
    conditions = (raw.get("status") or {}).get("conditions") or []
    ready: Mapping[str, Any] = next((c for c in conditions if c.get("type") == "Ready"), {})
    if ready.get("status") != "True":
        reason = f", {ready['reason']}" if ready.get("reason") else ""
        return f"Ready={ready.get('status', 'missing')}{reason}"
    taints = sorted({str(t.get("key")) for t in (raw.get("spec") or {}).get("taints") or []} & UNHEALTHY_TAINTS)
    return f"tainted {', '.join(taints)}" if taints else ""


def _kube_node(raw: Mapping[str, Any]) -> _KubeNode:
    metadata = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    taints = {t.get("key") for t in (spec.get("taints") or [])}
    info = status.get("nodeInfo") or status.get("node_info") or {}
    boot_id = info.get("bootID") if "bootID" in info else info.get("boot_id")
    why = not_ready_why(raw)
    return _KubeNode(
        ready=not why,
        not_ready_why=why,
        boot_id=_opt_str(boot_id),
        unschedulable=_bool(spec.get("unschedulable")),
        annotations=MappingProxyType(dict(metadata.get("annotations") or {})),
        labels=MappingProxyType(dict(metadata.get("labels") or {})),
        taint_keys=frozenset(str(k) for k in taints if k),
        cpu=_opt_int((status.get("capacity") or {}).get("cpu")),
        memory=_opt_str((status.get("capacity") or {}).get("memory")),
    )


def _opt_int(value: Any) -> Optional[int]:
    """A whole number as Kubernetes writes a CPU count ("4"); None for anything else ("3500m")."""
    return int(value) if isinstance(value, (int, str)) and str(value).isdigit() else None


def build_view(
    cluster: Mapping[str, Any],
    vms: Sequence[Mapping[str, Any]],
    volumes: Sequence[Mapping[str, Any]],
    service_offerings: Sequence[Mapping[str, Any]],
    disk_offerings: Sequence[Mapping[str, Any]],
    affinity_groups: Sequence[Mapping[str, Any]],
    k8s_nodes: Sequence[Mapping[str, Any]],
    k8s_version: str = "",
) -> ClusterView:
    """Join the raw API answers into one view. Pure: no I/O, input dicts are not changed.

    ``cluster`` is one listKubernetesClusters entry; its ``virtualmachines`` say which VMs
    belong to the cluster and their etcd/external flags. ``vms`` are listVirtualMachines
    entries (they carry the offering and affinity groups the embedded entries lack); extra VMs
    are ignored. ``volumes`` may hold any volumes: ROOT ones are matched by VM id.
    """
    offerings = {str(o["id"]): _offering(o) for o in service_offerings}
    disks = {str(d["id"]): _disk_offering(d) for d in disk_offerings}
    groups = {str(g["id"]): _listed_group(g) for g in affinity_groups}
    full_vms = {str(v["id"]): v for v in vms if v.get("id")}
    roots = _root_volumes(volumes)
    kube = {str((k.get("metadata") or {}).get("name", "")).lower(): k for k in k8s_nodes}
    matched: set[str] = set()

    nodes: list[Node] = []
    for embedded in cluster.get("virtualmachines") or []:
        vm_id = str(embedded["id"])
        # The embedded entry has the cluster flags; the full entry has the settings.
        vm: dict[str, Any] = {**embedded, **full_vms.get(vm_id, {})}
        for flag in ("isetcdnode", "isexternalnode"):
            if flag in embedded:
                vm[flag] = embedded[flag]
        vm_name = str(vm.get("name", vm_id))
        name = vm_name.lower()
        node_type = node_type_of(vm)
        offering_id = _opt_str(vm.get("serviceofferingid"))
        offering = offerings.get(offering_id) if offering_id else None
        root = roots.get(vm_id)
        root_disk_offering_id = _opt_str(root.get("diskofferingid")) if root else None
        root_disk = disks.get(root_disk_offering_id) if root_disk_offering_id else None
        kube_node: Optional[_KubeNode] = None
        if node_type != ETCD and name in kube:
            kube_node = _kube_node(kube[name])
            matched.add(name)
        annotations = kube_node.annotations if kube_node else _EMPTY
        nodes.append(Node(
            name=name, vm_id=vm_id, vm_name=vm_name, node_type=node_type,
            vm_state=str(vm.get("state", "Unknown")),
            offering_id=offering_id,
            offering_name=_opt_str(vm.get("serviceofferingname")) or (offering.name if offering else None),
            cpu=_int(vm.get("cpunumber"), offering.cpu if offering else 0),
            memory_mb=_int(vm.get("memory"), offering.memory_mb if offering else 0),
            root_volume_id=_opt_str(root.get("id")) if root else None,
            root_disk_gb=(_int(root.get("size")) >> 30) if root else None,
            root_disk_offering_id=root_disk_offering_id,
            root_disk_strict=bool((root_disk and root_disk.strict)
                                  or (offering and offering.disk_offering_strict)),
            offering_root_gb=offering.rootdisksize_gb if offering else 0,
            affinity_groups=tuple(_group(g, groups) for g in vm.get("affinitygroup") or []),
            host_id=_opt_str(vm.get("hostid")),
            k8s_present=kube_node is not None,
            ready=kube_node.ready if kube_node else False,
            not_ready_why=kube_node.not_ready_why if kube_node else "",
            boot_id=kube_node.boot_id if kube_node else None,
            unschedulable=kube_node.unschedulable if kube_node else False,
            # An empty value (written by an earlier version) is still the rollout's annotation.
            rollout_boot_id=(_opt_str(annotations.get(ROLLOUT_ANNOTATION)) or NO_BOOT_ID
                             if ROLLOUT_ANNOTATION in annotations else None),
            annotations=annotations,
            labels=kube_node.labels if kube_node else _EMPTY,
            taint_keys=kube_node.taint_keys if kube_node else frozenset(),
            ip_address=_default_ip(vm),
            external=_bool(vm.get("isexternalnode")),
            root_storage_type=_opt_str(root.get("storagetype")) if root else None,
            kubelet_cpu=kube_node.cpu if kube_node else None,
            kubelet_memory=kube_node.memory if kube_node else None,
        ))

    node_offerings = {t: str(cluster[f"{t}offeringid"]) for t in (CONTROL, WORKER, ETCD)
                      if cluster.get(f"{t}offeringid")}
    unmatched = {name: _kube_node(raw).ready for name, raw in kube.items()
                 if name and name not in matched}
    return ClusterView(
        id=str(cluster["id"]), name=str(cluster.get("name", cluster["id"])),
        state=str(cluster.get("state", "Unknown")),
        offering_id=_opt_str(cluster.get("serviceofferingid")),
        node_offerings=MappingProxyType(node_offerings),
        nodes=tuple(nodes),
        external_etcd=any(n.node_type == ETCD for n in nodes) or _int(cluster.get("etcdnodes")) > 0,
        offerings=MappingProxyType(offerings),
        disk_offerings=MappingProxyType(disks),
        affinity_groups=MappingProxyType(groups),
        account=_opt_str(cluster.get("account")),
        domain_id=_opt_str(cluster.get("domainid")),
        project_id=_opt_str(cluster.get("projectid")),
        zone_id=_opt_str(cluster.get("zoneid")),
        network_id=_opt_str(cluster.get("networkid")),
        endpoint=_opt_str(cluster.get("endpoint")),
        recorded_cores=_int(cluster["cpunumber"]) if cluster.get("cpunumber") not in (None, "") else None,
        recorded_memory_mb=_int(cluster["memory"]) if cluster.get("memory") not in (None, "") else None,
        unmatched_k8s_nodes=MappingProxyType(unmatched),
        k8s_objects=MappingProxyType(kube),
        k8s_version=k8s_version,
    )


def node_names(nodes: Iterable[Node]) -> str:
    """The nodes' names for a message: ``a, b, c``."""
    return ", ".join(n.name for n in nodes)
