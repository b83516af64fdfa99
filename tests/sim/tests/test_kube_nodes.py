"""Nodes as the official client sees them: boots, Ready, taints, cordon, annotations, leases."""

from __future__ import annotations

import json
import time
from typing import Any, Optional

import pytest
from kubernetes import client as k8s

from cks_sim.harness import wait_until
from kubekit import CONTROL, WORKERS, KubeEnv, assert_known_fields, merge_patch_kwargs, node_ready

ROLLOUT_ANNOTATION = "cloudstack.apache.org/rollout-boot-id"


def _taints(node: Any) -> set[tuple[str, str]]:
    return {(t.key, t.effect) for t in node.spec.taints or []}


def test_node_shape_matches_client_models(kube_env: KubeEnv) -> None:
    raw = kube_env.raw_json("GET", "/api/v1/nodes")
    assert raw["kind"] == "NodeList" and raw["metadata"]["resourceVersion"]
    assert_known_fields(raw, "V1NodeList")
    node = kube_env.core.read_node(CONTROL[0])
    assert node.metadata.uid and node.metadata.resource_version
    assert node.metadata.labels["node-role.kubernetes.io/control-plane"] == ""
    assert (("node-role.kubernetes.io/control-plane", "NoSchedule")) in _taints(node)
    assert {c.type for c in node.status.conditions} == {"Ready", "MemoryPressure", "DiskPressure", "PIDPressure"}
    ready = next(c for c in node.status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("True", "KubeletReady")
    assert node.status.node_info.boot_id and node.status.node_info.kubelet_version == "v1.30.4"
    assert node.status.capacity["cpu"] == "2" and node.status.capacity["memory"] == f"{4096 * 1024}Ki"
    assert {a.type for a in node.status.addresses} == {"InternalIP", "Hostname"}
    worker = kube_env.core.read_node(WORKERS[0])
    assert "node-role.kubernetes.io/control-plane" not in worker.metadata.labels
    assert not worker.spec.taints
    assert kube_env.world.ready_node_count() == 7


def test_power_off_goes_unknown_after_grace_and_power_on_boots_new_id(kube_env: KubeEnv) -> None:
    name = WORKERS[1]
    before = kube_env.core.read_node(name)
    old_boot = before.status.node_info.boot_id
    kube_env.core.patch_node(name, {"metadata": {"annotations": {ROLLOUT_ANNOTATION: old_boot}}})
    kube_env.power_off(name)
    # Right after the stop the API still shows the stale Ready (node-monitor grace).
    assert node_ready(kube_env.core.read_node(name)) == "True"
    node = wait_until(lambda: (n := kube_env.core.read_node(name)) and node_ready(n) == "Unknown" and n)
    ready = next(c for c in node.status.conditions if c.type == "Ready")
    assert ready.reason == "NodeStatusUnknown" and ready.message == "Kubelet stopped posting node status."
    assert {("node.kubernetes.io/unreachable", "NoSchedule"),
            ("node.kubernetes.io/unreachable", "NoExecute")} <= _taints(node)
    assert all(c.status == "Unknown" for c in node.status.conditions)
    assert kube_env.world.ready_node_count() == 6

    kube_env.power_on(name, cpu=4, memory_mb=8192)
    node = wait_until(lambda: (n := kube_env.core.read_node(name)) and node_ready(n) == "True" and n)
    assert node.status.node_info.boot_id != old_boot
    assert node.metadata.uid == before.metadata.uid
    assert node.metadata.annotations[ROLLOUT_ANNOTATION] == old_boot  # survives stop/start
    assert not _taints(node)
    assert node.status.capacity["cpu"] == "4" and node.status.capacity["memory"] == f"{8192 * 1024}Ki"
    events = kube_env.core.list_namespaced_event("default", field_selector=f"involvedObject.name={name}")
    rebooted = [e for e in events.items if e.reason == "Rebooted"]
    assert rebooted and node.status.node_info.boot_id in rebooted[0].message
    timeline = [e["event"] for e in kube_env.sim.timeline.list() if e.get("node") == name]
    assert timeline.index("notready") < timeline.index("boot") < timeline.index("ready")


def test_quick_restart_never_leaves_ready_but_boot_id_changes(kube_env: KubeEnv) -> None:
    name = WORKERS[2]
    old_boot = kube_env.core.read_node(name).status.node_info.boot_id
    kube_env.power_off(name)
    kube_env.power_on(name)  # inside the grace period: Ready never went Unknown
    assert node_ready(kube_env.core.read_node(name)) == "True"
    wait_until(lambda: kube_env.core.read_node(name).status.node_info.boot_id != old_boot)
    assert not any(e["event"] == "notready" for e in kube_env.sim.timeline.list() if e.get("node") == name)


def test_stale_ready_fault_reports_old_boot_then_new(make_kube_env: Any) -> None:
    env = make_kube_env({"timings": {"boot_to_ready": 30, "notready_grace": 10, "pod_termination": 5,
                                     "pod_start": 3}})
    name = WORKERS[0]
    old_boot = env.core.read_node(name).status.node_info.boot_id
    env.power_off(name)
    wait_until(lambda: node_ready(env.core.read_node(name)) == "Unknown")
    env.sim.faults.add({"kind": "stale_ready", "node": name, "seconds": 60})
    env.power_on(name)
    node = env.core.read_node(name)
    assert node_ready(node) == "True" and node.status.node_info.boot_id == old_boot
    assert not any(t[0] == "node.kubernetes.io/unreachable" for t in _taints(node))
    wait_until(lambda: env.core.read_node(name).status.node_info.boot_id != old_boot)
    assert node_ready(env.core.read_node(name)) == "True"


def test_never_ready_fault_keeps_node_not_ready_with_new_boot(kube_env: KubeEnv) -> None:
    name = WORKERS[3]
    old_boot = kube_env.core.read_node(name).status.node_info.boot_id
    kube_env.sim.faults.add({"kind": "never_ready", "node": name})
    kube_env.power_off(name)
    kube_env.power_on(name)
    node = wait_until(lambda: (n := kube_env.core.read_node(name)).status.node_info.boot_id != old_boot and n)
    ready = next(c for c in node.status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("False", "KubeletNotReady")
    assert ("node.kubernetes.io/not-ready", "NoSchedule") in _taints(node)


def test_node_lease_renewed_while_up_and_frozen_while_off(kube_env: KubeEnv) -> None:
    name = WORKERS[0]
    lease = kube_env.coord.read_namespaced_lease(name, "kube-node-lease")
    assert lease.spec.holder_identity == name and lease.spec.lease_duration_seconds == 40
    assert lease.metadata.owner_references[0].kind == "Node"
    first = lease.spec.renew_time
    wait_until(lambda: kube_env.coord.read_namespaced_lease(name, "kube-node-lease").spec.renew_time > first)
    kube_env.power_off(name)
    frozen = kube_env.coord.read_namespaced_lease(name, "kube-node-lease").spec.renew_time
    other = kube_env.coord.read_namespaced_lease(WORKERS[1], "kube-node-lease").spec.renew_time
    wait_until(lambda: kube_env.coord.read_namespaced_lease(WORKERS[1], "kube-node-lease").spec.renew_time > other)
    assert kube_env.coord.read_namespaced_lease(name, "kube-node-lease").spec.renew_time == frozen


class CountingApi:
    """The store the kubelets write to, counting their reads and writes; its next write can be refused."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.calls: list[str] = []
        self.refuse_next_put = False

    def read(self, plural: str, namespace: str, name: str) -> Optional[dict[str, Any]]:
        self.calls.append(f"read {plural}")
        return self.store.read(plural, namespace, name)

    def put(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(f"put {plural}")
        if self.refuse_next_put:
            self.refuse_next_put = False
            raise RuntimeError("409 Conflict: the object has been modified")
        return self.store.put(plural, obj)


def test_a_heartbeat_renews_the_lease_in_one_write_and_reads_it_again_after_a_refusal(kube_env: KubeEnv) -> None:
    # On the real backend a few threads renew every node's Lease each round: one request each, as the
    # kubelet's lease controller keeps the Lease it last stored (a read and a write per node doubled a
    # round of large.yml's 1,003 and let leases lapse).
    name = WORKERS[0]
    api = CountingApi(kube_env.world.store)
    before = kube_env.coord.read_namespaced_lease(name, "kube-node-lease").spec.renew_time
    with kube_env.sim.lock:
        kube_env.world.kubelets.heartbeat(name, api)
    assert api.calls == ["put leases"]
    renewed = kube_env.coord.read_namespaced_lease(name, "kube-node-lease").spec.renew_time
    assert renewed > before
    # A write refused (another writer moved the Lease on): the next heartbeat reads it first.
    api.calls.clear()
    api.refuse_next_put = True
    with kube_env.sim.lock, pytest.raises(RuntimeError):
        kube_env.world.kubelets.heartbeat(name, api)
    with kube_env.sim.lock:
        kube_env.world.kubelets.heartbeat(name, api)
        kube_env.world.kubelets.heartbeat(name, api)
    assert api.calls == ["put leases", "read leases", "put leases", "put leases"]
    assert kube_env.coord.read_namespaced_lease(name, "kube-node-lease").spec.renew_time > renewed


def test_a_heartbeat_posts_the_unchanged_status_once_its_report_is_due(kube_env: KubeEnv) -> None:
    # The real node lifecycle controller drops a taint change that failed until the Node changes again:
    # the kubelet's periodic report is that change (the real backend sets it; in memory, on a change only).
    name = WORKERS[0]
    kubelets = kube_env.world.kubelets
    api = CountingApi(kube_env.world.store)
    with kube_env.sim.lock:
        kubelets.heartbeat(name, api)
    assert api.calls == ["put leases"]  # no report when none is set
    before = next(c for c in kube_env.core.read_node(name).status.conditions if c.type == "Ready")
    kubelets.status_report = 3600.0
    with kube_env.sim.lock:
        kubelets.heartbeat(name, api)
    assert api.calls == ["put leases"] * 2  # posted at its registration: not due yet
    kubelets.status_report = 0.0
    time.sleep(1.1)  # condition stamps are whole seconds
    with kube_env.sim.lock:
        kubelets.heartbeat(name, api)
    assert api.calls == ["put leases"] * 3 + ["read nodes", "put nodes"]
    after = next(c for c in kube_env.core.read_node(name).status.conditions if c.type == "Ready")
    assert after.status == "True" and after.last_heartbeat_time > before.last_heartbeat_time
    assert after.last_transition_time == before.last_transition_time


def test_cordon_strategic_merge_mirrors_taint_and_uncordon_with_null(kube_env: KubeEnv) -> None:
    name = WORKERS[0]
    node = kube_env.core.patch_node(name, {"spec": {"unschedulable": True}})
    assert node.spec.unschedulable is True
    # The node lifecycle controller adds the taint in a write of its own after the cordon
    # (doNoScheduleTaintingPass): not in the patch's answer, there on the next read, a newer version.
    assert ("node.kubernetes.io/unschedulable", "NoSchedule") not in _taints(node)
    read = kube_env.core.read_node(name)
    assert ("node.kubernetes.io/unschedulable", "NoSchedule") in _taints(read)
    assert int(read.metadata.resource_version) > int(node.metadata.resource_version)
    node = kube_env.core.patch_node(name, {"spec": {"unschedulable": None}})
    assert not node.spec.unschedulable and ("node.kubernetes.io/unschedulable", "NoSchedule") in _taints(node)
    assert not _taints(kube_env.core.read_node(name))
    events = [e["event"] for e in kube_env.sim.timeline.list() if e.get("node") == name]
    assert events[-2:] == ["cordoned", "uncordoned"]
    calls = [c for c in kube_env.sim.calls.list() if c["verb"] == "patch"]
    assert calls[-1]["resource"] == "nodes" and calls[-1]["name"] == name


def test_merge_patch_null_removes_annotation(kube_env: KubeEnv) -> None:
    name = WORKERS[1]
    kube_env.core.patch_node(name, {"metadata": {"annotations": {ROLLOUT_ANNOTATION: "abc"}}},
                             **merge_patch_kwargs())
    node = kube_env.core.read_node(name)
    assert node.metadata.annotations[ROLLOUT_ANNOTATION] == "abc"
    assert "node.alpha.kubernetes.io/ttl" in node.metadata.annotations  # merged, not replaced
    node = kube_env.core.patch_node(name, {"metadata": {"annotations": {ROLLOUT_ANNOTATION: None}}},
                                    **merge_patch_kwargs())
    assert ROLLOUT_ANNOTATION not in node.metadata.annotations
    annotated = [e for e in kube_env.sim.timeline.list() if e["event"] == "annotated"]
    assert [e["value"] for e in annotated] == ["abc", None]


def test_json_patch_on_node_and_its_failures(kube_env: KubeEnv) -> None:
    name = WORKERS[2]
    node = kube_env.core.patch_node(name, [
        {"op": "add", "path": "/metadata/annotations/cloudstack.apache.org~1rollout-boot-id", "value": "x1"},
        {"op": "add", "path": "/spec/unschedulable", "value": True},
    ])
    assert node.metadata.annotations[ROLLOUT_ANNOTATION] == "x1" and node.spec.unschedulable
    with pytest.raises(k8s.ApiException) as info:
        kube_env.core.patch_node(name, [{"op": "test", "path": "/spec/unschedulable", "value": False}])
    assert info.value.status == 422
    body = json.loads(info.value.body)
    assert body["kind"] == "Status" and body["status"] == "Failure"


def test_patch_with_stale_resource_version_is_conflict(kube_env: KubeEnv) -> None:
    name = WORKERS[3]
    rv = kube_env.core.read_node(name).metadata.resource_version
    kube_env.core.patch_node(name, {"metadata": {"labels": {"rollout": "one"}}})
    with pytest.raises(k8s.ApiException) as info:
        kube_env.core.patch_node(name, {"metadata": {"resourceVersion": rv, "labels": {"rollout": "two"}}})
    assert info.value.status == 409 and json.loads(info.value.body)["reason"] == "Conflict"
    current = kube_env.core.read_node(name)
    assert current.metadata.labels["rollout"] == "one"
    ok = kube_env.core.patch_node(name, {"metadata": {"resourceVersion": current.metadata.resource_version,
                                                      "labels": {"rollout": "three"}}})
    assert ok.metadata.labels["rollout"] == "three"


def test_replace_node_status_is_ignored_and_stale_put_conflicts(kube_env: KubeEnv) -> None:
    name = WORKERS[0]
    node = kube_env.core.read_node(name)
    node.spec.unschedulable = True
    node.status.node_info.boot_id = "forged"
    updated = kube_env.core.replace_node(name, node)
    assert updated.spec.unschedulable and updated.status.node_info.boot_id != "forged"
    with pytest.raises(k8s.ApiException) as info:
        kube_env.core.replace_node(name, node)  # the resourceVersion it carries is now old
    assert info.value.status == 409


def test_foreign_cordon_undone_is_an_invariant_violation(kube_env: KubeEnv) -> None:
    name = WORKERS[1]
    kube_env.sim.faults.add({"kind": "foreign_cordon", "node": name})
    node = kube_env.core.read_node(name)
    assert node.spec.unschedulable is True
    assert kube_env.sim.invariants.list() == []
    kube_env.core.patch_node(name, {"spec": {"unschedulable": False}})
    violations = kube_env.sim.invariants.list()
    assert [v["kind"] for v in violations] == ["foreign_cordon_undone"] and violations[0]["node"] == name
    # A node the client cordoned itself may be uncordoned freely.
    kube_env.core.patch_node(WORKERS[2], {"spec": {"unschedulable": True}})
    kube_env.core.patch_node(WORKERS[2], {"spec": {"unschedulable": None}})
    assert len(kube_env.sim.invariants.list()) == 1


def test_node_list_selectors_and_paging(kube_env: KubeEnv) -> None:
    controls = kube_env.core.list_node(label_selector="node-role.kubernetes.io/control-plane")
    assert sorted(n.metadata.name for n in controls.items) == sorted(CONTROL)
    workers = kube_env.core.list_node(label_selector="!node-role.kubernetes.io/control-plane")
    assert sorted(n.metadata.name for n in workers.items) == sorted(WORKERS)
    named = kube_env.core.list_node(field_selector=f"metadata.name={WORKERS[0]}")
    assert [n.metadata.name for n in named.items] == [WORKERS[0]]
    hosts = kube_env.core.list_node(label_selector=f"kubernetes.io/hostname in ({CONTROL[0]},{WORKERS[3]})")
    assert {n.metadata.name for n in hosts.items} == {CONTROL[0], WORKERS[3]}
    seen, token = [], None
    while True:
        page = kube_env.core.list_node(limit=3, _continue=token)
        assert len(page.items) <= 3
        seen += [n.metadata.name for n in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert sorted(seen) == sorted(CONTROL + WORKERS) and len(seen) == 7
    with pytest.raises(k8s.ApiException) as info:
        kube_env.core.list_node(field_selector="spec.providerID=x")
    assert info.value.status == 400
