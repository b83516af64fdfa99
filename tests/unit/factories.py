# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Raw CloudStack and Kubernetes API dicts for a CKS cluster, and the view built from them.

Tests describe a cluster in operator words (3 control nodes, worker 2 stopped, ...); the
factory turns that into the dicts the APIs return, with the field names of the reference, and
calls the real ``build_view``. So every plan test also exercises the join.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Optional

from fakes import FakeCloudStack, FakeKube

from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ClusterView, build_view
from ansible_collections.cloudstack.cks.plugins.module_utils._model.loader import ClusterLoader

GIB = 1 << 30

SERVICE_OFFERINGS: dict[str, dict[str, Any]] = {
    "medium": {"name": "cks-medium", "cpunumber": 2, "memory": 4096},
    "large": {"name": "cks-large", "cpunumber": 4, "memory": 8192},
    "xlarge": {"name": "cks-xlarge", "cpunumber": 8, "memory": 16384},
    "tiny": {"name": "cks-tiny", "cpunumber": 1, "memory": 1024},
    "custom": {"name": "cks-custom", "cpunumber": 0, "memory": 0, "iscustomized": True},
    "fixed-root": {"name": "cks-fixed-root", "cpunumber": 4, "memory": 8192, "rootdisksize": 40},
    "strict": {"name": "cks-strict", "cpunumber": 4, "memory": 8192, "diskofferingid": "do-fixed-50",
               "diskofferingname": "fixed-50", "diskofferingstrictness": True},
}
DISK_OFFERINGS: dict[str, dict[str, Any]] = {
    "custom-root": {"name": "custom-root", "disksize": 0, "iscustomized": True, "disksizestrictness": False},
    "fixed-50": {"name": "fixed-50", "disksize": 50, "iscustomized": False, "disksizestrictness": True},
}
AFFINITY_GROUPS: dict[str, str] = {
    "dedicated": "ExplicitDedication",
    "spread": "host anti-affinity",
    "control-spread": "host anti-affinity",
    "soft": "non-strict host anti-affinity",
}


def so(key: str) -> str:
    """The id of a service offering of the factory."""
    return f"so-{key}"


def do(key: str) -> str:
    return f"do-{key}"


def ag(key: str) -> str:
    return f"ag-{key}"


@dataclass
class NodeSpec:
    """One node as a test describes it."""

    name: str
    node_type: str
    offering: str
    root_gb: Optional[int]
    root_offering: str = "custom-root"  # a key of DISK_OFFERINGS, or "compute-only"
    groups: list[str] = field(default_factory=list)  # keys of AFFINITY_GROUPS
    state: str = "Running"
    k8s: bool = True
    ready: bool = True
    boot_id: str = ""
    annotation: Optional[str] = None
    unschedulable: bool = False
    taints: list[str] = field(default_factory=list)
    external: bool = False
    cpu: Optional[int] = None  # override the VM's cpunumber (default: the offering's)


class ClusterFactory:
    """A CKS cluster described in operator words. ``c(1)``, ``w(2)``, ``e(3)`` name its nodes."""

    def __init__(
        self,
        name: str = "demo",
        control: int = 3,
        workers: int = 4,
        etcd: int = 0,
        offering: str = "medium",
        root_gb: int = 20,
        node_offerings: Optional[dict[str, str]] = None,
        dedication: bool = True,
        groups: Optional[dict[str, list[str]]] = None,
        state: str = "Running",
        project: bool = False,
    ) -> None:
        self.name = name
        self.id = f"cluster-{name}"
        self.offering = offering
        self.node_offerings = dict(node_offerings or {})
        self.state = state
        self.project = project
        self.extra_k8s_nodes: list[dict[str, Any]] = []
        self.listed_groups = dict(AFFINITY_GROUPS)
        self.nodes: list[NodeSpec] = []
        groups = groups or {}
        base = 0x18F2A3B4C00
        counts = {"etcd": etcd, "control": control, "worker": workers}
        serial = 0
        for node_type in ("control", "etcd", "worker"):  # CKS creates control nodes first
            for i in range(counts[node_type]):
                serial += 1
                suffix = f"{base + serial:x}"
                if node_type == "control":
                    vm_name = f"{name}-control-{suffix}"
                elif node_type == "etcd":
                    vm_name = f"{name}-etcd-{i + 1}-{suffix}"
                else:
                    vm_name = f"{name}-node-{suffix}"
                node_groups = (["dedicated"] if dedication else []) + list(groups.get(node_type, []))
                self.nodes.append(NodeSpec(
                    name=vm_name, node_type=node_type,
                    offering=self.node_offerings.get(node_type, offering), root_gb=root_gb,
                    groups=node_groups, k8s=node_type != "etcd", boot_id=f"boot-{vm_name}-1",
                ))

    # -- naming -------------------------------------------------------------------------------
    def of(self, node_type: str) -> list[NodeSpec]:
        return [n for n in self.nodes if n.node_type == node_type]

    def c(self, i: int) -> str:
        return self.of("control")[i - 1].name

    def w(self, i: int) -> str:
        return self.of("worker")[i - 1].name

    def e(self, i: int) -> str:
        return self.of("etcd")[i - 1].name

    def spec(self, name: str) -> NodeSpec:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    # -- changes ------------------------------------------------------------------------------
    def set(self, *names: str, **changes: Any) -> ClusterFactory:
        for name in names:
            spec = self.spec(name)
            for key, value in changes.items():
                if not hasattr(spec, key):
                    raise AttributeError(key)
                setattr(spec, key, value)
        return self

    def stop(self, *names: str) -> ClusterFactory:
        """The VM is stopped; its node goes NotReady (the boot ID stays the old one)."""
        return self.set(*names, state="Stopped", ready=False)

    def cordon_for_rollout(self, *names: str) -> ClusterFactory:
        for name in names:
            spec = self.spec(name)
            spec.annotation = spec.boot_id
            spec.unschedulable = True
        return self

    def reboot(self, *names: str) -> ClusterFactory:
        """The node came back: Ready with a new boot ID."""
        for name in names:
            spec = self.spec(name)
            spec.state, spec.ready = "Running", True
            spec.boot_id = spec.boot_id.rsplit("-", 1)[0] + f"-{int(spec.boot_id.rsplit('-', 1)[1]) + 1}"
        return self

    def add_external_worker(self, vm_name: str) -> str:
        self.nodes.append(NodeSpec(name=vm_name, node_type="worker", offering=self.offering,
                                   root_gb=self.nodes[0].root_gb if self.nodes else 20,
                                   external=True, boot_id=f"boot-{vm_name.lower()}-1"))
        return vm_name

    # -- raw API dicts ------------------------------------------------------------------------
    def vm_id(self, name: str) -> str:
        return f"vm-{name}"

    def raw_cluster(self) -> dict[str, Any]:
        cluster: dict[str, Any] = {
            "id": self.id, "name": self.name, "state": self.state,
            "serviceofferingid": so(self.offering),
            "serviceofferingname": SERVICE_OFFERINGS[self.offering]["name"],
            "controlnodes": len(self.of("control")), "size": len(self.of("worker")),
            "etcdnodes": len(self.of("etcd")),
            "account": "admin", "domainid": "domain-root", "zoneid": "zone-1",
            "networkid": "net-1", "endpoint": "https://10.0.0.1:6443/",
            "cpunumber": str(sum(SERVICE_OFFERINGS[n.offering]["cpunumber"] for n in self.nodes)),
            "memory": str(sum(SERVICE_OFFERINGS[n.offering]["memory"] for n in self.nodes)),
            # Embedded entries carry only nics-level detail: no offering, no groups.
            "virtualmachines": [
                {"id": self.vm_id(n.name), "name": n.name, "displayname": n.name, "state": n.state,
                 "isetcdnode": n.node_type == "etcd", "isexternalnode": n.external,
                 "kubernetesnodeversion": "1.30.4", "affinitygroup": []}
                for n in self.nodes
            ],
        }
        if self.project:
            cluster["projectid"] = "project-1"
        for node_type, key in self.node_offerings.items():
            cluster[f"{node_type}offeringid"] = so(key)
            cluster[f"{node_type}offeringname"] = SERVICE_OFFERINGS[key]["name"]
        return cluster

    def raw_vms(self) -> list[dict[str, Any]]:
        vms = []
        for i, n in enumerate(self.nodes):
            offering = SERVICE_OFFERINGS[n.offering]
            vms.append({
                "id": self.vm_id(n.name), "name": n.name, "displayname": n.name, "state": n.state,
                "serviceofferingid": so(n.offering), "serviceofferingname": offering["name"],
                "cpunumber": n.cpu if n.cpu is not None else offering["cpunumber"],
                "memory": offering["memory"], "hostid": f"host-{i % 3 + 1}", "vmtype": "cksnode",
                "affinitygroup": [{"id": ag(g), "name": g, "account": "admin"} for g in n.groups],
                "nic": [{"id": f"nic-{i}", "ipaddress": f"10.1.1.{i + 10}", "isdefault": True,
                         "networkid": "net-1"}],
            })
        return vms

    def raw_volumes(self) -> list[dict[str, Any]]:
        volumes: list[dict[str, Any]] = [
            # Someone else's volumes are listed too; they must not be matched.
            {"id": "vol-other", "type": "ROOT", "size": 100 * GIB, "virtualmachineid": "vm-other",
             "diskofferingid": do("custom-root"), "state": "Ready"},
        ]
        for n in self.nodes:
            if n.root_gb is None:
                continue
            offering_id = (f"do-compute-only-{n.offering}" if n.root_offering == "compute-only"
                           else do(n.root_offering))
            volumes.append({"id": f"vol-{n.name}", "type": "ROOT", "size": n.root_gb * GIB,
                            "virtualmachineid": self.vm_id(n.name), "diskofferingid": offering_id,
                            "state": "Ready"})
            volumes.append({"id": f"vol-{n.name}-data", "type": "DATADISK", "size": 500 * GIB,
                            "virtualmachineid": self.vm_id(n.name), "diskofferingid": do("custom-root"),
                            "state": "Ready"})
        return volumes

    def raw_service_offerings(self) -> list[dict[str, Any]]:
        return [{"id": so(k), **copy.deepcopy(v)} for k, v in SERVICE_OFFERINGS.items()]

    def raw_disk_offerings(self) -> list[dict[str, Any]]:
        return [{"id": do(k), **copy.deepcopy(v)} for k, v in DISK_OFFERINGS.items()]

    def raw_affinity_groups(self) -> list[dict[str, Any]]:
        return [{"id": ag(k), "name": k, "type": t, "account": "admin"} for k, t in self.listed_groups.items()]

    def raw_k8s_nodes(self) -> list[dict[str, Any]]:
        nodes = []
        for n in self.nodes:
            if not n.k8s or n.node_type == "etcd":
                continue
            annotations = {"node.alpha.kubernetes.io/ttl": "0"}
            if n.annotation is not None:
                annotations["cloudstack.apache.org/rollout-boot-id"] = n.annotation
            taints = [{"key": k, "effect": "NoSchedule"} for k in n.taints]
            if n.unschedulable:
                taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
            spec: dict[str, Any] = {"taints": taints}
            if n.unschedulable:
                spec["unschedulable"] = True
            nodes.append({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": n.name.lower(), "annotations": annotations,
                             "labels": {"kubernetes.io/hostname": n.name.lower()}},
                "spec": spec,
                "status": {
                    "conditions": [
                        {"type": "MemoryPressure", "status": "False"},
                        {"type": "Ready", "status": "True" if n.ready else "Unknown"},
                    ],
                    "nodeInfo": {"bootID": n.boot_id, "kubeletVersion": "v1.30.4"},
                },
            })
        return nodes + copy.deepcopy(self.extra_k8s_nodes)

    def raw(self) -> tuple[Any, ...]:
        return (self.raw_cluster(), self.raw_vms(), self.raw_volumes(), self.raw_service_offerings(),
                self.raw_disk_offerings(), self.raw_affinity_groups(), self.raw_k8s_nodes())

    def view(self) -> ClusterView:
        return build_view(*self.raw())


def cloud_for(factory: ClusterFactory, clusters: list[dict]) -> FakeCloudStack:
    """CloudStack answering the loader's list calls from the factory's raw dicts, filtering as CloudStack would."""

    def clusters_named(params: dict[str, Any]) -> list[dict]:
        if "id" in params:
            return [c for c in clusters if c["id"] == params["id"]]
        return [c for c in clusters if c["name"] == params.get("name")]

    def vms(params: dict[str, Any]) -> list[dict]:
        found = factory.raw_vms() + [{"id": "vm-other", "name": "other", "state": "Running"}]
        if "ids" in params:
            ids = set(params["ids"].split(","))
            return [vm for vm in found if vm["id"] in ids]
        return found

    return FakeCloudStack(lists={
        "listKubernetesClusters": clusters_named,
        "listVirtualMachines": vms,
        "listVolumes": lambda params: [v for v in factory.raw_volumes() if v["type"] == params.get("type", v["type"])],
        "listServiceOfferings": lambda _params: factory.raw_service_offerings(),
        "listDiskOfferings": lambda _params: factory.raw_disk_offerings(),
        "listAffinityGroups": lambda _params: factory.raw_affinity_groups(),
    })


def loader_for(f: ClusterFactory, clusters: list[dict] | None = None) -> tuple[ClusterLoader, FakeCloudStack, FakeKube]:
    """The collection's ClusterLoader over fakes answering from the factory (``cloud_for``, its nodes)."""
    cloud = cloud_for(f, clusters if clusters is not None else [f.raw_cluster()])
    kube = FakeKube(nodes=f.raw_k8s_nodes)
    return ClusterLoader(cloud, kube), cloud, kube
