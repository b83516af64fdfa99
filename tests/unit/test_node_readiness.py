"""What makes a Kubernetes node not Ready, as the preflight, the release and the validation name it:
its Ready condition, or a taint the node lifecycle controller keeps on it while kubectl shows it Ready."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.health import preflight_problems, release_verdict
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import build_view, not_ready_why


def kube_node(name: str, ready: Optional[str] = "True", reason: Optional[str] = None,
              taints: tuple[str, ...] = ()) -> dict[str, Any]:
    conditions: list[dict[str, Any]] = [{"type": "MemoryPressure", "status": "False"}]
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready, **({"reason": reason} if reason else {})})
    return {"metadata": {"name": name, "annotations": {}}, "status": {"conditions": conditions, "nodeInfo": {"bootID": "b1"}},
            "spec": {"taints": [{"key": key, "effect": "NoSchedule"} for key in taints]}}


@pytest.mark.parametrize("raw, why", [
    (kube_node("a"), ""),
    (kube_node("a", taints=("node-role.kubernetes.io/control-plane", "node.kubernetes.io/unschedulable")), ""),
    (kube_node("a", "Unknown", "NodeStatusUnknown"), "Ready=Unknown, NodeStatusUnknown"),
    (kube_node("a", "False", "KubeletNotReady"), "Ready=False, KubeletNotReady"),
    (kube_node("a", "Unknown"), "Ready=Unknown"),
    (kube_node("a", None), "Ready=missing"),
    # The API server's TaintNodesByCondition admission: a new Node is not-ready until the controller reads it.
    (kube_node("a", taints=("node.kubernetes.io/not-ready",)), "tainted node.kubernetes.io/not-ready"),
    (kube_node("a", taints=("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")),
     "tainted node.kubernetes.io/not-ready, node.kubernetes.io/unreachable"),
    # The condition first: it is what kubectl's STATUS column shows.
    (kube_node("a", "Unknown", "NodeStatusUnknown", taints=("node.kubernetes.io/unreachable",)),
     "Ready=Unknown, NodeStatusUnknown"),
])
def test_not_ready_why(raw: dict[str, Any], why: str) -> None:
    assert not_ready_why(raw) == why


def view(*nodes: dict[str, Any]) -> Any:
    names = [n["metadata"]["name"] for n in nodes]
    cluster = {"id": "c1", "name": "demo", "state": "Running",
               "virtualmachines": [{"id": f"vm-{n}", "name": n} for n in names]}
    return build_view(cluster, [{"id": f"vm-{n}", "name": n, "state": "Running"} for n in names],
                      [], [], [], [], list(nodes))


def test_the_preflight_names_what_makes_another_node_not_ready() -> None:
    v = view(kube_node("demo-node-1"), kube_node("demo-node-2", taints=("node.kubernetes.io/not-ready",)),
             kube_node("demo-node-3", "Unknown", "NodeStatusUnknown"), kube_node("demo-node-4"))
    assert [n.ready for n in v.nodes] == [True, False, False, True]
    assert preflight_problems(v, ["demo-node-1"]) == [
        "demo-node-2: Kubernetes node not Ready (tainted node.kubernetes.io/not-ready)",
        "demo-node-3: Kubernetes node not Ready (Ready=Unknown, NodeStatusUnknown)",
    ]


def test_the_release_keeps_an_annotated_node_out_naming_the_taint() -> None:
    annotated = kube_node("demo-node-1", taints=("node.kubernetes.io/unreachable",))
    annotated["metadata"]["annotations"]["cloudstack.apache.org/rollout-boot-id"] = "b0"
    node = view(annotated).nodes[0]
    assert release_verdict(node) == (False, "Kubernetes node not Ready (tainted node.kubernetes.io/unreachable)")
