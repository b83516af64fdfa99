# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The service behind the ``cloudstack.cks.clusters`` inventory plugin: the CKS clusters a key can
see, as inventory hosts.

The listing is CloudStack's own scoping: ``listall=true`` (a root admin sees every account, a domain
admin its domain's subtree, a user only itself), once for accounts' clusters and once with
``projectid=-1`` for the projects' (CloudStack lists them apart). Each is paged at 500, so 200
clusters cost 2 calls; the nodes' SSH port forwards 2 more, whatever the number of clusters.

``out_of_date`` reads each cluster as ``cks_node_outdated`` does (the same session, view, record,
lock and ``outdated.outdated_report``): per cluster 6 CloudStack calls (getKubernetesClusterConfig and the
loader's 5 lists) and 3 Kubernetes reads (nodes, the record's ConfigMap, the lock's Lease).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError
from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import CloudStackApi
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.inventory import (
    InventoryHost,
    cluster_hostvars,
    host_names,
    node_hosts,
    out_of_date_vars,
    ssh_forwards,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.reasons import OUT_OF_DATE_KEYS
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import NODE_TYPES
from ansible_collections.cloudstack.cks.plugins.module_utils._services.outdated import outdated_report
from ansible_collections.cloudstack.cks.plugins.module_utils._services.session import ClusterSession, KubeConnector

#: The states a rollout may start from (Running, or the Alert one causes); in the others the cluster's
#: API server may be down or busy, so its record is not read.
READABLE_STATES = ("Running", "Alert")
CLUSTERS_GROUP = "cks_clusters"


@dataclass(frozen=True)
class InventoryOptions:
    out_of_date: bool = False
    nodes: bool = False


@dataclass
class Inventory:
    hosts: list[InventoryHost] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"hosts": [h.to_dict() for h in self.hosts], "warnings": list(self.warnings)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Inventory:
        return cls(hosts=[InventoryHost.from_dict(h) for h in data.get("hosts") or []],
                   warnings=[str(w) for w in data.get("warnings") or []])


class ClusterListing:
    """The paged list calls: the clusters, and the port forwards of their nodes."""

    def __init__(self, cloud: CloudStackApi) -> None:
        self.cloud = cloud

    def _both_scopes(self, command: str) -> list[dict[str, Any]]:
        items: dict[str, dict[str, Any]] = {}
        # projectid=-1: the projects' resources (ParamProcessWorker passes "-1" through for a uuid).
        for project_id in (None, "-1"):
            scope = {"projectid": project_id} if project_id else {}
            for item in self.cloud.list(command, None, None, listall=True, **scope):
                items.setdefault(str(item.get("id")), item)
        return list(items.values())

    def clusters(self) -> list[dict[str, Any]]:
        return self._both_scopes("listKubernetesClusters")

    def port_forwards(self) -> list[dict[str, Any]]:
        return self._both_scopes("listPortForwardingRules")


class OutOfDateReader:
    """Per cluster: how many nodes of each type differ from the settings it has stored, and who holds
    its rollout lock, judged as ``cks_node_outdated`` judges them."""

    def __init__(self, cloud: CloudStackApi, connect_kube: KubeConnector) -> None:
        self.cloud = cloud
        self.connect_kube = connect_kube

    def read(self, entry: Mapping[str, Any]) -> tuple[dict[str, Any], Optional[str]]:
        """The host variables, and a warning when the cluster could not be read."""
        state = entry.get("state")
        if state not in READABLE_STATES:
            return out_of_date_vars(None, None, skipped=f"the cluster is {state}; its nodes are read only when "
                                                        f"it is {' or '.join(READABLE_STATES)}"), None
        try:
            with ClusterSession(self.cloud, self.connect_kube, str(entry["id"]), entry.get("projectid"),
                                entry=entry) as session:
                result = outdated_report(session.view(), session.store.read(), session.lock().read())
        except CksError as exc:
            why = f"could not be read: {exc.msg}"
            return out_of_date_vars(None, None, skipped=why), f"cluster {entry.get('name')} ({entry.get('id')}) {why}"
        counts = {t: int(result[OUT_OF_DATE_KEYS[t]]) for t in NODE_TYPES}
        return out_of_date_vars(counts, result["lock_holder"]), None


def list_inventory(cloud: CloudStackApi, options: InventoryOptions,
                   connect_kube: Optional[Callable[[Optional[str]], Any]] = None) -> Inventory:
    """The clusters (and with ``options.nodes`` their nodes) as inventory hosts, sorted by name."""
    listing = ClusterListing(cloud)
    entries = listing.clusters()
    names, clashes = host_names(entries)
    inventory = Inventory(warnings=list(clashes))
    reader = OutOfDateReader(cloud, connect_kube) if options.out_of_date and connect_kube is not None else None
    forwards = ssh_forwards(listing.port_forwards()) if options.nodes and entries else {}
    for entry in sorted(entries, key=lambda e: names[str(e["id"])]):
        name = names[str(entry["id"])]
        hostvars = cluster_hostvars(entry)
        if reader is not None:
            found, warning = reader.read(entry)
            hostvars.update(found)
            if warning:
                inventory.warnings.append(warning)
        inventory.hosts.append(InventoryHost(name=name, hostvars=hostvars, groups=[CLUSTERS_GROUP]))
        if options.nodes:
            inventory.hosts.extend(node_hosts(entry, name, forwards))
    return inventory
