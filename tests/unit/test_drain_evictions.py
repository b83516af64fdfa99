"""The Drainer's eviction loop against a scripted fake of KubeClient (pure logic, no network)."""

from __future__ import annotations

import threading
from typing import Any, Optional

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.drain import DrainOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.drainer import Drainer
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import StepFailed
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube import EvictionResult
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline


def rs_pod(name: str, labels: Optional[dict[str, str]] = None, owner: str = "ReplicaSet") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels or {},
                         "ownerReferences": [{"kind": owner, "name": "o", "controller": True}]},
            "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}


class FakeKube:
    """Pods vanish a few reads after their eviction is accepted; answers are scripted per pod."""

    def __init__(self, pods: list[dict[str, Any]], answers: dict[str, list[EvictionResult]],
                 reads_until_gone: int = 2, recreate: bool = False, pdbs: Optional[list[dict]] = None) -> None:
        self.pods = {p["metadata"]["name"]: p for p in pods}
        self.answers = answers
        self.reads_until_gone = reads_until_gone
        self.recreate = recreate
        self.pdbs = pdbs or []
        self.evictions: list[str] = []
        self.reads: dict[str, int] = {}
        self.lock = threading.Lock()

    def list_pods(self, node: str) -> list[dict[str, Any]]:
        return list(self.pods.values())

    def read_daemonset(self, ns: str, name: str) -> Optional[dict]:
        return {"metadata": {"name": name}}

    def list_pdbs(self) -> list[dict]:
        return self.pdbs

    def evict(self, ns: str, name: str, grace: Optional[int]) -> EvictionResult:
        with self.lock:
            self.evictions.append(name)
            script = self.answers.get(name) or []
            return script.pop(0) if script else EvictionResult("evicted", 201)

    def read_pod(self, ns: str, name: str) -> Optional[dict[str, Any]]:
        with self.lock:
            if name not in self.evictions or self.answers.get(name):
                return self.pods.get(name)
            self.reads[name] = self.reads.get(name, 0) + 1
            if self.reads[name] < self.reads_until_gone:
                return self.pods[name]
            if self.recreate:
                # A StatefulSet's pod comes back with the same name and a new UID.
                return dict(self.pods[name], metadata=dict(self.pods[name]["metadata"], uid="new-uid"))
            return None


FAST = DrainOptions(eviction_retry_interval=0.01, poll_interval=0.01)
BLOCKED = EvictionResult("blocked", 429, "The disruption budget web needs 3 healthy pods and has 3 currently",
                         pdb="web")


def test_all_pods_evicted_and_waited_for() -> None:
    kube = FakeKube([rs_pod("a"), rs_pod("b")], {})
    report = Drainer(kube, FAST).drain("n1", Deadline(5))
    assert sorted(report.evicted) == ["default/a", "default/b"]
    assert all(kube.reads[name] >= 2 for name in ("a", "b"))


def test_429_is_retried_until_allowed() -> None:
    kube = FakeKube([rs_pod("a")], {"a": [BLOCKED, BLOCKED]})
    report = Drainer(kube, FAST).drain("n1", Deadline(5))
    assert report.evicted == ["default/a"]
    assert kube.evictions == ["a", "a", "a"]


def test_429_until_the_deadline_names_the_pdb() -> None:
    kube = FakeKube([rs_pod("a", {"app": "web"}), rs_pod("b")], {"a": [BLOCKED] * 10_000})
    with pytest.raises(StepFailed) as caught:
        Drainer(kube, FAST).drain("n1", Deadline(0.3))
    error = caught.value
    assert error.step == "drain" and error.node == "n1"
    assert "default/a" in error.msg and "PodDisruptionBudget default/web" in error.msg
    assert "default/b" not in error.msg
    assert error.details["evicted"] == ["default/b"]


def test_500_multiple_pdbs_fails_at_once() -> None:
    multiple = EvictionResult("multiple_pdbs", 500, "This pod has more than one PodDisruptionBudget")
    kube = FakeKube([rs_pod("a")], {"a": [multiple]})
    with pytest.raises(StepFailed) as caught:
        Drainer(kube, FAST).drain("n1", Deadline(30))
    assert kube.evictions == ["a"]
    assert "more than one PodDisruptionBudget" in caught.value.msg


def test_404_counts_as_gone() -> None:
    kube = FakeKube([rs_pod("a")], {"a": [EvictionResult("gone", 404)]})
    assert Drainer(kube, FAST).drain("n1", Deadline(5)).evicted == ["default/a"]


def test_same_name_new_uid_counts_as_gone() -> None:
    kube = FakeKube([rs_pod("db-0", owner="StatefulSet")], {}, reads_until_gone=1, recreate=True)
    assert Drainer(kube, FAST).drain("n1", Deadline(5)).evicted == ["default/db-0"]


def test_blocking_pods_abort_before_any_eviction() -> None:
    bare = rs_pod("bare")
    bare["metadata"]["ownerReferences"] = []
    cache = rs_pod("cache")
    cache["spec"]["volumes"] = [{"name": "c", "emptyDir": {}}]
    kube = FakeKube([rs_pod("a"), bare, cache], {})
    with pytest.raises(StepFailed) as caught:
        Drainer(kube, FAST).drain("n1", Deadline(5))
    assert kube.evictions == []
    assert "default/bare" in caught.value.msg and "default/cache" in caught.value.msg
    assert set(caught.value.details["blocking_pods"]) == {
        "pods that declare no controller (use force=true to override)",
        "pods with local storage (use delete_emptydir_data=true to override)",
    }


def test_still_terminating_at_the_deadline() -> None:
    kube = FakeKube([rs_pod("a", {"app": "web"})], {}, reads_until_gone=10_000,
                    pdbs=[{"metadata": {"namespace": "default", "name": "web"},
                           "spec": {"selector": {"matchLabels": {"app": "web"}}}}])
    with pytest.raises(StepFailed) as caught:
        Drainer(kube, FAST).drain("n1", Deadline(0.2))
    assert "still terminating" in caught.value.msg
    # No 429 named a PDB: it is found by matching the PDBs' selectors to the pod's labels.
    assert caught.value.details["pods_left"][0]["pdb"] == ["default/web"]
