"""The fleet's decisions: how one cluster's rollout run ended (read from its exit code, its failed
tasks and its report), when the fleet stops starting clusters, and the fleet report."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.cloudstack.cks.plugins.filter.fleet_report import FilterModule, fleet_report
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions import fleet as decisions
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.fleet import (
    OUTCOMES,
    ClusterOutcome,
    cancel_taken,
    cancelled_outcome,
    cluster_outcome,
    fleet_summary,
    plan_line,
    start_refusal,
)

LOCK_REFUSAL = {"failures": [{"host": "localhost", "task": "Store the node settings and take the rollout lock", "failed": True,
                              "holder": "awx-job-41", "msg": "a rollout holds the lock kube-system/cloudstack-cks-rollout ..."}]}


def report(*outcomes: str, **extra: Any) -> dict[str, Any]:
    nodes = [{"name": f"w{i}", "outcome": outcome} for i, outcome in enumerate(outcomes)]
    return dict({"nodes": nodes, "cancelled": False, "last_error": None, "outcome": "Running", "still_out_of_date": 0}, **extra)


def test_a_run_that_restarted_nodes_rolled_them() -> None:
    found = cluster_outcome("c1", 0, {}, report("done", "restarted", "failed"))
    assert (found.outcome, found.nodes_restarted, found.last_error) == ("rolled", ["w0", "w1"], None)


def test_a_run_whose_plan_found_nothing_is_up_to_date() -> None:
    assert cluster_outcome("c1", 0, {}, report()).outcome == "up_to_date"


def test_a_cancelled_run_says_so_with_its_reason() -> None:
    found = cluster_outcome("c1", 0, {}, report("done", cancelled=True, last_error="cancelled by the operator"))
    assert (found.outcome, found.nodes_restarted, found.last_error) == ("cancelled", ["w0"], "cancelled by the operator")


def test_a_lock_refused_before_any_batch_is_a_skip_naming_the_holder() -> None:
    found = cluster_outcome("c1", 2, LOCK_REFUSAL, None)
    assert (found.outcome, found.locked_by, found.last_error) == ("locked", "awx-job-41", "skipped: locked by awx-job-41")
    assert not found.failed


def test_a_lock_lost_during_a_batch_is_a_failure_not_a_skip() -> None:
    # The report exists: the run held the lock and lost it part-way, which the operator must look at.
    found = cluster_outcome("c1", 2, LOCK_REFUSAL, report("done", last_error="the rollout lock ... is held by someone"))
    assert (found.outcome, found.last_error, found.nodes_restarted) == ("failed", "the rollout lock ... is held by someone", ["w0"])


def test_a_failed_run_keeps_its_last_failed_task_as_the_error() -> None:
    failures = {"failures": [{"failed": True, "msg": "first"}, {"failed": True, "msg": "Stop: batch 1 failed"}]}
    found = cluster_outcome("c1", 2, failures, None)
    assert (found.outcome, found.last_error) == ("failed", "Stop: batch 1 failed")


def test_a_run_that_died_before_any_task_failed_points_at_its_log() -> None:
    found = cluster_outcome("c1", -9, {}, None)
    assert found.outcome == "failed" and "exit code -9" in (found.last_error or "")


def test_a_clean_exit_without_report_is_not_taken_for_success() -> None:
    assert cluster_outcome("c1", 0, {}, None).outcome == "failed"


@pytest.mark.parametrize(("failed", "max_failed", "starts"), [
    ([], 0, True), (["a", "b", "c"], 0, True), (["a"], 2, True), (["a", "b"], 2, False), (["a", "b", "c"], 2, False),
])
def test_the_fleet_stops_starting_clusters_once_max_failed_failed(failed: list[str], max_failed: int, starts: bool) -> None:
    refusal = start_refusal(failed, max_failed)
    assert (refusal is None) == starts
    if refusal:
        assert f"fleet_max_failed={max_failed}" in refusal and all(name in refusal for name in failed)


def test_the_fleet_report_counts_each_outcome_and_lists_the_clusters_by_name() -> None:
    results = [
        {"cluster": "c2", "outcome": "failed", "nodes_restarted": ["c2-w0"], "last_error": "PDB web", "seconds": 9.5},
        {"cluster": "c1", "outcome": "rolled", "nodes_restarted": ["c1-w0", "c1-w1"], "seconds": 8.0},
        {"cluster": "c3", "outcome": "locked", "nodes_restarted": [], "last_error": "skipped: locked by awx-job-7",
         "locked_by": "awx-job-7"},
    ]
    found = fleet_report(results, run_id="fleet-1", started="s", ended="e")
    assert [c["cluster"] for c in found["clusters"]] == ["c1", "c2", "c3"]
    assert found["counts"] == dict.fromkeys(OUTCOMES, 0) | {"rolled": 1, "failed": 1, "locked": 1}
    assert found["nodes_restarted"] == 3
    assert found["summary"][0] == "Fleet fleet-1: 3 cluster(s): 1 rolled, 1 failed, 1 locked; 3 node(s) restarted"
    assert found["summary"][1:] == ["c1: rolled, restarted c1-w0, c1-w1 (8.0 s)", "c2: failed, restarted c2-w0 (9.5 s); PDB web",
                                    "c3: locked; skipped: locked by awx-job-7"]
    assert FilterModule().filters()["fleet_report"] is fleet_report


def test_the_fleet_report_refuses_anything_but_a_list_of_results() -> None:
    with pytest.raises(Exception, match="list of cks_fleet_rollout results"):
        fleet_report({"cluster": "c1"}, run_id="fleet-1")  # type: ignore[arg-type]


PLAN = {"out_of_date": {"control": 0, "etcd": 0, "worker": 3},
        "batches": [{"node_type": "worker", "nodes": ["w1"]}, {"node_type": "worker", "nodes": ["w2", "w3"]}]}


def test_a_dry_run_with_batches_would_roll_and_one_without_is_up_to_date() -> None:
    outcome = cluster_outcome("c1", 0, {"failures": [], "plan": PLAN}, None, dry_run=True)
    assert (outcome.outcome, outcome.plan, outcome.still_out_of_date) == ("would_roll", PLAN, 3)
    empty = {"out_of_date": {"worker": 0}, "batches": []}
    assert cluster_outcome("c1", 0, {"plan": empty}, None, dry_run=True).outcome == "up_to_date"
    # A dry run that failed (a refusal before the lock) is a failure, plan or not.
    refused = cluster_outcome("c1", 2, {"plan": PLAN, "failures": [{"failed": True, "msg": "Refused before the lock"}]}, None,
                              dry_run=True)
    assert refused.outcome == "failed" and refused.last_error == "Refused before the lock"


def test_the_plan_line_names_the_out_of_date_counts_and_each_batch() -> None:
    assert plan_line(PLAN) == "out of date: worker 3; 2 batch(es): worker [w1]; worker [w2, w3]"
    report = decisions.fleet_report([{"cluster": "c1", "outcome": "would_roll", "plan": PLAN}], "fleet-1", None, None)
    assert report["counts"]["would_roll"] == 1 and report["clusters"][0]["plan"] == PLAN
    assert fleet_summary(report)[1] == "c1: would_roll, out of date: worker 3; 2 batch(es): worker [w1]; worker [w2, w3]"


def test_a_cancel_keeps_a_rollout_that_ended_well_and_marks_the_others_cancelled() -> None:
    rolled = ClusterOutcome("c1", "rolled", ["w1"])
    assert cancelled_outcome(rolled, "SIGTERM", stopped=False, cancel_timeout=600) is rolled
    stopped = cancelled_outcome(rolled, "SIGTERM", stopped=True, cancel_timeout=600)
    assert stopped.outcome == "cancelled" and "fleet_cancel_timeout=600 s and was stopped" in stopped.last_error
    failed = ClusterOutcome("c2", "failed", [], "the rollout was cancelled (the record's cancel flag is set)")
    ended = cancelled_outcome(failed, "controller gone", stopped=False, cancel_timeout=600)
    assert ended.outcome == "cancelled" and ended.last_error.startswith("the fleet's job was cancelled (controller gone)")


def test_a_cancel_is_taken_only_when_the_cancel_run_set_the_flag() -> None:
    assert cancel_taken({"cancel": {"cancel_requested": True}})
    assert not cancel_taken({"cancel": {"cancel_requested": False, "msg": "nothing to cancel"}})
    assert not cancel_taken({"failures": []})
