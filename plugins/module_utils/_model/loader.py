# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Reads a cluster's VMs, volumes, offerings, groups and Kubernetes nodes in a few paged calls and
builds its ``ClusterView``."""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Optional, Protocol

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CloudStackError, InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import UUID_PATTERN, ClusterView, build_view


class CloudLister(Protocol):
    def list(self, command: str, **params: Any) -> list[dict]:
        """A paged list call returning all items."""


class NodeLister(Protocol):
    def list_nodes(self) -> list[dict]:
        """All Kubernetes Node objects as API JSON dicts."""


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

    def __init__(self, cloud: CloudLister, kube: Optional[NodeLister] = None) -> None:
        self.cloud = cloud
        self.kube = kube

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

    def find_by_id(self, cluster_id: str, project_id: Optional[str] = None) -> dict:
        scope = {"projectid": project_id} if project_id else {}
        found = self._by_id(cluster_id, scope)
        if found is None:
            raise InvalidInput("cluster", cluster_id, "no CKS cluster with this id is visible to this account")
        return found

    def _by_id(self, cluster_id: str, scope: Mapping[str, Any]) -> Optional[dict]:
        found = self.cloud.list("listKubernetesClusters", id=cluster_id, listall=True, **scope)
        found = [c for c in found if str(c.get("id")) == cluster_id]
        return found[0] if found else None

    def load(self, cluster: str, project_id: Optional[str] = None,
             detail_for: Optional[Iterable[str]] = None) -> ClusterView:
        """The view of the cluster named by id or exact name (see ``load_cluster`` for ``detail_for``)."""
        return self.load_cluster(self.find(cluster, project_id), detail_for)

    def load_cluster(self, cluster: Mapping[str, Any], detail_for: Optional[Iterable[str]] = None) -> ClusterView:
        """The view of an already resolved listKubernetesClusters entry.

        ``detail_for``: node names whose VMs alone are read with listVirtualMachines (a batch);
        the other nodes keep what the cluster's embedded VM entries say (state, type, name), which
        is all a batch needs of them, so its reads do not grow with the cluster. Their offering,
        groups and capacity are then unknown (None, empty, 0): plan and count from a full view.
        """
        owner = self._owner_scope(cluster)
        wanted = {n.lower() for n in detail_for} if detail_for is not None else None
        vm_ids = [str(vm["id"]) for vm in cluster.get("virtualmachines") or [] if vm.get("id")
                  and (wanted is None or str(vm.get("name", "")).lower() in wanted)]
        vms = self._vms(vm_ids, owner)
        volumes = self._owned("listVolumes", owner, type="ROOT", listall=True)
        offerings = self.cloud.list("listServiceOfferings")
        disk_offerings = self.cloud.list("listDiskOfferings")
        group_scope = {"projectid": owner["projectid"]} if "projectid" in owner else {}
        groups = self.cloud.list("listAffinityGroups", listall=True, **group_scope)
        k8s_nodes = self.kube.list_nodes() if self.kube is not None else []
        return build_view(cluster, vms, volumes, offerings, disk_offerings, groups, k8s_nodes)

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

    def _vms(self, vm_ids: list[str], owner: Mapping[str, Any]) -> list[dict]:
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
