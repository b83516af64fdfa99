"""The machines cks-sim plays on a real control plane, judged by the real controllers: a stopped VM's
node stops heartbeating and the node lifecycle controller marks it Unknown and taints it, its pods
turn NotReady and the disruption controller counts them out of the budget; a started VM's node
comes back Ready with a new boot ID, the kubelet's Events saying so."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from cks_sim.harness import wait_until
from helpers import ClusterSim

pytestmark = pytest.mark.timeout(600)

UNREACHABLE = "node.kubernetes.io/unreachable"


def node(sim: ClusterSim, name: str) -> dict[str, Any]:
    return next(n for n in sim.kube.list_nodes() if n["metadata"]["name"] == name)


def ready(raw: dict[str, Any]) -> str:
    return next(c["status"] for c in raw["status"]["conditions"] if c["type"] == "Ready")


def web_budget(sim: ClusterSim) -> dict[str, Any]:
    return next(p["status"] for p in sim.kube.list_pdbs() if p["metadata"]["name"] == "web")


def api(sim: ClusterSim) -> Any:
    """The real API server, read as the actors read it (the world in this process)."""
    return next(iter(sim.sim.kube.values())).api


def test_a_stopped_vm_goes_unknown_and_a_started_one_comes_back_with_a_new_boot(
        cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml", etcd=False)
    web_nodes = {p["spec"]["nodeName"] for p in api(sim).list("/api/v1/namespaces/default/pods")
                 if p["metadata"]["name"].startswith("web-")}
    worker = sorted(web_nodes)[0]
    before = node(sim, worker)
    assert ready(before) == "True" and web_budget(sim)["currentHealthy"] == 4

    sim.action(action="stop_vm", vm=worker)
    # Only the real node lifecycle controller writes Unknown and the unreachable taint.
    wait_until(lambda: ready(node(sim, worker)) == "Unknown", 60, "the node lifecycle controller to mark it Unknown")
    wait_until(lambda: UNREACHABLE in {t["key"] for t in node(sim, worker)["spec"].get("taints") or []}, 60,
               "the unreachable taint")
    # Its web pod is NotReady now (the controller's MarkPodsNotReady), and the budget counts it out.
    wait_until(lambda: web_budget(sim)["currentHealthy"] == 3, 60, "the disruption controller to count the pod out")
    assert web_budget(sim)["disruptionsAllowed"] == 0
    # cks-sim's kubelets see the controller's mark on their next look at the nodes: its timeline's
    # notready comes from there, a moment after the API has it.
    wait_until(lambda: "notready" in after_power_off(sim, worker), 60, "the sim's timeline to record the node NotReady")

    sim.action(action="start_vm", vm=worker)
    wait_until(lambda: ready(node(sim, worker)) == "True", 60, "the node to come back Ready")
    after = node(sim, worker)
    assert after["status"]["nodeInfo"]["bootID"] != before["status"]["nodeInfo"]["bootID"]
    wait_until(lambda: UNREACHABLE not in {t["key"] for t in node(sim, worker)["spec"].get("taints") or []}, 60,
               "the controller to take the taint off")
    wait_until(lambda: web_budget(sim)["currentHealthy"] == 4, 60, "the pod Ready again on the new boot")
    reasons = [e["reason"] for e in api(sim).list("/api/v1/namespaces/default/events")
               if e["involvedObject"].get("name") == worker]
    assert {"Starting", "Rebooted", "NodeReady"} <= set(reasons), reasons
    after_stop = after_power_off(sim, worker)
    assert after_stop.index("notready") < after_stop.index("powered_on") < after_stop.index("boot"), after_stop


def after_power_off(sim: ClusterSim, worker: str) -> list[str]:
    """The node's timeline events from its VM's last power-off on."""
    timeline = [e["event"] for e in sim.timeline() if e.get("node") == worker]
    start = len(timeline) - 1 - timeline[::-1].index("powered_off") if "powered_off" in timeline else len(timeline)
    return timeline[start:]


def test_the_machines_faults_act_on_a_real_api_and_the_in_memory_apis_are_named_not_applied(
        cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml", etcd=False)
    worker = sorted(n["metadata"]["name"] for n in sim.kube.list_nodes()
                    if "node-role.kubernetes.io/control-plane" not in n["metadata"]["labels"])[0]
    # Someone else cordons the node: an actor's write, which the real API server stores.
    sim.fault(kind="foreign_cordon", node=worker)
    wait_until(lambda: node(sim, worker)["spec"].get("unschedulable") is True, 60, "the foreign cordon in the API")
    # A fault of cks-sim's own API has no counterpart in a real API server: named, not pretended.
    sim.fault(kind="kube_error", verb="get", resource="nodes", status=500, count=1)
    assert [e["kind"] for e in sim.timeline() if e.get("event") == "kube_fault_not_applied"] == ["kube_error"]
    # A kubelet's fault acts through the shared actors: a node that never turns Ready after its boot.
    sim.fault(kind="never_ready", node=worker)
    sim.action(action="stop_vm", vm=worker)
    wait_until(lambda: ready(node(sim, worker)) == "Unknown", 60, "the node lifecycle controller to mark it Unknown")
    sim.action(action="start_vm", vm=worker)
    wait_until(lambda: "boot" in after_power_off(sim, worker), 60, "the new boot")
    wait_until(lambda: ready(node(sim, worker)) == "False", 60, "the new kubelet to post NotReady")
    assert "ready" not in after_power_off(sim, worker)
