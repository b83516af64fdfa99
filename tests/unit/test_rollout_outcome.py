"""The ``rollout_outcome`` filter: the closing lines of a rollout, read from its report - how it ended,
which nodes were restarted, not reached, uncordoned, left cordoned, what is still out of date, the
capacity, the last error and where the report is."""

from __future__ import annotations

from typing import Any

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.progress import DONE_OUTCOMES
from ansible_collections.cloudstack.cks.plugins.filter.rollout_outcome import FilterModule, rollout_outcome

AFTER = {"controlnodesoutofdate": 0, "workernodesoutofdate": 1, "etcdnodesoutofdate": 0}
CAPACITY = {"cores": 12, "memory_mb": 24576, "cloudstack_cores": 10, "cloudstack_memory_mb": 20480}


def report(**extra: Any) -> dict[str, Any]:
    return dict({"run_id": "rollout-1", "outcome": "Running", "result": "done", "cancelled": False, "nodes": [], "nodes_not_reached": [],
                 "uncordoned": [], "left_cordoned": [], "last_error": None, "capacity": CAPACITY}, **extra)


def test_a_rollout_that_went_through() -> None:
    nodes = [{"name": "w1", "outcome": "done"}, {"name": "w2", "outcome": "done"}]
    assert rollout_outcome(report(nodes=nodes, uncordoned=[{"node": "w1"}, {"node": "w2"}]), cluster="demo",
                           after=AFTER, report_path="/tmp/report.json") == [
        "Rollout rollout-1 of demo: done; cluster health: Running",
        "Nodes restarted: w1, w2",
        "Not reached: -",
        "Uncordoned: w1, w2",
        "Left cordoned: -",
        "Out of date now: control 0, worker 1, etcd 0",
        "Capacity: 12 cores, 24576 MB (CloudStack reports 10 cores, 20480 MB)",
        "Last error: -",
        "Report: /tmp/report.json",
    ]


def test_a_failed_rollout_names_what_is_left() -> None:
    nodes = [{"name": "w1", "outcome": "restarted"}, {"name": "w2", "outcome": "failed"},
             {"name": "w3", "outcome": "cordoned"}]
    lines = rollout_outcome(report(result="failed at batch 2 of 5", nodes=nodes, nodes_not_reached=["w4", "w5"],
                                   left_cordoned=[{"node": "w2", "why": "Stopped"}], last_error="node w2: stop: 533"),
                            cluster="demo", after=AFTER)
    # A restarted node (a batch with hooks that another node failed) is back on its settings.
    assert lines[1:5] == ["Nodes restarted: w1", "Not reached: w4, w5", "Uncordoned: -", "Left cordoned: w2"]
    # The result leads, with the error; the health beside it (Running here reads as success alone).
    assert lines[0] == "Rollout rollout-1 of demo: failed at batch 2 of 5: node w2: stop: 533; cluster health: Running"
    assert lines[-2:] == ["Last error: node w2: stop: 533", "Report: (not written: set rollout_report_path)"]


def test_a_cancelled_rollout_says_so() -> None:
    lines = rollout_outcome(report(cancelled=True, result="cancelled before batch 3 of 5",
                                   last_error="cancelled by the operator (cancel_rollout) before batch 3"),
                            cluster="c-1", after=AFTER)
    assert lines[0] == "Rollout rollout-1 of c-1: cancelled before batch 3 of 5; cluster health: Running"


def test_a_report_without_a_result_reads_from_the_cancel_flag() -> None:
    # A release that recorded no result (an older report): cancelled or done, never the health alone.
    assert rollout_outcome(report(result=None, cancelled=True), cluster="c", after=AFTER)[0] \
        == "Rollout rollout-1 of c: cancelled; cluster health: Running"
    assert rollout_outcome(report(result=None), cluster="c", after=AFTER)[0] == "Rollout rollout-1 of c: done; cluster health: Running"


def test_a_figure_not_reported_shows_as_nothing() -> None:
    # As Jinja shows a none templated into text.
    lines = rollout_outcome(report(capacity=dict(CAPACITY, cloudstack_memory_mb=None)), cluster="demo",
                            after=dict(AFTER, etcdnodesoutofdate=None))
    assert lines[5] == "Out of date now: control 0, worker 1, etcd "
    assert lines[6] == "Capacity: 12 cores, 24576 MB (CloudStack reports 10 cores,  MB)"


def test_restarted_means_what_the_progress_line_counts_as_done() -> None:
    assert DONE_OUTCOMES == ("done", "restarted")


def test_registered() -> None:
    assert FilterModule().filters() == {"rollout_outcome": rollout_outcome}


def test_work_left_stands_beside_counts_of_nothing_out_of_date() -> None:
    left = [{"node": "w4", "why": ["VM Stopped", "cordoned by the rollout"],
             "message": "w4 (VM Stopped, cordoned by the rollout)"}]
    after = dict(AFTER, workernodesoutofdate=0, work_left=left)
    lines = rollout_outcome(report(result="failed at batch 4 of 4"), cluster="demo", after=after)
    assert lines[5:7] == ["Out of date now: control 0, worker 0, etcd 0",
                          "Work left: w4 (VM Stopped, cordoned by the rollout)"]


def test_live_scale_lines_name_the_live_nodes_and_the_fallbacks() -> None:
    from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.rollout_report import node_paths

    nodes = [{"name": "w1", "outcome": "done", "changes": {"path": {"path": "live", "capacity": "4 CPU, 8.0 GiB"}}},
             {"name": "w2", "outcome": "done",
              "changes": {"path": {"path": "restart", "reason": "CloudStack refused (530)", "fell_back_from": "live"}}},
             {"name": "w3", "outcome": "done", "changes": {"path": {"path": "restart", "reason": "root disk"}}}]
    paths = node_paths(nodes)
    assert paths == {"live": ["w1"], "fell_back": [{"node": "w2", "reason": "CloudStack refused (530)"}]}
    lines = rollout_outcome(report(nodes=nodes, paths=paths), cluster="demo", after=AFTER)
    assert "Scaled live (no restart): w1" in lines
    assert "Live scale fell back to a restart: w2 (CloudStack refused (530))" in lines
    # Without the live path (rollout_live_scale never) the lines are as before.
    assert not [line for line in rollout_outcome(report(nodes=nodes[2:]), cluster="demo", after=AFTER) if "live" in line]
