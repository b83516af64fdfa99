"""The load-balancer exclusion through the whole playbook (``playbooks/rollout.yml``) against cks-sim.

With ``rollout_exclude_from_load_balancers`` each node gets the label
``node.kubernetes.io/exclude-from-external-load-balancers`` before its drain, keeps it until after
verify (it goes with the uncordon), and its VM stops no sooner than ``rollout_exclude_delay``
seconds after the drain ended (a lower bound from the simulator's timeline). A node that carried
the label before the rollout keeps it, and the steps show in the report.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.marks import LB_EXCLUSION_ANNOTATION, LB_EXCLUSION_LABEL

pytestmark = pytest.mark.timeout(900)

SPEC = "rollout_small.yml"  # 1 stacked control node (not rolled), 3 workers
WORKERS_LARGER: dict[str, Any] = {"rollout_node_offerings": {"worker": "cks-large"}, "rollout_max_unavailable": 1}
DELAY = 2.0


def index(events: list[dict[str, Any]], event: str, **match: Any) -> int:
    return next(i for i, e in enumerate(events) if e["event"] == event
                and all(e.get(k) == v for k, v in match.items()))


def test_label_from_before_the_drain_until_after_verify_and_the_delay_before_the_stop(rollout_sim: Any) -> None:
    sim = rollout_sim(SPEC)
    workers = sim.names("worker")
    theirs = workers[-1]
    # Excluded by someone else before the rollout: that label is not the rollout's to remove.
    sim.kube.patch_node(theirs, {"metadata": {"labels": {LB_EXCLUSION_LABEL: ""}}})
    since = time.time()
    run = sim.rollout(rollout_exclude_from_load_balancers=True, rollout_exclude_delay=DELAY, **WORKERS_LARGER)
    assert run.rc == 0, run.output
    sim.assert_converged()

    for node in workers:
        events = [e for e in sim.timeline() if e.get("node") == node and e["t"] >= since]
        stop = index(events, "stop_requested")
        drain_end = max(i for i, e in enumerate(events[:stop]) if e["event"] in ("eviction", "pod_deleted"))
        boot = index(events, "boot")
        uncordoned = index(events, "uncordoned")
        steps = next(n for n in run.report["nodes"] if n["name"] == node)["steps"]
        outcomes = {s["name"]: s["outcome"] for s in steps}
        if node == theirs:
            assert not [e for e in events if e["event"] == "labelled"]
            assert outcomes["exclude_from_lb"] == outcomes["lb_wait"] == "skipped"
            continue
        labelled = index(events, "labelled", key=LB_EXCLUSION_LABEL, value="true")
        unlabelled = index(events, "labelled", key=LB_EXCLUSION_LABEL, value=None)
        first_eviction = index(events, "eviction")
        # label -> drain -> (delay) -> stop -> ... -> boot (verify) -> label gone with the uncordon
        assert labelled < first_eviction <= drain_end < stop < boot < unlabelled
        assert all(e["event"] in ("labelled", "annotated")
                   for e in events[min(unlabelled, uncordoned):max(unlabelled, uncordoned)])
        assert events[stop]["t"] - events[drain_end]["t"] >= DELAY
        assert [s["name"] for s in steps][:5] == ["annotate", "cordon", "exclude_from_lb", "drain", "lb_wait"]
        assert outcomes["exclude_from_lb"] == outcomes["lb_wait"] == outcomes["uncordon"] == "ok"
        assert "load-balancer exclusion removed" in next(s for s in steps if s["name"] == "uncordon")["detail"]

    nodes = {n["metadata"]["name"]: n["metadata"] for n in sim.kube.list_nodes()}
    for node in workers[:-1]:
        assert LB_EXCLUSION_LABEL not in nodes[node].get("labels", {})
        assert LB_EXCLUSION_ANNOTATION not in nodes[node].get("annotations", {})
    assert nodes[theirs]["labels"][LB_EXCLUSION_LABEL] == ""
    # kubeadm's label on the control node (not rolled here) is untouched too.
    control = sim.names("control")[0]
    assert LB_EXCLUSION_LABEL in nodes[control]["labels"]
    assert sim.invariants() == []
