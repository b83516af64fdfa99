"""Pods, PodDisruptionBudgets and the eviction subresource, through the official client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client as k8s

from cks_sim.harness import wait_until
from kubekit import CONTROL, WORKERS, KubeEnv, assert_known_fields


def _evict(env: KubeEnv, namespace: str, name: str, grace: int | None = None) -> Any:
    body = k8s.V1Eviction(
        api_version="policy/v1", kind="Eviction",
        metadata=k8s.V1ObjectMeta(name=name, namespace=namespace),
        delete_options=k8s.V1DeleteOptions(grace_period_seconds=grace) if grace is not None else None,
    )
    return env.core.create_namespaced_pod_eviction(name, namespace, body)


def _pods(env: KubeEnv, namespace: str, selector: str) -> list[Any]:
    return env.core.list_namespaced_pod(namespace, label_selector=selector).items


def _ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _controller(pod: Any) -> Any:
    return next((o for o in pod.metadata.owner_references or [] if o.controller), None)


def _pdb(env: KubeEnv, namespace: str, name: str) -> Any:
    return env.policy.read_namespaced_pod_disruption_budget(name, namespace)


def test_pod_and_pdb_shapes_match_client_models(kube_env: KubeEnv) -> None:
    raw = kube_env.raw_json("GET", "/api/v1/pods")
    assert_known_fields(raw, "V1PodList")
    assert_known_fields(kube_env.raw_json("GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets"),
                        "V1PodDisruptionBudgetList")
    for path, model in (("/apis/apps/v1/daemonsets", "V1DaemonSetList"),
                        ("/apis/apps/v1/deployments", "V1DeploymentList"),
                        ("/apis/apps/v1/replicasets", "V1ReplicaSetList"),
                        ("/apis/apps/v1/statefulsets", "V1StatefulSetList"),
                        ("/api/v1/namespaces", "V1NamespaceList"),
                        ("/apis/coordination.k8s.io/v1/leases", "V1LeaseList"),
                        ("/api/v1/events", "CoreV1EventList")):
        assert_known_fields(kube_env.raw_json("GET", path), model)
    pods = kube_env.core.list_pod_for_all_namespaces()
    assert all(p.status.phase == "Running" and _ready(p) for p in pods.items)
    # 7 kube-proxy + 2 coredns + 4 web + 3 db + 2 cache + loner + 4 mirror pods x 3 control nodes
    assert len(pods.items) == 7 + 2 + 4 + 3 + 2 + 1 + 12


def test_workloads_spread_off_control_nodes_and_owned_by_controllers(kube_env: KubeEnv) -> None:
    web = _pods(kube_env, "default", "app=web")
    assert len(web) == 4 and {p.spec.node_name for p in web} == set(WORKERS)  # spread, one per worker
    for pod in web:
        owner = _controller(pod)
        assert owner.kind == "ReplicaSet" and owner.api_version == "apps/v1"
        assert pod.metadata.name.startswith(owner.name + "-")
        assert owner.name.startswith("web-") and pod.metadata.labels["pod-template-hash"] in owner.name
    rs = kube_env.apps.read_namespaced_replica_set(_controller(web[0]).name, "default")
    assert _controller(rs).kind == "Deployment" and _controller(rs).name == "web"
    db = sorted(p.metadata.name for p in _pods(kube_env, "default", "app=db"))
    assert db == ["db-0", "db-1", "db-2"]
    all_pods = kube_env.core.list_pod_for_all_namespaces().items
    on_control = {p.metadata.name for p in all_pods if p.spec.node_name in CONTROL}
    assert all(n.startswith(("kube-proxy-", "etcd-", "kube-apiserver-", "kube-controller-manager-",
                             "kube-scheduler-")) for n in on_control)
    cache = _pods(kube_env, "default", "app=cache")
    assert all(any(v.empty_dir is not None for v in p.spec.volumes) for p in cache)
    loner = kube_env.core.read_namespaced_pod("loner", "default")
    assert not loner.metadata.owner_references


def test_daemonset_and_mirror_pods_on_a_control_node(kube_env: KubeEnv) -> None:
    node = CONTROL[1]
    pods = kube_env.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
    by_name = {p.metadata.name: p for p in pods}
    etcd = by_name[f"etcd-{node}"]
    assert "kubernetes.io/config.mirror" in etcd.metadata.annotations
    assert _controller(etcd).kind == "Node" and _controller(etcd).name == node
    assert f"kube-apiserver-{node}" in by_name
    proxy = [p for p in pods if p.metadata.name.startswith("kube-proxy-")]
    assert len(proxy) == 1
    owner = _controller(proxy[0])
    assert (owner.kind, owner.api_version, owner.name) == ("DaemonSet", "apps/v1", "kube-proxy")
    ds = kube_env.apps.read_namespaced_daemon_set("kube-proxy", "kube-system")
    assert ds.status.desired_number_scheduled == 7 and ds.status.number_ready == 7


def test_field_selector_and_paging_of_pods_on_a_node(kube_env: KubeEnv) -> None:
    node = WORKERS[0]
    expected = {p.metadata.name for p in kube_env.core.list_pod_for_all_namespaces().items
                if p.spec.node_name == node}
    seen, token, pages = [], None, 0
    while True:
        page = kube_env.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}", limit=2,
                                                         _continue=token)
        pages += 1
        assert page.metadata.resource_version
        seen += [p.metadata.name for p in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert set(seen) == expected and len(seen) == len(expected) and pages >= 2
    running = kube_env.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node},status.phase=Running")
    assert {p.metadata.name for p in running.items} == expected
    none = kube_env.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node},status.phase!=Running")
    assert none.items == []


def test_pdb_status_fields(kube_env: KubeEnv) -> None:
    web = _pdb(kube_env, "default", "web")
    assert (web.status.current_healthy, web.status.desired_healthy, web.status.expected_pods,
            web.status.disruptions_allowed) == (4, 3, 4, 1)
    assert web.status.observed_generation == web.metadata.generation == 1
    db = _pdb(kube_env, "default", "db")  # maxUnavailable 1 of 3
    assert (db.status.desired_healthy, db.status.disruptions_allowed, db.status.expected_pods) == (2, 1, 3)
    listed = kube_env.policy.list_namespaced_pod_disruption_budget("default")
    assert sorted(p.metadata.name for p in listed.items) == ["db", "web"]


def test_eviction_accepted_then_pod_replaced_with_new_uid(make_kube_env: Any) -> None:
    # Termination slow enough (1 s real) to read the Terminating pod reliably.
    kube_env = make_kube_env({"timings": {"boot_to_ready": 30, "notready_grace": 40, "pod_termination": 100,
                                          "pod_start": 3}})
    victim = sorted(_pods(kube_env, "default", "app=web"), key=lambda p: p.metadata.name)[0]
    kube_env.core.patch_node(victim.spec.node_name, {"spec": {"unschedulable": True}})
    result = _evict(kube_env, "default", victim.metadata.name)
    assert result.kind == "Status" or result is not None
    raw_last = [c for c in kube_env.sim.calls.list() if c["resource"] == "pods/eviction"][-1]
    assert raw_last["status"] == 201 and raw_last["verb"] == "create"
    terminating = kube_env.core.read_namespaced_pod(victim.metadata.name, "default")
    assert terminating.metadata.deletion_timestamp is not None
    # The ReplicaSet does not wait: a replacement exists at once, away from the cordoned node.
    web = _pods(kube_env, "default", "app=web")
    fresh = [p for p in web if p.metadata.deletion_timestamp is None]
    fresh_nodes = {p.spec.node_name for p in fresh if p.metadata.uid != victim.metadata.uid}
    assert len(fresh) == 4 and victim.spec.node_name not in fresh_nodes

    def gone() -> bool:
        try:
            pod = kube_env.core.read_namespaced_pod(victim.metadata.name, "default")
        except k8s.ApiException as exc:
            return exc.status == 404
        return pod.metadata.uid != victim.metadata.uid

    wait_until(gone)
    wait_until(lambda: all(_ready(p) for p in _pods(kube_env, "default", "app=web"))
               and len(_pods(kube_env, "default", "app=web")) == 4)
    assert kube_env.sim.invariants.list() == []


def test_statefulset_pod_comes_back_with_same_name_new_uid(kube_env: KubeEnv) -> None:
    pod = kube_env.core.read_namespaced_pod("db-1", "default")
    kube_env.core.patch_node(pod.spec.node_name, {"spec": {"unschedulable": True}})
    _evict(kube_env, "default", "db-1")

    def replaced() -> Any:
        try:
            new = kube_env.core.read_namespaced_pod("db-1", "default")
        except k8s.ApiException:
            return None
        return new if new.metadata.uid != pod.metadata.uid else None

    new = wait_until(replaced)
    assert new.spec.node_name != pod.spec.node_name
    new = wait_until(lambda: (p := replaced()) is not None and _ready(p) and p)
    assert new.status.phase == "Running"


def test_eviction_blocked_by_pdb_is_429_with_disruption_budget_cause(kube_env: KubeEnv) -> None:
    web = sorted(_pods(kube_env, "default", "app=web"), key=lambda p: p.metadata.name)
    for node in WORKERS:  # the replacement has nowhere to go and stays Pending
        kube_env.core.patch_node(node, {"spec": {"unschedulable": True}})
    _evict(kube_env, "default", web[0].metadata.name)
    with pytest.raises(k8s.ApiException) as info:
        _evict(kube_env, "default", web[1].metadata.name)
    assert info.value.status == 429
    body = json.loads(info.value.body)
    assert body["kind"] == "Status" and body["reason"] == "TooManyRequests"
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    cause = body["details"]["causes"][0]
    assert cause["reason"] == "DisruptionBudget"
    assert cause["message"] == "The disruption budget web needs 3 healthy pods and has 3 currently"
    assert kube_env.core.read_namespaced_pod(web[1].metadata.name, "default").metadata.deletion_timestamp is None
    # Once the replacement is Ready, the budget allows the next one.
    kube_env.core.patch_node(WORKERS[0], {"spec": {"unschedulable": None}})
    wait_until(lambda: _pdb(kube_env, "default", "web").status.disruptions_allowed == 1)
    _evict(kube_env, "default", web[1].metadata.name)


def test_pdb_block_fault_forces_zero_disruptions(kube_env: KubeEnv) -> None:
    kube_env.sim.faults.add({"kind": "pdb_block", "namespace": "default", "name": "db"})
    assert _pdb(kube_env, "default", "db").status.disruptions_allowed == 0
    with pytest.raises(k8s.ApiException) as info:
        _evict(kube_env, "default", "db-0")
    assert info.value.status == 429
    kube_env.sim.faults.clear()
    _evict(kube_env, "default", "db-0")


def test_two_pdbs_is_500_and_missing_pod_404_and_name_mismatch_400(make_kube_env: Any) -> None:
    from kubekit import BASE_SPEC

    pdbs = BASE_SPEC["pdbs"] + [{"namespace": "default", "name": "web-too", "selector": {"app": "web"},
                                 "maxUnavailable": "50%"}]
    env = make_kube_env({"pdbs": pdbs})
    victim = _pods(env, "default", "app=web")[0].metadata.name
    with pytest.raises(k8s.ApiException) as info:
        _evict(env, "default", victim)
    assert info.value.status == 500
    assert "more than one PodDisruptionBudget" in json.loads(info.value.body)["message"]
    with pytest.raises(k8s.ApiException) as info:
        _evict(env, "default", "no-such-pod")
    assert info.value.status == 404 and json.loads(info.value.body)["reason"] == "NotFound"
    body = k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name="other", namespace="default"))
    with pytest.raises(k8s.ApiException) as info:
        env.core.create_namespaced_pod_eviction(victim, "default", body)
    assert info.value.status == 400
    pct = env.policy.read_namespaced_pod_disruption_budget("web-too", "default")
    assert pct.status.desired_healthy == 2  # 4 - ceil(50% of 4)


def test_unprotected_and_daemonset_pods_evict_and_come_back(kube_env: KubeEnv) -> None:
    cache = _pods(kube_env, "default", "app=cache")[0]
    _evict(kube_env, "default", cache.metadata.name, grace=0)
    wait_until(lambda: cache.metadata.uid not in {p.metadata.uid for p in _pods(kube_env, "default", "app=cache")})
    wait_until(lambda: len([p for p in _pods(kube_env, "default", "app=cache") if _ready(p)]) == 2)
    proxy = _pods(kube_env, "kube-system", "app=kube-proxy")[0]
    kube_env.core.delete_namespaced_pod(proxy.metadata.name, "kube-system")

    def node_proxies() -> list[Any]:
        return [p for p in _pods(kube_env, "kube-system", "app=kube-proxy") if p.spec.node_name == proxy.spec.node_name]

    wait_until(lambda: [p.metadata.uid for p in node_proxies()] not in ([], [proxy.metadata.uid]))


def test_pods_on_a_stopped_node_go_not_ready_and_count_against_budget(kube_env: KubeEnv) -> None:
    web = sorted(_pods(kube_env, "default", "app=web"), key=lambda p: p.metadata.name)
    down = web[0].spec.node_name
    kube_env.power_off(down)
    wait_until(lambda: not _ready(kube_env.core.read_namespaced_pod(web[0].metadata.name, "default")))
    wait_until(lambda: _pdb(kube_env, "default", "web").status.current_healthy == 3)
    with pytest.raises(k8s.ApiException) as info:
        _evict(kube_env, "default", web[1].metadata.name)
    assert info.value.status == 429
    kube_env.power_on(down)
    wait_until(lambda: _ready(kube_env.core.read_namespaced_pod(web[0].metadata.name, "default")))
    pod = kube_env.core.read_namespaced_pod(web[0].metadata.name, "default")
    assert pod.metadata.uid == web[0].metadata.uid and pod.status.container_statuses[0].restart_count == 1


def test_eviction_while_another_node_is_silently_down_violates_budget(kube_env: KubeEnv) -> None:
    web = sorted(_pods(kube_env, "default", "app=web"), key=lambda p: p.metadata.name)
    # The stop is not visible yet (grace period): the API still allows one disruption...
    kube_env.power_off(web[0].spec.node_name)
    _evict(kube_env, "default", web[1].metadata.name)
    # ...but only 2 of the 3 required web pods are really up: the sim records it.
    violations = kube_env.sim.invariants.list()
    assert [v["kind"] for v in violations] == ["pdb_below_budget"]
    assert violations[0]["pdb"] == "default/web" and violations[0]["healthy"] == 2


def test_replacement_pending_when_no_node_fits_then_scheduled(kube_env: KubeEnv) -> None:
    for node in WORKERS:
        kube_env.core.patch_node(node, {"spec": {"unschedulable": True}})
    cache = sorted(_pods(kube_env, "default", "app=cache"), key=lambda p: p.metadata.name)[0]
    _evict(kube_env, "default", cache.metadata.name)
    pending = wait_until(lambda: [p for p in _pods(kube_env, "default", "app=cache")
                                  if p.status.phase == "Pending"])
    assert pending[0].spec.node_name is None
    assert pending[0].status.conditions[0].reason == "Unschedulable"
    kube_env.core.patch_node(WORKERS[2], {"spec": {"unschedulable": None}})
    wait_until(lambda: any(p.spec.node_name == WORKERS[2] and _ready(p)
                           for p in _pods(kube_env, "default", "app=cache")))


def test_slow_drain_keeps_pod_terminating(make_kube_env: Any) -> None:
    env = make_kube_env()
    pod = _pods(env, "default", "app=cache")[0]
    env.sim.faults.add({"kind": "slow_drain", "node": pod.spec.node_name, "seconds": 3000})
    _evict(env, "default", pod.metadata.name)
    still = env.core.read_namespaced_pod(pod.metadata.name, "default")
    assert still.metadata.uid == pod.metadata.uid and still.metadata.deletion_timestamp is not None


def test_unready_pod_on_dead_node_evicts_while_budget_healthy_and_waits_for_kubelet(kube_env: KubeEnv) -> None:
    web = sorted(_pods(kube_env, "default", "app=web"), key=lambda p: p.metadata.name)
    dead = web[0]
    kube_env.power_off(dead.spec.node_name)
    wait_until(lambda: not _ready(kube_env.core.read_namespaced_pod(dead.metadata.name, "default")))
    # IfHealthyBudget: 3 healthy >= 3 desired, so the unready pod may go even with 0 disruptions allowed.
    assert _pdb(kube_env, "default", "web").status.disruptions_allowed == 0
    _evict(kube_env, "default", dead.metadata.name)
    # Nobody on the dead node confirms the kill: the pod stays Terminating, its replacement runs elsewhere.
    wait_until(lambda: len([p for p in _pods(kube_env, "default", "app=web")
                            if _ready(p) and p.metadata.deletion_timestamp is None]) == 4)
    still = kube_env.core.read_namespaced_pod(dead.metadata.name, "default")
    assert still.metadata.uid == dead.metadata.uid and still.metadata.deletion_timestamp is not None
    kube_env.power_on(dead.spec.node_name)
    wait_until(lambda: dead.metadata.name not in {p.metadata.name for p in _pods(kube_env, "default", "app=web")})
    assert kube_env.sim.invariants.list() == []


def test_dry_run_eviction_changes_nothing(kube_env: KubeEnv) -> None:
    pod = _pods(kube_env, "default", "app=cache")[0]
    status, body = kube_env.raw("POST", f"/api/v1/namespaces/default/pods/{pod.metadata.name}/eviction?dryRun=All",
                                {"apiVersion": "policy/v1", "kind": "Eviction",
                                 "metadata": {"name": pod.metadata.name, "namespace": "default"}})
    assert status == 201 and body["status"] == "Success"
    assert kube_env.core.read_namespaced_pod(pod.metadata.name, "default").metadata.deletion_timestamp is None
