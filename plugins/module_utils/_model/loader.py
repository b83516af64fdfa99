# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Reads a cluster's VMs, volumes, offerings, groups and Kubernetes nodes in a few paged calls and
builds its ``ClusterView``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Protocol

from ansible_collections.cloudstack.cks.plugins.module_utils._common.background import Background
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CloudStackError, InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._common.memory import no_cycle_collection
from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import ObjectList
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import UUID_PATTERN, ClusterView, Node, build_view


class CloudLister(Protocol):
    def list(self, command: str, **params: Any) -> list[dict]:
        """A paged list call returning all items."""


class NodeLister(Protocol):
    def list_nodes_at(self) -> ObjectList:
        """All Kubernetes Node objects as API JSON dicts, and the list's resourceVersion."""


#: Every field the view's builders (_model.cluster) read of a catalog entry. The rest of CloudStack's
#: answer would only make the catalog the role hands from run to run larger; a field left out here
#: is missing from the later runs' view, and a check before the stop that reads it passes silently.
CATALOG_FIELDS: Mapping[str, tuple[str, ...]] = {
    "service_offerings": ("id", "name", "cpunumber", "memory", "rootdisksize", "diskofferingid",
                          "diskofferingstrictness", "iscustomized", "state", "storagetype", "storagetags"),
    "disk_offerings": ("id", "name", "disksize", "iscustomized", "disksizestrictness"),
    "affinity_groups": ("id", "name", "type", "account", "domainid", "domainpath", "projectid", "project"),
}
CATALOG_OPTION = "catalog"


@dataclass(frozen=True)
class Catalog:
    """The cloud's service offerings, disk offerings and affinity groups, as listed once.

    None of them changes with a rollout, so a rollout reads them in its first module run and hands
    them to the later runs (the ``catalog`` option) instead of listing them in every batch: three
    list calls less per batch against the management server. An offering deleted meanwhile is
    then refused by CloudStack at its change; the batch starts that node again before it fails.
    """

    service_offerings: tuple[Mapping[str, Any], ...]
    disk_offerings: tuple[Mapping[str, Any], ...]
    affinity_groups: tuple[Mapping[str, Any], ...]

    @classmethod
    def listed(cls, service_offerings: Iterable[Mapping[str, Any]], disk_offerings: Iterable[Mapping[str, Any]],
               affinity_groups: Iterable[Mapping[str, Any]]) -> Catalog:
        return cls(_kept(service_offerings, "service_offerings"), _kept(disk_offerings, "disk_offerings"),
                   _kept(affinity_groups, "affinity_groups"))

    @classmethod
    def from_option(cls, value: Any) -> Optional[Catalog]:
        """The catalog an earlier run returned (the module option), or None when not given."""
        if value is None or value == {}:
            return None
        if not isinstance(value, Mapping) or set(value) != set(CATALOG_FIELDS):
            raise InvalidInput(CATALOG_OPTION, "(given)", "must be the catalog a cloudstack.cks module returned "
                               f"(a mapping with {', '.join(sorted(CATALOG_FIELDS))}); leave it out to list them again")
        for key in CATALOG_FIELDS:
            entries = value[key]
            if not isinstance(entries, list) or not all(isinstance(e, Mapping) and e.get("id") for e in entries):
                raise InvalidInput(CATALOG_OPTION, "(given)", f"{key} must be a list of entries with an id, as a "
                                   "cloudstack.cks module returned it; leave the option out to list them again")
        return cls.listed(value["service_offerings"], value["disk_offerings"], value["affinity_groups"])

    def to_dict(self) -> dict[str, list[dict[str, Any]]]:
        return {"service_offerings": [dict(e) for e in self.service_offerings],
                "disk_offerings": [dict(e) for e in self.disk_offerings],
                "affinity_groups": [dict(e) for e in self.affinity_groups]}


def _names(entry: Mapping[str, Any], cluster: str) -> bool:
    return cluster in (str(entry.get("id", "")), str(entry.get("name", "")))


def _kept(entries: Iterable[Mapping[str, Any]], kind: str) -> tuple[Mapping[str, Any], ...]:
    fields = CATALOG_FIELDS[kind]
    return tuple({k: e[k] for k in fields if k in e} for e in entries)


class CatalogCache:
    """The catalog of one module run: given with the run, or listed on first use and kept."""

    def __init__(self, given: Optional[Catalog] = None) -> None:
        self.value = given
        self.given = given is not None


class ClusterLoader:
    """Fetches a ClusterView with at most ``MAX_CLOUD_CALLS`` list calls and one node list.

    listVirtualMachines is asked by ``ids`` in chunks of ``VM_IDS_PER_CALL`` (long GET query
    strings are refused by proxies and servers); a cluster too large for ``MAX_VM_ID_CALLS``
    chunks lists the owner's VMs instead and keeps the cluster's. ROOT volumes are listed for
    the owner in one call and matched client-side: asking per VM would not scale.
    """

    VM_IDS_PER_CALL = 100
    MAX_VM_ID_CALLS = 4
    MAX_CLOUD_CALLS = 10  # 2 to resolve + 4 VM chunks + volumes, offerings, disks, groups

    def __init__(self, cloud: CloudLister, kube: Optional[NodeLister] = None,
                 catalog: Optional[CatalogCache] = None, fresh_entry: Optional[Mapping[str, Any]] = None,
                 root_volume_needed: Optional[Callable[[Node], bool]] = None) -> None:
        self.cloud = cloud
        self.kube = kube
        self.catalog = catalog if catalog is not None else CatalogCache()
        #: For a batch's load (``detail_for``): whether a node of the batch needs its ROOT volume
        #: read (``_decisions.node.needs_root_volume`` with the batch's settings); None: always.
        self.root_volume_needed = root_volume_needed
        #: VMs read ahead by ``read_batch_vms`` (the ids asked, the answer): the next load of
        #: exactly those VMs takes them instead of listing them again.
        self._read_ahead: Optional[tuple[tuple[str, ...], list[dict]]] = None
        #: The cluster's entry as this run read it a moment ago (to fetch its kubeconfig): the first
        #: ``load`` takes it instead of listing the cluster again; later loads read it afresh.
        self._fresh_entry = fresh_entry

    def find(self, cluster: str, project_id: Optional[str] = None) -> dict:
        """The listKubernetesClusters entry named by id or by exact name."""
        scope = {"projectid": project_id} if project_id else {}
        if UUID_PATTERN.match(cluster):
            by_id = self._by_id(cluster, scope)
            if by_id is not None:
                return by_id
        found = self.cloud.list("listKubernetesClusters", name=cluster, listall=True, **scope)
        found = [c for c in found if c.get("name") == cluster]
        if len(found) > 1:
            matches = ", ".join(f"{c.get('id')} (account {c.get('account', '?')})" for c in found)
            raise InvalidInput("cluster", cluster,
                               f"{len(found)} CKS clusters have this name: {matches}; give the id")
        if not found:
            where = f" in project {project_id}" if project_id else ""
            raise InvalidInput("cluster", cluster,
                               f"no CKS cluster with this id or name is visible to this account{where}")
        return found[0]

    def _by_id(self, cluster_id: str, scope: Mapping[str, Any]) -> Optional[dict]:
        found = self.cloud.list("listKubernetesClusters", id=cluster_id, listall=True, **scope)
        found = [c for c in found if str(c.get("id")) == cluster_id]
        return found[0] if found else None

    def load(self, cluster: str, project_id: Optional[str] = None,
             detail_for: Optional[Iterable[str]] = None) -> ClusterView:
        """The view of the cluster named by id or exact name (see ``load_cluster`` for ``detail_for``)."""
        entry, self._fresh_entry = self._fresh_entry, None
        if entry is None or not _names(entry, cluster):
            entry = self.find(cluster, project_id)
        return self.load_cluster(entry, detail_for)

    def load_cluster(self, cluster: Mapping[str, Any], detail_for: Optional[Iterable[str]] = None) -> ClusterView:
        """The view of an already resolved listKubernetesClusters entry.

        ``detail_for``: node names whose VMs alone are read with listVirtualMachines (a batch);
        the other nodes keep what the cluster's embedded VM entries say (state, type, name), which
        is all a batch needs of them, so its reads do not grow with the cluster. Their offering,
        groups and capacity are then unknown (None, empty, 0): plan and count from a full view.
        """
        with no_cycle_collection():
            return self._load_cluster(cluster, detail_for)

    def _load_cluster(self, cluster: Mapping[str, Any], detail_for: Optional[Iterable[str]]) -> ClusterView:
        owner = self._owner_scope(cluster)
        wanted = {n.lower() for n in detail_for} if detail_for is not None else None
        vm_ids = self._batch_vm_ids(cluster, wanted)
        # The node list goes to the API server while the CloudStack reads go to the management
        # server: the load takes the longer of the two, not their sum.
        kube = self.kube
        k8s_nodes = Background(kube.list_nodes_at, name="list-nodes") if kube is not None else None
        vms = self._vms(vm_ids, owner)
        if wanted is None:
            volumes = self._owned("listVolumes", owner, type="ROOT", listall=True)
            catalog = self.read_catalog(owner)
        else:
            catalog = self.read_catalog(owner)
            volumes = self._batch_volumes(cluster, vms, vm_ids, owner, catalog)
        nodes = k8s_nodes.result() if k8s_nodes is not None else ObjectList([], "")
        return build_view(cluster, vms, volumes, catalog.service_offerings, catalog.disk_offerings,
                          catalog.affinity_groups, nodes.items, nodes.version)

    def _batch_volumes(self, cluster: Mapping[str, Any], vms: list[dict], vm_ids: list[str],
                       owner: Mapping[str, Any], catalog: Catalog) -> list[dict]:
        """The ROOT volumes of a batch's VMs, or none when no node of the batch needs them.

        Only the batch's nodes are judged and changed, so only their volumes are read: one VM's
        with listVolumes ``virtualmachineid`` (ListVolumesCmd, a filter on the volume's instance,
        so the server reads one VM's volumes and not the owner's), several with the owner's list
        in one call as before (listVolumes takes one ``virtualmachineid``, not a list).
        """
        if not vm_ids:
            return []
        rule = self.root_volume_needed
        if rule is not None:
            # The batch's nodes as the VM list shows them (no volumes, no Kubernetes nodes yet):
            # enough to know which changes are planned; the other nodes are left out, so this
            # costs the batch's size, not the cluster's.
            ids = set(vm_ids)
            batch = dict(cluster, virtualmachines=[vm for vm in cluster.get("virtualmachines") or []
                                                   if str(vm.get("id")) in ids])
            seen = build_view(batch, vms, [], catalog.service_offerings, catalog.disk_offerings,
                              catalog.affinity_groups, [])
            if not any(rule(node) for node in seen.nodes):
                return []
        if len(vm_ids) == 1:
            return self._owned("listVolumes", owner, type="ROOT", virtualmachineid=vm_ids[0], listall=True)
        return self._owned("listVolumes", owner, type="ROOT", listall=True)

    def read_catalog(self, owner: Mapping[str, Any]) -> Catalog:
        """The catalog this run was given or listed already, else listed now (three calls)."""
        if self.catalog.value is None:
            group_scope = {"projectid": owner["projectid"]} if "projectid" in owner else {}
            self.catalog.value = Catalog.listed(
                self.cloud.list("listServiceOfferings"), self.cloud.list("listDiskOfferings"),
                self.cloud.list("listAffinityGroups", listall=True, **group_scope))
        return self.catalog.value

    @staticmethod
    def _owner_scope(cluster: Mapping[str, Any]) -> dict[str, Any]:
        if cluster.get("projectid"):
            return {"projectid": cluster["projectid"]}
        if cluster.get("account") and cluster.get("domainid"):
            return {"account": cluster["account"], "domainid": cluster["domainid"]}
        return {}

    def _owned(self, command: str, owner: Mapping[str, Any], **params: Any) -> list[dict]:
        """A list call narrowed to the cluster's owner (a root admin would otherwise page through the
        whole cloud). A key refused the owner's domain (531: cks-sim refuses a plain user any
        ``domainid``) lists without it: such a key sees only its own account anyway."""
        try:
            return self.cloud.list(command, **params, **owner)
        except CloudStackError as exc:
            if exc.errorcode != 531 or "domainid" not in owner:
                raise
            return self.cloud.list(command, **params)

    def read_batch_vms(self, cluster: Mapping[str, Any], names: Iterable[str]) -> None:
        """List the VMs of the nodes ``names`` of the resolved entry ``cluster`` now, for the batch's
        load (``load`` with the same ``detail_for``), so that the read can run while something else
        does (the Kubernetes client being made)."""
        ids = self._batch_vm_ids(cluster, {n.lower() for n in names})
        self._read_ahead = (tuple(ids), self._vms(ids, self._owner_scope(cluster)))

    @staticmethod
    def _batch_vm_ids(cluster: Mapping[str, Any], wanted: Optional[set[str]]) -> list[str]:
        return [str(vm["id"]) for vm in cluster.get("virtualmachines") or [] if vm.get("id")
                and (wanted is None or str(vm.get("name", "")).lower() in wanted)]

    def _vms(self, vm_ids: list[str], owner: Mapping[str, Any]) -> list[dict]:
        ahead, self._read_ahead = self._read_ahead, None
        if ahead is not None and ahead[0] == tuple(vm_ids):
            return ahead[1]
        if not vm_ids:
            return []
        chunks = math.ceil(len(vm_ids) / self.VM_IDS_PER_CALL)
        if chunks > self.MAX_VM_ID_CALLS:
            wanted = set(vm_ids)
            return [vm for vm in self._owned("listVirtualMachines", owner, listall=True)
                    if str(vm.get("id")) in wanted]
        vms: list[dict] = []
        for start in range(0, len(vm_ids), self.VM_IDS_PER_CALL):
            chunk = vm_ids[start:start + self.VM_IDS_PER_CALL]
            vms.extend(self._owned("listVirtualMachines", owner, ids=",".join(chunk), listall=True))
        return vms
