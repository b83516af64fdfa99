# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""A worker whose VM was scaled live and whose kubelet was never restarted (a run stopped between
the live path's scale and its kubelet restart) against cks-sim: it is out of date, with the reason,
and the rollout ends with its kubelet reporting what the VM has: under ``live_scale: auto`` by the
kubelet restart alone, else by the restart path with no offering change."""

from __future__ import annotations

from typing import Any, Callable

from helpers import ClusterSim
from in_process_sims import RolloutSim
from live_scale_helpers import LIVE, calls, live_spec, node_capacity, path_of, workers

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.live_scale import scale
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.request import SettingsRequest
from ansible_collections.cloudstack.cks.plugins.module_utils._services.outdated import outdated_report

UNAWARE = "kubelet reports 2 CPU, its VM has 4 (a live scale not yet seen by the kubelet)"


def scaled_behind_the_kubelet(sim: ClusterSim, offering: str = "cks-large") -> str:
    """A worker's running VM scaled with scaleVirtualMachine, as the live path does, and nothing more."""
    node = sim.names("worker")[0]
    vm = sim.view().node(node)
    scale(sim.cloud, vm.vm_id, sim.offering_id(offering), Deadline(30), vm.vm_name)
    assert node_capacity(sim, node)[0] == "2"  # the kubelet still posts what it saw at its start
    return node


def judged(sim: ClusterSim) -> dict[str, Any]:
    """cks_node_outdated's answer for the workers on cks-large, from the cluster as read now."""
    return outdated_report(sim.view(), None, None, changes=SettingsRequest.from_params({"node_offerings": {"worker": "cks-large"}}))


def reasons(sim: ClusterSim, node: str) -> list[dict[str, Any]]:
    judged_now = judged(sim)
    assert node in judged_now["out_of_date"]
    return next(n for n in judged_now["nodes"] if n["name"] == node)["reasons"]


def test_unaware_node_is_out_of_date_and_its_kubelet_restarted_live(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim(live_spec())
    node = scaled_behind_the_kubelet(sim)
    assert [r["message"] for r in reasons(sim, node)] == [UNAWARE]
    boot = node_capacity(sim, node)[2]
    result = sim.cycle([node], workers(sim), options=LIVE)
    assert result.error is None, result.error
    path = path_of(result, node)
    assert path["path"] == "live" and path["reason"].endswith(UNAWARE), path
    assert path["capacity"] == "4 CPU, 8.0 GiB"
    assert [s.name for s in result.results[0].steps] == ["kubelet_restart", "node_reports"]
    assert node_capacity(sim, node) == ("4", f"{8192 * 1024}Ki", boot)  # no reboot
    assert len(calls(sim, "scaleVirtualMachine")) == 1  # only the one above: the VM had its offering
    assert calls(sim, "stopVirtualMachine") == []
    assert node not in judged(sim)["out_of_date"]
    assert not [p for p in sim.kube.list_all_pods() if p["metadata"]["name"].startswith("cks-live-scale-")]
    assert sim.invariants() == []


def test_unaware_node_takes_the_restart_path_without_an_offering_change(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim(live_spec())
    node = scaled_behind_the_kubelet(sim)
    result = sim.cycle([node], workers(sim))  # live_scale never
    assert result.error is None, result.error
    steps = {s.name: s.outcome for s in result.results[0].steps}
    assert steps["stop"] == "ok" and steps["change_offering"] == "skipped" and steps["start"] == "ok"
    assert calls(sim, "changeServiceForVirtualMachine") == []
    assert node_capacity(sim, node)[0] == "4"
    assert node not in judged(sim)["out_of_date"]
    assert sim.invariants() == []


def test_rollout_ends_with_every_kubelet_aware(rollout_sim: Callable[..., RolloutSim]) -> None:
    sim = rollout_sim(live_spec())
    node = scaled_behind_the_kubelet(sim)
    change = {"rollout_node_offerings": {"worker": "cks-large"}, "rollout_max_unavailable": 2,
              "rollout_live_scale": "auto", "rollout_live_scale_timeout": 10}
    dry = sim.rollout(args=("--check",), **change)
    assert dry.rc == 0, dry.output
    assert f"{node} path: live (the VM already has its offering, the kubelet is restarted to see it: {UNAWARE})" \
        in dry.output
    run = sim.rollout(**change)
    assert run.rc == 0, run.output
    for worker in sim.names("worker"):
        assert node_capacity(sim, worker)[0] == "4"
    assert calls(sim, "stopVirtualMachine") == []
    sim.assert_converged()


def test_a_key_that_may_not_scale_plans_the_live_nodes_on_the_restart_path(rollout_sim: Callable[..., RolloutSim]) -> None:
    # A CloudStack 4.23 key pair whose rules leave out scaleVirtualMachine (cks_sim/api_keys.py,
    # as DynamicRoleBasedAPIAccessChecker.checkAccess answers it: 432).
    raw = live_spec()
    raw["account"]["keys"] = [{"name": "no-scale", "apikey": "no-scale-key", "secretkey": "no-scale-secret",
                               "rules": ["list*", "get*", "queryAsyncJobResult", "stopVirtualMachine",
                                         "startVirtualMachine", "changeServiceForVirtualMachine"]}]
    sim = rollout_sim(raw)
    env = {"CLOUDSTACK_KEY": "no-scale-key", "CLOUDSTACK_SECRET": "no-scale-secret"}
    change = {"rollout_node_offerings": {"worker": "cks-large"}, "rollout_live_scale": "auto"}
    run = sim.rollout(env=env, **change)
    assert run.rc == 0, run.output
    for worker in sim.names("worker"):
        assert f"{worker} path: restart (the API key may not call scaleVirtualMachine)" in run.output, run.output
        assert node_capacity(sim, worker)[0] == "4"
    # No scale was tried after the lock: each node took the restart path from the start.
    assert calls(sim, "scaleVirtualMachine") == []
    assert len(calls(sim, "changeServiceForVirtualMachine")) == len(sim.names("worker"))
    sim.assert_converged()
