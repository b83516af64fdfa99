# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""What the ``cloudstack.cks.clusters`` inventory shows of a CKS cluster, from its
listKubernetesClusters entry: its host name, its host variables and, optionally, its nodes as hosts.

Pure: the reads are ``_services.inventory``'s. Every variable name starts with ``cks_`` so that it
cannot shadow a variable of Ansible's or of the operator's playbooks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import CONTROL, ETCD, NODE_TYPES, WORKER, node_type_of

#: Where listKubernetesClusters reports the offering of a node type (4.21+, present only once set).
TYPE_OFFERING_FIELDS: Mapping[str, str] = {
    CONTROL: "controlofferingname", WORKER: "workerofferingname", ETCD: "etcdofferingname",
}
SSH_PORT = 22


@dataclass(frozen=True)
class SshForward:
    """The port forward CKS creates on the cluster's public IP for a node's SSH port."""

    public_ip: str
    public_port: int


@dataclass
class InventoryHost:
    """One host of the inventory: a cluster, or a node of one (``cluster`` names it then)."""

    name: str
    hostvars: dict[str, Any]
    cluster: Optional[str] = None
    groups: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "hostvars": self.hostvars, "cluster": self.cluster, "groups": list(self.groups)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InventoryHost:
        return cls(name=str(data["name"]), hostvars=dict(data.get("hostvars") or {}), cluster=data.get("cluster"),
                   groups=[str(g) for g in data.get("groups") or []])


def owner_of(entry: Mapping[str, Any]) -> str:
    """The project, else the account, a cluster belongs to: what makes its name unique."""
    return str(entry.get("project") or entry.get("account") or "")


def host_names(entries: Iterable[Mapping[str, Any]]) -> tuple[dict[str, str], list[str]]:
    """The host name of each cluster by id, and one line per name that clashed.

    CloudStack keeps a cluster name unique within its account or project only, so a key that sees
    several accounts may see one name twice. A name seen once stays as it is. A clashing name is
    never given to one cluster and silently dropped for the other: each cluster that has it is named
    ``<name>@<project or account>`` (still readable, and stable from run to run), and only if that
    clashes too (same account name in two domains) ``<name>@<id>``.
    """
    listed = list(entries)
    by_name: dict[str, list[Mapping[str, Any]]] = {}
    for entry in listed:
        by_name.setdefault(str(entry.get("name")), []).append(entry)
    names: dict[str, str] = {}
    clashes: list[str] = []
    for name, same in sorted(by_name.items()):
        if len(same) == 1:
            names[str(same[0]["id"])] = name
            continue
        owners = [owner_of(e) for e in same]
        qualified_unique = len(set(owners)) == len(owners) and all(owners)
        for entry, owner in zip(same, owners, strict=True):
            names[str(entry["id"])] = f"{name}@{owner}" if qualified_unique else f"{name}@{entry['id']}"
        clashes.append(f"{len(same)} clusters are named {name!r} ({', '.join(sorted(names[str(e['id'])] for e in same))}):"
                       " each is listed under its qualified name")
    return names, clashes


def _count(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def node_counts(entry: Mapping[str, Any]) -> dict[str, int]:
    """Nodes per type as the cluster has them (its VMs), which also counts nodes added later."""
    vms = entry.get("virtualmachines")
    if vms:
        counts = {t: 0 for t in NODE_TYPES}
        for vm in vms:
            counts[node_type_of(vm)] += 1
        return counts
    # A cluster listed without its VMs (being created): what CKS recorded.
    return {CONTROL: _count(entry.get("controlnodes") or entry.get("masternodes")), WORKER: _count(entry.get("size")),
            ETCD: _count(entry.get("etcdnodes"))}


def type_offerings(entry: Mapping[str, Any]) -> dict[str, Optional[str]]:
    """The offering CKS recorded per node type; before 4.21 (or when never set) the cluster's default.

    A type without nodes has no offering. It is CloudStack's record, which goes stale once anyone but
    CKS changes a VM: ``cks_out_of_date`` judges the VMs themselves.
    """
    counts = node_counts(entry)
    default = entry.get("serviceofferingname")
    return {t: (entry.get(TYPE_OFFERING_FIELDS[t]) or default) if counts[t] else None for t in NODE_TYPES}


def cluster_hostvars(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The host variables of a cluster from its listKubernetesClusters entry (no secret is in it)."""
    return {
        "cks_id": entry.get("id"),
        "cks_name": entry.get("name"),
        "cks_state": entry.get("state"),
        "cks_kubernetes_version": entry.get("kubernetesversionname"),
        "cks_zone": entry.get("zonename"),
        "cks_zone_id": entry.get("zoneid"),
        "cks_account": entry.get("account"),
        "cks_domain": entry.get("domain"),
        "cks_domain_id": entry.get("domainid"),
        "cks_domain_path": entry.get("domainpath"),
        "cks_project": entry.get("project"),
        "cks_project_id": entry.get("projectid"),
        "cks_cluster_type": entry.get("clustertype"),
        "cks_endpoint": entry.get("endpoint"),
        "cks_public_ip": entry.get("ipaddress"),
        "cks_node_counts": node_counts(entry),
        "cks_offerings": type_offerings(entry),
        # What the collection's playbooks take: the id is unambiguous whatever the host name.
        "rollout_cluster": entry.get("id"),
        "rollout_project_id": entry.get("projectid"),
    }


def ssh_forwards(rules: Iterable[Mapping[str, Any]]) -> dict[str, SshForward]:
    """Per VM id, the port forward to its SSH port (22) on a public IP."""
    forwards: dict[str, SshForward] = {}
    for rule in rules:
        if _count(rule.get("privateport")) != SSH_PORT or not rule.get("virtualmachineid"):
            continue
        port = _count(rule.get("publicport"))
        if port and rule.get("ipaddress"):
            forwards.setdefault(str(rule["virtualmachineid"]), SshForward(str(rule["ipaddress"]), port))
    return forwards


def _private_ip(vm: Mapping[str, Any]) -> Optional[str]:
    for nic in vm.get("nic") or []:
        if nic.get("isdefault") and nic.get("ipaddress"):
            return str(nic["ipaddress"])
    return str(vm["ipaddress"]) if vm.get("ipaddress") else None


def node_hosts(entry: Mapping[str, Any], cluster_host: str, forwards: Mapping[str, SshForward]) -> list[InventoryHost]:
    """The cluster's nodes as hosts, named as their Kubernetes nodes (the VM name in lowercase).

    ``ansible_host``/``ansible_port`` are the SSH port forward on the cluster's public IP when CKS made
    one (the nodes sit on the cluster's isolated network), else the node's private IP and port 22.
    """
    hosts = []
    for vm in entry.get("virtualmachines") or []:
        name = str(vm.get("name", "")).lower()
        if not name:
            continue
        node_type = node_type_of(vm)
        private_ip = _private_ip(vm)
        forward = forwards.get(str(vm.get("id")))
        hostvars: dict[str, Any] = {
            "cks_cluster": cluster_host,
            "cks_cluster_id": entry.get("id"),
            "cks_node_type": node_type,
            "cks_vm_id": vm.get("id"),
            "cks_vm_state": vm.get("state"),
            "cks_private_ip": private_ip,
            "cks_ssh_public_ip": forward.public_ip if forward else None,
            "cks_ssh_public_port": forward.public_port if forward else None,
        }
        if forward is not None:
            hostvars.update(ansible_host=forward.public_ip, ansible_port=forward.public_port)
        elif private_ip:
            hostvars.update(ansible_host=private_ip, ansible_port=SSH_PORT)
        hosts.append(InventoryHost(name=name, hostvars=hostvars, cluster=cluster_host,
                                   groups=["cks_nodes", f"cks_{node_type}_nodes"]))
    return hosts


def out_of_date_vars(counts: Optional[Mapping[str, int]], lock_holder: Optional[str],
                     skipped: Optional[str] = None) -> dict[str, Any]:
    """The ``out_of_date`` host variables: per type, the nodes that differ from the stored settings."""
    total = sum(counts.values()) if counts is not None else None
    return {"cks_out_of_date": dict(counts) if counts is not None else None, "cks_out_of_date_total": total,
            "cks_lock_holder": lock_holder, "cks_out_of_date_skipped": skipped}
