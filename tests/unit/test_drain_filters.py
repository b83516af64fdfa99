"""kubectl's drain filter chain, as ``classify_pod`` applies it, and PDB matching."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.drain import DrainOptions, REASON_DAEMONSET, REASON_LOCAL_STORAGE, REASON_ORPHANED_DAEMONSET, REASON_UNMANAGED, classify_pod, pdbs_for_pod, selector_matches
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.drainer import _pdb_from_message


def pod(name: str = "p", owner: Optional[str] = "ReplicaSet", controller: bool = True, phase: str = "Running",
        empty_dir: bool = False, mirror: bool = False, deleted: Optional[str] = None,
        labels: Optional[dict[str, str]] = None, namespace: str = "default") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "owner", "controller": controller,
                                    "apiVersion": "apps/v1"}]
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    if deleted:
        meta["deletionTimestamp"] = deleted
    volumes = [{"name": "cache", "emptyDir": {}}] if empty_dir else [{"name": "data", "hostPath": {"path": "/x"}}]
    return {"metadata": meta, "spec": {"nodeName": "n1", "volumes": volumes}, "status": {"phase": phase}}


def exists(_ns: str, _name: str) -> bool:
    return True


def missing(_ns: str, _name: str) -> bool:
    return False


CASES = [
    # (description, pod, options, daemonset lookup, action, reason)
    ("replicaset pod", pod(), DrainOptions(), exists, "evict", ""),
    ("daemonset pod skipped", pod(owner="DaemonSet"), DrainOptions(), exists, "skip", "DaemonSet-managed"),
    ("daemonset pod blocks without ignore", pod(owner="DaemonSet"), DrainOptions(ignore_daemonsets=False),
     exists, "block", REASON_DAEMONSET),
    ("orphaned daemonset pod blocks", pod(owner="DaemonSet"), DrainOptions(), missing, "block",
     REASON_ORPHANED_DAEMONSET),
    ("orphaned daemonset pod with force", pod(owner="DaemonSet"), DrainOptions(force=True), missing, "evict", ""),
    ("finished daemonset pod is deletable", pod(owner="DaemonSet", phase="Succeeded"), DrainOptions(), missing,
     "evict", ""),
    ("mirror pod skipped", pod(owner="Node", mirror=True), DrainOptions(), exists, "skip", "mirror (static) pod"),
    ("unmanaged mirror pod still skipped", pod(owner=None, mirror=True), DrainOptions(), exists, "skip",
     "mirror (static) pod"),
    ("emptyDir blocks", pod(empty_dir=True), DrainOptions(), exists, "block", REASON_LOCAL_STORAGE),
    ("emptyDir allowed", pod(empty_dir=True), DrainOptions(delete_emptydir_data=True), exists, "evict", ""),
    ("finished emptyDir pod", pod(empty_dir=True, phase="Failed"), DrainOptions(), exists, "evict", ""),
    ("no owner blocks", pod(owner=None), DrainOptions(), exists, "block", REASON_UNMANAGED),
    ("owner without controller=true counts as none", pod(controller=False), DrainOptions(), exists, "block",
     REASON_UNMANAGED),
    ("daemonset owner without controller=true is unmanaged", pod(owner="DaemonSet", controller=False),
     DrainOptions(), exists, "block", REASON_UNMANAGED),
    ("no owner with force", pod(owner=None), DrainOptions(force=True), exists, "evict", ""),
    ("finished unmanaged pod", pod(owner=None, phase="Succeeded"), DrainOptions(), exists, "evict", ""),
    ("unmanaged emptyDir pod: local storage reported first", pod(owner=None, empty_dir=True), DrainOptions(),
     exists, "block", REASON_LOCAL_STORAGE),
    ("unmanaged emptyDir pod with emptyDir allowed", pod(owner=None, empty_dir=True),
     DrainOptions(delete_emptydir_data=True), exists, "block", REASON_UNMANAGED),
    ("long-deleted pod skipped", pod(deleted="2026-01-01T00:00:00Z"),
     DrainOptions(skip_wait_for_delete_timeout=10), exists, "skip",
     "deleted more than skip_wait_for_delete_timeout seconds ago"),
    ("deleted pod not skipped without the timeout", pod(deleted="2026-01-01T00:00:00Z"), DrainOptions(), exists,
     "evict", ""),
]


@pytest.mark.parametrize("description,the_pod,options,lookup,action,reason", CASES, ids=[c[0] for c in CASES])
def test_classify_pod(description: str, the_pod: dict[str, Any], options: DrainOptions, lookup: Any,
                      action: str, reason: str) -> None:
    verdict = classify_pod(the_pod, options, lookup, now=1_800_000_000.0)
    assert verdict.action == action
    if action != "evict":
        assert verdict.reason == reason


def test_forced_pods_carry_a_warning() -> None:
    verdict = classify_pod(pod(owner=None), DrainOptions(force=True), exists)
    assert "no controller" in verdict.warning
    verdict = classify_pod(pod(empty_dir=True), DrainOptions(delete_emptydir_data=True), exists)
    assert "local storage" in verdict.warning


def test_daemonset_lookup_only_for_daemonset_pods() -> None:
    asked: list[tuple[str, str]] = []

    def lookup(ns: str, name: str) -> bool:
        asked.append((ns, name))
        return True

    classify_pod(pod(), DrainOptions(), lookup)
    classify_pod(pod(owner="DaemonSet", phase="Succeeded"), DrainOptions(), lookup)
    assert asked == []
    classify_pod(pod(owner="DaemonSet", namespace="kube-system"), DrainOptions(), lookup)
    assert asked == [("kube-system", "owner")]


def test_snake_case_objects_are_read_too() -> None:
    the_pod = {"metadata": {"name": "p", "namespace": "d", "owner_references": None, "annotations": None},
               "spec": {"volumes": [{"name": "v", "empty_dir": {"medium": None}, "host_path": None}]},
               "status": {"phase": "Running"}}
    assert classify_pod(the_pod, DrainOptions(force=True), exists).action == "block"
    assert classify_pod(the_pod, DrainOptions(force=True, delete_emptydir_data=True), exists).action == "evict"


SELECTORS = [
    ({"matchLabels": {"app": "web"}}, {"app": "web", "tier": "x"}, True),
    ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "db"]}]}, {"app": "db"}, True),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, {"app": "web"}, False),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, {}, True),
    ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {}, False),
    ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {}, True),
    ({}, {"anything": "x"}, True),
    (None, {"app": "web"}, False),
]


@pytest.mark.parametrize("selector,labels,expected", SELECTORS)
def test_selector_matches(selector: Any, labels: dict[str, str], expected: bool) -> None:
    assert selector_matches(selector, labels) is expected


def test_pdbs_for_pod_same_namespace_only() -> None:
    pdbs = [
        {"metadata": {"namespace": "default", "name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}}}},
        {"metadata": {"namespace": "other", "name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}}}},
        {"metadata": {"namespace": "default", "name": "db"}, "spec": {"selector": {"matchLabels": {"app": "db"}}}},
    ]
    assert pdbs_for_pod(pod(labels={"app": "web"}), pdbs) == ["default/web"]
    assert pdbs_for_pod(pod(labels={"app": "cache"}), pdbs) == []


def test_pdb_name_from_the_429_cause() -> None:
    text = "Cannot evict pod as it would violate the pod's disruption budget. " \
           "The disruption budget web needs 3 healthy pods and has 3 currently"
    assert _pdb_from_message(text) == "web"
    assert _pdb_from_message("Too many requests") == ""
