"""The CloudStack API of cks-sim through the real `cs` client: signing, errors, jobs, lists."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from typing import Optional

import pytest
import requests
from cs import CloudStack, CloudStackApiException, CloudStackException

from cks_sim import apis
from cks_sim.harness import wait_until
from cks_sim.signing import sign
from simkit import SIM_DIR, small_spec

# The checkout (its parent holds shared/reference when the shared reference is beside it).
ROOT = os.path.dirname(os.path.dirname(SIM_DIR))


def test_wrong_secret_is_refused_with_401(sim):
    bad = sim.cs(secret="not-the-secret")
    with pytest.raises(CloudStackApiException) as caught:
        bad.listVirtualMachines()
    assert caught.value.response.status_code == 401
    assert caught.value.error["errorcode"] == 401
    assert caught.value.error["errortext"] == "unable to verify user credentials and/or request signature"
    # The error sits under the command's own response name, as the management server puts it.
    assert "listvirtualmachinesresponse" in caught.value.response.json()


def test_unknown_api_key_is_refused(sim):
    with pytest.raises(CloudStackApiException) as caught:
        sim.cs(key="someone-else").listZones()
    assert caught.value.error["errorcode"] == 401


def test_expired_request_is_refused(sim):
    cs = sim.cs()
    past = (datetime.now(timezone.utc) - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S%z")
    with pytest.raises(CloudStackApiException) as caught:
        cs.listZones(signatureVersion="3", expires=past)
    assert caught.value.error["errorcode"] == 401
    future = (datetime.now(timezone.utc) + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S%z")
    assert cs.listZones(signatureVersion="3", expires=future)["count"] == 1


def test_signature_uses_java_url_encoding(sim):
    """Java's URLEncoder encodes '~' where Python's quote does not: cs signs such a value wrongly."""
    cs = sim.cs()
    with pytest.raises(CloudStackApiException) as caught:
        cs.listVirtualMachines(keyword="a~b")
    assert caught.value.error["errorcode"] == 401
    # Signed the Java way, the same request passes, over GET and POST alike.
    params = {"command": "listVirtualMachines", "keyword": "a~b c/+", "apikey": sim.env["cloudstack_key"],
              "response": "json"}
    params["signature"] = sign(params, sim.env["cloudstack_secret"])
    for method in ("get", "post"):
        kwargs = {"params": params} if method == "get" else {"data": params}
        answer = requests.request(method, sim.env["cloudstack_endpoint"], timeout=10, **kwargs)
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"listvirtualmachinesresponse": {}}


def test_post_requests_are_verified_too(sim):
    vms = sim.cs(method="post").listVirtualMachines()
    assert vms["count"] == 7
    with pytest.raises(CloudStackApiException):
        sim.cs(method="post", secret="wrong").listVirtualMachines()


def test_unknown_command_answers_errorresponse(sim):
    with pytest.raises(CloudStackApiException) as caught:
        sim.cs().updateKubernetesCluster(id="x")
    assert caught.value.response.status_code == 401
    assert list(caught.value.response.json()) == ["errorresponse"]


def test_missing_and_invalid_parameters_are_431(sim):
    cs = sim.cs()
    with pytest.raises(CloudStackApiException) as caught:
        cs.stopVirtualMachine()
    assert caught.value.error["errorcode"] == 431
    assert caught.value.error["errortext"] == "Unable to execute API command stopvirtualmachine due to missing parameter id"
    with pytest.raises(CloudStackApiException) as caught:
        cs.stopVirtualMachine(id="not-a-uuid")
    assert caught.value.error["errorcode"] == 431
    assert "invalid value" in caught.value.error["errortext"]
    vm = sim.node_vms("worker")[0]
    with pytest.raises(CloudStackApiException) as caught:
        cs.stopVirtualMachine(id=vm["id"], forced="yes")
    assert caught.value.error["errorcode"] == 431
    assert "forced" in caught.value.error["errortext"]
    with pytest.raises(CloudStackApiException) as caught:
        cs.listVirtualMachines(page="one", pagesize=5)
    assert caught.value.error["errorcode"] == 431
    # An unknown parameter is ignored, as the management server ignores it.
    assert cs.listVirtualMachines(no_such_parameter="x")["count"] == 7


def test_async_job_goes_from_pending_to_success(sim_factory):
    raw = small_spec()
    raw["timings"]["stop"] = 100  # a real second: still Stopping when listed, even on a busy machine
    sim = sim_factory(spec=raw)
    cs = sim.cs()
    vm = sim.node_vms("worker")[0]
    started = cs.stopVirtualMachine(id=vm["id"])
    assert set(started) == {"jobid"}
    pending = cs.queryAsyncJobResult(jobid=started["jobid"])
    assert pending["jobstatus"] == 0
    assert "jobresult" not in pending
    assert cs.listVirtualMachines(id=vm["id"])["virtualmachine"][0]["state"] == "Stopping"
    result = cs._jobresult(started["jobid"])
    assert result["virtualmachine"]["state"] == "Stopped"
    done = cs.queryAsyncJobResult(jobid=started["jobid"])
    assert (done["jobstatus"], done["jobresultcode"], done["jobinstanceid"]) == (1, 0, vm["id"])
    listed = cs.listVirtualMachines(id=vm["id"])["virtualmachine"][0]
    assert listed["state"] == "Stopped" and "hostid" not in listed
    started = cs.startVirtualMachine(id=vm["id"], fetch_result=True)
    assert started["virtualmachine"]["state"] == "Running"
    assert started["virtualmachine"]["hostid"]
    jobs = cs.listAsyncJobs()["asyncjobs"]
    assert {j["jobinstanceid"] for j in jobs} == {vm["id"]}


def test_paging_counts_the_total(sim):
    cs = sim.cs()
    first = cs.listVirtualMachines(page=1, pagesize=3)
    third = cs.listVirtualMachines(page=3, pagesize=3)
    assert first["count"] == third["count"] == 7
    assert len(first["virtualmachine"]) == 3 and len(third["virtualmachine"]) == 1
    beyond = cs.listVirtualMachines(page=4, pagesize=3)
    assert beyond == {"count": 7}
    everything = cs.listVirtualMachines(fetch_list=True)
    assert len({vm["id"] for vm in everything}) == 7
    with pytest.raises(CloudStackApiException) as caught:
        cs.listVirtualMachines(pagesize=3)  # page is required with pagesize
    assert caught.value.error["errorcode"] == 431
    with pytest.raises(CloudStackApiException) as caught:
        cs.listVirtualMachines(page=1, pagesize=501)
    assert caught.value.error["errorcode"] == 431


def test_unpaged_list_stops_at_the_default_page_size(sim_factory):
    handle = sim_factory(cloud={"page_size_max": 5})
    answer = handle.cs().listVirtualMachines()
    assert answer["count"] == 7 and len(answer["virtualmachine"]) == 5
    with pytest.raises(CloudStackApiException) as caught:  # cs pages with 500, more than this cloud allows
        handle.cs().listVirtualMachines(fetch_list=True)
    assert caught.value.error["errorcode"] == 431
    assert len(handle.cs().listVirtualMachines(fetch_list=True, pagesize=5)) == 7


def test_list_filters(sim):
    cs = sim.cs()
    worker = sim.node_vms("worker")[0]
    assert cs.listVirtualMachines(name=worker["name"])["count"] == 1
    assert cs.listVirtualMachines(name=worker["name"][:-1]) == {}  # name is an exact match
    ids = [vm["id"] for vm in sim.node_vms("control")]
    assert {vm["id"] for vm in cs.listVirtualMachines(ids=ids)["virtualmachine"]} == set(ids)
    root = cs.listVolumes(virtualmachineid=worker["id"], type="ROOT")
    assert root["count"] == 1 and root["volume"][0]["size"] == 20 * 2**30
    assert cs.listVolumes(virtualmachineid=worker["id"], type="DATADISK") == {}
    slim = cs.listVirtualMachines(id=worker["id"], details="min")["virtualmachine"][0]
    assert "serviceofferingid" not in slim and "nic" not in slim
    servoff = cs.listVirtualMachines(id=worker["id"], details="servoff")["virtualmachine"][0]
    assert servoff["serviceofferingname"] == "cks-medium" and "affinitygroup" not in servoff
    with pytest.raises(CloudStackApiException):
        cs.listVirtualMachines(details="everything")


def test_kubernetes_cluster_listing_has_the_trap(sim):
    cs = sim.cs()
    cluster = cs.listKubernetesClusters()["kubernetescluster"][0]
    assert cluster["state"] == "Running"
    assert (cluster["controlnodes"], cluster["size"], cluster["etcdnodes"]) == (3, 4, 0)
    assert cluster["cpunumber"] == "14" and cluster["memory"] == "28672"  # strings, 7 x cks-medium
    assert "controlofferingid" not in cluster and "workerofferingid" not in cluster  # none set in small.yml
    assert cluster["serviceofferingname"] == "cks-medium"
    assert cluster["endpoint"].startswith("https://") and cluster["keypair"]
    embedded = cluster["virtualmachines"]
    assert [vm["name"].split("-")[1] for vm in embedded] == ["control"] * 3 + ["node"] * 4
    for vm in embedded:
        assert "serviceofferingid" not in vm and "cpunumber" not in vm and "memory" not in vm
        assert vm["affinitygroup"] == []
        assert vm["isetcdnode"] is False and vm["isexternalnode"] is False
    full = cs.listVirtualMachines(ids=[vm["id"] for vm in embedded])["virtualmachine"]
    dedication = sim.group("dedicated-admin")
    assert all([g["id"] for g in vm["affinitygroup"]] == [dedication["id"]] for vm in full)
    assert all("type" not in g for vm in full for g in vm["affinitygroup"])  # types come from listAffinityGroups
    assert cs.listKubernetesClusters(name="dem") == {}  # exact name match
    assert cs.listKubernetesClusters(keyword="dem")["count"] == 1


def test_per_type_offerings_appear_only_when_set(sim_factory):
    raw = small_spec()
    raw["clusters"][0]["node_offerings"] = {"worker": "cks-large"}
    handle = sim_factory(spec=raw)
    cluster = handle.cks_cluster()
    assert cluster["workerofferingname"] == "cks-large"
    assert "controlofferingid" not in cluster and "etcdofferingid" not in cluster
    workers = handle.node_vms("worker")
    assert {vm["serviceofferingname"] for vm in workers} == {"cks-large"}


def test_kubeconfig_comes_from_get_kubernetes_cluster_config(sim):
    import yaml

    answer = sim.cs().getKubernetesClusterConfig(id=sim.env["cluster_id"])["clusterconfig"]
    assert answer["id"] == sim.env["cluster_id"] and answer["name"] == "demo"
    config = yaml.safe_load(answer["configdata"])
    assert config["clusters"][0]["cluster"]["server"] == sim.env["clusters"][0]["kube_url"]
    with open(sim.env["kubeconfig"], encoding="utf-8") as handle:
        assert yaml.safe_load(handle) == config
    with pytest.raises(CloudStackApiException) as caught:
        sim.cs().getKubernetesClusterConfig(id="00000000-0000-4000-8000-000000000000")
    assert caught.value.error["errorcode"] == 431


def test_list_apis_agrees_with_the_422_data(sim):
    data = apis.catalogue()
    implicit = {p["name"] for p in apis.implicit_params()["all_commands"]}
    implicit_async = {p["name"] for p in apis.implicit_params()["async_commands"]}
    listed = sim.cs().listApis()["api"]
    assert {"listVirtualMachines", "updateVMAffinityGroup", "queryAsyncJobResult"} <= {a["name"] for a in listed}
    for api in listed:
        definition = data[api["name"]]
        assert api["isasync"] == definition["async"], api["name"]
        expected = {p["name"]: p["required"] for p in definition["params"]}
        params = {p["name"]: p["required"] for p in api["params"]}
        extra = implicit | (implicit_async if definition["async"] else set())
        assert {k: v for k, v in params.items() if k not in extra} == expected, api["name"]
        assert extra <= set(params)
        assert [r["name"] for r in api["response"]] == definition["response_fields"]
    one = sim.cs().listApis(name="resizeVolume")["api"]
    assert [a["name"] for a in one] == ["resizeVolume"]
    assert {p["name"]: p["type"] for p in one[0]["params"]}["size"] == "long"


def shared_reference() -> Optional[str]:
    """The shared reference folder: env CKS_SHARED_REFERENCE, else shared/reference beside the checkout."""
    named = os.environ.get("CKS_SHARED_REFERENCE")
    if named:
        return named
    beside = os.path.join(os.path.dirname(ROOT), "shared", "reference")
    return beside if os.path.isdir(beside) else None


def test_reference_data_copy_matches_shared_reference():
    folder = shared_reference()
    if folder is None:
        pytest.skip("no shared reference: set CKS_SHARED_REFERENCE to its folder, or put it at shared/reference "
                    f"beside the checkout ({os.path.dirname(ROOT)})")
    shared = os.path.join(folder, "cloudstack-apis-4.22.1.json")
    assert os.path.exists(shared), f"CKS_SHARED_REFERENCE or shared/reference has no {os.path.basename(shared)}: {folder}"
    with open(shared, encoding="utf-8") as a, open(apis.DATA_FILE, encoding="utf-8") as b:
        assert json.load(a) == json.load(b)


def test_affinity_group_listing(sim):
    cs = sim.cs()
    types = cs.listAffinityGroupTypes()
    assert types["count"] == 5
    assert {t["type"] for t in types["affinityGroupType"]} >= {"host anti-affinity", "ExplicitDedication"}
    worker = sim.node_vms("worker")[0]
    mine = cs.listAffinityGroups(virtualmachineid=worker["id"])["affinitygroup"]
    assert [(g["name"], g["type"]) for g in mine] == [("dedicated-admin", "ExplicitDedication")]
    assert worker["id"] in mine[0]["virtualmachineIds"]
    dedicated = cs.listAffinityGroups(type="ExplicitDedication")
    assert dedicated["count"] == 1


def test_offerings_and_compute_only_disk_offerings(sim):
    cs = sim.cs()
    fixed_root = sim.offering("cks-fixed-root")
    assert fixed_root["rootdisksize"] == 40 and fixed_root["diskofferingid"]
    # Its disk offering is an implicit compute-only one, which listDiskOfferings never shows.
    assert cs.listDiskOfferings(id=fixed_root["diskofferingid"]) == {}
    strict = sim.offering("cks-strict")
    assert strict["diskofferingstrictness"] is True
    linked = cs.listDiskOfferings(id=strict["diskofferingid"])["diskoffering"][0]
    assert (linked["name"], linked["disksizestrictness"], linked["disksize"]) == ("fixed-50", True, 50)
    assert {d["name"] for d in cs.listDiskOfferings()["diskoffering"]} == {"custom-root", "fixed-50"}


def test_hosts_zones_networks_and_port_forwards(sim):
    cs = sim.cs()
    assert cs.listZones()["zone"][0]["name"] == "zone-1"
    hosts = cs.listHosts(type="Routing")["host"]
    assert len(hosts) == 5
    worker = sim.node_vms("worker")[0]
    [host] = cs.listHosts(virtualmachineid=worker["id"])["host"]
    assert host["id"] == worker["hostid"] and host["memoryallocated"] > 0
    cluster = sim.cks_cluster()
    rules = cs.listPortForwardingRules(networkid=cluster["networkid"])["portforwardingrule"]
    ssh = {r["virtualmachineid"]: int(r["publicport"]) for r in rules if r["privateport"] == "22"}
    ordered = [ssh[vm["id"]] for vm in cluster["virtualmachines"]]
    assert ordered == list(range(2222, 2222 + 7))
    ip = cs.listPublicIpAddresses(associatednetworkid=cluster["networkid"])["publicipaddress"][0]
    assert ip["issourcenat"] is True and ip["ipaddress"] == cluster["ipaddress"]


def test_tags_on_vms(sim):
    cs = sim.cs()
    vm = sim.node_vms("worker")[0]
    cs.createTags(resourceids=[vm["id"]], resourcetype="UserVm", tags=[{"key": "rollout", "value": "v1"}],
                  fetch_result=True)
    assert cs.listTags(resourceid=vm["id"])["tag"][0]["value"] == "v1"
    assert cs.listVirtualMachines(id=vm["id"])["virtualmachine"][0]["tags"][0]["key"] == "rollout"
    with pytest.raises(CloudStackApiException) as caught:  # the key exists: delete, then create
        cs.createTags(resourceids=[vm["id"]], resourcetype="userVM", tags=[{"key": "rollout", "value": "v2"}],
                      fetch_result=True)
    assert caught.value.error["errorcode"] == 530
    with pytest.raises(CloudStackApiException) as caught:  # a CKS cluster is not taggable
        cs.createTags(resourceids=[sim.env["cluster_id"]], resourcetype="KubernetesCluster",
                      tags=[{"key": "k", "value": "v"}], fetch_result=True)
    assert caught.value.error["errorcode"] == 431
    cs.deleteTags(resourceids=[vm["id"]], resourcetype="UserVm", tags=[{"key": "rollout"}], fetch_result=True)
    assert cs.listTags(resourceid=vm["id"]) == {}


def test_call_log_never_holds_credentials(sim):
    with pytest.raises(CloudStackApiException):
        sim.cs(secret="wrong").listZones()
    sim.cs().listZones()
    calls = sim.admin("GET", "/calls?api=cloudstack")
    assert calls and calls[-1]["command"] == "listZones" and calls[-1]["status"] == 200
    assert calls[-2]["status"] == 401 and calls[-2]["errorcode"] == 401
    for call in calls:
        assert not {"signature", "apikey"} & {k.lower() for k in call["params"]}
    text = json.dumps(calls)
    assert sim.env["cloudstack_key"] not in text and sim.env["cloudstack_secret"] not in text


def test_cloudstack_error_fault(sim):
    sim.admin("POST", "/faults", {"kind": "cloudstack_error", "command": "listVirtualMachines", "count": 1,
                                  "code": 530, "errortext": "database went away"})
    cs = sim.cs()
    with pytest.raises(CloudStackApiException) as caught:
        cs.listVirtualMachines()
    assert (caught.value.error["errorcode"], caught.value.error["errortext"]) == (530, "database went away")
    assert cs.listVirtualMachines()["count"] == 7
    assert sim.admin("GET", "/faults") == []


def test_job_failure_fault_leaves_the_vm_as_it_was(sim):
    vm = sim.node_vms("worker")[1]
    sim.admin("POST", "/faults", {"kind": "job_failure", "command": "stopVirtualMachine", "vm": vm["name"],
                                  "count": 1, "code": 530})
    cs = sim.cs()
    with pytest.raises(CloudStackApiException) as caught:
        cs.stopVirtualMachine(id=vm["id"], fetch_result=True)
    assert caught.value.error["errorcode"] == 530
    assert sim.vm(vm["name"])["state"] == "Running"
    job = cs.listAsyncJobs()["asyncjobs"][0]
    assert (job["jobstatus"], job["jobresultcode"]) == (2, 530)
    assert cs.stopVirtualMachine(id=vm["id"], fetch_result=True)["virtualmachine"]["state"] == "Stopped"


def test_transient_fault_answers_a_5xx_then_recovers(sim):
    sim.admin("POST", "/faults", {"kind": "transient", "api": "cloudstack", "rate": 1.0, "mode": "5xx", "count": 1})
    cs = sim.cs()
    with pytest.raises(CloudStackException) as caught:
        cs.listZones()
    assert caught.value.response.status_code == 503
    assert cs.listZones()["count"] == 1


def test_transient_drop_fault_closes_the_connection(sim):
    sim.admin("POST", "/faults", {"kind": "transient", "api": "cloudstack", "rate": 1.0, "mode": "drop", "count": 1})
    with pytest.raises(requests.exceptions.ConnectionError):
        sim.cs().listVirtualMachines()
    # cs retries list* calls on connection errors when asked to.
    sim.admin("POST", "/faults", {"kind": "transient", "api": "cloudstack", "rate": 1.0, "mode": "drop", "count": 1})
    assert sim.cs(retry=2, retry_backoff=0.01).listVirtualMachines()["count"] == 7


def test_latency_fault_still_answers(sim):
    sim.admin("POST", "/faults", {"kind": "latency", "api": "cloudstack", "seconds": 0.05})
    assert sim.cs().listZones()["count"] == 1
    sim.admin("DELETE", "/faults")
    assert sim.admin("GET", "/faults") == []


def test_plain_cs_client_defaults_work(sim):
    client = CloudStack(endpoint=sim.env["cloudstack_endpoint"], key=sim.env["cloudstack_key"],
                        secret=sim.env["cloudstack_secret"])
    assert client.listCapabilities()["capability"]["cloudstackversion"].startswith("4.22")


def test_lost_answer_fault_carries_the_command_out_and_drops_the_answer(sim):
    """The command runs (its job is queued, as ApiServer.queueCommand does before it answers) and
    the client gets no answer, as when a proxy in front of the management server times out."""
    vm = sim.node_vms("worker")[0]
    sim.admin("POST", "/faults", {"kind": "lost_answer", "command": "stopVirtualMachine", "count": 1})
    cs = sim.cs()
    with pytest.raises(requests.exceptions.ConnectionError):
        cs.stopVirtualMachine(id=vm["id"])
    jobs = cs.listAsyncJobs()["asyncjobs"]
    assert [(j["jobinstanceid"], j["cmd"].rsplit(".", 1)[-1]) for j in jobs] == [(vm["id"], "StopVMCmdByAdmin")]
    wait_until(lambda: sim.vm(vm["name"])["state"] == "Stopped")
    logged = [c for c in sim.admin("GET", "/calls") if c.get("command") == "stopVirtualMachine"]
    assert [(c["status"], c["fault"]) for c in logged] == [(0, "lost_answer")]
    assert sim.admin("GET", "/faults") == []  # one shot


def test_list_async_jobs_keyword_matches_the_command_class(sim):
    """QueryManagerImpl.searchForAsyncJobsInternal: ``keyword`` is ``cmd LIKE %keyword%``."""
    cs = sim.cs()
    vm = sim.node_vms("worker")[0]
    cs.stopVirtualMachine(id=vm["id"], fetch_result=True)
    cs.startVirtualMachine(id=vm["id"], fetch_result=True)
    assert [j["cmd"].rsplit(".", 1)[-1] for j in cs.listAsyncJobs(keyword="StopVMCmd")["asyncjobs"]] == \
        ["StopVMCmdByAdmin"]
    assert len(cs.listAsyncJobs()["asyncjobs"]) == 2
    assert cs.listAsyncJobs(keyword="ResizeVolumeCmd") == {}
