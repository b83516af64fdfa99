# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""One batch result from the phases of a batch with per-node hooks.

The rollout role runs such a batch as up to three ``cks_node_cycle`` runs (``phase=cordon``,
``restart``, ``uncordon``) with the operator's hooks on each node in between, but reports, prints
and judges it as it does a batch of one run: each node once, its steps in the order they ran, one
outcome, and the batch's error. Pure: results in, a result out.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

FAILED = "failed"


def _hook_message(step: Mapping[str, Any]) -> str:
    return f"node {step.get('node')}: {step.get('name')} failed: {step.get('detail') or 'no message'}"


def _merge_node(name: str, parts: Sequence[Mapping[str, Any]], hooks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One node from its result in each phase run (in phase order) and its hook steps."""
    steps: list[dict[str, Any]] = [dict(step) for part in parts for step in part.get("steps") or []]
    steps += [{key: value for key, value in hook.items() if key != "node"} for hook in hooks]
    # Phases and hooks ran one after the other: their start times give the order (a stable sort
    # keeps a phase's own order for steps recorded within the same instant).
    steps.sort(key=lambda step: float(step.get("started") or 0.0))
    changes: dict[str, Any] = {}
    for part in parts:
        changes.update(part.get("changes") or {})
    error: Optional[dict[str, Any]] = next((dict(p["error"]) for p in parts if p.get("error")), None)
    failed_hook = next((h for h in hooks if h.get("outcome") == FAILED), None)
    if error is None and failed_hook is not None:
        error = {"step": failed_hook.get("name"), "message": failed_hook.get("detail")}
    failed = error is not None or any(p.get("outcome") == FAILED for p in parts)
    ends = [float(s["ended"]) for s in steps if s.get("ended") is not None]
    ends += [float(p["ended"]) for p in parts if p.get("ended") is not None]
    starts = [float(p["started"]) for p in parts if p.get("started")] + [float(h["started"]) for h in hooks]
    return {
        "name": name,
        "node_type": next((p.get("node_type") for p in parts if p.get("node_type")), None),
        "outcome": FAILED if failed else (parts[-1].get("outcome") if parts else "pending"),
        "steps": steps,
        "changes": changes,
        "cordoned_by_others": any(p.get("cordoned_by_others") for p in parts),
        "error": error,
        "started": min(starts) if starts else None,
        "ended": max(ends) if ends else None,
    }


def merge_phases(runs: Iterable[Mapping[str, Any]], hook_steps: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The batch's phase runs (in phase order) and its nodes' hook steps as one batch result."""
    runs = [run for run in runs if run and not run.get("skipped")]
    hooks = list(hook_steps or [])
    batch: list[str] = []
    for run in runs:
        batch.extend(name for name in run.get("batch") or [] if name not in batch)
    batch.extend(str(hook["node"]) for hook in hooks if hook.get("node") not in batch)
    nodes = []
    for name in batch:
        parts = [node for run in runs for node in run.get("nodes") or [] if node.get("name") == name]
        own_hooks = [hook for hook in hooks if hook.get("node") == name]
        if parts or own_hooks:
            nodes.append(_merge_node(name, parts, own_hooks))
    starts = [float(run["started"]) for run in runs if run.get("started")]
    ends = [float(run["ended"]) for run in runs if run.get("ended")]
    ends += [float(hook["ended"]) for hook in hooks if hook.get("ended") is not None]
    merged: dict[str, Any] = {
        "batch": batch,
        "phases": [run.get("phase") for run in runs],
        "nodes": nodes,
        "failed_nodes": [node["name"] for node in nodes if node["outcome"] == FAILED],
        "uncordoned": [dict(u) for run in runs for u in run.get("uncordoned") or []],
        "validation": next((run["validation"] for run in reversed(runs) if run.get("validation")), None),
        "started": min(starts) if starts else None,
        "ended": max(ends) if ends else None,
        "changed": any(bool(run.get("changed")) for run in runs),
    }
    messages = [str(run["msg"]) for run in runs if run.get("msg")]
    messages += [_hook_message(hook) for hook in hooks if hook.get("outcome") == FAILED]
    if messages:
        merged["msg"] = "; ".join(messages)
    if any(run.get("cancelled") for run in runs):
        merged["cancelled"] = True
    return merged
