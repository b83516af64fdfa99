"""The API's views of cks-sim's CloudStack world: the CloudStack response objects (UserVmResponse,
VolumeResponse, offerings, affinity groups, hosts, zones, KubernetesClusterResponse, the async
job), the cached JSON of a VM for long lists, the admin snapshot, and what the Kubernetes and
etcd sides are told about a cluster's VMs. A mixin over ``cloud_state.CloudState``: methods only."""

from __future__ import annotations

import json
import time
from typing import Any, Optional

from . import cloud_live_scale, placement
from .cloud_entities import GB, VM, AffinityGroup, Cluster, DiskOffering, Host, Job, ServiceOffering, Volume, iso
from .cloud_lookups import CloudLookups

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


class CloudViews(CloudLookups):
    """CloudStack response objects, built from the records as the API shows them to the caller."""

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
            "zonename": self.vm_zone(vm)["name"], "hypervisor": cloud_live_scale.hypervisor_of(self, vm),
            "isdynamicallyscalable": vm.dynamically_scalable, "arch": "x86_64",
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
                {"resourceid": rid, "resourcename": placement.resource_name(self.world, kind, rid), "resourcetype": kind}
                for kind, rid in group.dedicated()
            ]
        return view

    def host_view(self, host: Host, usage: tuple[int, int], details: Optional[set[str]] = None) -> dict[str, Any]:
        return placement.host_view(self.world, host, usage, details)

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
