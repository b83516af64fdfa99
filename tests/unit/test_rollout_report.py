"""The ``rollout_report`` filter: the report written after the release - each node the batches reached
and what it went through (UTC, RFC 3339), the planned nodes no batch reached, who was uncordoned by
whom, the counts per node type before and after, and what the release returned."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ansible_collections.cloudstack.cks.plugins.filter.rollout_report import FilterModule, rollout_report

T0 = 1764763200.0  # 2025-12-03T12:00:00Z

PLAN = {
    "cluster": {"name": "demo", "id": "c-1", "state": "Running"},
    "hosts": ["c1", "w1", "w2"],
    "plan": [{"node_type": "control", "nodes": ["c1"]}, {"node_type": "worker", "nodes": ["w1", "w2"]}],
    "max_unavailable": 2, "worker_batch_size": 2, "selected": None,
    "node_types": {"control": {"nodes": 1, "out_of_date": 1}, "worker": {"nodes": 3, "out_of_date": 2}},
    "out_of_date": 3,
}
RELEASE = {
    "outcome": "done", "last_error": None, "uncordoned": [{"node": "w1", "why": "Ready with a new boot ID"}],
    "left_cordoned": [], "cordoned_by_others": [{"node": "w3"}], "capacity": {"cores": 8, "memory_mb": 16384},
    "problems": [], "pending_taint_removed": ["w2"], "lb_exclusion_removed": [], "lb_exclusion_kept": [],
}
AFTER = {"node_types": {"control": {"nodes": 1, "out_of_date": 0}, "worker": {"nodes": 3, "out_of_date": 0},
                        "etcd": {"nodes": 0, "out_of_date": 0}}, "out_of_date": 0}


def node(name: str, outcome: str = "done", **extra: Any) -> dict[str, Any]:
    return dict({"name": name, "node_type": "worker", "outcome": outcome, "started": T0, "ended": T0 + 90.0,
                 "steps": [{"name": "drain", "outcome": "ok", "detail": "evicted 2", "started": T0,
                            "ended": T0 + 12.34567}],
                 "changes": {"offering": {"from": "small", "to": "large"}}, "cordoned_by_others": False,
                 "error": None}, **extra)


def report(**extra: Any) -> dict[str, Any]:
    given = dict({"release": RELEASE, "after": AFTER, "run_id": "rollout-1", "started": "2025-12-03T11:59:00Z",
                  "ended": "2025-12-03T12:10:00Z"}, **extra)
    return rollout_report(PLAN, **given)


def test_a_node_reached_with_its_steps_in_utc_and_their_length() -> None:
    shown = report(results=[node("c1", node_type="control")])["nodes"]
    assert shown == [{
        "name": "c1", "node_type": "control", "outcome": "done",
        "started": "2025-12-03T12:00:00Z", "ended": "2025-12-03T12:01:30Z",
        "steps": [{"name": "drain", "outcome": "ok", "detail": "evicted 2", "started": "2025-12-03T12:00:00Z",
                   "ended": "2025-12-03T12:00:12Z", "seconds": 12.346}],
        "changes": {"offering": {"from": "small", "to": "large"}}, "cordoned_by_others": False, "error": None,
    }]


def test_a_step_still_running_and_a_node_without_times() -> None:
    running = {"name": "stop", "outcome": "failed", "started": T0, "ended": None}
    bare = {"name": "w1", "node_type": "worker", "outcome": "failed", "started": None, "ended": 0,
            "steps": [running]}
    shown = report(results=[bare])["nodes"][0]
    # No detail recorded: an empty one; no end: no end and no length.
    assert shown["steps"] == [{"name": "stop", "outcome": "failed", "detail": "", "started": "2025-12-03T12:00:00Z",
                               "ended": None, "seconds": None}]
    assert (shown["started"], shown["ended"]) == (None, None)
    # What the node result does not carry has the report's defaults.
    assert (shown["changes"], shown["cordoned_by_others"], shown["error"]) == ({}, False, None)


def test_the_planned_nodes_no_batch_reached() -> None:
    assert report(results=[node("c1")])["nodes_not_reached"] == ["w1", "w2"]
    assert report(results=[node("c1"), node("w1"), node("w2")])["nodes_not_reached"] == []
    assert report()["nodes_not_reached"] == ["c1", "w1", "w2"]


def test_uncordoned_by_the_batches_first_then_by_the_release() -> None:
    batches = [{"batch": 1, "uncordoned": [{"node": "w8"}]}, {"batch": 2, "uncordoned": []},
               {"batch": 3, "uncordoned": None}, {"batch": 4, "uncordoned": [[{"node": "w9"}], None]}]
    shown = report(batches=batches)
    assert shown["uncordoned"] == [{"node": "w8"}, {"node": "w9"}, {"node": "w1", "why": "Ready with a new boot ID"}]
    assert shown["batches"] == batches


def test_counts_per_node_type_before_and_after() -> None:
    shown = report()
    # The plan knew no etcd nodes: zero of each, so every type is in both.
    assert shown["out_of_date_before"] == {"control": {"nodes": 1, "out_of_date": 1},
                                           "worker": {"nodes": 3, "out_of_date": 2},
                                           "etcd": {"nodes": 0, "out_of_date": 0}}
    assert shown["out_of_date_after"] == AFTER["node_types"]
    assert shown["still_out_of_date"] == 0


def test_counts_from_a_read_without_node_types() -> None:
    assert report(after={"out_of_date": 2})["out_of_date_after"] == {
        "control": {"nodes": 0, "out_of_date": 0}, "worker": {"nodes": 0, "out_of_date": 0},
        "etcd": {"nodes": 0, "out_of_date": 0}}


def test_what_the_release_returned() -> None:
    failed = dict(RELEASE, outcome="failed", last_error="batch 2: node w1: stop failed: 533",
                  left_cordoned=[{"node": "w1"}], problems=["w1 is Stopped"])
    shown = report(release=failed)
    assert (shown["outcome"], shown["last_error"]) == ("failed", "batch 2: node w1: stop failed: 533")
    assert shown["left_cordoned"] == [{"node": "w1"}] and shown["problems"] == ["w1 is Stopped"]
    assert shown["cordoned_by_others"] == [{"node": "w3"}] and shown["capacity"] == RELEASE["capacity"]
    assert shown["pending_taint_removed"] == ["w2"]


def test_a_release_without_the_later_lists_reports_them_empty() -> None:
    older = {key: value for key, value in RELEASE.items()
             if key not in ("pending_taint_removed", "lb_exclusion_removed", "lb_exclusion_kept")}
    shown = report(release=older)
    assert (shown["pending_taint_removed"], shown["lb_exclusion_removed"], shown["lb_exclusion_kept"]) == ([], [], [])


def test_the_run_the_settings_and_a_previous_rollout_that_stopped() -> None:
    taken = {"holder": "rollout-0", "acquire_time": "a", "renew_time": "r"}
    stored = {"lock": {"holder": "rollout-1", "taken_over_from": taken}, "settings": {"worker": {"offering": "large"}},
              "previous_settings": {"worker": {"offering": "small"}}}
    shown = report(stored=stored, hooks={"before_drain": "/h.yml", "after_verify": ""}, cancelled=True,
                   pause_seconds="30")
    assert (shown["run_id"], shown["started"], shown["ended"]) == ("rollout-1", "2025-12-03T11:59:00Z",
                                                                   "2025-12-03T12:10:00Z")
    assert shown["previous_rollout_stopped"] == taken
    assert shown["settings"] == {"worker": {"offering": "large"}}
    assert shown["previous_settings"] == {"worker": {"offering": "small"}}
    assert shown["cancelled"] is True and shown["pause_seconds"] == 30
    assert shown["hooks"] == {"before_drain": "/h.yml", "after_verify": ""}


@pytest.mark.parametrize("stored", [{}, {"lock": None}, {"lock": {"holder": "me", "taken_over_from": None}}])
def test_no_previous_rollout_stopped(stored: dict[str, Any]) -> None:
    shown = report(stored=stored)
    assert shown["previous_rollout_stopped"] is None
    assert (shown["settings"], shown["previous_settings"]) == ({}, {})


def test_the_plan_as_planned() -> None:
    shown = report()
    assert shown["cluster"] == PLAN["cluster"] and shown["batches_planned"] == PLAN["plan"]
    assert (shown["max_unavailable"], shown["worker_batch_size"], shown["selected"]) == (2, 2, None)
    # What the plan leaves out when it has none of it.
    assert (shown["canary"], shown["not_selected"], shown["not_rolled"]) == (False, [], {})
    assert (shown["cancelled"], shown["pause_seconds"], shown["hooks"], shown["batches"]) == (False, 0, {}, [])
    planned = dict(PLAN, canary=True, not_selected=["w9"], unrollable={"etcd": "no quorum"})
    shown = rollout_report(planned, release=RELEASE, after=AFTER, run_id="r", ended="e")
    assert (shown["canary"], shown["not_selected"], shown["not_rolled"]) == (True, ["w9"], {"etcd": "no quorum"})
    assert shown["started"] is None


def test_every_key_and_nothing_but_json() -> None:
    shown = report(results=[node("w1")], batches=[{"batch": 1, "uncordoned": []}])
    assert list(shown) == [
        "cluster", "run_id", "started", "ended", "outcome", "result", "cancelled", "last_error", "previous_rollout_stopped",
        "settings", "previous_settings", "max_unavailable", "worker_batch_size", "canary", "pause_seconds", "hooks",
        "selected", "not_selected", "batches_planned", "batches", "nodes", "nodes_not_reached", "paths", "uncordoned",
        "left_cordoned", "cordoned_by_others", "pending_taint_removed", "lb_exclusion_removed", "lb_exclusion_kept",
        "out_of_date_before", "out_of_date_after", "still_out_of_date", "work_left", "not_rolled", "capacity", "problems"]
    assert json.loads(json.dumps(shown)) == shown


def test_registered() -> None:
    assert FilterModule().filters() == {"rollout_report": rollout_report}
