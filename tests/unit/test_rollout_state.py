"""The rollout object: what travels from the start through each batch to the release, built in
Python: the batch record, the merge of a hooked batch's phases, the lock's version and the jobs'
timings handed on, how the rollout ended, and the versioned dict the role keeps in one fact."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.cloudstack.cks.plugins.filter.rollout_batch_end import FilterModule as BatchEndFilter
from ansible_collections.cloudstack.cks.plugins.filter.rollout_batch_end import rollout_batch_end
from ansible_collections.cloudstack.cks.plugins.filter.rollout_start import FilterModule as StartFilter
from ansible_collections.cloudstack.cks.plugins.filter.rollout_start import rollout_start
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.state import VERSION, Rollout

PLAN = {"cluster": {"name": "demo"}, "hosts": ["w1", "w2", "w3"], "lock_version": "100",
        "plan": [{"node_type": "worker", "nodes": ["w1", "w2"], "canary": True},
                 {"node_type": "worker", "nodes": ["w3"]}],
        "work": [{"name": "w1", "reasons": ["offering"]}, {"name": "w2"}, {"name": "w3"}, {"name": "e1"}],
        "unrollable": {"etcd": "etcd: no quorum without e1"}, "max_unavailable": 2, "worker_batch_size": 2,
        "settings": {"worker": {"offering_id": "o2"}}, "previous_settings": {"worker": {"offering_id": "o1"}},
        "lock": {"holder": "r1"}, "nodes": [{"name": "w1", "vm_id": "v1"}], "catalog": {"offerings": {}}}


def node(name: str, outcome: str = "done", started: float = 1.0) -> dict[str, Any]:
    return {"name": name, "node_type": "worker", "outcome": outcome, "error": None, "changes": {},
            "steps": [{"name": "stop", "started": started, "ended": started + 1.0, "outcome": "ok"}]}


def run(nodes: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return dict({"batch": [n["name"] for n in nodes], "nodes": nodes, "uncordoned": [], "validation": None,
                 "started": 1.0, "ended": 9.0, "changed": True, "retries": {"total": 1},
                 "jobs": {"job_seconds": {"stopVirtualMachine": [9.0, 10.0]}}}, **extra)


def started() -> Rollout:
    return Rollout.start(PLAN, run_id="r1", started="2026-12-05T13:00:00Z",
                         hooks={"before_drain": "", "after_verify": ""}, pause_seconds=5)


def test_the_start_keeps_the_plans_summary_not_every_node() -> None:
    state = started()
    assert state.run_id == "r1" and state.lock_version == "100" and state.pause_seconds == 5
    assert "nodes" not in state.plan and "catalog" not in state.plan and "lock_version" not in state.plan
    assert state.plan["work"] == [{"name": "w1"}, {"name": "w2"}, {"name": "w3"}, {"name": "e1"}]
    assert state.stored == {"settings": {"worker": {"offering_id": "o2"}},
                            "previous_settings": {"worker": {"offering_id": "o1"}}, "lock": {"holder": "r1"}}
    assert state.skipped == ["etcd: no quorum without e1"] and state.batch_count == 2


def test_the_dict_round_trips_and_says_its_version() -> None:
    state = started()
    state.record_run(["w1", "w2"], "all", run([node("w1"), node("w2")]), lock_version="101")
    data = state.to_dict()
    assert data["version"] == VERSION
    assert Rollout.from_dict(data).to_dict() == data
    assert rollout_start(PLAN, run_id="r1", started="2026-12-05T13:00:00Z",
                         hooks={"before_drain": "", "after_verify": ""}, pause_seconds="5") == started().to_dict()


@pytest.mark.parametrize("bad", [{"version": VERSION + 1}, {"version": "1"}, ["not", "a", "dict"],
                                 {"batches": [{"batch": "one"}]}])
def test_an_object_it_cannot_read_names_the_option(bad: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        Rollout.from_dict(bad)
    assert caught.value.parameter == "rollout"


def test_a_partial_dict_is_a_rollout_without_batches() -> None:
    state = Rollout.from_dict({"run_id": "r9", "last_error": "planning failed: boom"})
    assert (state.run_id, state.batches, state.plan) == ("r9", [], {})
    assert state.ending() == (None, "planning failed: boom")
    assert Rollout.from_dict(None).ending() == (None, None)


def test_a_batch_in_one_run_is_recorded_with_its_results_lock_and_job_timings() -> None:
    state = started()
    state.record_run(["w1", "w2"], "all", run([node("w1"), node("w2")], uncordoned=[{"node": "w9", "why": "back"}]),
                     lock_version="101")
    assert state.current is None and state.lock_version == "101"
    assert state.job_seconds == {"stopVirtualMachine": [9.0, 10.0]}
    record = state.batches[0].to_dict()
    assert record == {"batch": 1, "node_type": "worker", "nodes": ["w1", "w2"], "outcome": "done", "error": None,
                      "uncordoned": [{"node": "w9", "why": "back"}], "validation": None, "retries": {"total": 1}}
    assert [r["name"] for r in state.results] == ["w1", "w2"]
    assert state.progress.startswith("Batch 1/2 worker (canary) [w1, w2] done in 8.0s")
    assert state.progress.endswith("nodes done 2, skipped 1, left 1")
    # The next batch's timings are merged over these; a run without a renewal keeps the version.
    state.record_run(["w3"], "all", run([node("w3")], jobs={"job_seconds": {"startVirtualMachine": [15.0, 16.0]}}))
    assert state.lock_version == "101" and set(state.job_seconds) == {"stopVirtualMachine", "startVirtualMachine"}
    assert state.batches[1].batch == 2 and state.ending() == (None, None)


def test_a_failed_batch_ends_the_rollout_failed_with_its_message() -> None:
    state = started()
    state.record_run(["w1", "w2"], "all", run([node("w1", "failed"), node("w2")], msg="node w1: stop failed: 533"))
    last = state.batches[-1]
    assert (last.outcome, last.error) == ("failed", "node w1: stop failed: 533")
    assert state.ending() == ("failed at batch 1 of 2", "node w1: stop failed: 533")
    assert "FAILED" in state.progress and "error: node w1: stop failed: 533" in state.progress
    assert not state.cancelled


def test_a_cancelled_rollout_ends_cancelled_before_the_batch() -> None:
    state = started()
    state.record_run(["w1", "w2"], "all", run([node("w1"), node("w2")]))
    state.record_run(["w3"], "all", {"msg": "node w3: preflight failed: the rollout was cancelled", "cancelled": True})
    assert state.batches[-1].outcome == "cancelled" and state.batches[-1].error is None and state.cancelled
    result, last_error = state.ending()
    assert result == "cancelled before batch 2 of 2"
    assert last_error == ("cancelled by the operator (cancel_rollout) before batch 2; run the rollout again to resume")
    assert "cancelled, not started" in state.progress


def test_a_batch_in_phases_keeps_its_start_and_merges_phases_and_hooks() -> None:
    state = started()
    cordon = run([node("w1", "cordoned", 1.0)], phase="cordon", started=1.0, ended=1.5)
    state.record_run(["w1", "w2"], "cordon", cordon, lock_version="101")
    # Not ended yet: the later phases count the batch's timeout from the cordon run's start.
    assert state.batches == [] and state.batch_started(["W1", "w2"], "restart") == 1.0
    assert state.batch_started(["w1", "w2"], "all") is None and state.batch_started(["w3"], "restart") is None
    state.record_run(["w1", "w2"], "restart", run([node("w1", "restarted", 3.0)], phase="restart", started=3.0),
                     lock_version="102")
    hooks = [{"node": "w1", "name": "hook_before_drain", "started": 2.0, "ended": 2.5, "outcome": "ok", "detail": "h"}]
    data = rollout_batch_end(state.to_dict(), ["w1", "w2"], hooks)
    ended = Rollout.from_dict(data)
    assert ended.current is None and ended.lock_version == "102" and len(ended.batches) == 1
    steps = [s["name"] for s in ended.results[0]["steps"]]
    assert steps == ["stop", "hook_before_drain", "stop"] and ended.batches[0].outcome == "done"
    assert ended.batches[0].retries == {}  # as the merged phases had them
    # Ending it again (a run that recorded its failure already) adds no second record.
    assert len(Rollout.from_dict(rollout_batch_end(data, ["w1", "w2"], hooks)).batches) == 1


def test_a_failed_hook_fails_the_batch_in_phases() -> None:
    state = started()
    state.record_run(["w1", "w2"], "cordon", run([node("w1", "cordoned")], phase="cordon"))
    hooks = [{"node": "w1", "name": "hook_before_drain", "started": 2.0, "ended": 2.5, "outcome": "failed",
              "detail": "lb.yml: boom"}]
    state.end_batch(["w1", "w2"], hooks)
    assert state.batches[0].outcome == "failed"
    assert state.batches[0].error == "node w1: hook_before_drain failed: lb.yml: boom"
    assert state.ending()[0] == "failed at batch 1 of 2"


def test_a_batch_that_failed_outside_its_runs() -> None:
    state = started()
    data = rollout_batch_end(state.to_dict(), ["w1", "w2"], error="template error")
    failed = Rollout.from_dict(data)
    assert failed.batches[0].to_dict()["outcome"] == "failed" and failed.batches[0].error == "template error"
    assert failed.ending() == ("failed at batch 1 of 2", "template error")
    # A batch already recorded changes its outcome, and gets no second record.
    state.record_run(["w1", "w2"], "all", run([node("w1"), node("w2")]))
    state.batch_failed(["w1", "w2"], "the progress task failed")
    assert len(state.batches) == 1 and state.batches[0].outcome == "failed"


def test_a_direct_run_outside_the_plan_is_numbered_after_the_batches_run() -> None:
    state = Rollout()
    state.record_run(["x1"], "all", run([node("x1")]))
    assert state.batches[0].batch == 1 and state.batches[0].node_type == "worker"


def test_the_report_comes_from_the_object_and_only_for_a_rollout_that_planned() -> None:
    release = {"outcome": "Running", "result": "done", "last_error": None, "uncordoned": []}
    assert Rollout().report(release, after={}, ended="2026-12-05T14:00:00Z") is None
    state = started()
    state.record_run(["w1", "w2"], "all", run([node("w1"), node("w2")]))
    report = state.report(release, after={"out_of_date": []}, ended="2026-12-05T14:00:00Z")
    assert report is not None
    assert report["run_id"] == "r1" and report["started"] == "2026-12-05T13:00:00Z" and report["pause_seconds"] == 5
    assert [n["name"] for n in report["nodes"]] == ["w1", "w2"] and report["nodes_not_reached"] == ["w3"]
    assert report["batches"][0]["outcome"] == "done" and report["cancelled"] is False
    assert report["previous_settings"] == {"worker": {"offering_id": "o1"}}


def test_the_filters_are_registered() -> None:
    assert StartFilter().filters() == {"rollout_start": rollout_start}
    assert BatchEndFilter().filters() == {"rollout_batch_end": rollout_batch_end}
