"""The quorum checks through the Kubernetes API alone: etcdctl in kubeadm's etcd pods over pods/exec.

Every check here runs the REAL etcdctl against the sim's real etcd members, reached through the
sim's API server with the kubernetes client's websocket stream; the controller is given no etcd
endpoint and no etcd certificate.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest
from cks_sim.tools import needs
from helpers import ClusterSim, load_raw_spec

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd import EtcdClient
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd_exec import EtcdExecClient, quorum_client
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import EtcdError
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.drain import DrainOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.etcd_paths import ENDPOINTS, EXEC, NOT_NEEDED
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.batch import BatchCycle
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.options import CycleOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._services.cycle import etcd_check_for
from ansible_collections.cloudstack.cks.plugins.module_utils._services.outdated import node_outdated
from ansible_collections.cloudstack.cks.plugins.module_utils._services.session import ClusterSession

pytestmark = needs("etcd", "etcdctl")


def exec_cycle(sim: ClusterSim, nodes: list[str], settings: Settings) -> Any:
    """One batch whose etcd check is chosen by the module's own rule with no etcd option given."""
    check = etcd_check_for({}, sim.kube)
    options = CycleOptions(batch_timeout=120, poll_interval=0.05, drain=DrainOptions(
        delete_emptydir_data=True, eviction_retry_interval=0.05, poll_interval=0.05))
    return BatchCycle(sim.cloud, sim.kube, sim.loader, sim.cluster_id, settings, nodes, options=options,
                      etcd_check=check).run()


def execs(sim: ClusterSim) -> list[dict[str, Any]]:
    return [c for c in sim.calls() if c.get("api") == "kubernetes" and c.get("resource") == "pods/exec"]


def stops(sim: ClusterSim) -> list[dict[str, Any]]:
    return [c for c in sim.calls() if c.get("command") == "stopVirtualMachine"]


def with_controls(count: int) -> dict[str, Any]:
    raw = copy.deepcopy(load_raw_spec("small.yml"))
    raw["clusters"][0]["control_nodes"] = count
    return raw


def test_without_etcd_options_the_exec_path_is_chosen_and_explicit_endpoints_win(
        cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    assert isinstance(quorum_client({}, sim.kube), EtcdExecClient)
    assert isinstance(quorum_client(sim.etcd_endpoints(), sim.kube), EtcdClient)
    assert quorum_client({}, None) is None


def test_verdict_through_exec_equals_the_direct_http_verdict(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    controls = sim.names("control")
    by_exec = EtcdExecClient(sim.kube).check(going_down=[controls[0]])
    direct = quorum_client(sim.etcd_endpoints()).check(going_down=[controls[0]])
    assert by_exec.safe and direct.safe
    assert (by_exec.voters, by_exec.quorum, by_exec.healthy, by_exec.healthy_after) == (3, 2, 3, 2)
    assert [(m.name, m.id, m.client_urls, m.healthy) for m in by_exec.members] == [
        (m.name, m.id, m.client_urls, m.healthy) for m in direct.members]
    # The pod asked is on a node that stays up, and it ran the real etcdctl.
    assert f"etcdctl in etcd-{controls[0]})" not in by_exec.message
    commands = [c.get("exec_command") for c in execs(sim)]
    assert any("member" in str(c) and "list" in str(c) for c in commands)
    assert all(c.get("pod", c.get("name", "")) != f"etcd-{controls[0]}" for c in execs(sim))


@pytest.mark.parametrize("count", [3, 5])
def test_control_plane_rolls_one_at_a_time_through_exec_only(cycle_sim: Callable[..., ClusterSim], count: int) -> None:
    sim = cycle_sim(with_controls(count))
    controls = sim.names("control")
    assert len(controls) == count
    settings = Settings(control=TypeSettings(sim.offering_id("cks-large"), None, None))
    for name in controls:
        result = exec_cycle(sim, [name], settings)
        assert result.error is None, result.error
        assert f"{count} of {count} voting members" not in result.preflight["etcd_quorum"]
        assert f"{count - 1} of {count} voting members healthy without {name}" in result.preflight["etcd_quorum"]
        verify = next(s for s in result.results[0].steps if s.name == "verify")
        assert "etcd healthy" in verify.detail
    view = sim.view()
    assert all(n.offering_name == "cks-large" and n.ready for n in view.nodes_of("control"))
    assert execs(sim) and all(c.get("status") == 101 for c in execs(sim))
    assert sim.invariants() == []


def test_a_member_killed_while_its_vm_runs_goes_first_and_blocks_the_others(
        cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    controls = sim.names("control")
    vm_names = {n.name: n.vm_name for n in sim.view().nodes}
    sim.fault(kind="etcd_kill", vm=vm_names[controls[1]])
    settings = Settings(control=TypeSettings(sim.offering_id("cks-large"), None, None))

    # Its own pod cannot be exec'd into (container not found): another pod answers, and sees it down.
    verdict = EtcdExecClient(sim.kube).check()
    sick = next(m for m in verdict.members if m.name == controls[1])
    assert not sick.healthy and sick.reason.startswith("etcdctl endpoint health")

    refused = exec_cycle(sim, [controls[0]], settings)
    assert refused.error is not None and refused.error.step == "preflight"
    assert "would lose its quorum" in refused.error.msg and "1 of 3 voting members healthy" in refused.error.msg
    assert stops(sim) == []

    # The killed member's node may go: the others keep 2 of 3, and it comes back with its VM.
    first = exec_cycle(sim, [controls[1]], settings)
    assert first.error is None, first.error
    assert "2 of 3 voting members healthy without" in first.preflight["etcd_quorum"]
    again = exec_cycle(sim, [controls[0]], settings)
    assert again.error is None, again.error
    assert sim.invariants() == []


def test_quorum_about_to_be_lost_is_refused_before_anything_changes(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim(with_controls(5))
    controls = sim.names("control")
    vm_names = {n.name: n.vm_name for n in sim.view().nodes}
    sim.fault(kind="etcd_kill", vm=vm_names[controls[3]])
    sim.fault(kind="etcd_kill", vm=vm_names[controls[4]])
    settings = Settings(control=TypeSettings(sim.offering_id("cks-large"), None, None))

    refused = exec_cycle(sim, [controls[0]], settings)
    assert refused.error is not None and refused.error.step == "preflight"
    assert "2 of 5 voting members healthy without " + controls[0] in refused.error.msg
    assert "3 needed" in refused.error.msg
    assert stops(sim) == []


def test_the_pod_of_a_node_that_is_down_is_passed_over(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    controls = sim.names("control")
    vm = next(n for n in sim.view().nodes if n.name == controls[0])
    sim.cloud.call("stopVirtualMachine", id=vm.vm_id)

    verdict = EtcdExecClient(sim.kube).check(going_down=[controls[1]])
    assert not verdict.safe
    assert f"etcdctl in etcd-{controls[2]}" in verdict.message
    down = next(m for m in verdict.members if m.name == controls[0])
    assert not down.healthy

    # With only that pod left to ask, the failure names the kubelet the API server cannot reach.
    with pytest.raises(EtcdError) as failed:
        EtcdExecClient(sim.kube).members(avoid=[controls[1], controls[2]])
    assert f"etcd-{controls[0]}" in failed.value.msg and "error dialing backend" in failed.value.msg


def test_etcdctl_errors_and_no_pods_are_named(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    with pytest.raises(EtcdError) as failed:
        EtcdExecClient(sim.kube).members(avoid=sim.names("control"))
    assert "no etcd pod (component=etcd,tier=control-plane) in kube-system on a control node other than" in failed.value.msg
    pod = f"etcd-{sim.names('control')[0]}"
    sim.fault(kind="kube_error", resource="pods/exec", name=pod, status=403, message="injected refusal", count=1)
    answered = EtcdExecClient(sim.kube).check()
    assert answered.safe and pod not in answered.message.split("etcdctl in ")[-1]


# --- before the lock: the plan says how etcd will be checked ----------------------------------


def plan_of(sim: ClusterSim, **params: Any) -> dict[str, Any]:
    session = ClusterSession.of(dict(params, cluster=sim.cluster_id), sim.cloud, sim.kube)
    return node_outdated(session, dict(params, cluster=sim.cluster_id))


def test_the_plan_says_per_node_type_how_etcd_is_checked(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    controls = {"node_offerings": {"control": "cks-large"}}
    by_exec = plan_of(sim, **controls)
    assert by_exec["etcd_checks"] == {"control": EXEC, "etcd": NOT_NEEDED, "worker": NOT_NEEDED}
    assert by_exec["etcd_check_refusal"] is None
    assert by_exec["etcd"]["asked"] and by_exec["etcd"]["down"] == []
    assert "(etcdctl in etcd-" in by_exec["etcd"]["message"]
    reviews = [c for c in sim.calls() if c.get("resource") == "selfsubjectaccessreviews"]
    assert len(reviews) == 2 * len(sim.names("control"))  # get and create, per etcd pod by name

    given = plan_of(sim, etcd_endpoints=sim.etcd_endpoints()["etcd_endpoints"],
                    **{k: v for k, v in sim.etcd_endpoints().items() if k != "etcd_endpoints"}, **controls)
    assert given["etcd_checks"]["control"] == ENDPOINTS and given["etcd_check_refusal"] is None


def test_a_killed_member_is_planned_first_through_exec(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    controls = sim.names("control")
    vm_names = {n.name: n.vm_name for n in sim.view().nodes}
    sim.fault(kind="etcd_kill", vm=vm_names[controls[2]])
    plan = plan_of(sim, node_offerings={"control": "cks-large"})
    assert plan["etcd"]["down"] == [controls[2]]
    assert plan["hosts"][0] == controls[2]


def test_external_etcd_nodes_take_the_given_endpoints_over_the_check_pod(cycle_sim: Callable[..., ClusterSim]) -> None:
    """CKS 4.22 starts external etcd as a systemd unit on plain HTTP (etcd-node.yml: --listen-client-urls
    http://<node ip>:2379): no pod to exec into. Without endpoints a short-lived pod on a control
    node asks it (tests/integration/test_etcd_pod.py); given endpoints win, over plain HTTP."""
    sim = cycle_sim("external-etcd.yml")
    etcd_out_of_date = {"node_offerings": {"etcd": "cks-large"}}
    by_pod = plan_of(sim, **etcd_out_of_date)
    assert by_pod["etcd_checks"]["control"] == NOT_NEEDED and by_pod["etcd_check_refusal"] is None
    assert by_pod["etcd_checks"]["etcd"].startswith("a short-lived pod on ")
    # A workers-only plan on the same cluster needs no etcd check at all.
    workers = plan_of(sim, node_offerings={"worker": "cks-large"})
    assert workers["etcd_check_refusal"] is None and workers["hosts"]
    endpoints = sim.etcd_endpoints()
    assert all(url.startswith("http://") for url in endpoints["etcd_endpoints"])
    planned = plan_of(sim, **endpoints, **etcd_out_of_date)
    assert planned["etcd_checks"]["etcd"] == ENDPOINTS and planned["etcd_check_refusal"] is None
    settings = Settings(etcd=TypeSettings(sim.offering_id("cks-large"), None, None))
    first = planned["hosts"][0]
    options = CycleOptions(batch_timeout=120, poll_interval=0.05)
    result = BatchCycle(sim.cloud, sim.kube, sim.loader, sim.cluster_id, settings, [first], options=options,
                        etcd_check=etcd_check_for(endpoints, sim.kube)).run()
    assert result.error is None, result.error
    assert "healthy without " + first in result.preflight["etcd_quorum"]
