# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""A node's hook steps: the record the rollout role keeps of each per-node hook it runs.

A hook is the operator's task file (``rollout_hook_before_drain``, ``rollout_hook_after_verify``) run
on each node of a batch between the phases of its ``cks_node_cycle`` runs. Each node records its
hooks as steps shaped like the module's own (``name``, ``started``, ``ended``, ``outcome``,
``detail``, plus ``node``), so ``merge_phases`` reports a hooked batch as it reports a batch of one
run. The step is written as failed before the hook starts: a hook task delegated to a host Ansible
cannot reach takes the node out of the play with no rescue, and the batch must still see that the
hook did not finish. Pure: steps in, steps out; the clock is the caller's.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

OK = "ok"
FAILED = "failed"
OUTCOMES = (OK, FAILED)
UNFINISHED = "did not finish (the node left the play: a task delegated to an unreachable host?)"


class HookStepError(ValueError):
    """The role asked to end a hook step that was never begun, or with an outcome that is not one."""


def hook_begun(steps: Sequence[Mapping[str, Any]], node: str, hook: str, path: str, now: float) -> list[dict[str, Any]]:
    """``steps`` with the hook ``hook`` (its task file ``path``) begun on ``node`` at ``now``.

    Recorded as failed until ``hook_ended`` says otherwise (see the module's docstring)."""
    return [dict(step) for step in steps] + [{
        "node": node, "name": f"hook_{hook}", "started": float(now), "ended": None, "outcome": FAILED,
        "detail": f"{path}: {UNFINISHED}"}]


def hook_ended(steps: Sequence[Mapping[str, Any]], outcome: str, path: str, now: float,
               failed_task: Optional[str] = None, error: Optional[str] = None) -> list[dict[str, Any]]:
    """``steps`` with the last one (the hook begun last on this node) ended at ``now``.

    ``ok``: its detail is the task file. ``failed``: the task that failed and what it said."""
    if outcome not in OUTCOMES:
        raise HookStepError(f"outcome must be one of {', '.join(OUTCOMES)}, not {outcome!r}")
    if not steps or steps[-1].get("ended") is not None:
        raise HookStepError("no hook step was begun on this node (hook_begun first)")
    last = dict(steps[-1])
    last["ended"] = float(now)
    last["outcome"] = outcome
    if outcome == OK:
        last["detail"] = path
    else:
        last["detail"] = f'{path}: task "{failed_task or "?"}": {error or "failed"}'
    return [dict(step) for step in steps[:-1]] + [last]
