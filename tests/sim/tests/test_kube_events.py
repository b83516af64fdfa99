"""Events, control-plane leases and the Tables of rs/events/leases/pdb, read through Debian's kubectl.

What a real cluster shows, with its sources:

- Events, one object in two views (pkg/apis/events/v1/conversion.go), validated as
  pkg/apis/core/validation/events.go validates an events.k8s.io/v1 create and update; the recorders'
  names ``<object>.<unix ns in hex>``; the kubelet's Starting/NodeReady/Killing
  (kubelet_node_status.go, kuberuntime_container.go), the node controller's NodeNotReady, the
  scheduler's Scheduled (schedule_one.go, events.k8s.io recorder, action Binding) and the
  ReplicaSet/DaemonSet/StatefulSet controllers' SuccessfulCreate. The eviction subresource writes
  no Event when a PodDisruptionBudget refuses (pkg/registry/core/pod/storage/eviction.go has no
  recorder): "EvictionBlocked" is what a draining tool writes, not the API server.
- kube-system leases: kube-controller-manager and kube-scheduler leader election, apiserver-<hash>.
- Tables as printers.go prints them: printEvent, printReplicaSet, printLease, printPodDisruptionBudget.
- pod-template-hash as the Deployment controller makes it: rand.SafeEncodeString of the hash.
"""

from __future__ import annotations

import datetime
import json
import subprocess
from typing import Any

import requests
import yaml

from cks_sim.tools import binary, needs
from cks_sim.harness import SimHandle, wait_until
from cks_sim.kube import SAFE_ALPHABET
from simkit import small_spec

KUBECTL = binary("kubectl")
pytestmark = needs("kubectl")


def kubectl(handle: SimHandle, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(KUBECTL), "--kubeconfig", handle.env["kubeconfig"], *args], capture_output=True,
                          text=True, timeout=90, check=False)


def rows(out: subprocess.CompletedProcess) -> tuple[list[str], list[list[str]]]:
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    return lines[0].split(), [line.split() for line in lines[1:]]


def api(handle: SimHandle, method: str, path: str, body: Any = None,
        content_type: str = "application/json") -> requests.Response:
    with open(handle.env["kubeconfig"], encoding="utf-8") as fh:
        token = yaml.safe_load(fh)["users"][0]["user"]["token"]
    return requests.request(method, handle.env["kube_url"] + path, data=None if body is None else json.dumps(body),
                            headers={"Authorization": f"Bearer {token}", "Content-Type": content_type},
                            verify=handle.env["kube_ca"], timeout=10)


def micro() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def worker(handle: SimHandle) -> str:
    return sorted(vm["name"].lower() for vm in handle.node_vms("worker"))[0]


def node_event(node: str, uid: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": f"{node}.rollout1"},
            "eventTime": micro(), "reportingController": "cloudstack.cks/rollout", "reportingInstance": "ctl-1",
            "action": "Cordon", "reason": "CordonedForRollout", "note": "Cordoned for rollout r1", "type": "Normal",
            "regarding": {"kind": "Node", "name": node, "uid": uid, "apiVersion": "v1"}, **extra}


def kube_nodes(handle: SimHandle) -> list[dict[str, Any]]:
    return list(handle.admin("GET", "/state")["kube"].values())[0]["nodes"]


def restart(handle: SimHandle, vm_name: str) -> None:
    node = vm_name.lower()
    boot = next(n for n in kube_nodes(handle) if n["name"] == node)["boot_id"]
    handle.admin("POST", "/actions", {"action": "stop_vm", "vm": vm_name})
    wait_until(lambda: handle.vm(vm_name)["state"] == "Stopped")
    wait_until(lambda: any(n["name"] == node and n["ready"] == "Unknown"
                           for n in kube_nodes(handle)))
    handle.admin("POST", "/actions", {"action": "start_vm", "vm": vm_name})
    wait_until(lambda: any(n["name"] == node and n["ready"] == "True" and n["boot_id"] != boot
                           for n in kube_nodes(handle)))


def test_events_k8s_io_and_core_views_of_one_event(sim: SimHandle) -> None:
    node = worker(sim)
    uid = json.loads(kubectl(sim, "get", "node", node, "-o", "json").stdout)["metadata"]["uid"]
    created = api(sim, "POST", "/apis/events.k8s.io/v1/namespaces/default/events", node_event(node, uid))
    assert created.status_code == 201, created.text
    assert created.json()["regarding"]["name"] == node and "involvedObject" not in created.json()
    core = api(sim, "GET", f"/api/v1/namespaces/default/events/{node}.rollout1").json()
    assert core["involvedObject"]["name"] == node and core["message"] == "Cordoned for rollout r1"
    assert core["reportingComponent"] == "cloudstack.cks/rollout" and core["source"] == {}
    assert core["firstTimestamp"] is None and core["eventTime"].endswith("Z")
    # A repeat is one Event with a series (count + lastObservedTime), patched in place.
    patched = api(sim, "PATCH", f"/apis/events.k8s.io/v1/namespaces/default/events/{node}.rollout1",
                  {"series": {"count": 2, "lastObservedTime": micro()}}, "application/merge-patch+json")
    assert patched.status_code == 200, patched.text and patched.json()["series"]["count"] == 2
    header, found = rows(kubectl(sim, "get", "events", "--field-selector", f"involvedObject.name={node}", "-o", "wide"))
    assert header == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE", "MESSAGE", "FIRST", "SEEN",
                      "COUNT", "NAME"]
    row = next(r for r in found if "CordonedForRollout" in r)
    assert f"node/{node}" in row and "cloudstack.cks/rollout," in row and row[-2:] == ["2", f"{node}.rollout1"]
    v1 = api(sim, "GET", f"/apis/events.k8s.io/v1/events?fieldSelector=regarding.name%3D{node}").json()
    assert v1["kind"] == "EventList" and [e["reason"] for e in v1["items"]] == ["CordonedForRollout"]
    refused = api(sim, "GET", f"/apis/events.k8s.io/v1/events?fieldSelector=involvedObject.name%3D{node}")
    assert refused.status_code == 400 and "field label not supported" in refused.json()["message"]


def test_events_k8s_io_validation(sim: SimHandle) -> None:
    node = worker(sim)
    path = "/apis/events.k8s.io/v1/namespaces/default/events"
    missing = api(sim, "POST", path, {k: v for k, v in node_event(node, "u").items() if k != "action"})
    assert missing.status_code == 422 and "action: Required value" in missing.json()["message"]
    wrong_ns = api(sim, "POST", "/apis/events.k8s.io/v1/namespaces/kube-public/events", node_event(node, "u"))
    assert wrong_ns.status_code == 422 and "regarding.namespace" in wrong_ns.json()["message"]
    legacy = api(sim, "POST", path, node_event(node, "u", deprecatedLastTimestamp="2026-01-05T10:00:00Z",
                                               deprecatedSource={"component": "x"}))
    assert legacy.status_code == 422 and 'deprecatedLastTimestamp: Invalid value: "": needs to be unset' in \
        legacy.json()["message"] and "deprecatedSource" in legacy.json()["message"]
    one = api(sim, "POST", path, node_event(node, "u", series={"count": 1, "lastObservedTime": micro()}))
    assert one.status_code == 422 and "series.count" in one.json()["message"]
    assert api(sim, "POST", path, node_event(node, "u")).status_code == 201
    changed = api(sim, "PATCH", f"{path}/{node}.rollout1", {"reason": "Other"}, "application/merge-patch+json")
    assert changed.status_code == 422 and "reason: Invalid value" in changed.json()["message"]


def test_a_core_event_with_both_sets_of_fields(sim: SimHandle) -> None:
    """How client-go's recorders (and the rollout) write: core/v1 with eventTime, action and the
    reporting fields next to source, first/last timestamp and count; seen in both groups."""
    node = worker(sim)
    stamp = micro()
    body = {"metadata": {"name": f"{node}.core1"}, "involvedObject": {"kind": "Node", "name": node, "uid": "u"},
            "reason": "VMStopped", "message": "VM stopped", "type": "Normal",
            "source": {"component": "cloudstack.cks/rollout", "host": "ctl-1"},
            "firstTimestamp": stamp[:19] + "Z", "lastTimestamp": stamp[:19] + "Z", "count": 1,
            "eventTime": stamp, "action": "Stop", "reportingComponent": "cloudstack.cks/rollout",
            "reportingInstance": "ctl-1"}
    assert api(sim, "POST", "/api/v1/namespaces/default/events", body).status_code == 201
    v1 = api(sim, "GET", f"/apis/events.k8s.io/v1/namespaces/default/events/{node}.core1").json()
    assert v1["note"] == "VM stopped" and v1["deprecatedCount"] == 1 and v1["regarding"]["name"] == node
    assert v1["reportingController"] == "cloudstack.cks/rollout" and v1["deprecatedSource"]["host"] == "ctl-1"
    missing = dict(body, metadata={"name": f"{node}.core2"})
    del missing["action"]
    refused = api(sim, "POST", "/api/v1/namespaces/default/events", missing)
    assert refused.status_code == 422 and "action: Required value" in refused.json()["message"]
    # Without eventTime it is the legacy recorder's Event: taken as it is.
    legacy = {k: v for k, v in missing.items() if k not in ("eventTime",)}
    assert api(sim, "POST", "/api/v1/namespaces/default/events", legacy).status_code == 201


def test_a_restart_tells_its_story_in_kubectl_get_events(sim: SimHandle) -> None:
    vm_name = sorted(vm["name"] for vm in sim.node_vms("worker"))[0]
    node = vm_name.lower()
    restart(sim, vm_name)
    header, found = rows(kubectl(sim, "get", "events", "-A"))
    assert header == ["NAMESPACE", "LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    mine = [r[3] for r in found if r[0] == "default" and r[4] == f"node/{node}"]
    # In time order (the recorders' names are time-ordered), as a real cluster lists them.
    assert mine == ["NodeNotReady", "Starting", "Rebooted", "NodeReady"], mine
    assert any(r[3] == "NodeNotReady" and r[4].startswith("pod/") and r[2] == "Warning" for r in found)
    described = kubectl(sim, "describe", "node", node).stdout
    events = described.split("Events:", 1)[1]
    assert events.index("NodeNotReady") < events.index("Starting") < events.index("NodeReady")
    assert "node-controller" in events and "kubelet" in events


def test_an_eviction_kills_reschedules_and_creates(sim: SimHandle) -> None:
    pods = json.loads(kubectl(sim, "get", "pods", "-n", "default", "-l", "app=cache", "-o", "json").stdout)["items"]
    victim = pods[0]["metadata"]["name"]
    out = subprocess.run([str(KUBECTL), "--kubeconfig", sim.env["kubeconfig"], "delete", "pod", "-n", "default", victim,
                          "--wait=false"], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    _header, found = rows(kubectl(sim, "get", "events", "-n", "default", "-o", "wide"))
    killing = [r for r in found if r[2] == "Killing" and r[3] == f"pod/{victim}"]
    assert killing and killing[0][4] == "spec.containers{cache}" and "Stopping container cache" in " ".join(killing[0])
    created = [r for r in found if r[2] == "SuccessfulCreate" and r[3].startswith("replicaset/cache-")]
    assert created and "replicaset-controller" in " ".join(created[-1])
    new_pod = " ".join(created[-1]).split("Created pod: ")[1].split()[0]
    assert any(r[2] == "Scheduled" and r[3] == f"pod/{new_pod}" and "default-scheduler," in r for r in found)


def test_events_expire_after_the_ttl(sim_factory: Any) -> None:
    handle = sim_factory(spec=small_spec(kube={"event_ttl": 30}))
    node = worker(handle)
    created = api(handle, "POST", "/apis/events.k8s.io/v1/namespaces/default/events", node_event(node, "u"))
    assert created.status_code == 201
    wait_until(lambda: api(handle, "GET", f"/api/v1/namespaces/default/events/{node}.rollout1").status_code == 404)


def test_get_leases_in_kube_system_shows_the_control_plane(sim: SimHandle) -> None:
    header, found = rows(kubectl(sim, "get", "lease", "-n", "kube-system"))
    assert header == ["NAME", "HOLDER", "AGE"]
    names = [r[0] for r in found]
    controls = sorted(vm["name"].lower() for vm in sim.node_vms("control"))
    assert "kube-controller-manager" in names and "kube-scheduler" in names
    apiservers = [r for r in found if r[0].startswith("apiserver-")]
    assert len(apiservers) == len(controls) and all(r[1].startswith(f"{r[0]}_") for r in apiservers)
    leader = next(r for r in found if r[0] == "kube-controller-manager")[1]
    assert leader.rsplit("_", 1)[0] in controls
    labelled = json.loads(kubectl(sim, "get", "lease", "-n", "kube-system", "-l",
                                  "apiserver.kubernetes.io/identity=kube-apiserver", "-o", "json").stdout)["items"]
    assert sorted(i["metadata"]["labels"]["kubernetes.io/hostname"] for i in labelled) == controls


def test_the_leader_moves_when_its_node_stops(sim: SimHandle) -> None:
    def holder() -> str:
        lease = json.loads(kubectl(sim, "get", "lease", "-n", "kube-system", "kube-scheduler", "-o", "json").stdout)
        return str(lease["spec"]["holderIdentity"])

    first = holder()
    vm_name = next(vm["name"] for vm in sim.node_vms("control") if vm["name"].lower() == first.rsplit("_", 1)[0])
    sim.admin("POST", "/actions", {"action": "stop_vm", "vm": vm_name})
    wait_until(lambda: holder() != first)
    lease = json.loads(kubectl(sim, "get", "lease", "-n", "kube-system", "kube-scheduler", "-o", "json").stdout)
    assert lease["spec"]["leaseTransitions"] == 1 and lease["spec"]["holderIdentity"].rsplit("_", 1)[0] != vm_name.lower()
    _header, found = rows(kubectl(sim, "get", "events", "-n", "kube-system"))
    assert any(r[2] == "LeaderElection" and r[3] == "lease/kube-scheduler" for r in found)


def test_get_rs_prints_replicasets_with_safe_hashes(sim: SimHandle) -> None:
    header, found = rows(kubectl(sim, "get", "rs", "-A"))
    assert header == ["NAMESPACE", "NAME", "DESIRED", "CURRENT", "READY", "AGE"]
    web = next(r for r in found if r[1].startswith("web-"))
    assert web[0] == "default" and web[2:5] == ["4", "4", "4"]
    wide_header, _wide = rows(kubectl(sim, "get", "rs", "-n", "default", "-o", "wide"))
    assert wide_header[-3:] == ["CONTAINERS", "IMAGES", "SELECTOR"]
    for row in found:
        hashed = row[1].rsplit("-", 1)[1]
        assert set(hashed) <= set(SAFE_ALPHABET) and 1 <= len(hashed) <= 10, hashed
    labels = json.loads(kubectl(sim, "get", "pods", "-n", "default", "-l", "app=web", "-o", "json").stdout)["items"]
    assert {p["metadata"]["labels"]["pod-template-hash"] for p in labels} == {web[1].rsplit("-", 1)[1]}


def test_get_pdb_prints_the_budgets(sim: SimHandle) -> None:
    header, found = rows(kubectl(sim, "get", "pdb", "-A"))
    assert header == ["NAMESPACE", "NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE"]
    assert [r[:5] for r in found if r[1] == "web"] == [["default", "web", "3", "N/A", "1"]]


def test_a_watch_of_events_k8s_io_sees_the_new_form(sim: SimHandle) -> None:
    node = worker(sim)
    listed = api(sim, "GET", "/apis/events.k8s.io/v1/namespaces/default/events").json()
    version = listed["metadata"]["resourceVersion"]
    assert api(sim, "POST", "/apis/events.k8s.io/v1/namespaces/default/events", node_event(node, "u")).status_code == 201
    with open(sim.env["kubeconfig"], encoding="utf-8") as fh:
        token = yaml.safe_load(fh)["users"][0]["user"]["token"]
    watched = requests.get(sim.env["kube_url"] + "/apis/events.k8s.io/v1/namespaces/default/events",
                           params={"watch": "1", "resourceVersion": version, "timeoutSeconds": "1",
                                   "fieldSelector": f"regarding.name={node}"},
                           headers={"Authorization": f"Bearer {token}"}, verify=sim.env["kube_ca"], timeout=10)
    lines = [json.loads(line) for line in watched.text.splitlines() if line.strip()]
    added = [e["object"] for e in lines if e["type"] == "ADDED"]
    assert [o["reason"] for o in added] == ["CordonedForRollout"]
    assert added[0]["apiVersion"] == "events.k8s.io/v1" and added[0]["regarding"]["name"] == node
    assert "involvedObject" not in added[0] and added[0]["note"] == "Cordoned for rollout r1"
