"""A worker's cycle against cks-sim through the real clients: the order of the steps, what
changed on the VM, and the dedication group kept when the affinity groups are replaced."""

from __future__ import annotations

from typing import Any, Callable

from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ROLLOUT_ANNOTATION
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import STOP_ANNOTATION
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings

from helpers import ClusterSim, load_raw_spec


def first_index(events: list[dict[str, Any]], **match: Any) -> int:
    for i, event in enumerate(events):
        if all(event.get(k) == v for k, v in match.items()):
            return i
    raise AssertionError(f"no event {match} in {[(e.get('event'), e.get('key')) for e in events]}")


def last_index(events: list[dict[str, Any]], **match: Any) -> int:
    found = [i for i, e in enumerate(events) if all(e.get(k) == v for k, v in match.items())]
    assert found, f"no event {match}"
    return found[-1]


def test_annotate_cordon_drain_stop_change_start_verify_uncordon(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    node = sim.names("worker")[0]
    before = sim.view().node(node)
    settings = Settings(worker=TypeSettings(sim.offering_id("cks-large"), 30, (sim.group_id("workers-spread"),)))

    result = sim.cycle([node], settings)

    assert result.error is None, result.error
    [outcome] = result.results
    assert outcome.outcome == "done"
    assert [s.name for s in outcome.steps] == [
        "annotate", "cordon", "drain", "stop", "change_offering", "resize_root_disk",
        "update_affinity_groups", "start", "verify", "uncordon"]
    assert all(s.outcome == "ok" for s in outcome.steps)
    assert all(s.started <= s.ended for s in outcome.steps)
    assert outcome.changes["offering"]["from"] == "cks-medium" and outcome.changes["offering"]["to"] == "cks-large"
    assert outcome.changes["root_disk_gb"] == {"from": 20, "to": 30}
    assert outcome.changes["drain"]["evicted"]

    # The simulator saw it in that order.
    events = [e for e in sim.timeline() if e.get("node") == node]
    annotated = first_index(events, event="annotated", key=ROLLOUT_ANNOTATION, value=before.boot_id)
    cordoned = first_index(events, event="cordoned")
    evicted_first = first_index(events, event="eviction", result="accepted")
    evicted_last = last_index(events, event="eviction", result="accepted")
    stop = first_index(events, event="stop_requested")
    offering = first_index(events, event="offering_changed")
    resized = first_index(events, event="volume_resized")
    groups = first_index(events, event="affinity_updated")
    start = first_index(events, event="start_requested")
    boot = first_index(events, event="boot")
    uncordoned = first_index(events, event="uncordoned")
    removed = last_index(events, event="annotated", key=ROLLOUT_ANNOTATION, value=None)
    assert annotated < cordoned < evicted_first <= evicted_last < stop < offering < start < boot < uncordoned
    assert stop < resized < start and stop < groups < start
    # One patch: the annotations go with the uncordon (nothing else happens in between).
    assert boot < removed < uncordoned
    assert all(e["event"] == "annotated" for e in events[removed:uncordoned])

    commands = [c["command"] for c in sim.calls() if c.get("api") == "cloudstack" and c.get("status") == 200
                and c["command"] in ("stopVirtualMachine", "changeServiceForVirtualMachine", "resizeVolume",
                                     "updateVMAffinityGroup", "startVirtualMachine")]
    assert commands == ["stopVirtualMachine", "changeServiceForVirtualMachine", "resizeVolume",
                        "updateVMAffinityGroup", "startVirtualMachine"]

    after = sim.view().node(node)
    assert after.offering_name == "cks-large" and after.root_disk_gb == 30
    assert {g.name for g in after.affinity_groups} == {"workers-spread", "dedicated-admin"}
    assert after.ready and not after.unschedulable and after.boot_id != before.boot_id
    assert ROLLOUT_ANNOTATION not in after.annotations and STOP_ANNOTATION not in after.annotations
    assert sim.invariants() == []


def test_nothing_to_change_still_restarts_but_sends_no_change(cycle_sim: Callable[..., ClusterSim]) -> None:
    # A node taken for another reason (say, left annotated) with settings it already has: only
    # stop and start, no refused "same offering" call.
    sim = cycle_sim("small.yml")
    node = sim.names("worker")[1]
    settings = Settings(worker=TypeSettings(sim.offering_id("cks-medium"), 20, None))
    result = sim.cycle([node], settings)
    assert result.error is None, result.error
    steps = {s.name: s.outcome for s in result.results[0].steps}
    assert steps["change_offering"] == steps["resize_root_disk"] == steps["update_affinity_groups"] == "skipped"
    commands = {c["command"] for c in sim.calls() if c.get("api") == "cloudstack"}
    assert not commands & {"changeServiceForVirtualMachine", "resizeVolume", "updateVMAffinityGroup"}
    assert sim.invariants() == []


def test_affinity_groups_replaced_and_the_dedication_group_kept(cycle_sim: Callable[..., ClusterSim]) -> None:
    raw = load_raw_spec("small.yml")
    raw["clusters"][0]["affinity_groups"] = {"control": [], "worker": ["workers-soft"], "etcd": []}
    sim = cycle_sim(raw)
    node = sim.names("worker")[0]
    assert {g.name for g in sim.view().node(node).affinity_groups} == {"workers-soft", "dedicated-admin"}
    settings = Settings(worker=TypeSettings(None, None, (sim.group_id("workers-spread"),)))

    result = sim.cycle([node], settings)

    assert result.error is None, result.error
    changes = result.results[0].changes["affinity_groups"]
    assert set(changes["from"]) == {"workers-soft", "dedicated-admin"}
    assert set(changes["to"]) == {"workers-spread", "dedicated-admin"}
    update = [c for c in sim.calls() if c.get("command") == "updateVMAffinityGroup"]
    assert len(update) == 1
    after = sim.view().node(node)
    assert {g.name for g in after.affinity_groups} == {"workers-spread", "dedicated-admin"}
    # Nodes of the type not in the batch keep their groups.
    other = sim.view().node(sim.names("worker")[1])
    assert {g.name for g in other.affinity_groups} == {"workers-soft", "dedicated-admin"}
    assert sim.invariants() == []


def test_two_workers_in_one_batch_are_cycled_at_once(cycle_sim: Callable[..., ClusterSim]) -> None:
    raw = load_raw_spec("small.yml")
    raw["invariants"] = {"max_unavailable": {"control": 1, "etcd": 1, "worker": 2}}
    sim = cycle_sim(raw)
    nodes = sim.names("worker")[:2]
    settings = Settings(worker=TypeSettings(sim.offering_id("cks-large"), None, None))
    result = sim.cycle(nodes, settings)
    assert result.error is None, result.error
    assert [r.outcome for r in result.results] == ["done", "done"]
    # Concurrent: both were down at the same time at some point.
    stopped = {r.name: next(s for s in r.steps if s.name == "stop") for r in result.results}
    verified = {r.name: next(s for s in r.steps if s.name == "verify") for r in result.results}
    a, b = nodes
    assert stopped[a].started < verified[b].ended and stopped[b].started < verified[a].ended
    assert all(sim.view().node(n).offering_name == "cks-large" for n in nodes)
    assert sim.invariants() == []
