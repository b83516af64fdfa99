# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The one line the rollout role prints after each batch (the rollout object makes it as the batch ends).

One line, so that a terminal and an AWX job event show the same thing: the batch and its nodes,
each node's steps with their durations, the validation after it, and how many nodes are done,
skipped and left. Pure: the batch's result and the plan in, a string out.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

# A node a batch with hooks restarted and verified before another node failed it is `restarted`:
# back on its settings (release uncordons it), so it counts as done.
DONE_OUTCOMES = ("done", "restarted")


def _seconds(started: Any, ended: Any) -> str:
    return f"{float(ended) - float(started):.1f}"


def _state(cancelled: bool, error: Optional[str]) -> str:
    if cancelled:
        return "cancelled, not started"
    return "FAILED" if error is not None else "done"


def _is_canary(plan: Mapping[str, Any], batch_number: int) -> bool:
    batches: Sequence[Mapping[str, Any]] = plan.get("plan") or []
    index = int(batch_number) - 1
    return 0 <= index < len(batches) and bool(batches[index].get("canary", False))


def _headline(cycle: Mapping[str, Any], plan: Mapping[str, Any], batch_number: int, batch_count: int,
              node_type: str, batch_nodes: Sequence[str], state: str) -> str:
    canary = " (canary)" if _is_canary(plan, batch_number) else ""
    took = ""
    if cycle.get("ended") is not None and cycle.get("started") is not None:
        took = f" in {_seconds(cycle['started'], cycle['ended'])}s"
    return f"Batch {batch_number}/{batch_count} {node_type}{canary} [{', '.join(batch_nodes)}] {state}{took}"


def _step_part(step: Mapping[str, Any]) -> str:
    # A step recorded without an end shows as lasting no time.
    ended = step.get("ended") or step["started"]
    shown = "" if step.get("outcome") == "ok" else " " + str(step.get("outcome")).upper()
    return f"{step.get('name')} {_seconds(step['started'], ended)}s{shown}"


def _path_part(node: Mapping[str, Any]) -> str:
    """With rollout_live_scale auto: how the node went (live, or restarted and why)."""
    path = (node.get("changes") or {}).get("path") or {}
    if path.get("path") == "live":
        return f" live ({path.get('capacity', '')})"
    if path.get("fell_back_from"):
        return f" restarted after the live path failed ({path.get('reason', '')})"
    return ""


def _node_part(node: Mapping[str, Any]) -> str:
    steps = [_step_part(step) for step in node.get("steps") or [] if step.get("outcome") != "skipped"]
    return f"{node.get('name')} {node.get('outcome')}{_path_part(node)}: {', '.join(steps) or 'no steps'}"


def _validation_part(checked: Mapping[str, Any]) -> str:
    verdict = "validated" if checked.get("ok") else "validation FAILED"
    rounds = len(checked.get("rounds") or [])
    return (f"{verdict} ({checked.get('passes')}/{checked.get('count')} passes, {rounds} rounds) "
            f"in {_seconds(checked['started'], checked['ended'])}s")


def _counts_part(plan: Mapping[str, Any], results: Iterable[Mapping[str, Any]]) -> str:
    hosts = list(plan.get("hosts") or [])
    done = sum(1 for node in results if node.get("outcome") in DONE_OUTCOMES)
    # Planned work on nodes never handed to the batches: their type cannot be rolled now.
    skipped = sum(1 for work in plan.get("work") or [] if work.get("name") not in hosts)
    return f"nodes done {done}, skipped {skipped}, left {len(hosts) - done}"


def batch_progress(cycle: Optional[Mapping[str, Any]], plan: Mapping[str, Any], batch_number: int, batch_count: int,
                   node_type: str, batch_nodes: Sequence[str], results: Optional[Iterable[Mapping[str, Any]]] = None,
                   cancelled: bool = False, error: Optional[str] = None) -> str:
    """The progress line of a batch from its result (``{}`` when it has none) and the plan."""
    cycle = cycle or {}
    parts = [_headline(cycle, plan, batch_number, batch_count, node_type, batch_nodes, _state(bool(cancelled), error))]
    uncordoned = cycle.get("uncordoned") or []
    if uncordoned:
        parts.append("uncordoned first (back from a stopped rollout): "
                     + ", ".join(str(entry.get("node")) for entry in uncordoned))
    parts.extend(str(note) for note in (cycle.get("preflight") or {}).get("notes") or [])
    parts.extend(_node_part(node) for node in cycle.get("nodes") or [])
    checked = cycle.get("validation")
    if checked:
        parts.append(_validation_part(checked))
    if error is not None:
        parts.append(f"error: {error}")
    parts.append(_counts_part(plan, results or []))
    return " | ".join(parts).strip()
