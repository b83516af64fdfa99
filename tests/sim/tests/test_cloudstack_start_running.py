"""startVirtualMachine of a Running VM fails in its job.

``UserVmManagerImpl.startVirtualMachine`` checks ``vm.getState() == State.Running`` first and
throws InvalidParameterValueException("The virtual machine <uuid> (<display name>) is already
running"); ``ApiAsyncJobDispatcher.runJob`` turns that into a failed job with PARAM_ERROR (431).
"""

from __future__ import annotations

import pytest
from cs import CloudStackApiException


def test_start_of_a_running_vm_fails_431_and_changes_nothing(sim):
    cs = sim.cs()
    vm = sim.node_vms("worker")[0]
    before = sim.vm(vm["name"])
    with pytest.raises(CloudStackApiException) as caught:
        cs.startVirtualMachine(id=vm["id"], fetch_result=True)
    error = caught.value.error
    assert error["errorcode"] == 431
    assert error["errortext"] == f"The virtual machine {vm['id']} ({vm['name']}) is already running"
    job = cs.listAsyncJobs()["asyncjobs"][0]
    assert (job["jobstatus"], job["jobresultcode"]) == (2, 431)
    after = sim.vm(vm["name"])
    assert (after["state"], after["hostid"]) == ("Running", before["hostid"])
    assert not [e for e in sim.admin("GET", "/timeline") if e.get("event") in ("started", "stopped")]


def test_a_stopped_vm_still_starts(sim):
    cs = sim.cs()
    vm = sim.node_vms("worker")[0]
    cs.stopVirtualMachine(id=vm["id"], fetch_result=True)
    assert cs.startVirtualMachine(id=vm["id"], fetch_result=True)["virtualmachine"]["state"] == "Running"
