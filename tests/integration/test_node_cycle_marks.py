"""One batch in process against cks-sim through the real clients: the load-balancer exclusion and
its delay, the pending taint taken off at the uncordon and by release (other owners' taints kept),
and the validation after the batch (its rounds in the call log; another node going NotReady fails it).
The whole playbook's scenarios are in test_rollout_validation.py, test_rollout_pending_taint.py and
test_rollout_lb_exclusion.py."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from helpers import ClusterSim, load_raw_spec

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.marks import (
    LB_EXCLUSION_ANNOTATION,
    LB_EXCLUSION_LABEL,
    PENDING_TAINT_KEY,
    has_pending_taint,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.validation import ValidationOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._services.session import ClusterSession
from ansible_collections.cloudstack.cks.plugins.module_utils._services.taint import taint_pending

LB = LB_EXCLUSION_LABEL
PENDING = PENDING_TAINT_KEY
THEIRS = {"key": "example.com/dedicated", "value": "ml", "effect": "NoSchedule"}


def two_workers_at_once(cycle_sim: Callable[..., ClusterSim]) -> ClusterSim:
    raw = load_raw_spec("small.yml")
    raw["invariants"] = {"max_unavailable": {"control": 1, "etcd": 1, "worker": 2}}
    return cycle_sim(raw)


def large(sim: ClusterSim) -> Settings:
    return Settings(worker=TypeSettings(sim.offering_id("cks-large"), None, None))


def raw_node(sim: ClusterSim, name: str) -> dict[str, Any]:
    return sim.kube.read_node(name)


def test_lb_exclusion_from_before_the_drain_until_after_verify(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = two_workers_at_once(cycle_sim)
    ours, theirs = sim.names("worker")[:2]
    # Someone else had excluded the second node already: that label is theirs to keep.
    sim.kube.patch_node(theirs, {"metadata": {"labels": {LB: ""}}})
    since = time.time()
    delay = 1.0
    options = {"exclude_from_load_balancers": True, "exclude_delay": delay}
    result = sim.cycle([ours, theirs], large(sim), options=options)
    assert result.error is None, result.error
    steps = {r.name: [(s.name, s.outcome) for s in r.steps] for r in result.results}
    assert [n for n, _o in steps[ours]] == [
        "annotate", "cordon", "exclude_from_lb", "drain", "lb_wait", "stop", "change_offering", "resize_root_disk",
        "update_affinity_groups", "start", "verify", "uncordon"]
    assert dict(steps[ours])["exclude_from_lb"] == dict(steps[ours])["lb_wait"] == "ok"
    assert dict(steps[theirs])["exclude_from_lb"] == dict(steps[theirs])["lb_wait"] == "skipped"

    events = [e for e in sim.timeline() if e.get("node") == ours]
    kinds = [(e["event"], e.get("key"), e.get("value")) for e in events]
    labelled = kinds.index(("labelled", LB, "true"))
    unlabelled = kinds.index(("labelled", LB, None))
    first_eviction = next(i for i, e in enumerate(events) if e["event"] == "eviction")
    stop = next(i for i, e in enumerate(events) if e["event"] == "stop_requested")
    boot = next(i for i, e in enumerate(events) if e["event"] == "boot")
    uncordoned = next(i for i, e in enumerate(events) if e["event"] == "uncordoned")
    drain_end = max(i for i, e in enumerate(events[:stop]) if e["event"] == "pod_deleted")
    assert labelled < first_eviction <= drain_end < stop < boot < unlabelled
    # The label and the uncordon go in one write (nothing in between).
    assert all(e["event"] in ("labelled", "annotated") for e in events[min(unlabelled, uncordoned):
                                                                       max(unlabelled, uncordoned)])
    # The delay between the drain's end and the stop: a lower bound, from the sim's own clock.
    assert events[stop]["t"] - events[drain_end]["t"] >= delay

    after_ours, after_theirs = raw_node(sim, ours), raw_node(sim, theirs)
    assert LB not in after_ours["metadata"].get("labels", {})
    assert LB_EXCLUSION_ANNOTATION not in after_ours["metadata"].get("annotations", {})
    assert after_theirs["metadata"]["labels"][LB] == ""
    assert not [e for e in sim.timeline() if e.get("node") == theirs and e["event"] == "labelled" and e["t"] >= since]
    assert sim.invariants() == []


def test_uncordon_takes_the_pending_taint_off_and_release_the_rest(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    cycled, waiting = sim.names("worker")[:2]
    tainted = taint_pending(ClusterSession.of({}, None, sim.kube), {"nodes": [cycled, waiting]})
    assert tainted["pending_taint"]["tainted"] == [cycled, waiting]
    # Someone else's taint on the cycled node, added after ours: the uncordon keeps it.
    current = raw_node(sim, cycled)
    sim.kube.patch_node(cycled, {"metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                                 "spec": {"taints": current["spec"]["taints"] + [THEIRS]}})

    result = sim.cycle([cycled], large(sim))
    assert result.error is None, result.error
    uncordon = next(s for s in result.results[0].steps if s.name == "uncordon")
    assert "pending taint removed" in uncordon.detail
    taints = {(t["key"], t["effect"]) for t in raw_node(sim, cycled)["spec"].get("taints") or []}
    assert taints == {(THEIRS["key"], "NoSchedule")}
    events = [e for e in sim.timeline() if e.get("node") == cycled]
    untainted = next(i for i, e in enumerate(events) if e["event"] == "untainted")
    assert events[untainted + 1]["event"] == "uncordoned" or events[untainted - 1]["event"] == "uncordoned"
    assert has_pending_taint(raw_node(sim, waiting))  # its turn has not come

    released = sim.release()
    assert released.pending_taint_removed == [waiting]
    assert not any(has_pending_taint(n) for n in sim.kube.list_nodes())
    assert sim.release().pending_taint_removed == []  # idempotent
    assert sim.invariants() == []


def readyz_calls(sim: ClusterSim, since: float) -> list[dict[str, Any]]:
    return [c for c in sim.calls() if c.get("api") == "kubernetes" and c["path"].endswith("/readyz")
            and c["t"] >= since]


def test_validation_rounds_after_the_batch(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    node = sim.names("worker")[0]
    since = time.time()
    result = sim.cycle([node], large(sim), etcd=True, options={"validation": ValidationOptions(3, 0.5, 30)})
    assert result.error is None, result.error
    assert result.validation is not None and result.validation.ok and len(result.validation.rounds) == 3
    calls = readyz_calls(sim, since)
    assert len(calls) == 3
    assert all(b["t"] - a["t"] >= 0.5 for a, b in zip(calls, calls[1:]))
    uncordoned = next(e for e in sim.timeline() if e.get("node") == node and e["event"] == "uncordoned")
    assert uncordoned["t"] <= calls[0]["t"]  # after the node is done


def test_validation_fails_when_another_node_goes_not_ready(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = two_workers_at_once(cycle_sim)
    node, victim = sim.names("worker")[:2]
    vm_name = next(n.vm_name for n in sim.view().nodes if n.name == victim)

    def stop_the_victim_once_ours_is_down() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(e.get("node") == node and e["event"] == "stop_requested" for e in sim.timeline()):
                sim.admin("POST", "/actions", {"action": "stop_vm", "vm": vm_name})
                return
            time.sleep(0.02)

    watcher = threading.Thread(target=stop_the_victim_once_ours_is_down)
    watcher.start()
    # Two passes one second apart: the victim's Ready goes Unknown within the grace period (0.4 s).
    result = sim.cycle([node], large(sim), options={"validation": ValidationOptions(2, 1.0, 4.0)})
    watcher.join()
    assert result.error is not None and result.error.step == "validate", result.error
    assert f"node {victim} not Ready" in result.error.msg and "did not validate within 4s" in result.error.msg
    assert [r.outcome for r in result.results] == ["done"]  # the batch's own node is back and uncordoned
    after = sim.view().node(node)
    assert after.ready and not after.unschedulable and not after.annotated
    assert result.validation is not None and not result.validation.ok
