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


#: The hook that follows each phase of a hooked batch, on each node.
HOOK_AFTER = {"cordon": "before_drain", "restart": "after_verify"}


def hook_due(phase: str, hooks: Mapping[str, Any], node: str, phase_nodes: Sequence[Mapping[str, Any]],
             stopped: bool) -> str:
    """The hook (``before_drain``, ``after_verify``) to run on ``node`` after ``phase``, "" for none.

    ``hooks``: the hook files by hook ("" for none). ``phase_nodes``: the node results of the phase's
    run. ``stopped``: the batch stopped (a run or a hook failed). before_drain runs on every node once
    the whole batch is cordoned; after_verify on each node its restart phase verified, even when
    another node of the batch failed: what before_drain did is undone wherever the node is back."""
    hook = HOOK_AFTER.get(phase, "")
    if not hook or not hooks.get(hook):
        return ""
    if phase == "cordon":
        return "" if stopped else hook
    restarted = any(n.get("name") == node and n.get("outcome") == "restarted" for n in phase_nodes)
    return hook if restarted else ""


def hook_node(plan_nodes: Sequence[Mapping[str, Any]], node: str, batch_type: Optional[str],
              **batch: Any) -> dict[str, Any]:
    """What a hook is told of its node (``rollout_hook_node``): the node's record in the plan
    (``plan_nodes``; a node the plan does not list has the batch's type and no VM) and ``batch``
    (hook, batch, batch_nodes, cluster, run_id)."""
    record = next((n for n in plan_nodes if n.get("name") == node), {})
    return {"name": node, "node_type": record.get("node_type", batch_type), "vm_name": record.get("vm_name"),
            "vm_id": record.get("vm_id"), "ip_address": record.get("ip_address"), **batch}


def batch_hook_steps(steps_by_node: Sequence[Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Every hook step of a batch's nodes, node by node, in the order each node ran them."""
    return [dict(step) for steps in steps_by_node for step in steps or []]


def hook_failed(steps: Sequence[Mapping[str, Any]]) -> bool:
    """A hook failed (or did not finish) on one of the batch's nodes: the batch stops."""
    return any(step.get("outcome") == FAILED for step in steps)
