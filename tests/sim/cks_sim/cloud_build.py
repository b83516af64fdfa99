"""The CloudStack world of cks-sim built from the spec: host clusters, hosts (also added at run
time), disk and service offerings, affinity groups and dedications, Kubernetes versions, and
each CKS cluster with its network, public IP, node VMs, ROOT volumes and port forwarding rules.
A mixin over ``cloud_state.CloudState``: methods only."""

from __future__ import annotations

import time
from typing import Any, Optional

from . import cloud_live_scale, placement
from . import spec as specmod
from .cloud_entities import GB, VM, AffinityGroup, Cluster, DiskOffering, Host, Network, PortForwardingRule, PublicIp, ServiceOffering, Volume, iso
from .cloud_lookups import CloudLookups


class CloudBuild(CloudLookups):
    """Construction from the spec, and the VM records CKS creates later."""

    def _build(self, spec: dict[str, Any]) -> None:
        for c in spec.get("host_clusters", []):
            zone_id = self.zone_by_name[c["zone"]]
            cluster = placement.HostCluster(self.side_ids.uuid(), c["name"], zone_id, zone_id,
                                            c["cpu_overcommit_ratio"], c["memory_overcommit_ratio"], c["hypervisor"],
                                            c["kvm_cpu_dynamic_scaling_capacity"], c["kvm_memory_dynamic_scaling_capacity"])
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
            service = ServiceOffering(self.ids.uuid(), s["name"], s["cpu"], s["memory"], s["cpuspeed"], s["rootdisksize"],
                                      disk_id, s["diskofferingstrictness"], s["dynamicscalingenabled"], s["iscustomized"],
                                      s["displaytext"], s["state"], self._stamp())
            self.service_offerings[service.id] = service
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
            cluster_by_name = {c.name: c.id for c in self.host_clusters.values()}
            group.dedicated_cluster_ids = [cluster_by_name[n] for n in g.get("clusters", [])]
            group.dedicated_pod_ids = [self.zone_by_name[n] for n in g.get("pods", [])]
            group.dedicated_zone_ids = [self.zone_by_name[n] for n in g.get("zones", [])]
            self.affinity_groups[group.id] = group
            for _kind, resource_id in group.dedicated():
                self.dedication_ids[(group.id, resource_id)] = self.side_ids.uuid()
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
        if c.get("autoscaling"):
            cluster.autoscaling = c["autoscaling"]["enabled"]
            cluster.minsize, cluster.maxsize = c["autoscaling"]["minsize"], c["autoscaling"]["maxsize"]
            cluster.autoscaler_options = c["autoscaling"]
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
            # UserVmManagerImpl.checkIfDynamicScalingCanBeEnabled: CKS asks for it; the template, the
            # offering and the zone must all allow it.
            vm.dynamically_scalable = (c["dynamically_scalable"] and offering.dynamicscalingenabled
                                       and self.zones[cluster.zone_id]["dynamic_scale"])
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
                cloud_live_scale.record_domain(self, vm, host, c["started_on_version"])
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
