"""The CloudStack JSON API of cks-sim at ``/client/api`` (GET query or POST form).

Request path, as in ``ApiServlet`` / ``ApiServer``: signature check (401), command lookup,
parameter processing (431), then the command. Async commands answer ``{jobid}`` at once and
report through queryAsyncJobResult; their refusals (VM not stopped, strict disk, ...) come back
as failed jobs, because the server checks them inside the job. Every request is logged to
``sim.calls`` without its signature and api key.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Optional

from werkzeug.wrappers import Request, Response

from . import apis
from . import owners
from . import placement
from .cloud import CS_SERVER_API, GB as GIB, CloudError, CloudWorld, Job, param_error
from .core import Sim, drop_connection
from .rate_limit import API_LIMIT_EXCEED, DISABLED_TEXT, UNSUPPORTED_ACTION_ERROR, ApiRateLimit
from .signing import SignatureError, verify

API_PATH = "/client/api"
UNAUTHORIZED_TEXT = "unable to verify user credentials and/or request signature"
HIDDEN_PARAMS = {"signature", "apikey"}
VM_DETAILS = {"all", "group", "nics", "stats", "secgrp", "tmpl", "servoff", "diskoff", "backoff", "iso", "volume",
              "min", "affgrp", "vnfnics"}

Handler = Callable[["Call"], Any]
HANDLERS: dict[str, Handler] = {}


def handler(name: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        HANDLERS[name] = fn
        return fn

    return register


class Call:
    """One command invocation: typed parameters plus the world it acts on."""

    def __init__(self, sim: Sim, name: str, definition: dict[str, Any], values: dict[str, Any]) -> None:
        self.sim = sim
        self.cloud: CloudWorld = sim.cloud
        self.name = name
        self.definition = definition
        self.values = values

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def listing(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        """A list answer with CloudStack paging: count is the total; no results is ``{}``."""
        total = len(items)
        if total == 0:
            return {}
        page = apis.paginate(items, self.values, self.cloud.cloud_opts["page_size_max"])
        return page_body(total, self.definition["response_object"], page)

    def job(self, job: Job, **extra: Any) -> dict[str, Any]:
        return {"jobid": job.id, **extra}


class RawList:
    """A list answer whose items are already JSON text (see ``CloudWorld.vm_json``)."""

    def __init__(self, total: int, key: str, items: list[str]) -> None:
        self.total, self.key, self.items = total, key, items

    def encode(self, response_name: str) -> str:
        inner = f'"count":{self.total}'
        if self.items:
            inner += f',{json.dumps(self.key)}:[' + ",".join(self.items) + "]"
        return f'{{{json.dumps(response_name)}:{{{inner}}}}}'


def page_body(total: int, key: str, page: list[Any]) -> dict[str, Any]:
    # A page past the end still carries the total, but no (empty) list.
    return {"count": total, key: page} if page else {"count": total}


def _keyword(item: dict[str, Any], keyword: Optional[str], *fields: str) -> bool:
    if not keyword:
        return True
    lowered = keyword.lower()
    return any(lowered in str(item.get(f, "")).lower() for f in fields)


# --- CKS ------------------------------------------------------------------------------------


@handler("listKubernetesClusters")
def list_kubernetes_clusters(call: Call) -> dict[str, Any]:
    out = []
    allowed = call.cloud.list_scope(call.values)
    for cluster in call.cloud.clusters.values():
        if not allowed(cluster.owner_id):
            continue
        if call.get("id") and cluster.id != call.get("id"):
            continue
        if call.get("name") and cluster.name != call.get("name"):
            continue
        if call.get("state") and cluster.state != call.get("state"):
            continue
        if call.get("clustertype") and cluster.clustertype != call.get("clustertype"):
            continue
        if call.get("keyword") and call.get("keyword").lower() not in cluster.name.lower():
            continue
        out.append(call.cloud.cluster_view(cluster))
    return call.listing(out)


@handler("getKubernetesClusterConfig")
def get_kubernetes_cluster_config(call: Call) -> dict[str, Any]:
    cluster_id = call.get("id")
    if not cluster_id:
        raise param_error("Invalid Kubernetes cluster ID provided")
    cluster = call.cloud.clusters.get(cluster_id)
    if cluster is None:
        raise param_error(f"Invalid Kubernetes cluster ID provided: {cluster_id}")
    call.cloud.check_access(cluster.owner_id, f"KubernetesCluster {cluster.name}")
    if cluster.state == "Starting":
        raise CloudError(530, f"Setup is in progress for Kubernetes cluster : {cluster.name}, config not available at this moment", 4250)
    provider = call.sim.kubeconfig_provider
    if provider is None:
        raise CloudError(530, f"Kubernetes cluster : {cluster.name} config not available", 4250)
    return {"clusterconfig": {"id": cluster.id, "name": cluster.name, "configdata": provider(cluster.id)}}


@handler("listKubernetesSupportedVersions")
def list_kubernetes_supported_versions(call: Call) -> dict[str, Any]:
    out = []
    for version in call.cloud.versions.values():
        if call.get("id") and version["id"] != call.get("id"):
            continue
        out.append({
            "id": version["id"], "name": version["name"], "semanticversion": version["semanticversion"],
            "zoneid": call.cloud.zone_id, "zonename": call.cloud.zone_name, "state": "Enabled",
            "isostate": "Ready", "isoid": version["id"], "isoname": f"{version['name']}.iso",
            "mincpunumber": 2, "minmemory": 2048, "supportsha": True, "supportsautoscaling": True,
            "arch": "x86_64", "created": call.cloud.zone_view().get("created", ""),
        })
    return call.listing(out)


def _cluster(call: Call) -> Any:
    cluster = call.cloud.get_cluster(call.get("id"))
    call.cloud.check_access(cluster.owner_id, f"KubernetesCluster {cluster.name}")
    return cluster


@handler("startKubernetesCluster")
def start_kubernetes_cluster(call: Call) -> dict[str, Any]:
    return call.job(call.cloud.start_cluster(_cluster(call)))


@handler("stopKubernetesCluster")
def stop_kubernetes_cluster(call: Call) -> dict[str, Any]:
    return call.job(call.cloud.stop_cluster(_cluster(call)))


@handler("scaleKubernetesCluster")
def scale_kubernetes_cluster(call: Call) -> dict[str, Any]:
    cluster = _cluster(call)
    if call.get("nodeids") and (call.get("size") is not None or call.get("serviceofferingid") or call.get("nodeofferings")):
        raise param_error("nodeids can not be passed along with size or serviceofferingid or nodeofferings")
    offering = call.cloud.get_service_offering(call.get("serviceofferingid")) if call.get("serviceofferingid") else None
    node_offerings = {}
    for row in call.get("nodeofferings", []):
        node_type = str(row.get("node", "")).lower()
        if node_type not in ("control", "worker", "etcd"):
            raise param_error(f"Invalid node type {row.get('node')} in nodeofferings")
        node_offerings[node_type] = call.cloud.get_service_offering(str(row.get("offering", "")).lower(), "nodeofferings")
    if call.get("nodeids"):
        raise CloudError(530, "cks-sim: removing nodes is not simulated", 4250)
    return call.job(call.cloud.scale_cluster(cluster, offering, node_offerings, call.get("size")))


@handler("upgradeKubernetesCluster")
def upgrade_kubernetes_cluster(call: Call) -> dict[str, Any]:
    return call.job(call.cloud.upgrade_cluster(_cluster(call), call.get("kubernetesversionid")))


# --- VMs ------------------------------------------------------------------------------------


def _vm_details(call: Call) -> Optional[set[str]]:
    details = call.get("details")
    if not details:
        return None
    wanted = {d.lower() for d in details}
    bad = wanted - VM_DETAILS
    if bad:
        raise param_error(
            "The details parameter contains a non permitted value. The allowed values are "
            + "[" + ", ".join(sorted(VM_DETAILS)) + "]")
    return wanted


@handler("listVirtualMachines")
def list_virtual_machines(call: Call) -> Any:
    cloud = call.cloud
    if call.get("id") and call.get("ids"):
        raise param_error("Either id or ids parameter can be passed, not both")
    details = _vm_details(call)
    wanted_ids = set(call.get("ids") or ([call.get("id")] if call.get("id") else []))
    state = call.get("state")
    tags = call.get("tags") or []
    allowed = cloud.list_scope(call.values)
    out = []
    for vm in cloud.vms.values():
        if wanted_ids and vm.id not in wanted_ids:
            continue
        if not allowed(vm.owner_id):
            continue
        if call.get("name") and vm.name != call.get("name"):
            continue
        if state and state.lower() != "present" and vm.state.lower() != state.lower():
            continue
        if call.get("hostid") and vm.host_id != call.get("hostid"):
            continue
        if call.get("zoneid") and call.get("zoneid") != cloud.vm_zone(vm)["id"]:
            continue
        if call.get("serviceofferingid") and vm.service_offering_id != call.get("serviceofferingid"):
            continue
        if call.get("affinitygroupid") and call.get("affinitygroupid") not in vm.affinity_group_ids:
            continue
        if call.get("networkid") and vm.network_id != call.get("networkid"):
            continue
        if call.get("keypair") and vm.keypair != call.get("keypair"):
            continue
        if call.get("keyword") and call.get("keyword").lower() not in vm.name.lower():
            continue
        if tags and not all(
            any(t["key"] == want.get("key") and t["value"] == want.get("value") for t in cloud.tags.get(vm.id, []))
            for want in tags
        ):
            continue
        out.append(vm)
    total = len(out)
    if total == 0:
        return {}
    if call.get("retrieveonlyresourcecount"):
        return {"count": total}
    page = apis.paginate(out, call.values, cloud.cloud_opts["page_size_max"])
    return RawList(total, "virtualmachine", [cloud.vm_json(vm, details) for vm in page])


def _vm(call: Call, param: str = "id") -> Any:
    vm = call.cloud.get_vm(call.get(param), param)
    call.cloud.check_access(vm.owner_id, call.cloud.vm_ref(vm))
    return vm


@handler("stopVirtualMachine")
def stop_virtual_machine(call: Call) -> dict[str, Any]:
    return call.job(call.cloud.stop_vm(_vm(call), forced=bool(call.get("forced"))))


@handler("startVirtualMachine")
def start_virtual_machine(call: Call) -> dict[str, Any]:
    vm = _vm(call)
    hostid = call.get("hostid")
    if hostid and hostid not in call.cloud.hosts:
        raise call.cloud.invalid_uuid("hostid", hostid)
    return call.job(call.cloud.start_vm(vm, hostid=hostid, considerlasthost=call.get("considerlasthost", True)))


@handler("rebootVirtualMachine")
def reboot_virtual_machine(call: Call) -> dict[str, Any]:
    return call.job(call.cloud.reboot_vm(_vm(call)))


def _details_map(call: Call) -> dict[str, str]:
    merged: dict[str, str] = {}
    for row in call.get("details", []) or []:
        merged.update(row)
    return merged


@handler("changeServiceForVirtualMachine")
def change_service_for_virtual_machine(call: Call) -> dict[str, Any]:
    vm = _vm(call)
    offering = call.cloud.get_service_offering(call.get("serviceofferingid"))
    call.cloud.change_service(vm, offering, _details_map(call))
    return {"virtualmachine": call.cloud.vm_view(vm)}


@handler("scaleVirtualMachine")
def scale_virtual_machine(call: Call) -> dict[str, Any]:
    vm = _vm(call)
    offering = call.cloud.get_service_offering(call.get("serviceofferingid"))
    return call.job(call.cloud.scale_vm(vm, offering, _details_map(call)))


@handler("updateVMAffinityGroup")
def update_vm_affinity_group(call: Call) -> dict[str, Any]:
    vm = _vm(call)
    ids = call.get("affinitygroupids")
    if ids is not None:
        for group_id in ids:
            if group_id not in call.cloud.affinity_groups:
                raise call.cloud.invalid_uuid("affinitygroupids", group_id)
    call.cloud.check_affinity_acl(vm, ids or [])
    return call.job(call.cloud.update_affinity(vm, ids, call.get("affinitygroupnames")))


# --- volumes --------------------------------------------------------------------------------


@handler("listVolumes")
def list_volumes(call: Call) -> dict[str, Any]:
    cloud = call.cloud
    wanted_ids = set(call.get("ids") or ([call.get("id")] if call.get("id") else []))
    out = []
    allowed = cloud.list_scope(call.values)
    for volume in cloud.volumes.values():
        if wanted_ids and volume.id not in wanted_ids:
            continue
        if not allowed(cloud.vms[volume.vm_id].owner_id):
            continue
        if call.get("virtualmachineid") and volume.vm_id != call.get("virtualmachineid"):
            continue
        if call.get("type") and volume.type.lower() != call.get("type").lower():
            continue
        if call.get("name") and volume.name != call.get("name"):
            continue
        if call.get("diskofferingid") and volume.disk_offering_id != call.get("diskofferingid"):
            continue
        if call.get("state") and volume.state.lower() != call.get("state").lower():
            continue
        if call.get("hostid") and cloud.vms[volume.vm_id].host_id != call.get("hostid"):
            continue
        if call.get("keyword") and call.get("keyword").lower() not in volume.name.lower():
            continue
        out.append(volume)
    total = len(out)
    if total == 0:
        return {}
    page = apis.paginate(out, call.values, cloud.cloud_opts["page_size_max"])
    return page_body(total, "volume", [cloud.volume_view(v) for v in page])


@handler("resizeVolume")
def resize_volume(call: Call) -> dict[str, Any]:
    volume = call.cloud.get_volume(call.get("id"))
    call.cloud.check_access(call.cloud.vms[volume.vm_id].owner_id, f"Volume {volume.id}")
    offering = call.cloud.get_disk_offering(call.get("diskofferingid")) if call.get("diskofferingid") else None
    size = call.get("size")
    return call.job(call.cloud.resize_volume(volume, size, bool(call.get("shrinkok")), offering))


# --- offerings, groups, hosts, zones ---------------------------------------------------------


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
    return call.listing([t for t in types if _keyword(t, call.get("keyword"), "type")])


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


@handler("listDedicatedHosts")
def list_dedicated_hosts(call: Call) -> dict[str, Any]:
    """ListDedicatedHostsCmd (root admin): DedicatedResourceManagerImpl.listDedicatedHosts."""
    out = []
    for entry in placement.dedicated_host_views(call.cloud):
        if call.get("hostid") and entry["hostid"] != call.get("hostid"):
            continue
        if call.get("domainid") and entry["domainid"] != call.get("domainid"):
            continue
        if call.get("affinitygroupid") and entry["affinitygroupid"] != call.get("affinitygroupid"):
            continue
        if call.get("account") and entry.get("accountname") != call.get("account"):
            continue
        out.append(entry)
    return call.listing(out)


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
        if not _keyword(zone, call.get("keyword"), "name"):
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


# --- owners and limits ----------------------------------------------------------------------


def _limit_fields(cloud: CloudWorld, account: Any) -> dict[str, Any]:
    """AccountJoinVO's limit, total and available for cpu, memory and primary storage (GiB)."""
    out: dict[str, Any] = {}
    for resource, prefix in (("cpu", "cpu"), ("memory", "memory"), ("primarystorage", "primarystorage")):
        limit = cloud.directory.limit("account", account, resource)
        total = cloud.usage("account", account.id, resource)
        if resource == "primarystorage":
            limit = limit if limit == -1 else limit // GIB
            total //= GIB
        out[f"{prefix}limit"] = "Unlimited" if limit == -1 else str(limit)
        out[f"{prefix}total"] = total
        out[f"{prefix}available"] = "Unlimited" if limit == -1 else str(max(limit - total, 0))
    return out


@handler("listAccounts")
def list_accounts(call: Call) -> dict[str, Any]:
    cloud = call.cloud
    directory = cloud.directory
    caller = cloud.caller
    out = []
    for account in directory.accounts.values():
        if account.role == "project":
            continue
        if caller.role == "user" and account.id != caller.id:
            continue
        if caller.role != "user" and not call.get("listall") and not call.get("id") and not call.get("domainid") \
                and not call.get("name") and account.id != caller.id:
            continue
        if caller.role == "domainadmin" and not directory.in_subtree(account.domain_id, caller.domain_id):
            continue
        if call.get("id") and account.id != call.get("id"):
            continue
        if call.get("name") and account.name != call.get("name"):
            continue
        if call.get("domainid") and account.domain_id != call.get("domainid"):
            continue
        domain = directory.domains[account.domain_id]
        out.append({
            "id": account.id, "name": account.name, "accounttype": owners.ACCOUNT_TYPES[account.role],
            "roletype": owners.ROLE_TYPES[account.role], "domainid": domain.id, "domain": domain.name,
            "domainpath": domain.path, "state": "enabled", "isdefault": account.id == directory.primary.id,
            **_limit_fields(cloud, account),
        })
    return call.listing(out)


@handler("listProjects")
def list_projects(call: Call) -> dict[str, Any]:
    cloud = call.cloud
    out = []
    for project in cloud.directory.projects.values():
        if not cloud.directory.can_access(cloud.caller, project.account_id):
            continue
        if call.get("id") and project.id != call.get("id"):
            continue
        if call.get("name") and project.name != call.get("name"):
            continue
        domain = cloud.directory.domains[project.domain_id]
        out.append({"id": project.id, "name": project.name, "displaytext": project.name, "domainid": domain.id,
                    "domain": domain.name, "domainpath": domain.path, "state": "Active",
                    **_limit_fields(cloud, cloud.directory.accounts[project.account_id])})
    return call.listing(out)


@handler("listResourceLimits")
def list_resource_limits(call: Call) -> dict[str, Any]:
    """ResourceLimitManagerImpl.searchForLimits for cpu (8), memory (9), primary_storage (10)."""
    cloud = call.cloud
    directory = cloud.directory
    caller = cloud.caller
    owner: Any = caller
    kind = "account"
    if call.get("projectid"):
        project = directory.projects.get(call.get("projectid"))
        if project is None:
            raise param_error(f"Unable to find project by id {call.get('projectid')}")
        cloud.check_access(project.account_id, f"Project {project.name}")
        owner = directory.accounts[project.account_id]
    elif caller.role != "user" and call.get("domainid"):
        domain = directory.domains.get(call.get("domainid"))
        if domain is None:
            return {}
        if call.get("account"):
            owner = next((a for a in directory.accounts.values()
                          if a.name == call.get("account") and a.domain_id == domain.id), None)
            if owner is None:
                return {}
            cloud.check_access(owner.id, owner.ref())
        else:
            owner, kind = domain, "domain"
    out = []
    for resource, (number, name) in owners.RESOURCE_TYPES.items():
        if call.get("resourcetype") is not None and call.get("resourcetype") != number:
            continue
        if call.get("resourcetypename") and call.get("resourcetypename") != name:
            continue
        limit = directory.limit(kind, owner, resource)
        if resource == "primarystorage" and limit != -1:
            limit //= GIB
        entry: dict[str, Any] = {"resourcetype": str(number), "resourcetypename": name, "max": limit}
        if kind == "account":
            entry.update(directory.owner_fields(owner.id))
        else:
            entry.update(domainid=owner.id, domain=owner.name, domainpath=owner.path)
        out.append(entry)
    return call.listing(out)


# --- tags -----------------------------------------------------------------------------------


@handler("listTags")
def list_tags(call: Call) -> dict[str, Any]:
    out = []
    for tags in call.cloud.tags.values():
        for tag in tags:
            if call.get("resourceid") and tag["resourceid"] != call.get("resourceid").lower():
                continue
            if call.get("resourcetype") and tag["resourcetype"].lower() != call.get("resourcetype").lower():
                continue
            if call.get("key") and tag["key"] != call.get("key"):
                continue
            if call.get("value") and tag["value"] != call.get("value"):
                continue
            if call.get("customer") and tag.get("customer") != call.get("customer"):
                continue
            if not _keyword(tag, call.get("keyword"), "key", "value"):
                continue
            out.append(dict(tag))
    return call.listing(out)


def _tag_rows(call: Call) -> list[dict[str, str]]:
    return [{"key": row.get("key", ""), "value": row.get("value", "")} for row in call.get("tags", []) or []]


@handler("createTags")
def create_tags(call: Call) -> dict[str, Any]:
    ids = [i.lower() for i in call.get("resourceids")]
    return call.job(call.cloud.create_tags(ids, call.get("resourcetype"), _tag_rows(call), call.get("customer")))


@handler("deleteTags")
def delete_tags(call: Call) -> dict[str, Any]:
    ids = [i.lower() for i in call.get("resourceids")]
    rows = _tag_rows(call) if call.get("tags") else None
    return call.job(call.cloud.delete_tags(ids, call.get("resourcetype"), rows))


# --- jobs and discovery ---------------------------------------------------------------------


@handler("queryAsyncJobResult")
def query_async_job_result(call: Call) -> dict[str, Any]:
    job_id = call.get("jobid")
    if not job_id:
        raise param_error("Either jobid or resourceid and resourcetype must be specified")
    job = call.cloud.jobs.get(job_id)
    if job is None:
        raise call.cloud.invalid_uuid("jobid", job_id)
    return call.cloud.job_view(job)


@handler("listAsyncJobs")
def list_async_jobs(call: Call) -> dict[str, Any]:
    # ListAsyncJobsCmd extends BaseListAccountResourcesCmd, not the project variant: a projectid is
    # no parameter of it and is ignored; a job belongs to the account that started it.
    allowed = call.cloud.list_scope({k: v for k, v in call.values.items() if k != "projectid"})
    jobs = sorted((j for j in call.cloud.jobs.values() if allowed(j.caller_id or call.cloud.directory.primary.id)),
                  key=lambda j: j.created, reverse=True)
    views = [call.cloud.job_view(j) for j in jobs]
    keyword = call.get("keyword")
    if keyword:
        # QueryManagerImpl.searchForAsyncJobsInternal: sc.addAnd("cmd", LIKE, "%" + keyword + "%").
        views = [v for v in views if str(keyword).lower() in str(v["cmd"]).lower()]
    return call.listing(views)


# --- the API rate limit (plugins/api/rate-limit) -------------------------------------------


def _rate_limit(call: Call) -> ApiRateLimit:
    limit: ApiRateLimit = call.sim.api_rate_limit
    if not limit.enabled:
        raise CloudError(UNSUPPORTED_ACTION_ERROR, DISABLED_TEXT, CS_SERVER_API)
    return limit


@handler("getApiLimit")
def get_api_limit(call: Call) -> dict[str, Any]:
    # GetApiLimitCmd.execute: searchApiLimit(caller), object name "apilimit".
    limit = _rate_limit(call)
    caller = call.cloud.caller
    return {"apilimit": {"accountid": caller.id, "account": caller.name, **limit.search(caller.id)}}


@handler("resetApiLimit")
def reset_api_limit(call: Call) -> dict[str, Any]:
    limit = _rate_limit(call)
    account = call.get("account")
    if account is not None and account not in call.cloud.directory.accounts:
        raise call.cloud.invalid_uuid("account", account)
    limit.reset(account)
    return {"success": True}


@handler("listApis")
def list_apis(call: Call) -> dict[str, Any]:
    return call.listing(apis.list_apis(call.get("name"), call.cloud.is_admin))


@handler("listCapabilities")
def list_capabilities(call: Call) -> dict[str, Any]:
    cloud = call.cloud
    return {"capability": {
        "cloudstackversion": cloud.cloud_opts["version"], "securitygroupsenabled": False,
        "userpublictemplateenabled": True, "supportELB": "false", "projectinviterequired": False,
        "allowusercreateprojects": True, "customdiskofferingminsize": 1, "customdiskofferingmaxsize": 1024,
        "kubernetesserviceenabled": True, "kubernetesclusterexperimentalfeaturesenabled": False,
        "dynamicscalingenabled": cloud.dynamic_scale, "apilimitinterval": 1, "apilimitmax": 0,
        "defaultuipagesize": 20, "allowuserviewdestroyedvm": False, "allowuserexpungerecovervm": False,
        "allowuserforcestopvm": True, "kvmsnapshotenabled": False, "instanceleaseenabled": False,
    }}


# --- the WSGI application -------------------------------------------------------------------


class CloudStackApp:
    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self.callers = sim.cloud.directory.by_apikey()
        if sim.api_rate_limit is None:
            sim.api_rate_limit = ApiRateLimit(lambda: sim.cloud.cloud_opts, sim.clock.real)
        self.secrets = {key: account.secretkey or "" for key, account in self.callers.items()}

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        request = Request(environ)
        response = self.handle(request, environ)
        return response(environ, start_response)

    @staticmethod
    def _params(request: Request) -> dict[str, str]:
        params: dict[str, str] = {}
        for source in (request.args, request.form):
            for key in source.keys():
                params.setdefault(key, source.get(key, ""))
        return params

    def _json(self, body: dict[str, Any], status: int, text: Optional[str] = None) -> Response:
        response = Response(json.dumps(body, separators=(",", ":")), status=status,
                            content_type="application/json;charset=utf-8")
        if text is not None:
            response.headers["X-Description"] = text.encode("ascii", "replace").decode("ascii")[:1000]
        return response

    def _error(self, response_name: str, code: int, text: str, cserrorcode: Optional[int]) -> Response:
        body: dict[str, Any] = {"uuidList": [], "errorcode": code}
        if cserrorcode is not None:
            body["cserrorcode"] = cserrorcode
        body["errortext"] = text
        return self._json({response_name: body}, code, text)

    def handle(self, request: Request, environ: dict[str, Any]) -> Response:
        if request.path.rstrip("/") != API_PATH:
            return Response("Not Found", status=404, content_type="text/html")
        delay = self.sim.faults.latency("cloudstack") + self.sim.delay("api_latency")
        if delay > 0:
            time.sleep(delay)
        params = self._params(request)
        name = params.get("command", "")
        logged = {k: v for k, v in params.items() if k.lower() not in HIDDEN_PARAMS and k != "command"}
        transient = self.sim.faults.transient("cloudstack")
        if transient == "drop":
            self.sim.calls.add(api="cloudstack", command=name, params=logged, status=0, errorcode=None, fault="drop")
            drop_connection(environ)
            return Response(b"", status=500)
        if transient is not None:
            self.sim.calls.add(api="cloudstack", command=name, params=logged, status=503, errorcode=503, fault="5xx")
            return Response("<html><body><h1>503 Service Unavailable</h1></body></html>", status=503,
                            content_type="text/html")
        response, errorcode, extra = self._dispatch(request, params, name)
        if self.sim.faults.take("lost_answer", command=name) is not None:
            # Carried out (a job was queued, a change made), but the answer never reaches the client.
            self.sim.calls.add(api="cloudstack", command=name, params=logged, status=0, errorcode=errorcode,
                               fault="lost_answer", **extra)
            drop_connection(environ)
            return Response(b"", status=500)
        self.sim.calls.add(api="cloudstack", command=name, params=logged, status=response.status_code,
                           errorcode=errorcode, **extra)
        return response

    def _dispatch(self, request: Request, params: dict[str, str], name: str) -> tuple[Response, Optional[int], dict[str, Any]]:
        definition = apis.command(name) if name in HANDLERS else None
        response_name = definition["response_name"] if definition else "errorresponse"
        try:
            caller = self.callers[verify(params, self.secrets)]
        except SignatureError:
            return self._error(response_name, 401, UNAUTHORIZED_TEXT, None), 401, {}
        if definition is None:
            # verifyRequest refuses a command it does not know before it even checks the signature.
            return self._error("errorresponse", 401, UNAUTHORIZED_TEXT, None), 401, {}
        # ApiServer.commandAvailable -> checkCommandAvailable: the API checkers, ApiRateLimitServiceImpl among
        # them, before the command's parameters are processed; RequestLimitException -> API_LIMIT_EXCEED.
        wait_ms = self.sim.api_rate_limit.check(caller.id, root_admin=caller.role == "admin")
        if wait_ms is not None:
            text = ApiRateLimit.text(wait_ms)
            return (self._error(response_name, API_LIMIT_EXCEED, text, CS_SERVER_API), API_LIMIT_EXCEED,
                    {"throttled": True, "account": caller.name, "retry_after_ms": wait_ms})
        if caller.role != "admin" and name in apis.ADMIN_ONLY_COMMANDS:
            # DynamicRoleBasedAPIAccessChecker.checkAccess: a role without the API throws
            # UnavailableCommandException; ApiServer.commandAvailable answers it 432
            # (UNSUPPORTED_ACTION_ERROR), and getSerializedApiError names it errorresponse.
            text = f"The API [{name}] does not exist or is not available for the account {caller.ref()}."
            return self._error("errorresponse", 432, text, CS_SERVER_API), 432, {}
        fault = self.sim.faults.take("cloudstack_error", command=name)
        if fault is not None:
            code = int(fault.get("code", 530))
            text = str(fault.get("errortext", f"cks-sim fault on {name}"))
            return self._error(response_name, code, text, int(fault.get("cserrorcode", 4250))), code, {"fault": "cloudstack_error"}
        cloud = self.sim.cloud
        try:
            with self.sim.lock:
                cloud.caller = caller
                try:
                    values = apis.parse_params(definition, params, cloud.is_admin)
                    body = HANDLERS[name](Call(self.sim, name, definition, values))
                finally:
                    cloud.caller = cloud.directory.primary
        except CloudError as err:
            return self._error(response_name, err.code, err.text, err.cserrorcode), err.code, {}
        if isinstance(body, RawList):
            return Response(body.encode(response_name), status=200, content_type="application/json;charset=utf-8"), None, {}
        extra = {"jobid": body["jobid"]} if isinstance(body, dict) and "jobid" in body else {}
        return self._json({response_name: body}, 200), None, extra
