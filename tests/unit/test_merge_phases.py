"""The ``merge_phases`` filter: a batch with per-node hooks (up to three cks_node_cycle runs and the
hooks between them) comes out as one batch result, each node once with its steps in order."""

from __future__ import annotations

from typing import Any, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.phases import merge_phases


def step(name: str, started: float, outcome: str = "ok", detail: str = "") -> dict[str, Any]:
    return {"name": name, "started": started, "ended": started + 0.5, "outcome": outcome, "detail": detail}


def node(name: str, outcome: str, steps: list[dict[str, Any]], error: Optional[dict[str, Any]] = None,
         changes: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    return {"name": name, "node_type": "worker", "outcome": outcome, "steps": steps, "changes": changes or {},
            "cordoned_by_others": False, "error": error, "started": steps[0]["started"] if steps else 0.0,
            "ended": steps[-1]["ended"] if steps else None}


def run(phase: str, nodes: list[dict[str, Any]], started: float, ended: float, **extra: Any) -> dict[str, Any]:
    return dict({"batch": ["w1", "w2"], "phase": phase, "nodes": nodes, "uncordoned": [], "validation": None,
                 "started": started, "ended": ended, "changed": True, "failed": False}, **extra)


def hook(node_name: str, name: str, started: float, outcome: str = "ok", detail: str = "/hooks/lb.yml") -> dict[str, Any]:
    return dict(step(name, started, outcome, detail), node=node_name)


CORDON = run("cordon", [node("w1", "cordoned", [step("annotate", 1.0), step("cordon", 1.1)],
                             changes={"offering": {"from": "m", "to": "l"}}),
                        node("w2", "cordoned", [step("annotate", 1.0), step("cordon", 1.2)])],
             1.0, 1.5, uncordoned=[{"node": "w9", "why": "Ready with a new boot ID"}])
RESTART = run("restart", [node("w1", "restarted", [step("drain", 3.0), step("stop", 3.5), step("start", 4.0),
                                                   step("verify", 4.5)],
                               changes={"offering": {"from": "m", "to": "l"}, "drain": {"evicted": ["p"]}}),
                          node("w2", "restarted", [step("drain", 3.0), step("verify", 4.6)])], 3.0, 5.2)
UNCORDON = run("uncordon", [node("w1", "done", [step("recheck", 7.0), step("uncordon", 7.1)]),
                            node("w2", "done", [step("recheck", 7.0), step("uncordon", 7.2)])], 7.0, 8.0,
               validation={"ok": True, "passes": 1, "count": 1, "rounds": [{}], "started": 7.5, "ended": 7.9})
HOOKS = [hook("w1", "hook_before_drain", 2.0), hook("w2", "hook_before_drain", 2.1),
         hook("w1", "hook_after_verify", 6.0), hook("w2", "hook_after_verify", 6.1)]


def test_each_node_once_with_every_step_in_the_order_it_ran() -> None:
    merged = merge_phases([CORDON, RESTART, UNCORDON], HOOKS)
    assert [n["name"] for n in merged["nodes"]] == ["w1", "w2"]
    w1 = merged["nodes"][0]
    assert [s["name"] for s in w1["steps"]] == ["annotate", "cordon", "hook_before_drain", "drain", "stop", "start",
                                                "verify", "hook_after_verify", "recheck", "uncordon"]
    assert "node" not in w1["steps"][2] and w1["steps"][2]["detail"] == "/hooks/lb.yml"
    assert w1["outcome"] == "done" and w1["error"] is None
    assert w1["changes"] == {"offering": {"from": "m", "to": "l"}, "drain": {"evicted": ["p"]}}
    assert (w1["started"], w1["ended"]) == (1.0, 7.6)
    assert merged["phases"] == ["cordon", "restart", "uncordon"]
    assert merged["failed_nodes"] == [] and "msg" not in merged and "cancelled" not in merged
    # The batch: from the cordon run's start to the last run's end; the nodes back from a stopped
    # rollout (cordon run) and the validation (uncordon run) as a whole-batch run has them.
    assert (merged["started"], merged["ended"]) == (1.0, 8.0)
    assert merged["uncordoned"] == [{"node": "w9", "why": "Ready with a new boot ID"}]
    assert merged["validation"]["ok"] and merged["changed"] is True


def test_a_failed_before_drain_hook_fails_its_node_and_the_batch() -> None:
    hooks = [hook("w1", "hook_before_drain", 2.0),
             hook("w2", "hook_before_drain", 2.1, "failed", "/hooks/lb.yml: task 'Take it out': HTTP 500")]
    merged = merge_phases([CORDON], hooks)
    w1, w2 = merged["nodes"]
    # w1 only got as far as its cordon and hook: cordoned, not done (release puts it back).
    assert (w1["outcome"], w2["outcome"]) == ("cordoned", "failed")
    assert w2["error"] == {"step": "hook_before_drain", "message": "/hooks/lb.yml: task 'Take it out': HTTP 500"}
    assert [s["name"] for s in w2["steps"]] == ["annotate", "cordon", "hook_before_drain"]
    assert merged["failed_nodes"] == ["w2"]
    assert merged["msg"] == "node w2: hook_before_drain failed: /hooks/lb.yml: task 'Take it out': HTTP 500"
    assert merged["validation"] is None and merged["ended"] == 2.6


def test_a_failed_phase_and_a_failed_hook_are_both_in_the_message() -> None:
    failed = run("restart", [node("w1", "failed", [step("drain", 3.0), step("start", 4.0, "failed", "533")],
                                  error={"step": "start", "message": "533"}),
                             node("w2", "restarted", [step("drain", 3.0), step("verify", 4.6)])], 3.0, 5.0,
                 msg="node w1: start failed: 533")
    hooks = HOOKS[:2] + [hook("w2", "hook_after_verify", 6.1, "failed", "/hooks/in.yml: boom")]
    merged = merge_phases([CORDON, failed], hooks)
    assert merged["msg"] == "node w1: start failed: 533; node w2: hook_after_verify failed: /hooks/in.yml: boom"
    w1, w2 = merged["nodes"]
    assert w1["outcome"] == "failed" and w1["error"] == {"step": "start", "message": "533"}
    assert w2["outcome"] == "failed" and w2["error"]["step"] == "hook_after_verify"
    assert merged["failed_nodes"] == ["w1", "w2"]


def test_a_cancelled_cordon_run_and_skipped_runs() -> None:
    cancelled = {"batch": ["w1"], "failed": False, "msg": "node w1: preflight failed: the rollout was cancelled",
                 "cancelled": True, "changed": False}
    merged = merge_phases([cancelled, {"skipped": True, "changed": False}], [])
    assert merged["cancelled"] is True and merged["msg"].endswith("cancelled")
    assert merged["nodes"] == [] and merged["phases"] == [None]
    assert merged["started"] is None and merged["ended"] is None
