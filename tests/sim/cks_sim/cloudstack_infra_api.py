"""The listing commands of cks-sim's CloudStack API for what VMs run on and with: service and
disk offerings, affinity groups and their types, hosts, host clusters, dedicated hosts, zones,
networks, public IP addresses and port forwarding rules."""

from __future__ import annotations

from typing import Any

from . import placement
from .cloud import CloudWorld, param_error
from .cloudstack_call import Call, handler, matches_keyword


@handler("listServiceOfferings")
def list_service_offerings(call: Call) -> dict[str, Any]:
    cloud = call.cloud
    exclude = None
    if call.get("virtualmachineid"):
        # The offerings the VM could change to: never its current one.
        exclude = cloud.get_vm(call.get("virtualmachineid"), "virtualmachineid").service_offering_id
    if call.get("issystem"):
        return {}
    out = []
    for offering in cloud.service_offerings.values():
        if call.get("id") and offering.id != call.get("id"):
            continue
        if call.get("name") and offering.name != call.get("name"):
            continue
        if exclude and offering.id == exclude:
            continue
        if call.get("cpunumber") and offering.cpu < call.get("cpunumber"):
            continue
        if call.get("memory") and offering.memory < call.get("memory"):
            continue
        if call.get("state") and call.get("state").lower() not in ("all", offering.state.lower()):
            continue
        if not call.get("state") and offering.state != "Active":
            continue
        if call.get("keyword") and call.get("keyword").lower() not in offering.name.lower():
            continue
        out.append(cloud.service_offering_view(offering))
    return call.listing(out)


@handler("listDiskOfferings")
def list_disk_offerings(call: Call) -> dict[str, Any]:
    cloud = call.cloud
    out = []
    for offering in cloud.disk_offerings.values():
        if offering.compute_only:
            continue  # QueryManagerImpl never lists the implicit compute-only offerings
        if call.get("id") and offering.id != call.get("id"):
            continue
        if call.get("name") and offering.name != call.get("name"):
            continue
        if call.get("keyword") and call.get("keyword").lower() not in offering.name.lower():
            continue
        out.append(cloud.disk_offering_view(offering))
    return call.listing(out)


@handler("listAffinityGroups")
def list_affinity_groups(call: Call) -> dict[str, Any]:
    cloud = call.cloud
    member_of = None
    if call.get("virtualmachineid"):
        vm = cloud.get_vm(call.get("virtualmachineid"), "virtualmachineid")
        cloud.check_access(vm.owner_id, cloud.vm_ref(vm))
        member_of = vm.affinity_group_ids
    out = []
    allowed = cloud.list_scope(call.values)
    by_owner = call.get("account") is not None or call.get("projectid") is not None
    caller_domains = cloud.directory.ancestors(cloud.caller.domain_id)
    for group in cloud.affinity_groups.values():
        if member_of is not None and group.id not in member_of:
            continue
        if member_of is not None:
            pass  # a VM's own groups, whoever owns them
        elif group.domain_level_id is not None:
            # QueryManagerImpl also lists the domain-level groups of the caller's domain and
            # its parents (all of them for a root admin's listall), unless listing by owner.
            if by_owner or not (group.domain_level_id in caller_domains or (cloud.is_admin and call.get("listall"))):
                continue
        elif not allowed(group.owner_id):
            continue
        if call.get("id") and group.id != call.get("id"):
            continue
        if call.get("name") and group.name != call.get("name"):
            continue
        if call.get("type") and group.type != call.get("type"):
            continue
        if call.get("keyword") and call.get("keyword").lower() not in group.name.lower():
            continue
        out.append(cloud.affinity_group_view(group))
    return call.listing(out)


AFFINITY_TYPES = ("host anti-affinity", "host affinity", "non-strict host anti-affinity", "non-strict host affinity",
                  "ExplicitDedication")


@handler("listAffinityGroupTypes")
def list_affinity_group_types(call: Call) -> dict[str, Any]:
    types = [{"type": t} for t in AFFINITY_TYPES if call.cloud.is_admin or t != "ExplicitDedication"]
    return call.listing([t for t in types if matches_keyword(t, call.get("keyword"), "type")])


HOST_DETAILS = ("all", "capacity", "events", "stats", "min")  # ApiConstants.HostDetails


@handler("listHosts")
def list_hosts(call: Call) -> dict[str, Any]:
    """ListHostsCmd -> QueryManagerImpl.searchForServersInternal, HostJoinDaoImpl.newHostResponse."""
    cloud = call.cloud
    details = set(call.get("details") or ["all"])
    if not details <= set(HOST_DETAILS):
        # ListHostsCmd.getDetails
        raise param_error("The details parameter contains a non permitted value. "
                          f"The allowed values are [{', '.join(HOST_DETAILS)}]")
    usage = cloud.host_usage()
    vm_host = None
    if call.get("virtualmachineid"):
        vm_host = cloud.get_vm(call.get("virtualmachineid"), "virtualmachineid").host_id or ""
    filters = {"id": "id", "zoneid": "zone_id", "clusterid": "cluster_id", "state": "state",
               "resourcestate": "resourcestate", "name": "name"}
    out = []
    for host in cloud.hosts.values():
        if any(call.get(param) and getattr(host, attr) != call.get(param) for param, attr in filters.items()):
            continue
        if call.get("podid") and cloud.host_clusters[host.cluster_id].pod_id != call.get("podid"):
            continue
        if call.get("type") and call.get("type") != "Routing":
            continue
        if call.get("hypervisor") and call.get("hypervisor").lower() != "kvm":
            continue
        if vm_host is not None and host.id != vm_host:
            continue
        if call.get("keyword") and call.get("keyword").lower() not in host.name.lower():
            continue
        out.append(cloud.host_view(host, usage[host.id], details))
    return call.listing(out)


@handler("listClusters")
def list_clusters(call: Call) -> dict[str, Any]:
    """ListClustersCmd (root admin): the host clusters with their overcommit ratios."""
    cloud = call.cloud
    out = []
    for cluster in cloud.host_clusters.values():
        if call.get("id") and cluster.id != call.get("id"):
            continue
        if call.get("name") and cluster.name != call.get("name"):
            continue
        if call.get("zoneid") and cluster.zone_id != call.get("zoneid"):
            continue
        if call.get("podid") and cluster.pod_id != call.get("podid"):
            continue
        if call.get("keyword") and call.get("keyword").lower() not in cluster.name.lower():
            continue
        out.append(placement.cluster_view(cloud, cluster))
    return call.listing(out)


def _dedicated(call: Call, kind: str) -> dict[str, Any]:
    """DedicatedResourceManagerImpl.listDedicated{Hosts,Clusters,Pods,Zones} (root admin): by the
    resource, the domain, the account (with domainid) or the dedication group."""
    key = f"{kind.lower()}id"
    out = []
    for entry in placement.dedicated_views(call.cloud, kind):
        if call.get(key) and entry[key] != call.get(key):
            continue
        if call.get("domainid") and entry["domainid"] != call.get("domainid"):
            continue
        if call.get("affinitygroupid") and entry["affinitygroupid"] != call.get("affinitygroupid"):
            continue
        if call.get("account") and entry.get("accountname") != call.get("account"):
            continue
        out.append(entry)
    return call.listing(out)


@handler("listDedicatedHosts")
def list_dedicated_hosts(call: Call) -> dict[str, Any]:
    return _dedicated(call, "Host")


@handler("listDedicatedClusters")
def list_dedicated_clusters(call: Call) -> dict[str, Any]:
    return _dedicated(call, "Cluster")


@handler("listDedicatedPods")
def list_dedicated_pods(call: Call) -> dict[str, Any]:
    return _dedicated(call, "Pod")


@handler("listDedicatedZones")
def list_dedicated_zones(call: Call) -> dict[str, Any]:
    return _dedicated(call, "Zone")


@handler("listZones")
def list_zones(call: Call) -> dict[str, Any]:
    wanted = set(call.get("ids") or ([call.get("id")] if call.get("id") else []))
    out = []
    for zone_id in call.cloud.zones:
        zone = call.cloud.zone_view(zone_id)
        if wanted and zone["id"] not in wanted:
            continue
        if call.get("name") and call.get("name") != zone["name"]:
            continue
        if not matches_keyword(zone, call.get("keyword"), "name"):
            continue
        out.append(zone)
    return call.listing(out)


@handler("listNetworks")
def list_networks(call: Call) -> dict[str, Any]:
    cloud = call.cloud
    out = []
    allowed = cloud.list_scope(call.values)
    for network in cloud.networks.values():
        if not allowed(_network_owner(cloud, network.id)):
            continue
        if call.get("id") and network.id != call.get("id"):
            continue
        if call.get("name") and network.name != call.get("name"):
            continue
        out.append({
            "id": network.id, "name": network.name, "displaytext": network.name, "cidr": network.cidr,
            "gateway": network.gateway, "netmask": "255.255.255.0", "type": "Isolated", "traffictype": "Guest",
            "state": "Implemented", "zoneid": cloud.network_zone(network.id)["id"],
            "zonename": cloud.network_zone(network.id)["name"],
            **cloud.owner_fields(_network_owner(cloud, network.id)),
            "issystem": False, "isdefault": False, "restartrequired": False, "specifyipranges": False,
            "canusefordeploy": True, "service": [], "tags": cloud.tag_views(network.id),
        })
    return call.listing(out)


def _network_owner(cloud: CloudWorld, network_id: str) -> str:
    cluster = cloud.clusters.get(cloud.networks[network_id].cluster_id or "")
    return cluster.owner_id if cluster else cloud.directory.primary.id


@handler("listPublicIpAddresses")
def list_public_ip_addresses(call: Call) -> dict[str, Any]:
    cloud = call.cloud
    out = []
    allowed = cloud.list_scope(call.values)
    for ip in cloud.public_ips.values():
        if not allowed(_network_owner(cloud, ip.network_id)):
            continue
        if call.get("id") and ip.id != call.get("id"):
            continue
        if call.get("ipaddress") and ip.ipaddress != call.get("ipaddress"):
            continue
        network = call.get("associatednetworkid") or call.get("networkid")
        if network and ip.network_id != network:
            continue
        if call.get("issourcenat") is not None and ip.issourcenat != call.get("issourcenat"):
            continue
        if call.get("isstaticnat"):
            continue
        net = cloud.networks[ip.network_id]
        out.append({
            "id": ip.id, "ipaddress": ip.ipaddress, "allocated": ip.created,
            "zoneid": cloud.network_zone(net.id)["id"], "zonename": cloud.network_zone(net.id)["name"],
            "issourcenat": ip.issourcenat, "isstaticnat": False, "issystem": False,
            "state": "Allocated", "purpose": "", "associatednetworkid": net.id, "associatednetworkname": net.name,
            "networkid": net.id, "forvirtualnetwork": True, "hasrules": True, "fordisplay": True,
            **cloud.owner_fields(_network_owner(cloud, net.id)),
            "tags": cloud.tag_views(ip.id),
        })
    return call.listing(out)


@handler("listPortForwardingRules")
def list_port_forwarding_rules(call: Call) -> dict[str, Any]:
    cloud = call.cloud
    out = []
    allowed = cloud.list_scope(call.values)
    for rule in cloud.pf_rules.values():
        if not allowed(cloud.vms[rule.vm_id].owner_id):
            continue
        if call.get("id") and rule.id != call.get("id"):
            continue
        if call.get("ipaddressid") and rule.ip_id != call.get("ipaddressid"):
            continue
        if call.get("networkid") and rule.network_id != call.get("networkid"):
            continue
        vm = cloud.vms[rule.vm_id]
        ip = cloud.public_ips[rule.ip_id]
        out.append({
            "id": rule.id, "ipaddressid": ip.id, "ipaddress": ip.ipaddress, "publicport": str(rule.publicport),
            "publicendport": str(rule.publicport), "privateport": str(rule.privateport),
            "privateendport": str(rule.privateport), "protocol": "tcp", "virtualmachineid": vm.id,
            "virtualmachinename": vm.name, "virtualmachinedisplayname": vm.name, "vmguestip": vm.ipaddress,
            "networkid": rule.network_id, "state": "Active", "cidrlist": "", "fordisplay": True,
            "tags": cloud.tag_views(rule.id),
        })
    return call.listing(out)
