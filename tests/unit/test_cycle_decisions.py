"""The node cycle's pure decisions: is the node back, how to cordon it, what to change."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import AffinityGroup, ROLLOUT_ANNOTATION, build_view
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node import change_plan, cordon_decision, describe_changes, node_is_back, node_with_vm
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.reasons import outdated_reasons
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import TypeSettings


def k8s_node(boot: Optional[str] = "boot-2", ready: str = "True", reason: str = "KubeletReady",
             taints: Optional[list[str]] = None, unschedulable: bool = False,
             annotations: Optional[dict[str, str]] = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "c-node-1", "annotations": annotations or {}},
        "spec": {"unschedulable": unschedulable, "taints": [{"key": k, "effect": "NoSchedule"} for k in taints or []]},
        "status": {"nodeInfo": {"bootID": boot} if boot else {},
                   "conditions": [{"type": "Ready", "status": ready, "reason": reason}]},
    }


BACK_CASES = [
    ("new boot, Ready", k8s_node(), True, "new boot ID"),
    ("stale Ready with the old boot ID", k8s_node(boot="boot-1"), False, "from before the restart"),
    ("stale Ready with the boot ID seen before the stop", k8s_node(boot="boot-0"), False, "from before"),
    ("new boot, not Ready yet", k8s_node(ready="False", reason="KubeletNotReady"), False, "Ready=False"),
    ("new boot, Ready Unknown", k8s_node(ready="Unknown", reason="NodeStatusUnknown"), False, "Ready=Unknown"),
    ("Ready but unreachable taint", k8s_node(taints=["node.kubernetes.io/unreachable"]), False, "tainted"),
    ("Ready but not-ready taint", k8s_node(taints=["node.kubernetes.io/not-ready"]), False, "tainted"),
    ("other taints do not matter", k8s_node(taints=["node.kubernetes.io/unschedulable"]), True, "new boot ID"),
    ("no boot ID at all", k8s_node(boot=None), False, "no boot ID"),
    ("Ready with an odd reason", k8s_node(reason="SomethingElse"), False, "reason"),
]


@pytest.mark.parametrize("description,node,expected,why", BACK_CASES, ids=[c[0] for c in BACK_CASES])
def test_node_is_back(description: str, node: dict[str, Any], expected: bool, why: str) -> None:
    ok, message = node_is_back(node, ["boot-1", "boot-0", None])
    assert ok is expected
    assert why in message


def test_cordon_decision_fresh_node() -> None:
    decision = cordon_decision(k8s_node(boot="b1"))
    assert (decision.ours, decision.annotate, decision.cordon, decision.boot_id) == (True, True, True, "b1")


def test_cordon_decision_cordoned_by_someone_else() -> None:
    decision = cordon_decision(k8s_node(boot="b1", unschedulable=True))
    assert (decision.ours, decision.annotate, decision.cordon) == (False, False, False)


def test_cordon_decision_resume_keeps_the_recorded_boot_id() -> None:
    # The previous run annotated b0 and the node has rebooted since (now b1): b0 stays.
    decision = cordon_decision(k8s_node(boot="b1", unschedulable=True, annotations={ROLLOUT_ANNOTATION: "b0"}))
    assert (decision.ours, decision.annotate, decision.cordon, decision.boot_id) == (True, False, False, "b0")
    # Annotated but uncordoned (the run stopped between the two patches): cordon again.
    decision = cordon_decision(k8s_node(boot="b0", annotations={ROLLOUT_ANNOTATION: "b0"}))
    assert (decision.ours, decision.annotate, decision.cordon) == (True, False, True)


# --- change decisions, on a view built from raw API dicts -------------------------------------

GROUPS = [
    {"id": "g-ded", "name": "dedicated", "type": "ExplicitDedication"},
    {"id": "g-spread", "name": "spread", "type": "host anti-affinity"},
    {"id": "g-soft", "name": "soft", "type": "non-strict host anti-affinity"},
]


def view_with(offering: str = "o-medium", root_gb: int = 20, groups: tuple[str, ...] = ("g-ded",)) -> Any:
    cluster = {"id": "c1", "name": "demo", "state": "Running",
               "virtualmachines": [{"id": "vm1", "name": "demo-node-1"}]}
    vm = {"id": "vm1", "name": "demo-node-1", "state": "Running", "serviceofferingid": offering,
          "affinitygroup": [{"id": g, "name": g} for g in groups]}
    volume = {"id": "vol1", "type": "ROOT", "virtualmachineid": "vm1", "size": root_gb << 30, "state": "Ready"}
    offerings = [{"id": "o-medium", "name": "medium", "cpunumber": 2, "memory": 4096},
                 {"id": "o-large", "name": "large", "cpunumber": 4, "memory": 8192}]
    return build_view(cluster, [vm], [volume], offerings, [], GROUPS, [])


def test_nothing_to_change() -> None:
    view = view_with()
    plan = change_plan(view.nodes[0], TypeSettings("o-medium", 20, None))
    assert plan.empty


def test_offering_and_disk_change() -> None:
    view = view_with()
    plan = change_plan(view.nodes[0], TypeSettings("o-large", 30, None))
    assert (plan.offering.from_, plan.offering.to) == ("o-medium", "o-large")
    assert (plan.root_disk.from_, plan.root_disk.to) == (20, 30)
    assert plan.affinity_groups is None
    described = describe_changes(plan, view)
    assert described["offering"]["from"] == "medium" and described["offering"]["to"] == "large"
    assert described["root_disk_gb"] == {"from": 20, "to": 30}


def test_a_larger_disk_is_never_shrunk() -> None:
    view = view_with(root_gb=50)
    assert change_plan(view.nodes[0], TypeSettings(None, 30, None)).root_disk is None


def test_groups_replaced_but_dedication_kept() -> None:
    view = view_with(groups=("g-ded", "g-soft"))
    plan = change_plan(view.nodes[0], TypeSettings(None, None, ("g-spread",)))
    assert set(plan.affinity_groups.from_) == {"g-ded", "g-soft"}
    assert set(plan.affinity_groups.to) == {"g-spread", "g-ded"}
    described = describe_changes(plan, view)
    assert set(described["affinity_groups"]["to"]) == {"spread", "dedicated"}


def test_groups_left_alone_without_recorded_groups() -> None:
    view = view_with(groups=("g-ded", "g-soft"))
    assert change_plan(view.nodes[0], TypeSettings(None, None, None)).affinity_groups is None


def test_groups_equal_up_to_dedication() -> None:
    view = view_with(groups=("g-ded", "g-spread"))
    assert change_plan(view.nodes[0], TypeSettings(None, None, ("g-spread",))).affinity_groups is None


def test_node_with_vm_rereads_the_settings() -> None:
    view = view_with()
    node = view.nodes[0]
    settings = TypeSettings("o-large", 30, ("g-spread",))
    assert outdated_reasons(node, settings, view)
    vm = {"id": "vm1", "state": "Running", "serviceofferingid": "o-large",
          "affinitygroup": [{"id": "g-ded"}, {"id": "g-spread"}]}
    refreshed = node_with_vm(node, vm, {"size": 30 << 30}, view)
    assert outdated_reasons(refreshed, settings, view) == []
    assert refreshed.affinity_groups[0] == AffinityGroup("g-ded", "dedicated", "ExplicitDedication")
    # Only half done: the disk is still small.
    half = node_with_vm(node, vm, {"size": 20 << 30}, view)
    assert [r.kind for r in outdated_reasons(half, settings, view)] == ["root_disk"]


def test_raise_for_failure_carries_the_whole_result() -> None:
    from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.results import BatchResult
    from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import StepFailed

    result = BatchResult(nodes=["n1"], error=StepFailed("n1", "drain", "pods still on the node", pods_left=[]))
    with pytest.raises(StepFailed) as caught:
        result.raise_for_failure()
    error = caught.value
    assert (error.node, error.step) == ("n1", "drain")
    assert error.msg == "node n1: drain failed: pods still on the node"
    assert error.details["batch"] == ["n1"] and error.details["pods_left"] == []
    assert error.details["changed"] is False
