# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The ``plan_summary`` filter: the plan as the rollout role shows it before the first batch.

One line per item, for debug's msg: the batches and what changes on each node, what is not rolled
and why, what a selection left out, and in a dry run what would block each drain now. Pure: the
plan in, a list of lines out.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: plan_summary
short_description: The lines that show a rollout's plan
version_added: 0.1.0
author:
  - cloudstack.cks contributors (@cloudstack-cks)
description:
  - Used by the C(cloudstack.cks.rollout) role to show the plan before the first batch. Takes the plan as
    C(cloudstack.cks.cks_node_outdated) returns it and returns one line per item.
  - In a dry run (O(check_mode)) first a line saying that nothing is changed; when this rollout took over the lock of
    one that stopped without release, a line naming that rollout and when it took and last renewed its lock.
  - Then the cluster and the counts (batches, nodes to restart, nodes to uncordon without a restart), the out-of-date
    counts per node type and the workers' batch size, each batch with each of its nodes and what changes on it (from ->
    to) or V(no change), with rollout_live_scale V(auto) its path (V(live) or V(restart), and why), and, from a dry
    run's drain check, what would block the node's drain now.
  - Last the node types not rolled and why, the nodes a selection left out, the nodes uncordoned without a restart,
    with rollout_restart V(selected) or V(all) the restart round (a new one, or the one resumed and the nodes it
    restarted already, not restarted again), what the key could not check (C(not_checked), one V(Not checked) line each),
    the per-node hooks, the pause between batches, and that nothing is in the way of the drains when the drain check
    found nothing.
options:
  _input:
    description:
      - The plan, as C(cloudstack.cks.cks_node_outdated) returns it - C(cluster), C(plan), C(hosts), C(to_release),
        C(work), the C(*nodesoutofdate) counts, C(worker_batch_size), C(canary), C(unrollable), C(not_selected) and,
        after a drain check, C(drain_blockers).
    type: dict
    required: true
  check_mode:
    description: Whether this is a dry run.
    type: bool
    default: false
  lock:
    description:
      - The rollout lock as C(cloudstack.cks.cks_node_settings) returns it; its C(taken_over_from) (C(holder),
        C(acquire_time), C(renew_time)) names the rollout whose expired lock this one took over. V(null) when there is
        no lock.
    type: dict
  hooks:
    description: The per-node hook files, C(before_drain) and C(after_verify); an empty one is no hook.
    type: dict
    default: {}
  pause_seconds:
    description: The pause between batches, in seconds, as the operator gave it.
    type: raw
    default: 0
"""

EXAMPLES = r"""
- name: Show the plan
  ansible.builtin.debug:
    msg: >-
      {{ rollout_plan | cloudstack.cks.plan_summary(check_mode=ansible_check_mode, lock=rollout_stored.lock,
         hooks=rollout_hooks, pause_seconds=rollout_pause_seconds) }}
"""

RETURN = r"""
_value:
  description:
    - 'The lines, for example C(Cluster demo (Running\): 3 batch(es\), 4 node(s\) to restart, 0 to uncordon without a
      restart) and C(  demo-node-1: offering small -> large).'
  type: list
  elements: str
"""

from typing import Any, Iterable, Mapping, Optional, Sequence

DRY_RUN = ("DRY RUN (check mode): nothing is changed - the lock is not taken, the settings are not stored, no node is "
           "touched, no report is written")
DRAINS_CLEAR = ("Drains: nothing in the way now (no PodDisruptionBudget allowing 0 disruptions over pods of a planned "
                "node, no pod the drain would refuse)")


def _as_int(value: Any) -> int:
    """An operator's number as Jinja's ``int`` filter reads it: ``0`` when it is none."""
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return 0


def _taken_over(taken: Mapping[str, Any]) -> str:
    return (f"The previous rollout {taken.get('holder')} stopped without release (took the lock at "
            f"{taken.get('acquire_time')}, last renewed {taken.get('renew_time')}): its lock has expired and this "
            "rollout took it over; its work left is resumed")


def _counts(plan: Mapping[str, Any]) -> list[str]:
    cluster = plan.get("cluster") or {}
    canary = ", the first one alone (canary)" if plan.get("canary", False) else ""
    return [
        f"Cluster {cluster.get('name')} ({cluster.get('state')}): {len(plan.get('plan') or [])} batch(es), "
        f"{len(plan.get('hosts') or [])} node(s) to restart, {len(plan.get('to_release') or [])} to uncordon "
        "without a restart",
        f"Out of date: control {plan.get('controlnodesoutofdate')}, worker {plan.get('workernodesoutofdate')}, "
        f"etcd {plan.get('etcdnodesoutofdate')}; workers {plan.get('worker_batch_size')} at a time{canary}",
    ]


def _batches(plan: Mapping[str, Any]) -> list[str]:
    why = {work.get("name"): work.get("why") for work in plan.get("work") or []}
    blockers: Sequence[Mapping[str, Any]] = plan.get("drain_blockers") or []
    batches: Sequence[Mapping[str, Any]] = plan.get("plan") or []
    # rollout_live_scale auto: each node's path (cks_node_outdated's nodes[].path).
    paths = {n.get("name"): n.get("path") for n in plan.get("nodes") or [] if isinstance(n, Mapping) and n.get("path")}
    lines = []
    for number, batch in enumerate(batches, start=1):
        canary = " (canary)" if batch.get("canary", False) else ""
        nodes: Sequence[str] = batch.get("nodes") or []
        lines.append(f"Batch {number}/{len(batches)} {batch.get('node_type')}{canary}: {', '.join(nodes)}")
        for node in nodes:
            lines.append(f"  {node}: {why.get(node) or 'no change'}")
            if node in paths:
                path: Mapping[str, Any] = paths[node] or {}
                lines.append(f"  {node} path: {path.get('path')} ({path.get('reason')})")
            lines.extend(f"  {node} drain: {message}" for found in blockers
                         if found.get("batch") == number and found.get("node") == node
                         for message in found.get("messages") or [])
    return lines


def _etcd_checks(checks: Mapping[str, Any]) -> list[str]:
    # How each node type's etcd check would be made (cks_node_outdated's etcd_checks).
    if not checks:
        return []
    named = [f"{node_type} {checks[node_type]}" for node_type in ("control", "etcd", "worker") if node_type in checks]
    return ["etcd checked: " + ", ".join(named)]


def _joined(title: str, names: Optional[Iterable[str]]) -> list[str]:
    names = list(names or [])
    return [title + ", ".join(names)] if names else []


def _hooks(hooks: Mapping[str, Any]) -> list[str]:
    if not any(hooks.values()):
        return []
    return [f"Per-node hooks: before_drain {hooks.get('before_drain') or '-'}, after_verify "
            f"{hooks.get('after_verify') or '-'} (each batch in three cks_node_cycle runs around them)"]


def plan_summary(plan: Mapping[str, Any], check_mode: bool = False, lock: Optional[Mapping[str, Any]] = None,
                 hooks: Optional[Mapping[str, Any]] = None, pause_seconds: Any = 0) -> list[str]:
    """The lines that show the plan, in the order an operator reads them."""
    lines = [DRY_RUN] if check_mode else []
    taken = (lock or {}).get("taken_over_from")
    if taken:
        lines.append(_taken_over(taken))
    lines += _counts(plan)
    lines += _etcd_checks(plan.get("etcd_checks") or {})
    lines += _batches(plan)
    lines += [f"Not rolled, {node_type}: {reason}" for node_type, reason in (plan.get("unrollable") or {}).items()]
    lines += _joined("Not selected (rollout_select), still out of date: ", plan.get("not_selected"))
    lines += _joined("Uncordoned without a restart (back since a rollout stopped): ", plan.get("to_release"))
    # rollout_restart selected or all: the round begun, or the one resumed and what it restarted already.
    lines += [str(plan["restart_round"]["words"])] if (plan.get("restart_round") or {}).get("words") else []
    # What the key could not read is named, never guessed: the checks it leaves to the batches.
    lines += [f"Not checked: {note}" for note in plan.get("not_checked") or []]
    # The cluster autoscaler, when on: what the rollout does about it (start.py words it).
    lines += [str(plan["autoscaler"]["words"])] if (plan.get("autoscaler") or {}).get("words") else []
    lines += _hooks(hooks or {})
    if _as_int(pause_seconds) > 0 and len(plan.get("plan") or []) > 1:
        lines.append(f"Pause between batches: {pause_seconds} s")
    # Only a dry run checks the drains: no drain_blockers at all is no statement about them.
    if "drain_blockers" in plan and not plan["drain_blockers"]:
        lines.append(DRAINS_CLEAR)
    return lines


class FilterModule:
    """cloudstack.cks filters."""

    def filters(self) -> dict[str, Any]:
        return {"plan_summary": plan_summary}
