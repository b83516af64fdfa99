"""The cluster autoscaler during a rollout, as pure decisions: the scale-down-disabled mark put on
and taken off (a value the node had is put back, a "true" already there never touched), how the
autoscaler is named, which nodes it added, the later batches for them (the rollout object and the
filter the playbook uses), and the words of a wait for a CKS operation. cluster-autoscaler reads the
annotation in core/scaledown/eligibility/eligibility.go (ScaleDownDisabledKey)."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.cloudstack.cks.plugins.filter.rollout_added import FilterModule, rollout_added
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.autoscaler import (
    HOLD_ANNOTATION,
    PASSING_OPERATIONS,
    SCALE_DOWN_DISABLED,
    added_batches,
    added_nodes,
    autoscaler_of,
    autoscaler_words,
    cks_wait_line,
    hold_patch,
    restore_patch,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.progress import batch_progress
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.state import Rollout


def apply(annotations: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch of metadata.annotations, as the API server applies it."""
    out = dict(annotations)
    for key, value in patch["metadata"]["annotations"].items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


@pytest.mark.parametrize("before", [{}, {SCALE_DOWN_DISABLED: "false"}, {SCALE_DOWN_DISABLED: ""},
                                    {SCALE_DOWN_DISABLED: "maybe", "other": "x"}])
def test_the_mark_goes_on_and_the_release_puts_back_exactly_what_was_there(before: dict[str, Any]) -> None:
    patch = hold_patch(before)
    assert patch is not None
    held = apply(before, patch)
    assert held[SCALE_DOWN_DISABLED] == "true" and HOLD_ANNOTATION in held
    # A second run of the rollout (a rerun after a failure) finds it marked: nothing to write.
    assert hold_patch(held) is None
    restored = restore_patch(held)
    assert restored is not None and apply(held, restored) == before


def test_a_node_someone_marked_true_is_never_touched() -> None:
    theirs = {SCALE_DOWN_DISABLED: "true"}
    assert hold_patch(theirs) is None
    assert restore_patch(theirs) is None


def test_the_autoscaler_is_on_by_its_cluster_setting_or_its_deployment() -> None:
    entry = {"autoscalingenabled": True, "minsize": 3, "maxsize": 6}
    assert autoscaler_of(entry, False) == {"on": True, "autoscalingenabled": True, "deployment": False,
                                           "minsize": 3, "maxsize": 6}
    assert autoscaler_of({}, True)["on"] is True
    assert autoscaler_of({"autoscalingenabled": False}, False)["on"] is False
    assert autoscaler_words(autoscaler_of({}, False)) == "cluster autoscaler: off"
    assert autoscaler_words(autoscaler_of(entry, False), ["w5"]) == (
        "cluster autoscaler: on (min 3, max 6 workers); the rollout marks its nodes scale-down-disabled until "
        "the release; nodes it added during the rollout: w5")
    assert "a cluster-autoscaler Deployment runs in kube-system" in autoscaler_words(autoscaler_of({}, True))


def test_added_nodes_are_the_ones_the_plan_did_not_know() -> None:
    assert added_nodes(["W1", "w2"], ["w1", "w2", "w9", "w5"]) == ["w5", "w9"]
    assert added_nodes(["w1"], ["w1"]) == []


def test_later_batches_take_only_the_added_nodes_in_the_plans_order() -> None:
    batches = [{"node_type": "worker", "nodes": ["w1", "w5"], "canary": True},
               {"node_type": "worker", "nodes": ["w2"]}, {"node_type": "worker", "nodes": ["w6"]}]
    assert added_batches(batches, ["w1", "w2"]) == [{"node_type": "worker", "nodes": ["w5"], "canary": False},
                                                    {"node_type": "worker", "nodes": ["w6"], "canary": False}]
    assert added_batches(batches, ["w1", "w2", "w5", "w6"]) == []


def test_only_the_operations_that_pass_are_waited_out() -> None:
    assert PASSING_OPERATIONS == {"Scaling", "RemovingNodes"}
    assert cks_wait_line("Scaling", 12.34, 1800) == (
        "cluster is Scaling (a CKS operation, such as the cluster autoscaler's scale): waited 12.3s of at "
        "most 1800s before the batch starts")


PLAN = {"cluster": {"name": "demo"}, "hosts": ["w1", "w2"], "lock_version": "1",
        "plan": [{"node_type": "worker", "nodes": ["w1"]}, {"node_type": "worker", "nodes": ["w2"]}],
        "work": [{"name": "w1"}, {"name": "w2"}],
        "autoscaler": {"on": True, "minsize": 1, "maxsize": 4, "known_nodes": ["c1", "w1", "w2"]}}


def test_the_filter_adds_batches_numbered_after_the_planned_ones() -> None:
    state = Rollout.start(PLAN, run_id="r1").to_dict()
    outdated = {"plan": [{"node_type": "worker", "nodes": ["w2", "w7"]}]}

    added = FilterModule().filters()["rollout_added"](state, plan=PLAN, outdated=outdated)

    assert added["batches"] == [{"node_type": "worker", "nodes": ["w7"], "canary": False}]
    assert added["hosts"] == ["w7"] and added["serial"] == [1] and added["batch_count"] == 3
    assert [b["nodes"] for b in added["plan"]["plan"]] == [["w1"], ["w2"], ["w7"]]
    rollout = Rollout.from_dict(added["rollout"])
    assert rollout.batch_count == 3 and rollout.planned_batch(["w7"]) == (3, "worker")
    assert rollout.plan["hosts"] == ["w1", "w2", "w7"]
    assert rollout.plan["autoscaler"]["rolled_added"] == ["w7"]
    assert PLAN["plan"] == [{"node_type": "worker", "nodes": ["w1"]}, {"node_type": "worker", "nodes": ["w2"]}]


def test_without_the_autoscaler_nothing_is_added() -> None:
    plan = dict(PLAN, autoscaler={"on": False, "known_nodes": ["w1", "w2"]})
    added = rollout_added(Rollout.start(plan, run_id="r1").to_dict(), plan=plan,
                          outdated={"plan": [{"node_type": "worker", "nodes": ["w7"]}]})
    assert added["batches"] == [] and added["hosts"] == [] and added["batch_count"] == 2


def test_a_dropped_node_is_no_work_left_and_the_notes_are_in_the_progress_line() -> None:
    rollout = Rollout.start(PLAN, run_id="r1")
    rollout.record_run(["w2"], "all", {"nodes": [], "preflight": {
        "notes": ["dropped from the plan, no longer in the cluster (removed by a CKS operation): w2"],
        "dropped": ["w2"]}})
    assert "w2" not in rollout.plan["hosts"] and {"name": "w2"} not in rollout.plan["work"]
    assert "dropped from the plan, no longer in the cluster (removed by a CKS operation): w2" in rollout.progress
    assert rollout.progress.endswith("nodes done 0, skipped 0, left 1")
    line = batch_progress({"preflight": {"notes": ["cluster is Scaling (...)"]}}, plan=PLAN, batch_number=1,
                          batch_count=2, node_type="worker", batch_nodes=["w1"])
    assert " | cluster is Scaling (...) | " in line
