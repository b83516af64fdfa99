"""The seed's "with external etcd, another control node must be serving the API" (``api_server_problems``)."""

from __future__ import annotations

from typing import Any, Optional

from factories import ClusterFactory

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.api_servers import api_server_problems


def api_pod(node: str, ready: Optional[bool] = True, phase: str = "Running") -> dict[str, Any]:
    condition: dict[str, Any] = {"type": "Ready", "status": "True" if ready else "False"}
    if not ready:
        condition.update(reason="ContainersNotReady", message="containers with unready status: [kube-apiserver]")
    return {"metadata": {"name": f"kube-apiserver-{node}", "namespace": "kube-system"},
            "spec": {"nodeName": node}, "status": {"phase": phase, "conditions": [condition]}}


def external(control: int = 2) -> ClusterFactory:
    return ClusterFactory(control=control, workers=2, etcd=3)


def test_another_serving_api_server_lets_the_control_node_go() -> None:
    f = external()
    pods = [api_pod(f.c(1)), api_pod(f.c(2))]
    assert api_server_problems(f.view(), [f.c(1)], pods) == []


def test_the_other_api_server_not_ready_refuses_and_names_the_pod_and_what_to_do() -> None:
    f = external()
    pods = [api_pod(f.c(1)), api_pod(f.c(2), ready=False)]
    [problem] = api_server_problems(f.view(), [f.c(1)], pods)
    assert f"while {f.c(1)} is down" in problem
    assert f"{f.c(2)}: kube-system/kube-apiserver-{f.c(2)} not Ready (ContainersNotReady" in problem
    assert "its /readyz must answer 200" in problem


def test_one_serving_of_several_others_is_enough() -> None:
    f = external(control=3)
    pods = [api_pod(f.c(1)), api_pod(f.c(2), ready=False), api_pod(f.c(3))]
    assert api_server_problems(f.view(), [f.c(1)], pods) == []


def test_a_missing_or_pending_api_server_pod_does_not_serve() -> None:
    f = external(control=3)
    pods = [api_pod(f.c(1)), api_pod(f.c(3), phase="Pending")]
    [problem] = api_server_problems(f.view(), [f.c(1)], pods)
    assert f"{f.c(2)}: no kube-apiserver pod in kube-system" in problem and "is Pending" in problem


def test_the_batchs_own_api_server_does_not_count() -> None:
    f = external()
    pods = [api_pod(f.c(1), ready=False), api_pod(f.c(2))]
    assert api_server_problems(f.view(), [f.c(2)], pods) != []


def test_only_with_external_etcd_and_only_for_control_nodes() -> None:
    stacked = ClusterFactory(control=3, workers=2)
    assert api_server_problems(stacked.view(), [stacked.c(1)], []) == []
    f = external()
    assert api_server_problems(f.view(), [f.w(1)], []) == []
    assert api_server_problems(f.view(), [f.e(1)], []) == []


def test_other_control_nodes_down_are_left_to_the_preflight() -> None:
    f = external()
    f.stop(f.c(2))
    assert api_server_problems(f.view(), [f.c(1)], []) == []
