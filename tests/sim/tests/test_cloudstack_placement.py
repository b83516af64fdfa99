"""CloudStack's deployment planner and the zone's hosts, through the real `cs` client over HTTP.

Each test names the CloudStack class and method it follows (apache/cloudstack 4.19-4.22):
``DeploymentPlanningManagerImpl.planDeployment`` (last host first, ``avoidDisabledHosts``,
``checkForNonDedicatedResources``), ``FirstFitAllocator`` with ``CapacityManagerImpl.checkIfHostHasCapacity``
(overcommit ratios), ``HostAntiAffinityProcessor``, ``ExplicitDedicationProcessor``,
``VirtualMachineManagerImpl.orchestrateStart`` + ``StartVMCmd.execute`` (the 533 text),
``HostJoinDaoImpl.newHostResponse`` (listHosts), ``DynamicRoleBasedAPIAccessChecker.checkAccess`` +
``ApiServer.commandAvailable`` (432 for a role without the API).
"""

from __future__ import annotations

import os

import pytest
from cs import CloudStackApiException

from cks_sim.harness import wait_until
from cks_sim.spec import load_spec
from simkit import small_spec

TENANTS = os.path.join(os.path.dirname(__file__), "..", "examples", "tenants.yml")
GIB = 1 << 30


def _job_error(call, **kwargs):
    with pytest.raises(CloudStackApiException) as caught:
        call(fetch_result=True, **kwargs)
    return caught.value.error


def _spread_spec(hosts: list[dict], workers: int, stopped: int = 0) -> dict:
    """One control node (no group) and ``workers`` workers in the strict anti-affinity group."""
    raw = small_spec()
    raw["hosts"] = hosts
    cluster = raw["clusters"][0]
    cluster["control_nodes"] = 1
    cluster["workers"] = workers
    cluster["affinity_groups"] = {"control": [], "worker": ["workers-spread"], "etcd": []}
    cluster["nodes"] = [{"type": "worker", "index": workers - 1 - i, "state": "Stopped"} for i in range(stopped)]
    return raw


def _hosts(n: int, **fields) -> list[dict]:
    return [{"name": f"kvm-{i + 1}", "cpu": 64, "memory": 262144, **fields} for i in range(n)]


def _stopped_worker(handle) -> dict:
    return next(vm for vm in handle.node_vms("worker") if vm["state"] == "Stopped")


def _host_name(handle, host_id: str) -> str:
    return handle.cs().listHosts(id=host_id)["host"][0]["name"]


# -- listHosts, listClusters, listDedicatedHosts ------------------------------------------------


HOST_FIELDS = {
    "id", "name", "type", "state", "resourcestate", "ipaddress", "zoneid", "zonename", "podid", "podname",
    "clusterid", "clustername", "clustertype", "hypervisor", "hypervisorversion", "version", "created",
    "cpunumber", "cpuspeed", "cpusockets", "cpuallocated", "cpuallocatedvalue", "cpuallocatedpercentage",
    "cpuallocatedwithoverprovisioning", "cpuwithoverprovisioning", "memorytotal", "memorywithoverprovisioning",
    "memoryallocated", "memoryallocatedbytes", "memoryallocatedpercentage", "hahost", "islocalstorageactive",
    "hasannotations", "arch", "lastpinged", "managementserverid", "managementservername", "outofbandmanagement",
}


def test_list_hosts_shows_capacity_with_the_clusters_overcommit_ratios(sim_factory):
    """HostJoinDaoImpl.newHostResponse: cpunumber and memorytotal with the ratios, MHz allocated, "#.##" percentages."""
    raw = small_spec()
    raw["host_clusters"] = [{"name": "dense", "cpu_overcommit_ratio": 2.0, "memory_overcommit_ratio": 1.5}]
    raw["hosts"] = [{"name": "kvm-1", "cpu": 48, "cpuspeed": 2000, "memory": 98304, "cluster": "dense"}]
    raw["clusters"][0].update(control_nodes=1, workers=2)
    handle = sim_factory(spec=raw)
    [host] = handle.cs().listHosts(fetch_list=True)
    assert set(host) == HOST_FIELDS
    assert (host["type"], host["state"], host["resourcestate"], host["clustername"]) == ("Routing", "Up", "Enabled", "dense")
    assert host["cpunumber"] == 96  # 48 cores x cpuOvercommitRatio 2
    assert host["cpuwithoverprovisioning"] == "192000"  # 48 x 2000 MHz x 2
    # Three Running cks-medium VMs: 3 x 2 cores x 2000 MHz, 3 x 4096 MB.
    assert host["cpuallocatedvalue"] == 12000
    assert host["cpuallocated"] == host["cpuallocatedpercentage"] == "6.25%"
    assert host["memorytotal"] == int(98304 * 1.5) * 2**20
    assert host["memoryallocated"] == host["memoryallocatedbytes"] == 3 * 4096 * 2**20
    assert host["memoryallocatedpercentage"] == "8.33%"
    [cluster] = handle.cs().listClusters(fetch_list=True)
    assert (cluster["id"], cluster["cpuovercommitratio"], cluster["memoryovercommitratio"]) == (host["clusterid"], "2.0", "1.5")


def test_list_hosts_filters_and_details(sim_factory):
    """ListHostsCmd: resourcestate/state filters; details=min leaves out names and capacities."""
    raw = small_spec()
    raw["hosts"] = _hosts(3) + [{"name": "kvm-4", "resourcestate": "Maintenance"}, {"name": "kvm-5", "state": "Down"}]
    handle = sim_factory(spec=raw)
    cs = handle.cs()
    assert [h["name"] for h in cs.listHosts(resourcestate="Maintenance")["host"]] == ["kvm-4"]
    assert [h["name"] for h in cs.listHosts(state="Down")["host"]] == ["kvm-5"]
    minimal = cs.listHosts(name="kvm-1", details="min")["host"][0]
    assert "memorytotal" not in minimal and "zonename" not in minimal and minimal["cpunumber"] == 64
    with pytest.raises(CloudStackApiException) as caught:
        cs.listHosts(details="everything")
    assert caught.value.error["errorcode"] == 431
    assert "allowed values are [all, capacity, events, stats, min]" in caught.value.error["errortext"]


def test_host_commands_are_refused_432_to_a_domain_admin(sim_factory):
    """DynamicRoleBasedAPIAccessChecker.checkAccess throws UnavailableCommandException; ApiServer answers 432."""
    spec = load_spec(TENANTS)
    spec["time_scale"] = 0.01
    handle = sim_factory(spec=spec)
    entry = next(k for k in handle.env["keys"] if k["account"] == "ops")
    ops = handle.cs(key=entry["apikey"], secret=entry["secretkey"])
    for command in ("listHosts", "listClusters", "listDedicatedHosts"):
        with pytest.raises(CloudStackApiException) as caught:
            getattr(ops, command)()
        assert caught.value.response.status_code == 432
        text = caught.value.error["errortext"]
        assert text.startswith(f"The API [{command}] does not exist or is not available for the account Account {{")
        assert '"accountName":"ops"' in text
    listed = {api["name"] for api in ops.listApis()["api"]}
    assert {"listHosts", "listClusters", "listDedicatedHosts"}.isdisjoint(listed)


def test_every_command_served_is_in_list_apis_with_its_parameters(sim):
    """ApiDiscoveryServiceImpl.listApis: the owners' and jobs' commands with their real parameters."""
    apis = {api["name"]: api for api in sim.cs().listApis()["api"]}
    expected = {
        "listAccounts": {"accounttype", "apikeyaccess", "details", "domainid", "id", "iscleanuprequired", "isrecursive",
                         "keyword", "listall", "name", "page", "pagesize", "showicon", "state", "tag"},
        "listAsyncJobs": {"account", "domainid", "isrecursive", "keyword", "listall", "managementserverid", "page",
                          "pagesize", "resourceid", "resourcetype", "startdate"},
        "listProjects": {"account", "details", "displaytext", "domainid", "id", "isrecursive", "keyword", "listall",
                         "name", "page", "pagesize", "showicon", "state", "tags", "username"},
        "listResourceLimits": {"account", "domainid", "id", "isrecursive", "keyword", "listall", "page", "pagesize",
                               "projectid", "resourcetype", "resourcetypename", "tag"},
        "listDedicatedHosts": {"account", "affinitygroupid", "domainid", "hostid", "keyword", "page", "pagesize"},
    }
    for name, params in expected.items():
        assert {p["name"] for p in apis[name]["params"]} - {"response"} == params, name
    assert {"cpuovercommitratio", "memoryovercommitratio"} <= {r["name"] for r in apis["listClusters"]["response"]}
    assert {"resourcestate", "cpuwithoverprovisioning"} <= {r["name"] for r in apis["listHosts"]["response"]}


def test_list_dedicated_hosts_names_the_dedication(sim_factory):
    """DedicatedResourceManagerImpl.listDedicatedHosts / createDedicateHostResponse."""
    raw = small_spec()
    raw["hosts"] = _hosts(4)
    raw["affinity_groups"][0]["hosts"] = ["kvm-3", "kvm-4"]  # dedicated-admin
    handle = sim_factory(spec=raw)
    cs = handle.cs()
    dedicated = cs.listDedicatedHosts(fetch_list=True)
    assert sorted(d["hostname"] for d in dedicated) == ["kvm-3", "kvm-4"]
    group = handle.group("dedicated-admin")
    assert {(d["affinitygroupid"], d["accountname"], d["domainname"]) for d in dedicated} == {(group["id"], "admin", "ROOT")}
    assert cs.listDedicatedHosts(hostid=dedicated[0]["hostid"])["count"] == 1


# -- the planner ---------------------------------------------------------------------------------


def test_hosts_not_up_and_enabled_are_never_used(sim_factory):
    """planDeployment/avoidDisabledHosts and FirstFitAllocator: only Up and Enabled hosts take a VM."""
    raw = _spread_spec(_hosts(2) + [{"name": "kvm-3", "resourcestate": "Maintenance"},
                                    {"name": "kvm-4", "resourcestate": "Disabled"},
                                    {"name": "kvm-5", "state": "Down"}], workers=3, stopped=1)
    handle = sim_factory(spec=raw)
    stopped = _stopped_worker(handle)
    error = _job_error(handle.cs().startVirtualMachine, id=stopped["id"])
    assert error["errorcode"] == 533
    # VirtualMachineManagerImpl.orchestrateStart + StartVMCmd.execute: the VM has affinity groups.
    assert error["errortext"] == (f"Unable to create a deployment for VM instance {{\"id\":"
                                  f"{handle.sim.cloud.vms[stopped['id']].number},\"instanceName\":\"{stopped['instancename']}\","
                                  f"\"name\":\"{stopped['name']}\",\"state\":\"Stopped\",\"type\":\"User\",\"uuid\":\"{stopped['id']}\"}}"
                                  ", Please check the affinity groups provided, there may not be sufficient capacity to follow them")
    # The operator ends the maintenance: the host is Enabled again and takes the VM.
    handle.admin("POST", "/actions", {"action": "set_host", "host": "kvm-3", "resourcestate": "Enabled"})
    started = handle.cs().startVirtualMachine(id=stopped["id"], fetch_result=True)["virtualmachine"]
    assert _host_name(handle, started["hostid"]) == "kvm-3"


def test_the_last_host_in_maintenance_is_passed_over(sim_factory):
    """planDeployment: the last host is tried first only when it is Up and Enabled."""
    handle = sim_factory(spec=_spread_spec(_hosts(3), workers=2))
    worker = handle.node_vms("worker")[0]
    handle.cs().stopVirtualMachine(id=worker["id"], fetch_result=True)
    last = _host_name(handle, worker["hostid"])
    handle.admin("POST", "/actions", {"action": "set_host", "host": last, "resourcestate": "PrepareForMaintenance"})
    started = handle.cs().startVirtualMachine(id=worker["id"], fetch_result=True)["virtualmachine"]
    assert started["hostid"] != worker["hostid"]


def test_a_host_added_at_run_time_takes_the_refused_vm(sim_factory):
    """HostAntiAffinityProcessor avoids the members' hosts; an added host gives the group room."""
    handle = sim_factory(spec=_spread_spec(_hosts(2), workers=3, stopped=1))
    stopped = _stopped_worker(handle)
    assert _job_error(handle.cs().startVirtualMachine, id=stopped["id"])["errorcode"] == 533
    added = handle.admin("POST", "/actions", {"action": "add_host", "name": "kvm-9", "cpu": 32, "memory": 131072})
    started = handle.cs().startVirtualMachine(id=stopped["id"], fetch_result=True)["virtualmachine"]
    assert started["hostid"] == added["id"]
    assert handle.cs().listHosts(name="kvm-9")["host"][0]["cpuallocatedvalue"] == 2 * 2000


def test_overcommit_ratio_decides_whether_a_host_has_room(sim_factory):
    """CapacityManagerImpl.checkIfHostHasCapacity: free memory is total x memoryOvercommitRatio - allocated."""
    raw = small_spec()
    raw["host_clusters"] = [{"name": "small", "memory_overcommit_ratio": 1.0}]
    # 4 x 4096 MB fit; the fifth VM only with a ratio above 1.
    raw["hosts"] = [{"name": "kvm-1", "cpu": 64, "memory": 4 * 4096, "cluster": "small"}]
    raw["clusters"][0].update(control_nodes=1, workers=4, nodes=[{"type": "worker", "index": 3, "state": "Stopped"}])
    handle = sim_factory(spec=raw)
    stopped = _stopped_worker(handle)
    error = _job_error(handle.cs().startVirtualMachine, id=stopped["id"])
    assert error["errorcode"] == 533
    # Only the dedication group (ExplicitDedication): still a group, so the hint is there.
    assert error["errortext"].endswith("there may not be sufficient capacity to follow them")
    handle.admin("POST", "/actions", {"action": "set_host_cluster", "cluster": "small", "memory_overcommit_ratio": 1.5})
    assert handle.cs().listHosts()["host"][0]["memorytotal"] == 6 * 4096 * 2**20
    assert handle.cs().startVirtualMachine(id=stopped["id"], fetch_result=True)["virtualmachine"]["state"] == "Running"


def test_dedicated_hosts_take_only_vms_of_the_dedication(sim_factory):
    """checkForNonDedicatedResources keeps other VMs off dedicated hosts; ExplicitDedicationProcessor keeps
    the dedication's VMs on them."""
    raw = small_spec()
    raw["hosts"] = _hosts(3)
    raw["affinity_groups"].append({"name": "dedicated-3", "type": "ExplicitDedication", "hosts": ["kvm-3"]})
    raw["clusters"][0].update(control_nodes=1, workers=2, dedication_group=None)
    handle = sim_factory(spec=raw)
    hosts = {h["id"]: h["name"] for h in handle.cs().listHosts(fetch_list=True)}
    vms = handle.node_vms("worker") + handle.node_vms("control")
    assert {hosts[vm["hostid"]] for vm in vms} <= {"kvm-1", "kvm-2"}
    worker = handle.node_vms("worker")[0]
    cs = handle.cs()
    cs.stopVirtualMachine(id=worker["id"], fetch_result=True)
    cs.updateVMAffinityGroup(id=worker["id"], affinitygroupnames=["dedicated-3"], fetch_result=True)
    started = cs.startVirtualMachine(id=worker["id"], fetch_result=True)["virtualmachine"]
    assert hosts[started["hostid"]] == "kvm-3"
    handle.admin("POST", "/actions", {"action": "set_host", "host": "kvm-3", "state": "Disconnected"})
    cs.stopVirtualMachine(id=worker["id"], fetch_result=True)
    assert _job_error(cs.startVirtualMachine, id=worker["id"])["errorcode"] == 533


# -- the start race ------------------------------------------------------------------------------


def _race_handle(sim_factory):
    raw = _spread_spec(_hosts(3), workers=2, stopped=2)
    raw.setdefault("cloud", {})["capacity_release_interval"] = 0
    return sim_factory(spec=raw)


def _wait_job(handle, job_id):
    cs = handle.cs()
    return wait_until(lambda: (r := cs.queryAsyncJobResult(jobid=job_id))["jobstatus"] != 0 and r)


def test_overlapping_starts_in_a_strict_group_can_share_a_host(sim_factory):
    """apache/cloudstack issue 9110: planDeployment runs when each start job begins, the host is taken
    when the VM is up; two starts that overlap both see the same free host."""
    handle = _race_handle(sim_factory)
    cs = handle.cs()
    first, second = handle.node_vms("worker")
    jobs = [cs.startVirtualMachine(id=vm["id"], considerlasthost=False)["jobid"] for vm in (first, second)]
    results = [_wait_job(handle, job) for job in jobs]
    assert [r["jobstatus"] for r in results] == [1, 1]
    hosts = {r["jobresult"]["virtualmachine"]["hostid"] for r in results}
    assert len(hosts) == 1  # both members of the strict anti-affinity group on one host
    events = [e for e in handle.admin("GET", "/timeline") if e["event"] in ("start_began", "start_ended")]
    began = [e["t"] for e in events if e["event"] == "start_began"]
    ended = [e["t"] for e in events if e["event"] == "start_ended"]
    assert max(began) < min(ended)  # the two starts overlapped
    [broken] = [v for v in handle.admin("GET", "/invariants") if v["kind"] == "anti_affinity_broken"]
    assert broken["group"] == "workers-spread" and set(broken["others"].values()) == {broken["host"]}


def test_starts_one_after_another_keep_the_group_apart(sim_factory):
    """HostAntiAffinityProcessor.process: a start planned after the first member is up avoids its host."""
    handle = _race_handle(sim_factory)
    cs = handle.cs()
    started = [cs.startVirtualMachine(id=vm["id"], considerlasthost=False, fetch_result=True)["virtualmachine"]
               for vm in handle.node_vms("worker")]
    assert len({vm["hostid"] for vm in started}) == 2
    events = [e for e in handle.admin("GET", "/timeline") if e["event"] in ("start_began", "start_ended")]
    assert [e["event"] for e in events] == ["start_began", "start_ended", "start_began", "start_ended"]
    assert [e["ok"] for e in events if e["event"] == "start_ended"] == [True, True]
    assert events[0]["vm"] == events[1]["vm"] != events[2]["vm"]
    assert [v for v in handle.admin("GET", "/invariants") if v["kind"] == "anti_affinity_broken"] == []


# -- examples/placement.yml: the operator's case -------------------------------------------------


def test_the_placement_example_cannot_hold_four_strict_members_on_three_hosts(sim_factory):
    """HostAntiAffinityProcessor + avoidDisabledHosts: the host in Maintenance does not count."""
    spec = load_spec(os.path.join(os.path.dirname(__file__), "..", "examples", "placement.yml"))
    spec["time_scale"] = 0.01
    handle = sim_factory(spec=spec)
    root = handle.cs(key="root-key", secret="root-secret")
    usable = [h for h in root.listHosts(fetch_list=True) if (h["state"], h["resourcestate"]) == ("Up", "Enabled")]
    assert len(usable) == 3
    spread = root.listAffinityGroups(name="alice-spread", listall=True)["affinitygroup"][0]
    workers = [vm for vm in root.listVirtualMachines(listall=True, fetch_list=True) if "-node-" in vm["name"]]
    outcomes = []
    for vm in workers:
        root.stopVirtualMachine(id=vm["id"], fetch_result=True)
        groups = [g["id"] for g in vm["affinitygroup"]] + [spread["id"]]
        root.updateVMAffinityGroup(id=vm["id"], affinitygroupids=groups, fetch_result=True)
        try:
            outcomes.append(root.startVirtualMachine(id=vm["id"], fetch_result=True)["virtualmachine"]["hostid"])
        except CloudStackApiException as exc:
            outcomes.append(exc.error["errorcode"])
    assert outcomes[3] == 533 and len(set(outcomes[:3])) == 3


def test_a_host_given_by_a_root_admin_skips_the_affinity_processors(sim_factory):
    """planDeployment: with plan.getHostId() the host is used unless avoided (disabled, dedicated);
    the affinity group chain runs only after that branch."""
    handle = sim_factory(spec=_spread_spec(_hosts(3), workers=2))
    cs = handle.cs()
    first, second = handle.node_vms("worker")
    cs.stopVirtualMachine(id=second["id"], fetch_result=True)
    started = cs.startVirtualMachine(id=second["id"], hostid=first["hostid"], fetch_result=True)["virtualmachine"]
    assert started["hostid"] == first["hostid"]
    cs.stopVirtualMachine(id=second["id"], fetch_result=True)
    handle.admin("POST", "/actions", {"action": "set_host", "host": _host_name(handle, first["hostid"]),
                                      "resourcestate": "Disabled"})
    assert _job_error(cs.startVirtualMachine, id=second["id"], hostid=first["hostid"])["errorcode"] == 533
