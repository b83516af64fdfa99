"""The dry run's drain check: which pods of a node a drain could not evict now, and why.

Pure: pods and PDBs as the API lists them in, ``NodeDrainBlockers`` out. The filter chain is
``classify_pod``'s (tested in test_drain_filters.py); here, what the Eviction API would refuse.
"""

from __future__ import annotations

import json
from typing import Any, Optional

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.drain import DrainOptions, REASON_LOCAL_STORAGE, REASON_ORPHANED_DAEMONSET, REASON_UNMANAGED, budget_refuses, drain_blockers


def pod(name: str, labels: Optional[dict[str, str]] = None, owner: Optional[str] = "ReplicaSet",
        phase: str = "Running", ready: bool = True, empty_dir: bool = False, deleting: bool = False,
        mirror: bool = False, namespace: str = "default") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                            "labels": labels if labels is not None else {"app": name.rsplit("-", 1)[0]}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": f"{name}-owner", "controller": True,
                                    "apiVersion": "apps/v1"}]
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": "x"}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T16:00:00Z"
    volumes = [{"name": "scratch", "emptyDir": {}}] if empty_dir else []
    return {"metadata": meta, "spec": {"nodeName": "w1", "volumes": volumes},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pdb(name: str, allowed: int, current: int = 2, desired: int = 2, selector: Optional[dict[str, str]] = None,
        policy: Optional[str] = None, namespace: str = "default") -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": selector if selector is not None else {"app": name}}}
    if policy:
        spec["unhealthyPodEvictionPolicy"] = policy
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec,
            "status": {"disruptionsAllowed": allowed, "currentHealthy": current, "desiredHealthy": desired}}


def exists(_ns: str, _name: str) -> bool:
    return True


def check(pods: list[dict[str, Any]], pdbs: list[dict[str, Any]], **options: Any) -> Any:
    return drain_blockers("w1", pods, pdbs, DrainOptions(**options), exists, now=0.0)


def test_a_budget_at_zero_names_itself_and_its_pods_on_the_node() -> None:
    found = check([pod("web-1"), pod("web-2"), pod("api-1")], [pdb("web", 0), pdb("api", 1)])
    [block] = found.budgets
    assert (block.pdb, block.disruptions_allowed, block.pods) == ("default/web", 0, ("default/web-1", "default/web-2"))
    assert found.messages == ["PodDisruptionBudget default/web allows 0 disruptions (2 healthy, 2 needed): "
                              "pods default/web-1, default/web-2 cannot be evicted until it allows one"]
    assert not found.empty and found.multiple_budgets == () and found.stopping == ()


def test_nothing_in_the_way() -> None:
    found = check([pod("web-1"), pod("lonely-1")], [pdb("web", 1)])
    assert found.empty and found.messages == []
    assert found.to_dict() == {"node": "w1", "pdbs": [], "multiple_pdbs": [], "pods": [], "messages": []}


def test_a_pod_two_budgets_select_fails_the_drain() -> None:
    found = check([pod("web-1", labels={"app": "web", "tier": "front"})],
                  [pdb("web", 1), pdb("front", 3, selector={"tier": "front"})])
    assert found.multiple_budgets == (("default/web-1", ("default/front", "default/web")),)
    assert found.budgets == ()
    assert "500" in found.messages[0]


@pytest.mark.parametrize("blocked, options, reason", [
    (pod("cache-1", empty_dir=True), {}, REASON_LOCAL_STORAGE),
    (pod("bare", owner=None), {}, REASON_UNMANAGED),
])
def test_pods_that_stop_the_drain_as_kubectl_does(blocked: dict[str, Any], options: dict[str, Any],
                                                  reason: str) -> None:
    found = check([blocked, pod("web-1")], [pdb("web", 1)], **options)
    assert found.stopping == ((reason, (f"default/{blocked['metadata']['name']}",)),)
    assert found.messages[0].startswith("stops before any eviction: " + reason)


def test_the_drain_options_let_those_pods_go_and_their_budgets_count() -> None:
    found = check([pod("cache-1", empty_dir=True), pod("bare", owner=None, labels={"app": "cache"})],
                  [pdb("cache", 0)], delete_emptydir_data=True, force=True)
    assert found.stopping == ()
    assert found.budgets[0].pods == ("default/bare", "default/cache-1")


def test_an_orphaned_daemonset_pod_stops_the_drain_without_force() -> None:
    orphan = pod("agent-x", owner="DaemonSet")
    found = drain_blockers("w1", [orphan], [], DrainOptions(), lambda _ns, _n: False, now=0.0)
    assert found.stopping == ((REASON_ORPHANED_DAEMONSET, ("default/agent-x",)),)


def test_pods_never_evicted_or_never_budget_checked_are_not_blockers() -> None:
    pods = [pod("web-ds", owner="DaemonSet"), pod("web-mirror", owner="Node", mirror=True),
            pod("web-done", phase="Succeeded"), pod("web-pending", phase="Pending"),
            pod("web-going", deleting=True)]
    assert check(pods, [pdb("web", 0)]).empty


def test_budgets_of_other_namespaces_do_not_select() -> None:
    assert check([pod("web-1")], [pdb("web", 0, namespace="other")]).empty


@pytest.mark.parametrize("ready, allowed, current, desired, policy, refused", [
    (True, 0, 2, 2, None, True),
    (True, 1, 3, 2, None, False),
    (False, 0, 2, 2, None, False),          # IfHealthyBudget: an unready pod goes while the budget is met
    (False, 0, 1, 2, None, True),           # ... but not below it
    (False, 0, 1, 2, "IfHealthyBudget", True),
    (False, 0, 1, 2, "AlwaysAllow", False),  # KEP-3017: unready pods always go
    (True, 0, 1, 2, "AlwaysAllow", True),   # a Ready pod still needs a disruption
])
def test_budget_refuses_as_the_eviction_handler(ready: bool, allowed: int, current: int, desired: int,
                                                policy: Optional[str], refused: bool) -> None:
    assert budget_refuses(pdb("web", allowed, current, desired, policy=policy), pod("web-1", ready=ready)) is refused


def test_a_budget_without_status_yet_allows_nothing() -> None:
    budget = pdb("web", 0)
    budget["status"] = {}
    assert budget_refuses(budget, pod("web-1"))
    [block] = check([pod("web-1")], [budget]).budgets
    assert block.message.startswith("PodDisruptionBudget default/web allows 0 disruptions: ")


def test_everything_at_once_is_json_worst_first() -> None:
    found = check([pod("cache-1", empty_dir=True), pod("web-1"), pod("db-0", labels={"app": "db", "x": "y"})],
                  [pdb("web", 0), pdb("db", 1), pdb("x", 1, selector={"x": "y"})])
    data = json.loads(json.dumps(found.to_dict()))
    assert [p["reason"] for p in data["pods"]] == [REASON_LOCAL_STORAGE]
    assert data["multiple_pdbs"] == [{"pod": "default/db-0", "pdbs": ["default/db", "default/x"]}]
    assert data["pdbs"][0]["pdb"] == "default/web" and data["pdbs"][0]["pods"] == ["default/web-1"]
    assert [m.split(" ")[0] for m in data["messages"]] == ["stops", "pod", "PodDisruptionBudget"]
