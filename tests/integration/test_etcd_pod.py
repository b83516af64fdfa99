"""External etcd checked through the Kubernetes API alone: a short-lived etcdctl pod on a control node.

tests/sim/examples/external-etcd.yml: 3 external etcd members (plain HTTP, as CKS 4.22's
etcd-node.yml starts them), 2 control nodes. Every check creates a pod through the sim's API
server; its kubelet runs the REAL etcdctl against the real members; the answers are read back
through pods/log. The controller is given no etcd endpoint.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest
from cks_sim.tools import needs
from helpers import ClusterSim, load_raw_spec

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd import EtcdClient
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd_exec import EtcdExecClient
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd_pod import (
    POD_PREFIX,
    EtcdPodClient,
    etcd_servers,
    quorum_client,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube import KubeClient
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube_options import KubeOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import EtcdError
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.drain import DrainOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.etcd_paths import CANNOT, NOT_NEEDED
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.batch import BatchCycle
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.options import CycleOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._services.cycle import etcd_check_for
from ansible_collections.cloudstack.cks.plugins.module_utils._services.outdated import node_outdated
from ansible_collections.cloudstack.cks.plugins.module_utils._services.session import ClusterSession

pytestmark = needs("etcd", "etcdctl")

SPEC = "external-etcd.yml"


def check_pods(kube: Any) -> list[dict[str, Any]]:
    return list(kube.list_labelled_pods("kube-system", "app.kubernetes.io/component=etcd-check"))


def pod_calls(sim: ClusterSim, verb: str) -> list[dict[str, Any]]:
    return [c for c in sim.calls() if c.get("api") == "kubernetes" and c.get("resource") == "pods"
            and c.get("verb") == verb and c.get("namespace") == "kube-system"]


def stops(sim: ClusterSim) -> list[dict[str, Any]]:
    return [c for c in sim.calls() if c.get("command") == "stopVirtualMachine"]


def etcd_cycle(sim: ClusterSim, nodes: list[str], settings: Settings) -> Any:
    """One batch whose etcd check is chosen by the module's own rule with no etcd option given."""
    options = CycleOptions(batch_timeout=180, poll_interval=0.05, drain=DrainOptions(
        delete_emptydir_data=True, eviction_retry_interval=0.05, poll_interval=0.05))
    return BatchCycle(sim.cloud, sim.kube, sim.loader, sim.cluster_id, settings, nodes, options=options,
                      etcd_check=etcd_check_for({}, sim.kube, external_etcd=True)).run()


def plan_of(sim: ClusterSim, kube: Any = None, **params: Any) -> dict[str, Any]:
    session = ClusterSession.of(dict(params, cluster=sim.cluster_id), sim.cloud, kube or sim.kube)
    return node_outdated(session, dict(params, cluster=sim.cluster_id))


def with_rules(rules: list[dict[str, Any]]) -> dict[str, Any]:
    raw = copy.deepcopy(load_raw_spec(SPEC))
    raw["kube"] = {"users": [{"name": "roller", "token": "roller-token", "rules": rules}]}
    return raw


def restricted_kube(sim: ClusterSim, tmp_path: Any) -> KubeClient:
    import yaml  # noqa: PLC0415 - only the RBAC test writes a kubeconfig

    with open(sim.env["kubeconfig"], encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    config["users"][0]["user"] = {"token": "roller-token"}
    path = tmp_path / "roller.yaml"
    path.write_text(yaml.safe_dump(config))
    return KubeClient.connect(KubeOptions(kubeconfig=str(path)))


def test_the_pod_path_is_chosen_for_external_etcd_and_explicit_endpoints_win(
        cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim(SPEC)
    assert isinstance(quorum_client({}, sim.kube, external_etcd=True), EtcdPodClient)
    assert isinstance(quorum_client({}, sim.kube, external_etcd=False), EtcdExecClient)
    assert isinstance(quorum_client(sim.etcd_endpoints(), sim.kube, external_etcd=True), EtcdClient)


def test_the_pods_verdict_equals_the_direct_http_verdict_and_the_pod_is_deleted(
        cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim(SPEC)
    etcd = sim.names("etcd")
    control = sim.names("control")[0]
    apiserver = sim.kube.read_pod("kube-system", f"kube-apiserver-{control}")
    assert sorted(etcd_servers(apiserver)) == sorted(sim.etcd_endpoints()["etcd_endpoints"])
    by_pod = EtcdPodClient(sim.kube).check(going_down=[etcd[0]])
    direct = quorum_client(sim.etcd_endpoints()).check(going_down=[etcd[0]])
    assert by_pod.safe and direct.safe
    assert (by_pod.voters, by_pod.quorum, by_pod.healthy, by_pod.healthy_after) == (3, 2, 3, 2)
    assert [(m.name, m.id, m.client_urls, m.healthy) for m in by_pod.members] == [
        (m.name, m.id, m.client_urls, m.healthy) for m in direct.members]
    assert "(etcdctl in a pod on " in by_pod.message
    created = pod_calls(sim, "create")
    assert len(created) == 1 and created[0].get("status") == 201
    deleted = pod_calls(sim, "delete")
    assert len(deleted) == 1 and str(deleted[0].get("name", "")).startswith(POD_PREFIX)
    assert check_pods(sim.kube) == []


def test_external_etcd_nodes_roll_one_at_a_time_with_no_etcd_options(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim(SPEC)
    etcd = sim.names("etcd")
    assert len(etcd) == 3
    settings = Settings(etcd=TypeSettings(sim.offering_id("cks-large"), None, None))
    for name in etcd:
        result = etcd_cycle(sim, [name], settings)
        assert result.error is None, result.error
        assert f"2 of 3 voting members healthy without {name}" in result.preflight["etcd_quorum"]
        verify = next(s for s in result.results[0].steps if s.name == "verify")
        assert "etcd healthy" in verify.detail
        assert check_pods(sim.kube) == []  # deleted after each check, not only at the end
    assert all(n.offering_name == "cks-large" for n in sim.view().nodes_of("etcd"))
    assert len(pod_calls(sim, "create")) == len(pod_calls(sim, "delete")) >= 2 * len(etcd)
    assert sim.invariants() == []


def test_a_member_killed_while_its_vm_runs_goes_first_and_blocks_the_others(
        cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim(SPEC)
    etcd = sim.names("etcd")
    vm_names = {n.name: n.vm_name for n in sim.view().nodes}
    sim.fault(kind="etcd_kill", vm=vm_names[etcd[1]])
    settings = Settings(etcd=TypeSettings(sim.offering_id("cks-large"), None, None))

    verdict = EtcdPodClient(sim.kube).check()
    sick = next(m for m in verdict.members if m.name.lower() == etcd[1].lower())
    assert not sick.healthy and sick.reason.startswith("etcdctl endpoint health")

    plan = plan_of(sim, node_offerings={"etcd": "cks-large"})
    assert [d.lower() for d in plan["etcd"]["down"]] == [etcd[1].lower()]
    assert plan["hosts"][0] == etcd[1]
    assert plan["etcd_checks"]["etcd"].startswith("a short-lived pod on ") and plan["etcd_check_refusal"] is None

    refused = etcd_cycle(sim, [etcd[0]], settings)
    assert refused.error is not None and refused.error.step == "preflight"
    assert "would lose its quorum" in refused.error.msg and "1 of 3 voting members healthy" in refused.error.msg
    assert stops(sim) == []
    first = etcd_cycle(sim, [etcd[1]], settings)
    assert first.error is None, first.error
    assert "2 of 3 voting members healthy without" in first.preflight["etcd_quorum"]
    assert check_pods(sim.kube) == []


def test_quorum_about_to_be_lost_is_refused_before_anything_changes(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim(SPEC)
    etcd = sim.names("etcd")
    vm_names = {n.name: n.vm_name for n in sim.view().nodes}
    sim.fault(kind="etcd_kill", vm=vm_names[etcd[2]])
    settings = Settings(etcd=TypeSettings(sim.offering_id("cks-large"), None, None))
    refused = etcd_cycle(sim, [etcd[0]], settings)
    assert refused.error is not None and refused.error.step == "preflight"
    assert f"1 of 3 voting members healthy without {etcd[0]}" in refused.error.msg and "2 needed" in refused.error.msg
    assert stops(sim) == []
    assert check_pods(sim.kube) == []


def test_the_pod_on_a_control_node_that_is_down_is_passed_over_and_the_pod_deleted(
        cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim(SPEC)
    controls = sim.names("control")
    vm = next(n for n in sim.view().nodes if n.name == controls[0])
    sim.cloud.call("stopVirtualMachine", id=vm.vm_id)
    client = EtcdPodClient(sim.kube, timeout=1.0)
    verdict = client.check()
    assert verdict.safe and f"(etcdctl in a pod on {controls[1]})" in verdict.message
    # Only the node that is down left: its pod never runs, the wait is bounded, the pod is deleted.
    with pytest.raises(EtcdError) as failed:
        client.members(avoid=[controls[1]])
    assert f"on {controls[0]}" in failed.value.msg and "gave up waiting" in failed.value.msg
    assert check_pods(sim.kube) == [] and client.left_behind == []


def test_a_node_without_the_etcd_image_is_named(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim(SPEC)
    controls = sim.names("control")
    world = sim.server.sim.kube[sim.cluster_id]
    with sim.server.sim.lock:
        for name in controls:
            world.store.node(name)["status"]["images"] = []  # a node without the ISO's images
    with pytest.raises(EtcdError) as failed:
        EtcdPodClient(sim.kube).check()
    assert "no etcd image in the node's status.images" in failed.value.msg
    assert pod_calls(sim, "create") == []


# --- before the lock --------------------------------------------------------------------------

POD_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "create", "update"]},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create", "update", "delete"]},
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["get", "list"]},
    {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get", "list"]},
]
RUN_POD = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete"], "namespace": "kube-system"},
           {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"], "namespace": "kube-system"}]


def test_without_pods_create_the_plan_refuses_before_the_lock(cycle_sim: Callable[..., ClusterSim], tmp_path: Any) -> None:
    sim = cycle_sim(with_rules(POD_RULES))
    kube = restricted_kube(sim, tmp_path)
    try:
        plan = plan_of(sim, kube=kube, node_offerings={"etcd": "cks-large"})
    finally:
        kube.close()
    assert plan["etcd_checks"] == {"control": NOT_NEEDED, "etcd": CANNOT, "worker": NOT_NEEDED}
    refusal = plan["etcd_check_refusal"]
    assert refusal is not None and "may not create pods, delete pods, get pods/log in kube-system" in refusal
    assert "docs/rbac.yml" in refusal and "etcd_endpoints" in refusal
    assert "may not run the etcd check pod" in plan["etcd"]["error"]
    reviews = [c for c in sim.calls() if c.get("resource") == "selfsubjectaccessreviews"]
    assert len(reviews) == 3
    assert pod_calls(sim, "create") == [] and stops(sim) == []
    assert plan["lock_holder"] is None


def test_with_exactly_the_pod_verbs_the_plan_asks_etcd_through_the_pod(
        cycle_sim: Callable[..., ClusterSim], tmp_path: Any) -> None:
    sim = cycle_sim(with_rules(POD_RULES + RUN_POD))
    kube = restricted_kube(sim, tmp_path)
    try:
        plan = plan_of(sim, kube=kube, node_offerings={"etcd": "cks-large"})
        assert check_pods(kube) == []
    finally:
        kube.close()
    assert plan["etcd_check_refusal"] is None
    assert plan["etcd_checks"]["etcd"] == f"a short-lived pod on {sim.names('control')[0]} through the Kubernetes API"
    assert plan["etcd"]["asked"] and plan["etcd"]["down"] == []


# --- the whole rollout playbook, no etcd variables ------------------------------------------------


def test_an_external_etcd_rollout_with_no_etcd_variables_converges(rollout_sim: Callable[..., Any]) -> None:
    sim = rollout_sim(SPEC)
    run = sim.rollout(drop_vars=("rollout_etcd_endpoints", "rollout_etcd_ca_cert", "rollout_etcd_client_cert",
                                 "rollout_etcd_client_key"),
                      rollout_node_offerings={"etcd": "cks-large"})
    assert run.rc == 0, run.output
    sim.assert_converged()
    assert all(n.offering_name == "cks-large" for n in sim.view().nodes_of("etcd"))
    # Every check ran as a pod, and none is left behind.
    assert check_pods(sim.kube) == []
    kinds = [c for c in sim.calls() if c.get("api") == "kubernetes" and c.get("resource") == "pods"
             and c.get("namespace") == "kube-system" and c.get("verb") in ("create", "delete")]
    assert kinds and len([c for c in kinds if c["verb"] == "create"]) == len([c for c in kinds if c["verb"] == "delete"])
