"""The live path (``live_scale: auto``) of the node cycle against cks-sim: a worker grows without a
restart when CloudStack can scale its running VM, and takes the restart path, with the reason in
its result, when it cannot or when the guest or the kubelet do not show the new size."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest
from helpers import ClusterSim
from in_process_sims import RolloutSim
from live_scale_helpers import LIVE, calls, evictions, live_spec, node_capacity, path_of, workers

from ansible_collections.cloudstack.cks.plugins.module_utils._services.session import ClusterSession
from ansible_collections.cloudstack.cks.plugins.module_utils._services.start import start_rollout


def test_workers_grow_live_without_stop_or_eviction(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim(live_spec())
    nodes = sim.names("worker")[:2]
    boots = {n: node_capacity(sim, n)[2] for n in nodes}
    result = sim.cycle(nodes, workers(sim), options=LIVE)
    assert result.error is None, result.error
    for node in nodes:
        path = path_of(result, node)
        assert path["path"] == "live", path
        assert path["capacity"] == "4 CPU, 8.0 GiB"
        assert node_capacity(sim, node) == ("4", f"{8192 * 1024}Ki", boots[node])  # same boot
        steps = [s.name for s in next(r for r in result.results if r.name == node).steps]
        assert steps == ["guest_check", "scale_live", "guest_sees", "kubelet_restart", "node_reports"]
        assert sim.view().node(node).offering_name == "cks-large"
    assert calls(sim, "stopVirtualMachine") == [] and calls(sim, "startVirtualMachine") == []
    assert not [e for e in sim.timeline() if e.get("event") in ("stopped", "boot", "cordoned")]
    assert not [c for c in sim.calls() if "eviction" in str(c.get("path", ""))]
    # The pods were deleted however the path ended; nothing is left cordoned or marked.
    assert not [p for p in sim.kube.list_all_pods() if p["metadata"]["name"].startswith("cks-live-scale-")]
    assert all(not sim.view().node(n).unschedulable for n in nodes)
    assert sim.invariants() == []


@pytest.mark.parametrize("spec, offering, settings_extra, words", [
    (dict(version="4.22.1.0"), "cks-large", {}, "custom offering"),
    (dict(dynamic_scale=False), "cks-large", {}, "enable.dynamic.scale.vm is false"),
    (dict(dynamically_scalable=False), "cks-large", {}, "not dynamically scalable"),
    ({}, "cks-large", {"root_gb": 30}, "root disk"),
], ids=["before-4.23-fixed-offering", "zone-without-dynamic-scaling", "vm-not-dynamically-scalable", "root-disk-too"])
def test_what_cloudstack_cannot_scale_live_restarts(cycle_sim: Callable[..., ClusterSim], spec: dict[str, Any], offering: str,
                                                    settings_extra: dict[str, Any], words: str) -> None:
    sim = cycle_sim(live_spec(**spec))
    node = sim.names("worker")[0]
    result = sim.cycle([node], workers(sim, offering, **settings_extra), options=LIVE)
    assert result.error is None, result.error
    path = path_of(result, node)
    assert path["path"] == "restart" and words in path["reason"], path
    assert "fell_back_from" not in path
    assert calls(sim, "scaleVirtualMachine") == [] and len(calls(sim, "stopVirtualMachine")) == 1
    assert node_capacity(sim, node)[0] == "4"
    assert sim.invariants() == []


def test_scale_down_restarts(cycle_sim: Callable[..., ClusterSim]) -> None:
    raw = live_spec()
    raw["service_offerings"].append({"name": "cks-tiny", "cpu": 1, "memory": 2048})
    sim = cycle_sim(raw)
    node = sim.names("worker")[0]
    result = sim.cycle([node], workers(sim, "cks-tiny"), options=LIVE)
    path = path_of(result, node)
    assert path["path"] == "restart" and "no scale up" in path["reason"], path
    assert result.error is None and node_capacity(sim, node)[0] == "1"


def test_domain_started_without_headroom_restarts_before_any_scale(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim(live_spec(started_on_version="4.22.1.0"))
    node = sim.names("worker")[0]
    result = sim.cycle([node], workers(sim), options=LIVE)
    assert result.error is None, result.error
    path = path_of(result, node)
    assert path["path"] == "restart" and path["fell_back_from"] == "live"
    assert "started with room for 2 vCPUs, not 4" in path["reason"]
    assert calls(sim, "scaleVirtualMachine") == []
    assert node_capacity(sim, node)[0] == "4"
    assert sim.invariants() == []


def live_plan(sim: ClusterSim, check_mode: bool) -> dict[str, Any]:
    """The rollout's plan (cks_node_settings plan=true), in process: workers to cks-large under live_scale auto."""
    params = {"cluster": sim.cluster_id, "node_offerings": {"worker": "cks-large"}, "rollout": True, "plan": True,
              "lock_holder": "run-plan", "live_scale": "auto", "restart": "outdated"}
    return start_rollout(ClusterSession.of(params, sim.cloud, sim.kube), params, check_mode=check_mode)


def probe_pods_created(sim: ClusterSim) -> list[dict[str, Any]]:
    return [c for c in sim.calls() if c.get("api") == "kubernetes" and c.get("verb") == "create"
            and c.get("resource") == "pods" and c.get("namespace") == "kube-system"]


def test_plan_names_the_restart_path_of_a_domain_started_without_headroom(cycle_sim: Callable[..., ClusterSim]) -> None:
    # Started under 4.22 on a fixed offering, the domains have no room for more vCPUs; no CloudStack
    # API shows it (KVMGuru wrote the domain's maximum at the start), so the plan asks the guest.
    sim = cycle_sim(live_spec(started_on_version="4.22.1.0"))
    nodes = sim.names("worker")

    # The dry run creates no pod: live as far as CloudStack tells, the headroom checked before the scale.
    dry = live_plan(sim, check_mode=True)
    for node in nodes:
        path = next(n["path"] for n in dry["nodes"] if n["name"] == node)
        assert path["path"] == "live" and path["reason"].endswith("; headroom checked before the scale"), path
    assert probe_pods_created(sim) == []

    # The rollout's plan asks each guest before the lock: the restart path, with why.
    plan = live_plan(sim, check_mode=False)
    for node in nodes:
        path = next(n["path"] for n in plan["nodes"] if n["name"] == node)
        assert path == {"path": "restart", "reason": "the running domain was started with room for 2 vCPUs, not 4: "
                                                     "it must be restarted once before it can be scaled live"}, path
    assert sorted(plan["live_paths"]["restart"]) == sorted(nodes) and plan["live_paths"]["live"] == []
    assert len(probe_pods_created(sim)) == len(nodes)
    assert not [p for p in sim.kube.list_all_pods() if p["metadata"]["name"].startswith("cks-live-scale-")]
    assert calls(sim, "scaleVirtualMachine") == []

    # Started under 4.23 (the host's vCPUs as the maximum): the plan's probe finds the room.
    fresh = cycle_sim(live_spec())
    plan = live_plan(fresh, check_mode=False)
    for node in fresh.names("worker"):
        path = next(n["path"] for n in plan["nodes"] if n["name"] == node)
        assert path["path"] == "live" and "; the running domain has room for " in path["reason"], path
    assert calls(fresh, "scaleVirtualMachine") == []


def test_refused_after_the_decision_falls_back_in_the_same_batch(cycle_sim: Callable[..., ClusterSim]) -> None:
    # The host fills up between the decision and the scale: CloudStack refuses (530) and the node
    # takes the restart path, whose start places it where there is room.
    sim = cycle_sim(live_spec())
    node = sim.names("worker")[0]
    sim.fault(kind="job_failure", command="scaleVirtualMachine", code=530, errortext="Failed to scale the VM", count=1)
    result = sim.cycle([node], workers(sim), options=LIVE)
    assert result.error is None, result.error
    path = path_of(result, node)
    assert path["fell_back_from"] == "live" and "refused the live scale (530)" in path["reason"], path
    steps = [s.name for s in result.results[0].steps]
    assert steps[:2] == ["guest_check", "scale_live"] and "drain" in steps and "change_offering" in steps
    assert evictions(sim)  # the restart path drained it
    assert node_capacity(sim, node)[0] == "4"
    assert not [p for p in sim.kube.list_all_pods() if p["metadata"]["name"].startswith("cks-live-scale-")]
    assert sim.invariants() == []


def test_guest_that_does_not_online_falls_back(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim(live_spec(guest_onlines_hotplug=False))
    node = sim.names("worker")[0]
    result = sim.cycle([node], workers(sim), options=LIVE, batch_timeout=200)
    assert result.error is None, result.error
    path = path_of(result, node)
    assert path["fell_back_from"] == "live" and "left offline" in path["reason"], path
    steps = {s.name: s.outcome for s in result.results[0].steps}
    # The VM has its offering already: the restart path only restarts it.
    assert steps["scale_live"] == "ok" and steps["change_offering"] == "skipped" and steps["start"] == "ok"
    assert node_capacity(sim, node)[0] == "4"
    assert sim.invariants() == []


def test_kubelet_that_never_reports_falls_back(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim(live_spec())
    node = sim.names("worker")[0]
    sim.fault(kind="kubelet_stale_capacity", node=node)
    result = sim.cycle([node], workers(sim), options=LIVE, batch_timeout=200)
    sim.clear_faults()
    assert result.error is None, result.error
    path = path_of(result, node)
    assert path["fell_back_from"] == "live" and "did not report its new size" in path["reason"], path
    assert "reports 2 CPU, not 4" in path["reason"]
    # After the restart path's reboot the kubelet reports what the VM has.
    assert node_capacity(sim, node)[0] == "4"
    assert sim.invariants() == []


def test_rollout_grows_workers_live_and_reports_the_path(rollout_sim: Callable[..., RolloutSim]) -> None:
    raw = live_spec()
    raw["kube"] = {"event_ttl": 360000}  # the Events outlive a slow run
    sim = rollout_sim(raw)
    change = {"rollout_node_offerings": {"worker": "cks-large"}, "rollout_max_unavailable": 2,
              "rollout_live_scale": "auto", "rollout_live_scale_timeout": 10}
    dry = sim.rollout(args=("--check",), **change)
    assert dry.rc == 0, dry.output
    for node in sim.names("worker"):
        assert (f"{node} path: live (cks-medium -> cks-large on a running KVM VM (CloudStack 4.23.0.0); "
                "headroom checked before the scale)") in dry.output
    assert calls(sim, "scaleVirtualMachine") == []

    run = sim.rollout(**change)
    assert run.rc == 0, run.output
    assert calls(sim, "stopVirtualMachine") == [] and not evictions(sim)
    for node in sim.names("worker"):
        assert node_capacity(sim, node)[0] == "4"
        assert f"{node} done live (4 CPU, 8.0 GiB)" in run.output  # the progress line
        _status, body = sim.kube.raw_get("/apis/events.k8s.io/v1/namespaces/default/events")
        notes = [e.get("note") for e in json.loads(body)["items"] if (e.get("regarding") or {}).get("name") == node]
        assert "scaled to cks-large without a restart; kubelet restarted; capacity now 4 CPU, 8.0 GiB" in notes, notes
    assert sorted(run.report["paths"]["live"]) == sim.names("worker") and run.report["paths"]["fell_back"] == []
    assert "Scaled live (no restart): " in run.output
    sim.assert_converged()
