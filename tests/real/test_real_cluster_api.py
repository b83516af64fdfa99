"""``real_kube.cluster_api.RestClusterApi``, the interface the shared actors are written against
(``kube_cluster_api.ClusterApi``), over HTTP against a real API server: what the in-memory store does
by handing out its objects, done with the API server's rules (it assigns uids and resourceVersions,
a kubelet's status goes through ``/status``, a pod's deletion is confirmed with grace 0)."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from cks_sim.real_kube.api import ApiRefusal
from cks_sim.real_kube.cluster_api import RestClusterApi
from helpers import ClusterSim

pytestmark = pytest.mark.timeout(600)


def cluster_api(sim: ClusterSim) -> RestClusterApi:
    """The adapter over a connection of this thread's own to the sim's real API server."""
    world = next(iter(sim.sim.kube.values()))
    return RestClusterApi(world._thread_api())  # pylint: disable=protected-access


def test_reads_and_lists_as_the_store_does(cycle_sim: Callable[..., ClusterSim]) -> None:
    api = cluster_api(cycle_sim("small.yml", etcd=False))
    nodes = api.select("nodes", None)
    names = [n["metadata"]["name"] for n in nodes]
    assert names == sorted(names) and len(names) == 7
    worker = next(n for n in nodes if "node-role.kubernetes.io/control-plane" not in n["metadata"]["labels"])
    name = worker["metadata"]["name"]
    assert api.read("nodes", "", name)["metadata"]["uid"] == worker["metadata"]["uid"]
    assert api.read("nodes", "", "no-such-node") is None
    assert api.read("pods", "default", "no-such-pod") is None
    system = api.select("pods", "kube-system")
    assert system and {p["metadata"]["namespace"] for p in system} == {"kube-system"}
    everywhere = api.select("pods", None)
    assert [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in everywhere] == \
        sorted((p["metadata"]["namespace"], p["metadata"]["name"]) for p in everywhere)
    on_worker = api.pods_on(name)
    assert on_worker and {p["spec"]["nodeName"] for p in on_worker} == {name}
    assert {p["metadata"]["uid"] for p in on_worker} == \
        {p["metadata"]["uid"] for p in everywhere if p["spec"].get("nodeName") == name}


def test_put_creates_then_replaces_and_a_kubelets_status_goes_through_status(
        cycle_sim: Callable[..., ClusterSim]) -> None:
    api = cluster_api(cycle_sim("small.yml", etcd=False))
    # A new object's metadata has no uid or resourceVersion: the API server assigns them, and the
    # object the actor holds is the one stored (as in the in-memory store).
    meta = api.new_meta("cluster-api-test", "default", labels={"test": "yes"})
    assert "uid" not in meta and "resourceVersion" not in meta
    lease: dict[str, Any] = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                             "spec": {"holderIdentity": "someone", "leaseDurationSeconds": 40}}
    stored = api.put("leases", lease)
    assert stored is lease and lease["metadata"]["uid"] and lease["metadata"]["resourceVersion"]
    first_rv = lease["metadata"]["resourceVersion"]
    lease["spec"]["holderIdentity"] = "someone-else"
    api.put("leases", lease)
    assert lease["metadata"]["resourceVersion"] != first_rv
    assert api.read("leases", "default", "cluster-api-test")["spec"]["holderIdentity"] == "someone-else"

    # A pod created with a status: the API server makes it Pending, the adapter writes the status after.
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod", "metadata": api.new_meta("cluster-api-pod", "default"),
        "spec": {"nodeName": "no-such-node", "containers": [{"name": "c", "image": "registry.example.com/c:1"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    api.put("pods", pod)
    assert pod["status"]["phase"] == "Running"
    assert api.read("pods", "default", "cluster-api-pod")["status"]["phase"] == "Running"

    # A read Node changed in its metadata and its status: both written (the main resource and /status).
    nodes = api.select("nodes", None)
    node = api.read("nodes", "", nodes[-1]["metadata"]["name"])
    assert node is not None
    name = node["metadata"]["name"]
    node["metadata"].setdefault("annotations", {})["cks-sim/test"] = "yes"
    node["status"]["conditions"].append({"type": "ClusterApiTest", "status": "True", "reason": "Test",
                                         "message": "written through /status"})
    api.put("nodes", node)
    again = api.read("nodes", "", name)
    assert again["metadata"]["annotations"]["cks-sim/test"] == "yes"
    assert any(c["type"] == "ClusterApiTest" for c in again["status"]["conditions"])
    assert node["metadata"]["resourceVersion"] == again["metadata"]["resourceVersion"]
    # Only the status changed: one call, the status one (the main resource's PUT would drop it).
    again["status"]["conditions"] = [c for c in again["status"]["conditions"] if c["type"] != "ClusterApiTest"]
    api.put("nodes", again)
    assert not any(c["type"] == "ClusterApiTest" for c in api.read("nodes", "", name)["status"]["conditions"])

    # A write of an object changed since it was read is refused (409), as the API server's rules say.
    stale = dict(lease, metadata=dict(lease["metadata"], resourceVersion=first_rv))
    with pytest.raises(ApiRefusal) as refused:
        api.put("leases", stale)
    assert refused.value.code == 409


def test_remove_is_a_deletion_with_grace_zero_and_events_go_through_the_same_api(
        cycle_sim: Callable[..., ClusterSim]) -> None:
    api = cluster_api(cycle_sim("small.yml", etcd=False))
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod", "metadata": api.new_meta("cluster-api-gone", "default"),
        "spec": {"nodeName": "no-such-node", "terminationGracePeriodSeconds": 30,
                 "containers": [{"name": "c", "image": "registry.example.com/c:1"}]}}
    api.put("pods", pod)
    uid = pod["metadata"]["uid"]
    assert api.read("pods", "default", "cluster-api-gone") is not None
    removed = api.remove("pods", ("default", "cluster-api-gone"))
    # Gone at once (grace 0), not terminating for its 30 s.
    assert removed is not None and removed["metadata"]["uid"] == uid
    assert api.read("pods", "default", "cluster-api-gone") is None
    assert api.remove("pods", ("default", "cluster-api-gone")) is None

    event: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Event", "metadata": api.new_meta("cluster-api.1", "default"),
        "involvedObject": {"kind": "Node", "name": "somewhere", "apiVersion": "v1"},
        "reason": "Starting", "message": "Starting kubelet.", "type": "Normal", "count": 1,
        "source": {"component": "kubelet", "host": "somewhere"}}
    api.put("events", event)
    assert event["metadata"]["uid"]
    listed = [e for e in api.select("events", "default") if e["metadata"]["name"] == "cluster-api.1"]
    assert [e["reason"] for e in listed] == ["Starting"]
    assert api.remove("events", ("default", "cluster-api.1")) is not None
    assert api.read("events", "default", "cluster-api.1") is None
