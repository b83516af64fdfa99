"""A batch in phases (``cycle.BatchCycle`` with ``phase=cordon``, then ``restart``, then ``uncordon``)
against cks-sim through the real clients: each phase does its part and no more, the later phases
take the nodes up from what the earlier ones left on them, the whole adds up to the one-run cycle,
and the uncordon phase refuses a node that is not proven back (never a stale Ready)."""

from __future__ import annotations

import time
from typing import Any, Callable

from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ROLLOUT_ANNOTATION
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.validation import ValidationOptions

from helpers import ClusterSim, load_raw_spec

NODE_EVENTS = ("annotated", "cordoned", "uncordoned", "stop_requested", "started", "boot", "offering_changed")


def node_events(sim: ClusterSim, node: str, since: float) -> list[str]:
    return [e["event"] for e in sim.timeline() if e.get("node") == node and e["t"] >= since
            and e["event"] in NODE_EVENTS]


def phase(sim: ClusterSim, nodes: list[str], settings: Settings, name: str, **options: Any) -> Any:
    return sim.cycle(nodes, settings, options=dict(options, phase=name))


def test_cordon_then_restart_then_uncordon(cycle_sim: Callable[..., ClusterSim]) -> None:
    raw = load_raw_spec("small.yml")
    raw["invariants"] = {"max_unavailable": {"control": 1, "etcd": 1, "worker": 2}}
    sim = cycle_sim(raw)
    nodes = sim.names("worker")[:2]
    boot_ids = {n: sim.view().node(n).boot_id for n in nodes}
    settings = Settings(worker=TypeSettings(sim.offering_id("cks-large"), None, None))
    validation = {"validation": ValidationOptions(count=1, interval=0.1, timeout=10)}

    since = time.time()
    cordoned = phase(sim, nodes, settings, "cordon", **validation)
    assert cordoned.error is None, cordoned.error
    assert cordoned.phase == "cordon" and cordoned.preflight["ok"] and cordoned.validation is None
    assert [r.outcome for r in cordoned.results] == ["cordoned", "cordoned"]
    assert {tuple(s.name for s in r.steps) for r in cordoned.results} == {("annotate", "cordon")}
    for node in nodes:
        assert node_events(sim, node, since) == ["annotated", "cordoned"]
        assert sim.view().node(node).unschedulable

    restarted = phase(sim, nodes, settings, "restart", batch_started=cordoned.started, **validation)
    assert restarted.error is None, restarted.error
    assert restarted.preflight["ok"] and restarted.validation is None
    assert [r.outcome for r in restarted.results] == ["restarted", "restarted"]
    for result in restarted.results:
        # Already annotated and cordoned: those steps are not shown again.
        assert [s.name for s in result.steps] == ["drain", "stop", "change_offering", "resize_root_disk",
                                                  "update_affinity_groups", "start", "verify"]
    for node in nodes:
        # The second "annotated": the stop mark, written just before the stop.
        assert node_events(sim, node, since) == ["annotated", "cordoned", "annotated", "stop_requested",
                                                 "offering_changed", "started", "boot"]
        after = sim.view().node(node)
        # Back, with the boot ID from before still recorded, and still out of service.
        assert after.unschedulable and after.annotations[ROLLOUT_ANNOTATION] == boot_ids[node]
        assert after.ready and after.boot_id != boot_ids[node]

    done = phase(sim, nodes, settings, "uncordon", **validation)
    assert done.error is None, done.error
    assert done.preflight == {} and done.validation is not None and done.validation.ok
    assert [r.outcome for r in done.results] == ["done", "done"]
    for result in done.results:
        assert [(s.name, s.outcome) for s in result.steps] == [("recheck", "ok"), ("uncordon", "ok")]
    for node in nodes:
        assert node_events(sim, node, since)[-1] == "uncordoned"
        after = sim.view().node(node)
        assert not after.unschedulable and not after.annotated and after.offering_name == "cks-large"
    assert sim.invariants() == []


def test_uncordon_phase_refuses_a_node_the_restart_phase_did_not_bring_back(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    node = sim.names("worker")[0]
    settings = Settings(worker=TypeSettings(sim.offering_id("cks-large"), None, None))
    assert phase(sim, [node], settings, "cordon").error is None

    # The restart phase never ran: Ready, but with the boot ID recorded before any stop.
    result = phase(sim, [node], settings, "uncordon")

    assert result.error is not None and (result.error.node, result.error.step) == (node, "recheck")
    assert "from before the restart" in result.error.msg
    assert result.results[0].outcome == "failed" and result.validation is None
    after = sim.view().node(node)
    assert after.unschedulable and after.annotated  # left for release to judge
    assert not [c for c in sim.calls() if c.get("command") == "stopVirtualMachine"]


def test_restart_phase_refuses_once_the_batch_deadline_passed(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    node = sim.names("worker")[0]
    settings = Settings(worker=TypeSettings(sim.offering_id("cks-large"), None, None))
    cordoned = phase(sim, [node], settings, "cordon")
    assert cordoned.error is None

    late = {"phase": "restart", "batch_started": cordoned.started - 10}
    result = sim.cycle([node], settings, batch_timeout=5, options=late)

    assert result.error is not None and result.error.step == "preflight"
    assert "batch deadline" in result.error.msg and "nothing was drained or stopped" in result.error.msg
    assert not [e for e in sim.timeline() if e.get("node") == node and e["event"] in ("eviction", "stop_requested")]
