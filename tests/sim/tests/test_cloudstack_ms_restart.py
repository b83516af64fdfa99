"""A management server restart in the middle of a batch (admin action restart_management_server).

While it is down its API port refuses connections. When it comes back,
``AsyncJobManagerImpl.cleanupLeftOverJobs`` has failed every job it was running: status FAILED,
result code ``ApiErrorCode.INTERNAL_ERROR`` (530), result the plain text "job cancelled because
of management server restart or shutdown". ``AsyncJobJoinDaoImpl.newAsyncJobResponse`` reads
the result back with ``ApiSerializerHelper.fromSerializedString``, which gives null for a text
without "/", so queryAsyncJobResult shows no ``jobresult`` at all. The VM is wherever the
hypervisor left it: a stop that the hypervisor was doing still ends Stopped; work queued behind
it never runs.
"""

from __future__ import annotations

import time

import pytest
import requests

from cks_sim.harness import wait_until
from simkit import small_spec


def _down(handle) -> bool:
    try:
        requests.get(handle.env["cloudstack_endpoint"], timeout=2)
    except requests.exceptions.ConnectionError as exc:
        return "refused" in str(exc).lower()
    return False


def test_the_api_refuses_connections_and_running_jobs_end_failed_530(sim_factory):
    raw = small_spec()
    raw["timings"]["stop"] = 200  # 2 real seconds at the tests' time scale: still stopping at the restart
    sim = sim_factory(spec=raw)
    cs = sim.cs()
    vm = sim.node_vms("worker")[0]
    stop = cs.stopVirtualMachine(id=vm["id"])
    start = cs.startVirtualMachine(id=vm["id"])  # queued behind the stop on the VM's work queue
    answer = sim.admin("POST", "/actions", {"action": "restart_management_server", "seconds": 1.0})
    assert set(answer["cancelled_jobs"]) == {stop["jobid"], start["jobid"]}
    assert _down(sim)
    with pytest.raises(requests.exceptions.ConnectionError):
        cs.listVirtualMachines(id=vm["id"])
    wait_until(lambda: not _down(sim), timeout=10)
    for jobid in (stop["jobid"], start["jobid"]):
        job = cs.queryAsyncJobResult(jobid=jobid)
        assert (job["jobstatus"], job["jobresultcode"]) == (2, 530)
        assert "jobresult" not in job and "jobresulttype" not in job
    # The hypervisor finished the stop; the start never ran.
    wait_until(lambda: cs.listVirtualMachines(id=vm["id"])["virtualmachine"][0]["state"] == "Stopped")
    time.sleep(0.3)
    assert cs.listVirtualMachines(id=vm["id"])["virtualmachine"][0]["state"] == "Stopped"
    events = [e["event"] for e in sim.admin("GET", "/timeline") if e.get("node") == vm["name"].lower()]
    assert "stopped" in events and "started" not in events
    # New work is served as usual once it is back.
    assert cs.startVirtualMachine(id=vm["id"], fetch_result=True)["virtualmachine"]["state"] == "Running"


def test_a_bad_restart_request_names_what_to_change(sim):
    response = requests.post(sim.env["admin_url"] + "/actions",
                             json={"action": "restart_management_server", "seconds": "soon"}, timeout=5)
    assert response.status_code == 400
    assert "seconds must be a number" in response.text
    assert not _down(sim)
