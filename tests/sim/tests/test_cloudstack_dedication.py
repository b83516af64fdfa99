"""Dedicated hosts, clusters, pods and zones in cks-sim, through the real `cs` client over HTTP.

Followed in apache/cloudstack (4.19-4.22):

- ``DeploymentPlanningManagerImpl.checkForNonDedicatedResources``: a zone dedicated to another
  account (or to a domain whose group the owner's domain may not use) fails the deployment with
  "Failed to deploy VM, Zone <name> not available for the user account ..." unless the owner is a
  root admin; a user VM without an ExplicitDedication group gets every dedicated pod, cluster and
  host of the zone in its avoid list, whoever they are dedicated to.
- ``ExplicitDedicationProcessor``: a VM of a dedication group goes only where its group's hosts,
  clusters, pods or zones are.
- ``ListDedicated{Hosts,Clusters,Pods,Zones}Cmd`` (parameters: the resource's ID, ``domainid``,
  ``account``, ``affinitygroupid``) and ``DedicatedResourceManagerImpl.createDedicate*Response``.
"""

from __future__ import annotations

import pytest
from cs import CloudStackApiException

from cks_sim.spec import SpecError, normalize
from simkit import small_spec


def _hosts(n: int) -> list[dict]:
    return [{"name": f"kvm-{i + 1}", "cpu": 64, "memory": 262144} for i in range(n)]


def _group(handle, name: str) -> dict:
    return handle.cs().listAffinityGroups(name=name, listall=True)["affinitygroup"][0]


def _two_clusters_spec() -> dict:
    """kvm-1, kvm-2 in the zone's cluster; kvm-3, kvm-4 in ``rack-b``, dedicated to the account ``other``."""
    raw = small_spec()
    raw["domains"] = [{"name": "tenants", "parent": "ROOT"}]
    raw["accounts"] = [{"name": "other", "domain": "tenants", "role": "user", "apikey": "other-key",
                        "secretkey": "other-secret"}]
    raw["host_clusters"] = [{"name": "rack-b"}]
    raw["hosts"] = _hosts(2) + [dict(h, cluster="rack-b") for h in _hosts(4)[2:]]
    raw["affinity_groups"].append({"name": "dedicated-other", "type": "ExplicitDedication", "account": "other",
                                   "clusters": ["rack-b"]})
    raw["clusters"][0].update(control_nodes=1, workers=2, dedication_group=None)
    return raw


def test_list_dedicated_clusters_pods_and_zones_name_the_owner(sim_factory):
    raw = _two_clusters_spec()
    raw["zones"] = [{"name": "zone-2"}]
    raw["hosts"].append({"name": "kvm-9", "zone": "zone-2"})
    raw["affinity_groups"].append({"name": "dedicated-tenants", "type": "ExplicitDedication", "domain": "tenants",
                                   "pods": ["zone-2"]})
    handle = sim_factory(spec=raw)
    cs = handle.cs()
    [cluster] = cs.listDedicatedClusters(fetch_list=True)
    group = _group(handle, "dedicated-other")
    assert set(cluster) == {"id", "clusterid", "clustername", "domainid", "domainname", "accountid", "accountname",
                            "affinitygroupid"}
    assert (cluster["clustername"], cluster["accountname"], cluster["domainname"], cluster["affinitygroupid"]) == (
        "rack-b", "other", "tenants", group["id"])
    [pod] = cs.listDedicatedPods(fetch_list=True)
    # Dedicated to a domain: no account in the answer.
    assert (pod["podname"], pod["domainname"], "accountname" in pod) == ("pod-1", "tenants", False)
    assert cs.listDedicatedZones(fetch_list=True) == []
    assert cs.listDedicatedClusters(account="admin", domainid=cluster["domainid"], fetch_list=True) == []
    assert cs.listDedicatedPods(podid=pod["podid"])["count"] == 1
    # The group names what is dedicated to it.
    assert [(r["resourcetype"], r["resourcename"]) for r in group["dedicatedresources"]] == [("Cluster", "rack-b")]
    # A root admin's commands: another account's key is answered 432 (DynamicRoleBasedAPIAccessChecker).
    other = handle.cs(key="other-key", secret="other-secret")
    for command in ("listDedicatedClusters", "listDedicatedPods", "listDedicatedZones"):
        with pytest.raises(CloudStackApiException) as caught:
            getattr(other, command)()
        assert caught.value.error["errorcode"] == 432
        assert caught.value.error["errortext"].startswith(f"The API [{command}] does not exist or is not available")


def test_a_dedicated_cluster_keeps_other_vms_off_its_hosts(sim_factory):
    handle = sim_factory(spec=_two_clusters_spec())
    cs = handle.cs()
    hosts = {h["id"]: h["name"] for h in cs.listHosts(fetch_list=True)}
    for vm in handle.node_vms("worker") + handle.node_vms("control"):
        assert hosts[vm["hostid"]] in ("kvm-1", "kvm-2")
    worker = handle.node_vms("worker")[0]
    cs.stopVirtualMachine(id=worker["id"], fetch_result=True)
    # Naming a host of the dedicated cluster does not get past the avoid list either.
    kvm3 = next(i for i, n in hosts.items() if n == "kvm-3")
    with pytest.raises(CloudStackApiException) as caught:
        cs.startVirtualMachine(id=worker["id"], hostid=kvm3, fetch_result=True)
    assert caught.value.error["errorcode"] == 533


def test_a_vm_of_the_dedication_goes_to_its_clusters_hosts(sim_factory):
    handle = sim_factory(spec=_two_clusters_spec())
    cs = handle.cs()
    hosts = {h["id"]: h["name"] for h in cs.listHosts(fetch_list=True)}
    worker = handle.node_vms("worker")[0]
    cs.stopVirtualMachine(id=worker["id"], fetch_result=True)
    handle.sim.cloud.vms[worker["id"]].affinity_group_ids = [_group(handle, "dedicated-other")["id"]]
    started = cs.startVirtualMachine(id=worker["id"], fetch_result=True)["virtualmachine"]
    assert hosts[started["hostid"]] in ("kvm-3", "kvm-4")


def test_a_zone_dedicated_to_another_account_fails_the_start_of_a_vm_not_of_a_root_admin(sim_factory):
    raw = small_spec()
    raw["domains"] = [{"name": "tenants", "parent": "ROOT"}]
    raw["accounts"] = [{"name": "ops", "domain": "tenants", "role": "domainadmin", "apikey": "ops-key",
                        "secretkey": "ops-secret"},
                       {"name": "other", "domain": "tenants", "role": "user"}]
    raw["affinity_groups"].append({"name": "dedicated-other", "type": "ExplicitDedication", "account": "other"})
    raw["clusters"][0].update(control_nodes=1, workers=2, dedication_group=None, account="ops")
    handle = sim_factory(spec=raw)
    cs = handle.cs()
    # Dedicated after the cluster was made (dedicateZone at run time, as an operator does).
    group = handle.sim.cloud.group_by_name("dedicated-other")
    group.dedicated_zone_ids.append(handle.sim.cloud.zone_id)
    handle.sim.cloud.dedication_ids[(group.id, handle.sim.cloud.zone_id)] = "zone-dedication"
    [zone] = cs.listDedicatedZones(fetch_list=True)
    assert (zone["zonename"], zone["accountname"]) == ("zone-1", "other")
    worker = next(vm for vm in cs.listVirtualMachines(listall=True, fetch_list=True) if "-node-" in vm["name"])
    cs.stopVirtualMachine(id=worker["id"], fetch_result=True)
    with pytest.raises(CloudStackApiException) as caught:
        cs.startVirtualMachine(id=worker["id"], fetch_result=True)
    error = caught.value.error
    assert error["errorcode"] == 530
    assert error["errortext"].startswith("Failed to deploy VM, Zone zone-1 not available for the user account "
                                         'Account {"accountName":"ops"')


def test_the_spec_refuses_a_resource_dedicated_twice_or_unknown():
    raw = _two_clusters_spec()
    raw["affinity_groups"].append({"name": "again", "type": "ExplicitDedication", "clusters": ["rack-b"]})
    with pytest.raises(SpecError, match=r"clusters: 'rack-b' is dedicated already \(to dedicated-other\)"):
        normalize(raw)
    raw = _two_clusters_spec()
    raw["affinity_groups"][-1]["zones"] = ["zone-9"]
    with pytest.raises(SpecError, match="zones: no zone named 'zone-9'"):
        normalize(raw)
    raw = _two_clusters_spec()
    raw["affinity_groups"].append({"name": "spread", "type": "host anti-affinity", "pods": ["zone-1"]})
    with pytest.raises(SpecError, match="only ExplicitDedication groups have dedicated pods"):
        normalize(raw)
