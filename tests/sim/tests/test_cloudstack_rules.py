"""The rules CloudStack enforces on a rollout's calls, through the real `cs` client."""

from __future__ import annotations

import pytest
from cs import CloudStackApiException

from simkit import small_spec


def _stop(handle, vm):
    return handle.cs().stopVirtualMachine(id=vm["id"], fetch_result=True)["virtualmachine"]


def _job_error(call, **kwargs):
    with pytest.raises(CloudStackApiException) as caught:
        call(fetch_result=True, **kwargs)
    return caught.value.error


def test_offering_change_needs_a_stopped_vm(sim):
    cs = sim.cs()
    vm = sim.node_vms("worker")[0]
    large = sim.offering("cks-large")
    with pytest.raises(CloudStackApiException) as caught:
        cs.changeServiceForVirtualMachine(id=vm["id"], serviceofferingid=large["id"])
    assert caught.value.response.status_code == 431
    assert caught.value.error["errorcode"] == 431 and caught.value.error["cserrorcode"] == 4350
    assert "make sure the virtual machine is stopped" in caught.value.error["errortext"]
    _stop(sim, vm)
    changed = cs.changeServiceForVirtualMachine(id=vm["id"], serviceofferingid=large["id"])["virtualmachine"]
    assert (changed["serviceofferingname"], changed["cpunumber"], changed["memory"]) == ("cks-large", 4, 8192)
    listed = cs.listVirtualMachines(id=vm["id"])["virtualmachine"][0]
    assert (listed["serviceofferingid"], listed["cpunumber"]) == (large["id"], 4)
    # The offering change leaves the ROOT disk alone (allow.diskoffering.change.during.scale.vm=false).
    assert cs.listVolumes(virtualmachineid=vm["id"], type="ROOT")["volume"][0]["size"] == 20 * 2**30


def test_same_offering_is_refused(sim):
    vm = sim.node_vms("worker")[0]
    _stop(sim, vm)
    with pytest.raises(CloudStackApiException) as caught:
        sim.cs().changeServiceForVirtualMachine(id=vm["id"], serviceofferingid=vm["serviceofferingid"])
    assert caught.value.error["errorcode"] == 431
    assert "already has the requested service offering" in caught.value.error["errortext"]


def test_disk_offering_strictness_must_match(sim):
    vm = sim.node_vms("worker")[0]
    _stop(sim, vm)
    with pytest.raises(CloudStackApiException) as caught:
        sim.cs().changeServiceForVirtualMachine(id=vm["id"], serviceofferingid=sim.offering("cks-strict")["id"])
    assert caught.value.error["errorcode"] == 431
    assert "strictness" in caught.value.error["errortext"]


def test_scale_of_a_running_vm_fails_in_the_job(sim):
    vm = sim.node_vms("worker")[0]
    error = _job_error(sim.cs().scaleVirtualMachine, id=vm["id"], serviceofferingid=sim.offering("cks-large")["id"])
    assert error["errorcode"] == 431
    _stop(sim, vm)
    scaled = sim.cs().scaleVirtualMachine(id=vm["id"], serviceofferingid=sim.offering("cks-large")["id"],
                                          fetch_result=True)
    assert scaled["virtualmachine"]["serviceofferingname"] == "cks-large"


def test_root_disk_grows_in_gb_and_never_shrinks(sim):
    cs = sim.cs()
    vm = sim.node_vms("worker")[0]
    root = cs.listVolumes(virtualmachineid=vm["id"], type="ROOT")["volume"][0]
    grown = cs.resizeVolume(id=root["id"], size=30, fetch_result=True)["volume"]
    assert grown["size"] == 30 * 2**30  # bytes in responses, GB in the request
    error = _job_error(cs.resizeVolume, id=root["id"], size=25)
    assert error["errorcode"] == 432 and "shrinkok" in error["errortext"]
    error = _job_error(cs.resizeVolume, id=root["id"], size=25, shrinkok=True)
    assert error["errorcode"] == 432 and "QCOW2" in error["errortext"]
    job = cs.listAsyncJobs()["asyncjobs"][0]
    assert (job["jobstatus"], job["jobresultcode"], job["jobresult"]["errorcode"]) == (2, 432, 432)
    assert cs.listVolumes(id=root["id"])["volume"][0]["size"] == 30 * 2**30


def _spec_with_worker_on(offering: str) -> dict:
    raw = small_spec()
    raw["clusters"][0]["nodes"] = [{"type": "worker", "index": 0, "offering": offering}]
    return raw


def test_strict_disk_offering_refuses_a_resize(sim_factory):
    handle = sim_factory(spec=_spec_with_worker_on("cks-strict"))
    cs = handle.cs()
    vm = handle.node_vms("worker")[0]
    root = cs.listVolumes(virtualmachineid=vm["id"], type="ROOT")["volume"][0]
    assert (root["diskofferingname"], root["size"]) == ("fixed-50", 50 * 2**30)
    error = _job_error(cs.resizeVolume, id=root["id"], size=60)
    assert error["errorcode"] == 432 and "strictly fixed" in error["errortext"]
    custom = cs.listDiskOfferings(name="custom-root")["diskoffering"][0]
    _stop(handle, vm)
    error = _job_error(cs.resizeVolume, id=root["id"], size=60, diskofferingid=custom["id"])
    assert error["errorcode"] == 432


def test_size_only_resize_is_refused_when_the_offering_fixes_rootdisksize(sim_factory):
    handle = sim_factory(spec=_spec_with_worker_on("cks-fixed-root"))
    cs = handle.cs()
    vm = handle.node_vms("worker")[0]
    root = cs.listVolumes(virtualmachineid=vm["id"], type="ROOT")["volume"][0]
    assert root["size"] == 40 * 2**30
    assert cs.listDiskOfferings(id=root["diskofferingid"]) == {}  # compute-only
    error = _job_error(cs.resizeVolume, id=root["id"], size=60)
    assert error["errorcode"] == 432 and "root disk size" in error["errortext"]


def test_root_resize_with_a_disk_offering_needs_a_stopped_vm(sim_factory):
    raw = small_spec()
    raw["disk_offerings"].append({"name": "custom-root-2", "size": 0, "iscustomized": True})
    handle = sim_factory(spec=raw)
    cs = handle.cs()
    vm = handle.node_vms("worker")[0]
    root = cs.listVolumes(virtualmachineid=vm["id"], type="ROOT")["volume"][0]
    other = cs.listDiskOfferings(name="custom-root-2")["diskoffering"][0]
    error = _job_error(cs.resizeVolume, id=root["id"], size=30, diskofferingid=other["id"])
    assert error["errorcode"] == 432 and "Stopped" in error["errortext"]
    # A size-only resize of the same ROOT disk is done live on KVM.
    assert cs.resizeVolume(id=root["id"], size=25, fetch_result=True)["volume"]["size"] == 25 * 2**30
    _stop(handle, vm)
    resized = cs.resizeVolume(id=root["id"], size=30, diskofferingid=other["id"], fetch_result=True)["volume"]
    assert (resized["size"], resized["diskofferingid"]) == (30 * 2**30, other["id"])
    fixed = cs.listDiskOfferings(name="fixed-50")["diskoffering"][0]
    error = _job_error(cs.resizeVolume, id=root["id"], diskofferingid=fixed["id"])
    assert error["errorcode"] == 432 and "strictness" in error["errortext"]


def test_affinity_update_needs_a_stopped_vm_and_replaces_the_list(sim):
    cs = sim.cs()
    vm = sim.node_vms("worker")[0]
    spread = sim.group("workers-spread")
    dedication = sim.group("dedicated-admin")
    error = _job_error(cs.updateVMAffinityGroup, id=vm["id"], affinitygroupids=[spread["id"]])
    assert error["errorcode"] == 431 and "make sure the virtual machine is stopped" in error["errortext"]
    _stop(sim, vm)
    updated = cs.updateVMAffinityGroup(id=vm["id"], affinitygroupids=[spread["id"]], fetch_result=True)
    # The whole list is replaced: the dedication group is gone because it was not passed.
    assert [g["name"] for g in updated["virtualmachine"]["affinitygroup"]] == ["workers-spread"]
    updated = cs.updateVMAffinityGroup(id=vm["id"], affinitygroupnames=["dedicated-admin", "workers-spread"],
                                       fetch_result=True)
    assert [g["id"] for g in updated["virtualmachine"]["affinitygroup"]] == [dedication["id"], spread["id"]]
    error = _job_error(cs.updateVMAffinityGroup, id=vm["id"], affinitygroupids=[spread["id"]],
                       affinitygroupnames=["workers-spread"])
    assert error["errorcode"] == 431 and "mutually exclusive" in error["errortext"]
    with pytest.raises(CloudStackApiException) as caught:  # a malformed id is refused before any job
        cs.updateVMAffinityGroup(id=vm["id"], affinitygroupids=["nope"])
    assert caught.value.error["errorcode"] == 431


def _anti_affinity_spec(hosts: int, workers: int, stopped_last: bool) -> dict:
    raw = small_spec()
    raw["hosts"] = [{"name": f"kvm-{i + 1}", "cpu": 64, "memory": 262144} for i in range(hosts)]
    cluster = raw["clusters"][0]
    cluster["control_nodes"] = 1
    cluster["workers"] = workers
    cluster["affinity_groups"] = {"control": [], "worker": ["workers-spread"], "etcd": []}
    if stopped_last:
        cluster["nodes"] = [{"type": "worker", "index": workers - 1, "state": "Stopped"}]
    return raw


def test_strict_anti_affinity_with_no_host_left_is_533(sim_factory):
    handle = sim_factory(spec=_anti_affinity_spec(hosts=2, workers=3, stopped_last=True))
    cs = handle.cs()
    workers = handle.node_vms("worker")
    assert len({vm["hostid"] for vm in workers if vm["state"] == "Running"}) == 2
    stopped = next(vm for vm in workers if vm["state"] == "Stopped")
    error = _job_error(cs.startVirtualMachine, id=stopped["id"])
    assert error["errorcode"] == 533
    assert "affinity groups" in error["errortext"]
    assert cs.listAsyncJobs()["asyncjobs"][0]["jobresultcode"] == 533
    assert handle.vm(stopped["name"])["state"] == "Stopped"


def test_a_recently_stopped_peer_keeps_its_host_reserved(sim_factory):
    handle = sim_factory(spec=_anti_affinity_spec(hosts=2, workers=3, stopped_last=True))
    cs = handle.cs()
    running = [vm for vm in handle.node_vms("worker") if vm["state"] == "Running"]
    stopped = next(vm for vm in handle.node_vms("worker") if vm["state"] == "Stopped")
    _stop(handle, running[0])  # its host is free, but reserved for vm.capacity.release.interval
    assert _job_error(cs.startVirtualMachine, id=stopped["id"])["errorcode"] == 533
    handle.admin("POST", "/actions", {"action": "set_config", "cloud": {"capacity_release_interval": 0}})
    started = cs.startVirtualMachine(id=stopped["id"], fetch_result=True)["virtualmachine"]
    assert started["hostid"] == running[0]["hostid"]


def test_a_stopped_vm_restarts_on_its_last_host(sim):
    vm = sim.node_vms("worker")[2]
    _stop(sim, vm)
    started = sim.cs().startVirtualMachine(id=vm["id"], fetch_result=True)["virtualmachine"]
    assert started["hostid"] == vm["hostid"]


def test_non_strict_anti_affinity_is_best_effort(sim_factory):
    raw = _anti_affinity_spec(hosts=2, workers=3, stopped_last=True)
    raw["clusters"][0]["affinity_groups"]["worker"] = ["workers-soft"]
    handle = sim_factory(spec=raw)
    stopped = next(vm for vm in handle.node_vms("worker") if vm["state"] == "Stopped")
    started = handle.cs().startVirtualMachine(id=stopped["id"], fetch_result=True)["virtualmachine"]
    assert started["state"] == "Running"


def test_start_capacity_fault_is_533_once(sim):
    vm = sim.node_vms("worker")[0]
    _stop(sim, vm)
    sim.admin("POST", "/faults", {"kind": "start_capacity", "vm": vm["name"], "count": 1})
    error = _job_error(sim.cs().startVirtualMachine, id=vm["id"])
    assert error["errorcode"] == 533
    assert sim.cs().startVirtualMachine(id=vm["id"], fetch_result=True)["virtualmachine"]["state"] == "Running"


def test_host_capacity_limits_placement(sim_factory):
    raw = small_spec()
    # CapacityManagerImpl counts CPU in MHz: 16 cores x 2000 MHz, 8 VMs x 2 cores x 2000 MHz: full.
    raw["hosts"] = [{"name": "kvm-1", "cpu": 16, "cpuspeed": 2000, "memory": 65536}]
    raw["clusters"][0]["control_nodes"] = 1
    raw["clusters"][0]["workers"] = 7
    handle = sim_factory(spec=raw)
    vm = handle.node_vms("worker")[0]
    _stop(handle, vm)
    handle.cs().changeServiceForVirtualMachine(id=vm["id"], serviceofferingid=handle.offering("cks-large")["id"])
    assert _job_error(handle.cs().startVirtualMachine, id=vm["id"])["errorcode"] == 533


def test_timeline_and_hooks_follow_a_node_cycle(sim):
    cs = sim.cs()
    vm = sim.node_vms("worker")[0]
    node = vm["name"].lower()
    _stop(sim, vm)
    cs.changeServiceForVirtualMachine(id=vm["id"], serviceofferingid=sim.offering("cks-large")["id"])
    root = cs.listVolumes(virtualmachineid=vm["id"], type="ROOT")["volume"][0]
    cs.resizeVolume(id=root["id"], size=25, fetch_result=True)
    cs.updateVMAffinityGroup(id=vm["id"], affinitygroupnames=["dedicated-admin"], fetch_result=True)
    cs.startVirtualMachine(id=vm["id"], fetch_result=True)
    events = [e for e in sim.admin("GET", "/timeline") if e.get("node") == node]
    names = [e["event"] for e in events]
    ordered = ["stop_requested", "stopped", "offering_changed", "volume_resized", "affinity_updated",
               "start_requested", "started"]
    assert [n for n in names if n in ordered] == ordered
    powered_on = next(e for e in events if e["event"] == "powered_on")
    assert (powered_on["cpu"], powered_on["memory"]) == (4, 8192)  # the CURRENT offering
    assert "powered_off" in names
    # The Kubernetes node sees the new capacity once it is back.
    world = sim.sim.kube[sim.env["cluster_id"]]
    assert world.has_node(node)


def test_too_many_nodes_down_is_an_invariant_violation(sim):
    cs = sim.cs()
    first, second = sim.node_vms("worker")[:2]
    cs.stopVirtualMachine(id=first["id"], fetch_result=True)
    assert sim.admin("GET", "/invariants") == []
    cs.stopVirtualMachine(id=second["id"], fetch_result=True)
    [violation] = sim.admin("GET", "/invariants")
    assert violation["kind"] == "too_many_unavailable" and violation["node_type"] == "worker"
    assert set(violation["down"]) == {first["name"].lower(), second["name"].lower()}


def test_stop_of_a_stopped_vm_is_a_no_op(sim):
    # A start of a Running VM is refused (test_cloudstack_start_running.py); a stop of a
    # Stopped one returns at once (VirtualMachineManagerImpl.advanceStop).
    vm = sim.node_vms("worker")[0]
    _stop(sim, vm)
    assert _stop(sim, vm)["state"] == "Stopped"


def test_jobs_on_one_vm_run_one_after_the_other(sim):
    cs = sim.cs()
    vm = sim.node_vms("worker")[0]
    stop = cs.stopVirtualMachine(id=vm["id"])
    start = cs.startVirtualMachine(id=vm["id"])
    assert cs._jobresult(start["jobid"])["virtualmachine"]["state"] == "Running"
    assert cs.queryAsyncJobResult(jobid=stop["jobid"])["jobstatus"] == 1
