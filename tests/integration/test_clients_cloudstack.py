"""The CloudStack client through the real ``cs`` library, over HTTP, against cks-sim.

One sim for the module, with more than 500 node VMs so that paging is real. Every test leaves
the VMs it touched running again.
"""

from __future__ import annotations

import os
from typing import Any, Iterator

import pytest
import yaml
from helpers import running_sim

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.cloudstack import CloudStackClient
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.cloudstack_options import CloudStackOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CloudStackError, DeadlineExceeded
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKERS = 560
CONTROL = 3


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with open(os.path.join(ROOT, "tests", "sim", "examples", "small.yml"), encoding="utf-8") as fh:
        spec = yaml.safe_load(fh)
    spec["clusters"][0]["workers"] = WORKERS
    spec["clusters"][0]["control_nodes"] = CONTROL
    spec["hosts"] = [{"name": f"kvm-{i}", "cpu": 1024, "memory": 4194304} for i in range(1, 5)]
    # A stop takes 1 s real: long enough for a short deadline to run out while it is pending.
    spec["timings"]["stop"] = 50
    spec["workloads"] = [w for w in spec["workloads"] if w["kind"] == "DaemonSet"]
    spec["pdbs"] = []
    path = tmp_path_factory.mktemp("spec") / "many-workers.yml"
    path.write_text(yaml.safe_dump(spec))
    with running_sim(str(path)) as handle:
        yield handle


@pytest.fixture(autouse=True)
def no_faults(sim: Any) -> Iterator[None]:
    yield
    sim.admin("DELETE", "/faults")


def options(sim: Any, **extra: Any) -> CloudStackOptions:
    return CloudStackOptions(api_url=sim.env["cloudstack_endpoint"], api_key=sim.env["cloudstack_key"],
                             api_secret=sim.env["cloudstack_secret"], **extra)


@pytest.fixture()
def client(sim: Any) -> CloudStackClient:
    return CloudStackClient(options(sim, poll_interval=0.05))


def worker_vm(client: CloudStackClient, index: int = 0) -> dict[str, Any]:
    vms = sorted((vm for vm in client.list("listVirtualMachines", listall=True) if "-node-" in vm["name"]),
                 key=lambda vm: vm["name"])
    return vms[index]


def test_list_pages_through_more_than_500_vms(client: CloudStackClient) -> None:
    vms = client.list("listVirtualMachines", listall=True)
    assert len(vms) == WORKERS + CONTROL
    assert len({vm["id"] for vm in vms}) == len(vms)
    assert client.calls["listVirtualMachines"] == 2  # 500 + 63


def test_kube_nodes_page_with_continue_past_500(client: CloudStackClient, sim: Any) -> None:
    import time

    from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube import KubeClient
    from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube_options import KubeOptions

    since = time.time()
    with KubeClient.connect(KubeOptions(), cloudstack=client, cluster_id=sim.env["cluster_id"]) as kube:
        nodes = kube.list_nodes()
    assert len({n["metadata"]["name"] for n in nodes}) == WORKERS + CONTROL
    lists = [c for c in sim.calls(since) if c.get("api") == "kubernetes" and c.get("path", "").endswith("/api/v1/nodes")]
    assert len(lists) == 2


def test_list_with_a_filter_and_a_single_page(client: CloudStackClient, sim: Any) -> None:
    [cluster] = client.list("listKubernetesClusters", id=sim.env["cluster_id"])
    assert cluster["name"] == sim.env["cluster_name"]
    assert client.calls["listKubernetesClusters"] == 1


def test_async_job_is_awaited_and_returns_the_vm(client: CloudStackClient) -> None:
    vm = worker_vm(client, 1)
    stopped = client.run_job("stopVirtualMachine", Deadline(60), target=vm["name"], id=vm["id"])
    assert stopped["id"] == vm["id"] and stopped["state"] == "Stopped"
    assert client.calls["queryAsyncJobResult"] >= 2  # pending at least once: the stop takes a second
    started = client.run_job("startVirtualMachine", Deadline(60), target=vm["name"], id=vm["id"])
    assert started["state"] == "Running"


def test_the_next_job_of_a_command_is_first_polled_when_the_last_one_ended(client: CloudStackClient) -> None:
    """Two stops of 1 s each: the first is polled from the interval on, backing off; the second about
    when the first ended (learned from the sim's real jobs), so it costs one or two polls where
    0.05 s polls cost some twenty."""
    first, second = worker_vm(client, 5), worker_vm(client, 6)
    try:
        for vm in (first, second):
            client.run_job("stopVirtualMachine", Deadline(60), target=vm["name"], id=vm["id"])
        one, two = client.job_times.waits
        assert one.polls >= 3 and 0.9 <= one.seconds <= 2.5
        assert two.polls <= 2 < one.polls
        assert client.calls["queryAsyncJobResult"] == one.polls + two.polls
        after, by = client.job_times.learned()["stopVirtualMachine"]
        assert 0.5 <= after <= by and by >= 0.9
    finally:
        for vm in (first, second):
            client.run_job("startVirtualMachine", Deadline(60), target=vm["name"], id=vm["id"])


def _job_slack(sim: Any, since: float, vm_name: str, jobid: str) -> float:
    """Seconds from the sim's ``stopped`` event of the VM to the first poll of the job after it."""
    events = sim.admin("GET", f"/timeline?since={since}")
    events = events.get("timeline", []) if isinstance(events, dict) else events
    stopped = min(e["t"] for e in events if e.get("event") == "stopped" and e.get("vm") == vm_name)
    polls = [c["t"] for c in sim.calls(since) if c.get("command") == "queryAsyncJobResult"
             and (c.get("params") or {}).get("jobid") == jobid]
    return min(t for t in polls if t >= stopped) - stopped


def test_the_slack_of_a_rollouts_jobs_shrinks_job_after_job(sim: Any) -> None:
    """Fewer job polls for the management server: stops of 1 s, one after the other as the batches of a rollout make them, with a prior
    four times too long (an operator's guess): the first is seen ended about two seconds late, and the
    schedule narrows what it knows job after job until a stop is seen ended within about a tenth of
    it, at one or two polls a job (the sim's own clock: its stop event and the poll that saw it)."""
    client = CloudStackClient(options(sim))  # the module's default poll_interval, 0.5 s
    client.job_times.give_priors({"stopVirtualMachine": 4.0})
    vms = [worker_vm(client, 10 + i) for i in range(8)]
    slack, polls = [], []
    try:
        for vm in vms:
            since = sim.state()["time"]
            client.run_job("stopVirtualMachine", Deadline(60), target=vm["name"], id=vm["id"])
            wait = client.job_times.waits[-1]
            slack.append(_job_slack(sim, since, vm["name"], wait.jobid))
            polls.append(wait.polls)
            client.run_job("startVirtualMachine", Deadline(60), target=vm["name"], id=vm["id"])
    finally:
        for vm in vms:
            if client.list("listVirtualMachines", id=vm["id"])[0]["state"] != "Running":
                client.run_job("startVirtualMachine", Deadline(60), target=vm["name"], id=vm["id"])
    # The prior put the first poll at 3 s (the middle of [2, 4]): two seconds after the stop's end.
    assert slack[0] >= 1.0, slack
    # The last stops: within the tolerance (0.1 s here) give or take a loaded machine's scheduling.
    assert max(slack[-3:]) <= 0.3 and sum(slack[-3:]) / 3 < slack[0] / 4, slack
    assert max(polls) <= 3 and sum(polls[-4:]) <= 8, polls


def test_job_failure_carries_cloudstack_code_and_text(client: CloudStackClient, sim: Any) -> None:
    vm = worker_vm(client, 2)
    client.run_job("stopVirtualMachine", Deadline(60), id=vm["id"])
    sim.fault(kind="start_capacity", vm=vm["name"], count=1)
    with pytest.raises(CloudStackError) as info:
        client.run_job("startVirtualMachine", Deadline(60), target=vm["name"], id=vm["id"])
    assert info.value.errorcode == 533
    assert info.value.command == "startVirtualMachine" and vm["name"] in info.value.msg
    assert client.calls["startVirtualMachine"] == 1
    assert client.run_job("startVirtualMachine", Deadline(60), id=vm["id"])["state"] == "Running"


def test_deadline_names_command_and_job(client: CloudStackClient) -> None:
    vm = worker_vm(client, 3)
    with pytest.raises(DeadlineExceeded) as info:
        client.run_job("stopVirtualMachine", Deadline(0.2), target=vm["name"], id=vm["id"])
    jobid = info.value.details["jobid"]
    assert jobid and jobid in info.value.msg and "stopVirtualMachine" in info.value.msg
    # The job goes on in CloudStack: it can still be awaited by id.
    job = client.call("queryAsyncJobResult", jobid=jobid)
    assert job["jobid"] == jobid
    _wait_state(client, vm, "Stopped")
    client.run_job("startVirtualMachine", Deadline(60), id=vm["id"])


def _state(client: CloudStackClient, vm: dict[str, Any]) -> str:
    [current] = client.list("listVirtualMachines", id=vm["id"])
    return current["state"]


def _wait_state(client: CloudStackClient, vm: dict[str, Any], state: str) -> None:
    from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import wait_for

    wait_for(lambda: _state(client, vm) == state, Deadline(60), interval=0.1, what=f"{vm['name']} {state}")


def test_bad_secret_fails_with_401_and_no_secret_in_the_message(sim: Any) -> None:
    wrong = "not-the-secret-" + "x" * 20
    client = CloudStackClient(CloudStackOptions(api_url=sim.env["cloudstack_endpoint"],
                                                api_key=sim.env["cloudstack_key"], api_secret=wrong))
    with pytest.raises(CloudStackError) as info:
        client.list("listZones")
    assert info.value.errorcode == 401
    assert "unable to verify user credentials" in info.value.msg
    for leaked in (wrong, sim.env["cloudstack_secret"], "signature="):
        assert leaked not in info.value.msg and leaked not in str(info.value.details)
    assert client.calls["listZones"] == 1  # a 401 is not retried


def test_cloudstack_refusal_is_not_retried(client: CloudStackClient) -> None:
    vm = worker_vm(client, 4)
    offerings = client.list("listServiceOfferings")
    other = next(o for o in offerings if o["name"] == "cks-large")
    with pytest.raises(CloudStackError) as info:
        client.call("changeServiceForVirtualMachine", target=vm["name"], id=vm["id"], serviceofferingid=other["id"])
    assert info.value.errorcode == 431 and info.value.errortext
    assert client.calls["changeServiceForVirtualMachine"] == 1


def test_reads_ride_out_transient_5xx(client: CloudStackClient, sim: Any) -> None:
    sim.fault(kind="transient", api="cloudstack", rate=1.0, mode="5xx", count=2)
    assert client.list("listZones")
    assert client.calls["listZones"] == 3


def test_reads_ride_out_dropped_connections(client: CloudStackClient, sim: Any) -> None:
    sim.fault(kind="transient", api="cloudstack", rate=1.0, mode="drop", count=1)
    assert client.call("getKubernetesClusterConfig", id=sim.env["cluster_id"])["clusterconfig"]["configdata"]
    assert client.calls["getKubernetesClusterConfig"] == 2


def test_a_change_that_lost_its_connection_is_not_sent_again(client: CloudStackClient, sim: Any) -> None:
    vm = worker_vm(client, 5)
    sim.fault(kind="transient", api="cloudstack", rate=1.0, mode="drop", count=1)
    with pytest.raises(CloudStackError) as info:
        client.run_job("stopVirtualMachine", Deadline(30), target=vm["name"], id=vm["id"])
    assert "may or may not" in info.value.msg
    assert client.calls["stopVirtualMachine"] == 1
    assert _state(client, vm) == "Running"  # the sim dropped it before acting


def test_post_method_works_too(sim: Any) -> None:
    client = CloudStackClient(options(sim, api_http_method="post"))
    assert len(client.list("listVirtualMachines", listall=True)) == WORKERS + CONTROL
