"""``request_fault``: one fault on the next request of one kind, named as the call log names it
(``request``: ``cloudstack <command>``, ``kubernetes <verb> <resource>``, ``etcd <call>``), what
``make fault-sweep`` plants on each kind a rollout sends. Through the real ``cs`` and ``kubernetes``
clients."""

from __future__ import annotations

import json
import urllib.error
from typing import Any

import pytest
import requests
import urllib3
import websocket
from cs import CloudStackApiException, CloudStackException
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.stream import stream

from cks_sim.harness import SimHandle, wait_until
from cks_sim.request_kinds import INTERNAL_ERROR_TEXT, etcd
from cks_sim.tools import needs

NAMESPACE = "kube-system"


def logged(sim: SimHandle, kind: str) -> list[dict[str, Any]]:
    return [c for c in sim.calls() if c.get("request") == kind or c.get("etcd_request") == kind]


def core_of(sim: SimHandle) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(k8s_config.new_client_from_config(sim.env["kubeconfig"]))


# --- CloudStack -------------------------------------------------------------------------------


def test_a_503_falls_on_the_next_request_of_its_kind_only(sim: SimHandle) -> None:
    """A proxy's 503 (HTML, not CloudStack's JSON): the command is not carried out; one shot."""
    sim.fault(kind="request_fault", request="cloudstack listVirtualMachines", mode="503", count=1)
    cs = sim.cs()
    assert cs.listZones()["zone"]  # another kind goes through untouched
    with pytest.raises(CloudStackException) as caught:
        cs.listVirtualMachines()
    assert caught.value.response.status_code == 503
    assert cs.listVirtualMachines()["virtualmachine"]
    calls = logged(sim, "cloudstack listVirtualMachines")
    assert [(c["status"], c.get("fault")) for c in calls] == [(503, "request_fault"), (200, None)]
    assert sim.admin("GET", "/faults") == []


def test_a_530_is_cloudstacks_internal_error_answer(sim: SimHandle) -> None:
    """ApiServer answers an unexpected exception of a command INTERNAL_ERROR (530), cserrorcode 4250:
    ApiServer.getSerializedApiError names the body after the command's response (BaseCmd.getCommandName)
    with its errorcode, cserrorcode, errortext and uuidList, and ApiServlet sends it with HTTP status
    ApiErrorCode.getHttpCode() (530). A read answered so is asked again like a 503, a write settled by
    reading (the collection's tests/unit/test_cloudstack_internal_error.py)."""
    vm = sim.node_vms("worker")[0]
    sim.fault(kind="request_fault", request="cloudstack stopVirtualMachine", mode="530", count=1)
    cs = sim.cs()
    with pytest.raises(CloudStackApiException) as caught:
        cs.stopVirtualMachine(id=vm["id"])
    assert caught.value.error["errorcode"] == 530 and caught.value.error["errortext"] == INTERNAL_ERROR_TEXT
    assert caught.value.error["cserrorcode"] == 4250
    assert caught.value.response.status_code == 530
    assert caught.value.response.json() == {"stopvirtualmachineresponse": {
        "uuidList": [], "errorcode": 530, "cserrorcode": 4250, "errortext": INTERNAL_ERROR_TEXT}}
    # Not carried out.
    assert sim.vm(vm["name"])["state"] == "Running"
    assert cs.listAsyncJobs() == {}


def test_a_dropped_connection_carries_the_command_out_and_loses_the_answer(sim: SimHandle) -> None:
    vm = sim.node_vms("worker")[0]
    sim.fault(kind="request_fault", request="cloudstack stopVirtualMachine", mode="drop", count=1)
    with pytest.raises(requests.exceptions.ConnectionError):
        sim.cs().stopVirtualMachine(id=vm["id"])
    wait_until(lambda: sim.vm(vm["name"])["state"] == "Stopped", what="the stop carried out")
    assert [(c["status"], c["fault"]) for c in logged(sim, "cloudstack stopVirtualMachine")] == [(0, "request_fault")]


@pytest.mark.parametrize("fault, why", [
    ({"request": "listVirtualMachines"}, "no request kind"),
    ({"request": "cloudstack listVirtualMachines", "mode": "429"}, "not one of 503, 530, drop"),
    ({"request": "kubernetes get nodes", "mode": "530"}, "not one of 503, drop"),
])
def test_a_request_fault_that_names_no_kind_or_mode_is_refused(sim: SimHandle, fault: dict[str, Any], why: str) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        sim.fault(kind="request_fault", **fault)
    assert caught.value.code == 400 and why in caught.value.read().decode()
    assert sim.admin("GET", "/faults") == []


# --- Kubernetes -------------------------------------------------------------------------------


def test_a_kubernetes_503_is_a_status_before_the_request_is_handled(sim: SimHandle) -> None:
    core = core_of(sim)
    node = core.list_node().items[0].metadata.name
    sim.fault(kind="request_fault", request="kubernetes patch nodes", mode="503", count=1)
    with pytest.raises(ApiException) as caught:
        core.patch_node(node, {"metadata": {"labels": {"swept": "yes"}}})
    assert caught.value.status == 503 and json.loads(caught.value.body)["reason"] == "ServiceUnavailable"
    assert "swept" not in (core.read_node(node).metadata.labels or {})
    core.patch_node(node, {"metadata": {"labels": {"swept": "yes"}}})
    assert [c["status"] for c in logged(sim, "kubernetes patch nodes")] == [503, 200]


def test_a_kubernetes_drop_carries_the_write_out_and_loses_the_answer(sim: SimHandle) -> None:
    core = core_of(sim)
    node = core.list_node().items[0].metadata.name
    sim.fault(kind="request_fault", request="kubernetes patch nodes", mode="drop", count=1)
    with pytest.raises(urllib3.exceptions.HTTPError):
        core.patch_node(node, {"metadata": {"labels": {"swept": "dropped"}}}, _request_timeout=10)
    assert core.read_node(node).metadata.labels["swept"] == "dropped"
    assert [(c["status"], c.get("dropped")) for c in logged(sim, "kubernetes patch nodes")] == [(0, True)]


def test_a_post_that_changes_nothing_is_a_kind_of_its_own(sim: SimHandle) -> None:
    """The access review the etcd checks ask (issue 33): its kind, as the collection's table names it."""
    api = k8s.AuthorizationV1Api(k8s_config.new_client_from_config(sim.env["kubeconfig"]))
    sim.fault(kind="request_fault", request="kubernetes create selfsubjectaccessreviews", mode="503", count=1)
    review = k8s.V1SelfSubjectAccessReview(spec=k8s.V1SelfSubjectAccessReviewSpec(
        resource_attributes=k8s.V1ResourceAttributes(verb="create", resource="pods", subresource="exec",
                                                     namespace=NAMESPACE)))
    with pytest.raises(ApiException) as caught:
        api.create_self_subject_access_review(review)
    assert caught.value.status == 503
    assert api.create_self_subject_access_review(review).status.allowed is True


# --- etcd (etcdctl in an etcd pod) ------------------------------------------------------------


def test_etcd_calls_are_named_by_etcdctls_words() -> None:
    assert etcd(["etcdctl", "--cacert=/x", "--dial-timeout=5s", "member", "list", "-w", "json"]) == "etcd member list"
    assert etcd(["/usr/local/bin/etcdctl", "-w", "json", "endpoint", "health", "--cluster"]) == "etcd endpoint health"
    assert etcd(["etcdctl", "--endpoints", "https://x:2379", "endpoint", "status"]) == "etcd endpoint status"
    assert etcd(["sh", "-c", "etcdctl member list"]) is None


def etcdctl(sim: SimHandle, pod: str, *args: str) -> Any:
    resp = stream(core_of(sim).connect_get_namespaced_pod_exec, pod, NAMESPACE,
                  command=["etcdctl", "--cacert=/etc/kubernetes/pki/etcd/ca.crt",
                           "--cert=/etc/kubernetes/pki/etcd/server.crt", "--key=/etc/kubernetes/pki/etcd/server.key",
                           *args, "-w", "json"],
                  stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
    resp.run_forever(timeout=30)
    status = resp.peek_channel(3)
    return resp.read_stdout(), resp.read_stderr(), json.loads(status) if status else None


@needs("etcd", "etcdctl")
def test_an_etcd_fault_fails_etcdctl_as_a_member_that_does_not_answer(sim_factory: Any) -> None:
    etcd_sim = sim_factory(etcd=True)
    pod = core_of(etcd_sim).list_namespaced_pod(NAMESPACE, label_selector="component=etcd").items[0].metadata.name
    etcd_sim.fault(kind="request_fault", request="etcd member list", mode="503", count=1)
    stdout, stderr, status = etcdctl(etcd_sim, pod, "member", "list")
    assert stdout == "" and "context deadline exceeded" in stderr
    assert status["reason"] == "NonZeroExitCode" and status["details"]["causes"][0]["message"] == "1"
    stdout, _stderr, status = etcdctl(etcd_sim, pod, "member", "list")
    assert status["status"] == "Success" and len(json.loads(stdout)["members"]) == 3
    calls = logged(etcd_sim, "etcd member list")
    assert [c.get("fault") for c in calls] == ["request_fault", None]


@needs("etcd", "etcdctl")
def test_an_etcd_drop_cuts_the_stream_before_the_exit_status(sim_factory: Any) -> None:
    etcd_sim = sim_factory(etcd=True)
    pod = core_of(etcd_sim).list_namespaced_pod(NAMESPACE, label_selector="component=etcd").items[0].metadata.name
    etcd_sim.fault(kind="request_fault", request="etcd endpoint status", mode="drop", count=1)
    # The client sees the connection closed with no status: the command's outcome is unknown.
    with pytest.raises(websocket.WebSocketConnectionClosedException):
        etcdctl(etcd_sim, pod, "endpoint", "status")
    assert [c.get("dropped") for c in logged(etcd_sim, "etcd endpoint status")] == [True]
