"""The cluster autoscaler CKS runs in a cluster with autoscaling on, and the scaleKubernetesCluster
parameters that turn it on (autoscalingenabled, minsize, maxsize) or remove nodes (nodeids).

CloudStack: KubernetesClusterManagerImpl.validateKubernetesClusterScaleParameters (the refusals and
their words), KubernetesClusterScaleWorker.autoscaleCluster (the Deployment in kube-system) and
.removeNodesFromCluster (kubectl drain and delete node, the VM destroyed and expunged; Scaling
meanwhile). kubernetes/autoscaler cluster-autoscaler: core/scaleup/orchestrator (TriggeredScaleUp,
"pod triggered scale-up: [{group a->b (max: m)}]"), core/scaledown/eligibility/eligibility.go
(ScaleDownDisabledKey, the utilization threshold), simulator/drainability/rules (pdb, system,
localstorage, replicated, notsafetoevict, mirror, daemonset), core/scaledown/actuator
("ScaleDown": "marked the node as toBeDeleted/unschedulable"), FAQ.md (minsize/maxsize bounds,
the delays).
"""

from __future__ import annotations

from typing import Any

import pytest
from cks_sim.harness import wait_until
from cs import CloudStackApiException
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from simkit import small_spec

DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"


def _core(handle: Any) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=handle.env["kubeconfig"]))


def _spec(workers: int, autoscaling: dict[str, Any], workloads: list[dict[str, Any]], pdbs: Any = ()) -> dict[str, Any]:
    raw = small_spec(workloads=workloads, pdbs=list(pdbs))
    raw["clusters"][0].update(workers=workers, autoscaling=autoscaling)
    return raw


def _events(core: k8s.CoreV1Api, reason: str) -> list[Any]:
    return core.list_event_for_all_namespaces(field_selector=f"reason={reason}").items


def test_pods_left_unschedulable_trigger_a_scale_up_through_cks_and_run_on_the_new_node(sim_factory):
    # Two 2-CPU workers; three pods of 1500m: the third fits nowhere.
    sim = sim_factory(_spec(2, {"enabled": True, "minsize": 2, "maxsize": 4, "scale_down_unneeded_time": 100000},
                            [{"kind": "Deployment", "namespace": "default", "name": "big", "replicas": 3,
                              "requests": {"cpu": "1500m", "memory": "256Mi"}}]))
    core = _core(sim)
    view = sim.cks_cluster()
    assert view["autoscalingenabled"] is True and int(view["minsize"]) == 2 and int(view["maxsize"]) == 4

    wait_until(lambda: int(sim.cks_cluster()["size"]) == 3 and sim.cks_cluster()["state"] == "Running",
               timeout=30, what="the autoscaler's scale-up")
    pods = wait_until(lambda: [p for p in core.list_namespaced_pod("default").items if p.status.phase == "Running"]
                      if all(p.status.phase == "Running" for p in core.list_namespaced_pod("default").items) else None,
                      timeout=30, what="every pod running")
    new = [vm["name"].lower() for vm in sim.node_vms("worker")]
    assert len(new) == 3 and len({p.spec.node_name for p in pods}) == 3
    triggered = _events(core, "TriggeredScaleUp")
    assert triggered and triggered[0].source.component == "cluster-autoscaler"
    assert f"{view['id']} 2->3 (max: 4)" in triggered[0].message
    assert triggered[0].message.startswith("pod triggered scale-up: [{")
    states = [e["state"] for e in sim.timeline() if e.get("event") == "cluster_state"]
    assert states[-2:] == ["Scaling", "Running"], states


def test_underused_workers_are_removed_down_to_minsize_but_not_an_annotated_one_or_a_kube_system_pods(sim_factory):
    sim = sim_factory(_spec(3, {"enabled": False, "minsize": 1, "maxsize": 2, "scale_down_unneeded_time": 30,
                                "scale_down_delay_after_add": 0},
                            [{"kind": "DaemonSet", "namespace": "kube-system", "name": "kube-proxy"},
                             {"kind": "Deployment", "namespace": "default", "name": "web", "replicas": 2}]))
    core, cs = _core(sim), sim.cs()
    workers = sorted(vm["name"].lower() for vm in sim.node_vms("worker"))
    kept = workers[0]
    core.patch_node(kept, {"metadata": {"annotations": {DISABLED: "true"}}})

    cs.scaleKubernetesCluster(id=sim.cks_cluster()["id"], autoscalingenabled=True, minsize=1, maxsize=4, fetch_result=True)

    ca = wait_until(lambda: [p for p in core.list_namespaced_pod("kube-system").items
                             if p.metadata.name.startswith("cluster-autoscaler-") and p.spec.node_name],
                    timeout=20, what="CKS's cluster-autoscaler Deployment")[0]
    expected = {kept} | ({ca.spec.node_name} & set(workers))
    wait_until(lambda: {vm["name"].lower() for vm in sim.node_vms("worker")} == expected
               and sim.cks_cluster()["state"] == "Running", timeout=60, what=f"workers down to {expected}")
    removed = set(workers) - expected
    assert int(sim.cks_cluster()["size"]) == len(expected)
    assert {n.metadata.name for n in core.list_node().items} & removed == set()
    marked = {e.involved_object.name for e in _events(core, "ScaleDown") if e.involved_object.kind == "Node"}
    assert marked == removed
    assert all(e.message == "marked the node as toBeDeleted/unschedulable"
               for e in _events(core, "ScaleDown") if e.involved_object.kind == "Node")
    # The web pods moved: evicted, replaced on the nodes that stay.
    wait_until(lambda: {p.spec.node_name for p in core.list_namespaced_pod("default").items
                        if p.status.phase == "Running"} <= expected, timeout=20)
    assert not [i for i in sim.invariants() if i.get("kind") == "pod_lost"]


@pytest.fixture
def kept_sim(sim_factory):
    return sim_factory(_spec(4, {"enabled": True, "minsize": 1, "maxsize": 5, "scale_down_unneeded_time": 100000},
                             [{"kind": "DaemonSet", "namespace": "kube-system", "name": "kube-proxy"},
                              {"kind": "Deployment", "namespace": "default", "name": "guarded", "replicas": 2},
                              {"kind": "Deployment", "namespace": "default", "name": "free", "replicas": 2},
                              {"kind": "Deployment", "namespace": "default", "name": "scratch", "replicas": 1, "emptyDir": True},
                              {"kind": "Pod", "namespace": "default", "name": "lonely"}],
                             [{"namespace": "default", "name": "guarded", "selector": {"app": "guarded"}, "minAvailable": 2}]))


def test_the_drainability_rules_say_which_pods_keep_their_node(kept_sim):
    sim = kept_sim
    world = sim.sim.kube[sim.cks_cluster()["id"]]
    autoscaler = sim.sim.autoscalers[sim.cks_cluster()["id"]]
    with sim.sim.lock:
        verdicts = {}
        for pod in world.store.objects["pods"].values():
            app = (pod["metadata"].get("labels") or {}).get("app") or pod["metadata"]["name"]
            verdicts.setdefault(app, set()).add(autoscaler._blocking(world, pod))
    assert verdicts["guarded"] == {"NotEnoughPdb"}  # rules/pdb: the budget allows no disruption
    assert verdicts["cluster-autoscaler"] == {"UnmovableKubeSystemPod"}  # rules/system: kube-system, no budget
    assert verdicts["scratch"] == {"LocalStorageRequested"}  # rules/localstorage: emptyDir
    assert verdicts["lonely"] == {"NotReplicated"}  # rules/replicated: no controller
    assert verdicts["free"] == {None}  # replicated, no budget: moved
    assert verdicts["kube-proxy"] == {"skip"}  # rules/daemonset
    assert "skip" in {autoscaler._blocking(world, p) for p in world.store.objects["pods"].values()
                      if "kubernetes.io/config.mirror" in (p["metadata"].get("annotations") or {})}  # rules/mirror


def test_a_node_marked_scale_down_disabled_or_fully_used_is_unremovable(kept_sim):
    sim = kept_sim
    core = _core(sim)
    world = sim.sim.kube[sim.cks_cluster()["id"]]
    autoscaler = sim.sim.autoscalers[sim.cks_cluster()["id"]]
    workers = sorted(vm["name"].lower() for vm in sim.node_vms("worker"))
    core.patch_node(workers[0], {"metadata": {"annotations": {DISABLED: "true"}}})
    with sim.sim.lock:
        assert autoscaler.unremovable_reason(world, workers[0], workers[1:]) == "ScaleDownDisabledAnnotation"
    core.patch_node(workers[0], {"metadata": {"annotations": {DISABLED: "false"}}})
    with sim.sim.lock:
        assert autoscaler.unremovable_reason(world, workers[0], workers[1:]) != "ScaleDownDisabledAnnotation"


@pytest.mark.parametrize(("params", "text"), [
    ({"autoscalingenabled": True, "minsize": 1, "maxsize": 3, "size": 3},
     "Autoscaling can not be passed along with nodeids or clustersize"),
    ({"autoscalingenabled": True, "minsize": 1}, "Autoscaling requires minsize and maxsize to be passed"),
    ({"autoscalingenabled": True, "minsize": 0, "maxsize": 3}, "Minsize must be at least than 1"),
    ({"autoscalingenabled": True, "minsize": 3, "maxsize": 3}, "Maxsize must be greater than minsize"),
    ({"autoscalingenabled": True, "minsize": 1, "maxsize": 9},
     "Maximum cluster size can not exceed 10. Please contact your administrator"),
    ({"nodeids": "00000000-0000-4000-8000-000000000000"}, "Invalid node ids"),
])
def test_scale_parameters_are_refused_as_cks_refuses_them(sim, params, text):
    with pytest.raises(CloudStackApiException) as caught:
        sim.cs().scaleKubernetesCluster(id=sim.cks_cluster()["id"], fetch_result=True, **params)
    assert caught.value.error["errorcode"] == 431
    assert caught.value.error["errortext"] == text
    assert sim.cks_cluster()["autoscalingenabled"] is False


def test_removing_every_worker_by_id_is_refused(sim):
    ids = ",".join(vm["id"] for vm in sim.node_vms("worker"))
    with pytest.raises(CloudStackApiException) as caught:
        sim.cs().scaleKubernetesCluster(id=sim.cks_cluster()["id"], nodeids=ids, fetch_result=True)
    assert caught.value.error["errortext"] == "Can not remove all nodes from a cluster"
