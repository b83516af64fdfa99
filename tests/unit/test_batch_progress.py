"""The ``batch_progress`` filter: the one line printed after each batch, for a terminal and AWX alike -
the batch and its state, each node's steps and their durations, the validation, the error, and the
nodes done, skipped and left."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.progress import batch_progress

PLAN = {
    "hosts": ["c1", "w1", "w2", "w3"],
    "plan": [{"node_type": "control", "nodes": ["c1"]},
             {"node_type": "worker", "nodes": ["w1"], "canary": True},
             {"node_type": "worker", "nodes": ["w2", "w3"], "canary": False}],
    # e1's type could not be rolled: planned work that no batch gets.
    "work": [{"name": "c1"}, {"name": "w1"}, {"name": "w2"}, {"name": "w3"}, {"name": "e1"}],
}


def step(name: str, started: float, ended: Optional[float], outcome: str = "ok") -> dict[str, Any]:
    return {"name": name, "started": started, "ended": ended, "outcome": outcome}


def node(name: str, outcome: str, *steps: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "outcome": outcome, "steps": list(steps)}


def line(cycle: Any, number: int = 3, nodes: tuple[str, ...] = ("w2", "w3"), node_type: str = "worker",
         **extra: Any) -> str:
    return batch_progress(cycle, plan=PLAN, batch_number=number, batch_count=3, node_type=node_type,
                          batch_nodes=list(nodes), **extra)


def test_a_batch_done_with_its_nodes_steps_validation_and_counts() -> None:
    cycle = {
        "started": 100.0, "ended": 195.25,
        "nodes": [node("w2", "done", step("drain", 100.0, 120.06), step("stop", 120.1, 125.1),
                       step("change", 125.1, 125.1, "skipped"), step("uncordon", 190.0, 190.04)),
                  node("w3", "done", step("drain", 100.0, 101.0))],
        "uncordoned": [],
        "validation": {"ok": True, "passes": 2, "count": 2, "rounds": [{}, {}], "started": 190.0, "ended": 195.2},
    }
    results = [node("c1", "done"), node("w1", "done"), node("w2", "done"), node("w3", "done")]
    assert line(cycle, results=results) == (
        "Batch 3/3 worker [w2, w3] done in 95.2s"
        " | w2 done: drain 20.1s, stop 5.0s, uncordon 0.0s"  # change, not needed, is left out
        " | w3 done: drain 1.0s"
        " | validated (2/2 passes, 2 rounds) in 5.2s"
        " | nodes done 4, skipped 1, left 0")


def test_a_failed_batch_says_failed_shows_the_failed_step_in_capitals_and_the_error() -> None:
    cycle = {"started": 10.0, "ended": 40.0,
             "nodes": [node("w2", "failed", step("drain", 10.0, 40.0, "timeout"), step("stop", 40.0, None, "failed"))],
             "validation": None}
    assert line(cycle, results=[node("c1", "done"), node("w2", "failed")], error="node w2: drain timed out") == (
        "Batch 3/3 worker [w2, w3] FAILED in 30.0s"
        # A step without an end lasted no time.
        " | w2 failed: drain 30.0s TIMEOUT, stop 0.0s FAILED"
        " | error: node w2: drain timed out"
        " | nodes done 1, skipped 1, left 3")


def test_an_empty_error_still_fails_the_batch() -> None:
    assert line({}, error="").startswith("Batch 3/3 worker [w2, w3] FAILED | error:  | nodes done 0")


def test_a_cancelled_batch_did_not_start_and_has_no_duration() -> None:
    assert line({}, cancelled=True) == "Batch 3/3 worker [w2, w3] cancelled, not started | nodes done 0, skipped 1, left 4"


def test_cancelled_wins_over_an_error() -> None:
    assert " cancelled, not started | error: x | " in line({}, cancelled=True, error="x")


def test_the_canary_batch_is_named_so() -> None:
    assert line({}, number=2, nodes=("w1",)).startswith("Batch 2/3 worker (canary) [w1] done | ")
    assert line({}, number=1, nodes=("c1",), node_type="control").startswith("Batch 1/3 control [c1] done | ")


def test_a_batch_number_out_of_the_plan_is_no_canary() -> None:
    assert line({}, number=4).startswith("Batch 4/3 worker [w2, w3] done | ")


def test_nodes_uncordoned_first_come_before_the_batch_nodes() -> None:
    cycle = {"uncordoned": [{"node": "w9", "why": "Ready with a new boot ID"}, {"node": "w8"}],
             "nodes": [node("w2", "done")]}
    assert line(cycle) == ("Batch 3/3 worker [w2, w3] done | uncordoned first (back from a stopped rollout): w9, w8"
                           " | w2 done: no steps | nodes done 0, skipped 1, left 4")


def test_a_node_whose_steps_were_all_skipped_shows_no_steps() -> None:
    cycle = {"nodes": [node("w2", "done", step("stop", 1.0, 1.0, "skipped"))]}
    assert " | w2 done: no steps | " in line(cycle)


def test_a_failed_validation_and_one_without_rounds() -> None:
    failed = {"validation": {"ok": False, "passes": 0, "count": 3, "rounds": [{}], "started": 1.0, "ended": 301.0}}
    assert " | validation FAILED (0/3 passes, 1 rounds) in 300.0s | " in line(failed)
    none_yet = {"validation": {"ok": False, "passes": 0, "count": 1, "rounds": None, "started": 1.0, "ended": 1.0}}
    assert " | validation FAILED (0/1 passes, 0 rounds) in 0.0s | " in line(none_yet)


@pytest.mark.parametrize("validation", [None, {}])
def test_no_validation_no_part(validation: Any) -> None:
    assert "valid" not in line({"validation": validation})


@pytest.mark.parametrize("cycle", [{"started": 1.0}, {"ended": 2.0}, {"started": 1.0, "ended": None}])
def test_no_duration_without_both_ends(cycle: dict[str, Any]) -> None:
    assert line(cycle).startswith("Batch 3/3 worker [w2, w3] done | ")


def test_a_batch_without_a_result_still_has_its_line() -> None:
    # The batch task failed before returning anything (rescue): the line still names the batch.
    assert line(None, error="boom") == "Batch 3/3 worker [w2, w3] FAILED | error: boom | nodes done 0, skipped 1, left 4"


def test_a_restarted_node_counts_as_done() -> None:
    # A batch with hooks: w1 restarted and verified before w2 failed it; release uncordons w1.
    results = [node("w1", "restarted"), node("w2", "failed"), node("w3", "cordoned"), {"name": "x"}]
    assert line({}, results=results).endswith("nodes done 1, skipped 1, left 3")


def test_a_plan_without_work_skips_nothing() -> None:
    plan = {"hosts": ["w1"], "plan": [{"node_type": "worker", "nodes": ["w1"]}]}
    assert batch_progress({}, plan=plan, batch_number="1", batch_count=1, node_type="worker",
                          batch_nodes=["w1"]) == "Batch 1/1 worker [w1] done | nodes done 0, skipped 0, left 1"


def test_the_line_names_each_nodes_path_under_live_scale() -> None:
    live = dict(node("w2", "done", step("scale_live", 100.0, 101.0)),
                changes={"path": {"path": "live", "capacity": "4 CPU, 8.0 GiB"}})
    fell = dict(node("w3", "done", step("scale_live", 100.0, 101.0, "failed"), step("stop", 102.0, 103.0)),
                changes={"path": {"path": "restart", "reason": "the guest has 2 vCPUs online", "fell_back_from": "live"}})
    text = line({"started": 100.0, "ended": 110.0, "nodes": [live, fell]})
    assert "w2 done live (4 CPU, 8.0 GiB): scale_live 1.0s" in text
    assert "w3 done restarted after the live path failed (the guest has 2 vCPUs online): scale_live 1.0s FAILED" in text
