"""Where the simulated scheduler puts a pod, and the node writes that steer it (taints, labels),
through the official client: PreferNoSchedule taints as kube-scheduler's TaintToleration score
weighs them, taint validation, the taint list replaced whole by a patch, and the timeline."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client as k8s

from cks_sim.harness import wait_until
from kubekit import WORKERS, KubeEnv, merge_patch_kwargs

PENDING = {"key": "cloudstack.apache.org/rollout-pending", "effect": "PreferNoSchedule"}


def _web_nodes(env: KubeEnv) -> dict[str, str]:
    pods = env.core.list_namespaced_pod("default", label_selector="app=web").items
    return {p.metadata.name: p.spec.node_name for p in pods if p.metadata.deletion_timestamp is None}


def _evict(env: KubeEnv, name: str) -> None:
    env.core.create_namespaced_pod_eviction(name, "default", k8s.V1Eviction(
        metadata=k8s.V1ObjectMeta(name=name, namespace="default"),
        delete_options=k8s.V1DeleteOptions(grace_period_seconds=0)))


def _add_taint(env: KubeEnv, node: str, taint: dict[str, Any]) -> None:
    current = env.core.read_node(node)
    taints = [t.to_dict() for t in current.spec.taints or []]
    env.core.patch_node(node, {"metadata": {"resourceVersion": current.metadata.resource_version},
                               "spec": {"taints": [{"key": t["key"], "effect": t["effect"]} for t in taints]
                                        + [taint]}})


def _replacement_node(env: KubeEnv, victim: str) -> str:
    before = set(_web_nodes(env))
    _evict(env, victim)
    new = wait_until(lambda: [n for n in _web_nodes(env) if n not in before])
    return _web_nodes(env)[new[0]]


def test_prefer_no_schedule_steers_a_replacement_away_unless_nothing_else_fits(kube_env: KubeEnv) -> None:
    # web: one pod per worker. Without taints a replacement goes to the worker with the fewest web
    # pods, the others being equal, by name: WORKERS[1] when WORKERS[0]'s pod is evicted.
    victim = next(p for p, n in _web_nodes(kube_env).items() if n == WORKERS[0])
    kube_env.core.patch_node(WORKERS[0], {"spec": {"unschedulable": True}})
    for node in WORKERS[1:3]:
        _add_taint(kube_env, node, PENDING)
    # Tainted WORKERS[1] and [2] would win on every other score; the untainted [3] wins instead.
    assert _replacement_node(kube_env, victim) == WORKERS[3]

    # With every schedulable node tainted the taint is only a preference: the pod still lands.
    _add_taint(kube_env, WORKERS[3], PENDING)
    victim = next(p for p, n in _web_nodes(kube_env).items() if n == WORKERS[3])
    assert _replacement_node(kube_env, victim) in WORKERS[1:4]


def test_a_tolerated_prefer_no_schedule_taint_does_not_count(make_kube_env: Any) -> None:
    spec = {"workloads": [{"kind": "Deployment", "namespace": "default", "name": "web", "replicas": 4,
                           "tolerations": [{"key": PENDING["key"], "operator": "Exists"}]}], "pdbs": []}
    env = make_kube_env(spec)
    victim = next(p for p, n in _web_nodes(env).items() if n == WORKERS[0])
    env.core.patch_node(WORKERS[0], {"spec": {"unschedulable": True}})
    _add_taint(env, WORKERS[1], PENDING)
    # The pod tolerates the taint: the name order decides, as without it.
    assert _replacement_node(env, victim) == WORKERS[1]


def test_taints_are_replaced_whole_and_validated(kube_env: KubeEnv) -> None:
    node = WORKERS[0]
    kube_env.core.patch_node(node, {"spec": {"unschedulable": True}})
    _add_taint(kube_env, node, PENDING)
    _add_taint(kube_env, node, {"key": "example.com/theirs", "value": "x", "effect": "NoSchedule"})
    taints = {(t.key, t.effect) for t in kube_env.core.read_node(node).spec.taints}
    assert taints == {("node.kubernetes.io/unschedulable", "NoSchedule"), (PENDING["key"], "PreferNoSchedule"),
                      ("example.com/theirs", "NoSchedule")}
    # No patch merge key on spec.taints: a patch carrying a list replaces it (what a careless
    # writer does to other owners' taints), strategic merge and merge patch alike...
    kube_env.core.patch_node(node, {"spec": {"taints": [PENDING]}})
    taints = {(t.key, t.effect) for t in kube_env.core.read_node(node).spec.taints}
    # ... but the lifecycle controller re-derives its own from spec.unschedulable.
    assert taints == {("node.kubernetes.io/unschedulable", "NoSchedule"), (PENDING["key"], "PreferNoSchedule")}
    kube_env.core.patch_node(node, {"spec": {"taints": None}}, **merge_patch_kwargs())
    taints = {(t.key, t.effect) for t in kube_env.core.read_node(node).spec.taints}
    assert taints == {("node.kubernetes.io/unschedulable", "NoSchedule")}

    for bad in ([{"key": PENDING["key"], "effect": "Sometimes"}], [{"effect": "NoSchedule"}], [PENDING, PENDING]):
        with pytest.raises(k8s.ApiException) as info:
            kube_env.core.patch_node(node, {"spec": {"taints": bad}})
        assert info.value.status == 422 and json.loads(info.value.body)["reason"] == "Invalid"


def test_stale_resource_version_protects_a_taint_read_modify_write(kube_env: KubeEnv) -> None:
    node = WORKERS[1]
    read = kube_env.core.read_node(node)
    _add_taint(kube_env, node, {"key": "example.com/theirs", "effect": "NoSchedule"})  # someone else, meanwhile
    with pytest.raises(k8s.ApiException) as info:
        kube_env.core.patch_node(node, {"metadata": {"resourceVersion": read.metadata.resource_version},
                                        "spec": {"taints": [PENDING]}})
    assert info.value.status == 409 and json.loads(info.value.body)["reason"] == "Conflict"
    assert {t.key for t in kube_env.core.read_node(node).spec.taints} == {"example.com/theirs"}


def test_timeline_journals_labels_client_taints_and_scheduling(kube_env: KubeEnv) -> None:
    node = WORKERS[2]
    label = "node.kubernetes.io/exclude-from-external-load-balancers"
    kube_env.core.patch_node(node, {"metadata": {"labels": {label: "true"}}}, **merge_patch_kwargs())
    kube_env.core.patch_node(node, {"spec": {"unschedulable": True}})
    _add_taint(kube_env, node, PENDING)
    kube_env.core.patch_node(node, {"metadata": {"labels": {label: None}}, "spec": {"taints": None}},
                             **merge_patch_kwargs())
    mine = [e for e in kube_env.sim.timeline.list() if e.get("node") == node]
    assert [(e["event"], e.get("key"), e.get("value", e.get("effect"))) for e in mine] == [
        ("labelled", label, "true"), ("cordoned", None, None), ("tainted", PENDING["key"], "PreferNoSchedule"),
        ("labelled", label, None), ("untainted", PENDING["key"], "PreferNoSchedule")]
    # The pods the cluster started with were not "scheduled"; a replacement is.
    assert not [e for e in kube_env.sim.timeline.list() if e["event"] == "scheduled"]
    victim = next(p for p, n in _web_nodes(kube_env).items() if n == node)
    where = _replacement_node(kube_env, victim)
    scheduled = [e for e in kube_env.sim.timeline.list() if e["event"] == "scheduled"]
    assert [(e["node"], e["owner"].split("/")[0]) for e in scheduled] == [(where, "ReplicaSet")]


def test_kube_error_fault_by_path(kube_env: KubeEnv) -> None:
    kube_env.sim.faults.add({"kind": "kube_error", "verb": "get", "path": "/readyz", "status": 500, "count": 1})
    assert kube_env.raw("GET", "/readyz/etcd")[0] == 200  # another path passes
    assert kube_env.raw("GET", "/readyz")[0] == 500
    assert kube_env.raw("GET", "/readyz")[0] == 200  # one shot
