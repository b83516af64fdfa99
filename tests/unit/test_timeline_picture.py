"""The rollout's timeline picture, drawn from the report alone (pure): what it shows and where."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.timeline_picture import (
    PLANNER,
    node_steps,
    node_waits,
    picture_path,
    timeline_svg,
)

SVG = "{http://www.w3.org/2000/svg}"


def step(name: str, started: str, seconds: float, outcome: str = "ok") -> dict[str, Any]:
    return {"name": name, "outcome": outcome, "detail": "", "started": started, "ended": started, "seconds": seconds}


def report() -> dict[str, Any]:
    throttled = {"cloudstack": {"throttled": 3, "throttled_seconds": 4.5}, "kubernetes": {"throttled": 0}}
    return {
        "cluster": {"id": "c1", "name": "prod"}, "run_id": "run-7", "outcome": "Running",
        "started": "2026-12-07T10:00:00Z", "ended": "2026-12-07T10:02:00Z", "last_error": None,
        "batches": [
            {"batch": 1, "node_type": "control", "nodes": ["prod-control-1"], "outcome": "done",
             "validation": {"started": 1796637630.0, "ended": 1796637632.5}},
            {"batch": 2, "node_type": "worker", "nodes": ["prod-node-1", "prod-node-2"], "outcome": "failed",
             "retries": throttled},
        ],
        "nodes": [
            {"name": "prod-control-1", "outcome": "done", "changes": {}, "steps": [
                step("cordon", "2026-12-07T10:00:01Z", 0.1), step("drain", "2026-12-07T10:00:01Z", 2.0),
                step("stop", "2026-12-07T10:00:03Z", 10.0), step("change_offering", "2026-12-07T10:00:13Z", 0.2),
                step("resize_root_disk", "2026-12-07T10:00:13Z", 0.0, "skipped"),
                step("start", "2026-12-07T10:00:13Z", 12.0), step("verify", "2026-12-07T10:00:25Z", 4.0),
                step("uncordon", "2026-12-07T10:00:29Z", 0.1)]},
            {"name": "prod-node-1", "outcome": "done", "path": "live",
             "changes": {"drain": {"waited_for": [{"pod": "default/web-1", "pdb": "default/web", "after": 1.0,
                                                   "seconds": 6.0}]},
                         "start": {"waited_for_planner": 5.0}},
             "steps": [step("drain", "2026-12-07T10:00:40Z", 8.0), step("stop", "2026-12-07T10:00:48Z", 10.0),
                       step("start", "2026-12-07T10:00:58Z", 20.0)]},
            {"name": "prod-node-2", "outcome": "failed",
             "error": {"step": "drain", "pods_left": [{"pod": "default/db-0", "pdb": ["default/db"], "answer": "429"}]},
             "changes": {}, "steps": [step("drain", "2026-12-07T10:00:40Z", 60.0, "failed")]},
        ],
    }


def texts(svg: str) -> list[str]:
    root = ET.fromstring(svg)  # well-formed XML, or this raises
    return ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


def test_the_picture_goes_beside_the_report() -> None:
    assert picture_path("/var/tmp/prod-rollout.json") == "/var/tmp/prod-rollout.svg"
    assert picture_path("report") == "report.svg"


def test_each_batch_each_node_with_its_path_and_each_wait_named() -> None:
    shown = texts(timeline_svg(report()))
    joined = "\n".join(shown)
    assert shown[0] == "Rollout run-7 of cluster prod: Running"
    assert "batch 1: control, 1 node, done" in shown and "batch 2: worker, 2 nodes, failed" in shown
    assert "prod-control-1 · restart" in shown and "prod-node-1 · live" in shown
    assert "prod-node-2 · restart (failed)" in shown
    assert "waited for PodDisruptionBudget default/web 6.0 s; " + PLANNER + " 5.0 s" in shown
    assert "waited for PodDisruptionBudget default/db (until the deadline) 60.0 s" in shown
    assert "waited for the API limit: CloudStack refused 3 call(s), 4.5 s waited" in joined
    # Batches and nodes top to bottom in the report's order; the time axis starts at 0 s.
    order = [t for t in shown if t.startswith(("batch ", "prod-"))]
    assert order == ["batch 1: control, 1 node, done", "prod-control-1 · restart", "batch 2: worker, 2 nodes, failed",
                     "prod-node-1 · live", "prod-node-2 · restart (failed)"]
    assert "0 s" in shown


def test_steps_follow_one_another_and_skipped_steps_are_not_drawn() -> None:
    node = report()["nodes"][0]
    steps = node_steps(node)
    assert [s[0] for s in steps] == ["cordon", "drain", "stop", "change_offering", "start", "verify", "uncordon"]
    # Whole seconds in the report, exact durations: one after another, each within its own second.
    assert all(a[3] <= b[2] + 1e-9 for a, b in zip(steps, steps[1:]))
    seconds = [1796637601, 1796637601, 1796637603, 1796637613, 1796637613, 1796637625, 1796637629]
    assert all(second <= start < second + 1 for second, (_n, _k, start, _e) in zip(seconds, steps)), steps
    assert [s[1] for s in steps][:3] == ["cordon", "drain", "stop"]


def test_a_wait_is_placed_inside_the_step_it_held_up() -> None:
    node = report()["nodes"][1]
    steps = node_steps(node)
    drain, start = steps[0], steps[2]
    (pdb, planner) = node_waits(node, steps)
    assert pdb == ("PodDisruptionBudget default/web", drain[2] + 1.0, drain[2] + 7.0)
    assert planner == (PLANNER, start[2], start[2] + 5.0)
    svg = ET.fromstring(timeline_svg(report()))
    titles = ["".join(t.itertext()) for t in svg.iter(f"{SVG}title")]
    assert "waited for PodDisruptionBudget default/web: 6.0 s" in titles and "prod-node-1 drain: 8.0 s" in titles


def test_an_empty_report_is_still_a_picture() -> None:
    shown = texts(timeline_svg({"cluster": "prod", "nodes": [], "batches": []}))
    assert shown[0] == "Rollout of cluster prod: ?" and any("0 nodes in 0 batches" in t for t in shown)
