"""The Drainer's eviction loop against a scripted fake of KubeClient (pure logic, no network)."""

from __future__ import annotations

from typing import Any, Optional

import pytest
from fakes import FakeKube

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube_answers import EvictionResult
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import StepFailed
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.drain import DrainOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.drainer import Drainer


def rs_pod(name: str, labels: Optional[dict[str, str]] = None, owner: str = "ReplicaSet") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels or {},
                         "ownerReferences": [{"kind": owner, "name": "o", "controller": True}]},
            "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}


FAST = DrainOptions(eviction_retry_interval=0.01, poll_interval=0.01)
BLOCKED = EvictionResult("blocked", 429, "The disruption budget web needs 3 healthy pods and has 3 currently",
                         pdb="web")


def test_all_pods_evicted_and_waited_for() -> None:
    kube = FakeKube(pods=[rs_pod("a"), rs_pod("b")], eviction_answers={})
    report = Drainer(kube, FAST).drain("n1", Deadline(5))
    assert sorted(report.evicted) == ["default/a", "default/b"]
    assert all(kube.pod_reads[name] >= 2 for name in ("a", "b"))


def test_429_is_retried_until_allowed() -> None:
    kube = FakeKube(pods=[rs_pod("a")], eviction_answers={"a": [BLOCKED, BLOCKED]})
    report = Drainer(kube, FAST).drain("n1", Deadline(5))
    assert report.evicted == ["default/a"]
    assert kube.evictions == ["a", "a", "a"]


def test_the_report_says_how_long_each_budget_held_a_pod_back() -> None:
    kube = FakeKube(pods=[rs_pod("a"), rs_pod("b")], eviction_answers={"a": [BLOCKED, BLOCKED]})
    report = Drainer(kube, FAST).drain("n1", Deadline(5))
    # b went at once: no wait; a was refused twice, then let through (two retry intervals at least).
    (wait,) = report.budget_waits
    assert wait["pod"] == "default/a" and wait["pdb"] == "default/web"
    assert wait["seconds"] >= 2 * FAST.eviction_retry_interval and 0 <= wait["after"] <= report.ended - report.started


def test_429_until_the_deadline_names_the_pdb() -> None:
    # b terminated while a was refused: the one look at the node's pods after the evictions (at
    # the deadline here) finds it gone.
    kube = FakeKube(pods=[rs_pod("a", {"app": "web"}), rs_pod("b")], eviction_answers={"a": [BLOCKED] * 10_000},
                    reads_until_gone=1)
    with pytest.raises(StepFailed) as caught:
        Drainer(kube, FAST).drain("n1", Deadline(0.3))
    error = caught.value
    assert error.step == "drain" and error.node == "n1"
    assert "default/a" in error.msg and "PodDisruptionBudget default/web" in error.msg
    assert "default/b" not in error.msg
    assert error.details["evicted"] == ["default/b"]


def test_500_multiple_pdbs_fails_at_once() -> None:
    multiple = EvictionResult("multiple_pdbs", 500, "This pod has more than one PodDisruptionBudget")
    kube = FakeKube(pods=[rs_pod("a")], eviction_answers={"a": [multiple]})
    with pytest.raises(StepFailed) as caught:
        Drainer(kube, FAST).drain("n1", Deadline(30))
    assert kube.evictions == ["a"]
    assert "more than one PodDisruptionBudget" in caught.value.msg


def test_404_counts_as_gone() -> None:
    kube = FakeKube(pods=[rs_pod("a")], eviction_answers={"a": [EvictionResult("gone", 404)]})
    assert Drainer(kube, FAST).drain("n1", Deadline(5)).evicted == ["default/a"]


def test_same_name_new_uid_counts_as_gone() -> None:
    kube = FakeKube(pods=[rs_pod("db-0", owner="StatefulSet")], eviction_answers={}, reads_until_gone=1, recreate=True)
    assert Drainer(kube, FAST).drain("n1", Deadline(5)).evicted == ["default/db-0"]


def test_blocking_pods_abort_before_any_eviction() -> None:
    bare = rs_pod("bare")
    bare["metadata"]["ownerReferences"] = []
    cache = rs_pod("cache")
    cache["spec"]["volumes"] = [{"name": "c", "emptyDir": {}}]
    kube = FakeKube(pods=[rs_pod("a"), bare, cache], eviction_answers={})
    with pytest.raises(StepFailed) as caught:
        Drainer(kube, FAST).drain("n1", Deadline(5))
    assert kube.evictions == []
    assert "default/bare" in caught.value.msg and "default/cache" in caught.value.msg
    assert set(caught.value.details["blocking_pods"]) == {
        "pods that declare no controller (use force=true to override)",
        "pods with local storage (use delete_emptydir_data=true to override)",
    }


def test_still_terminating_at_the_deadline() -> None:
    kube = FakeKube(pods=[rs_pod("a", {"app": "web"})], eviction_answers={}, reads_until_gone=10_000,
                    pdbs=[{"metadata": {"namespace": "default", "name": "web"},
                           "spec": {"selector": {"matchLabels": {"app": "web"}}}}])
    with pytest.raises(StepFailed) as caught:
        Drainer(kube, FAST).drain("n1", Deadline(0.2))
    assert "still terminating" in caught.value.msg
    # No 429 named a PDB: it is found by matching the PDBs' selectors to the pod's labels.
    assert caught.value.details["pods_left"][0]["pdb"] == ["default/web"]
