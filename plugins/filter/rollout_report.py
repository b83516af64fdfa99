# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The ``rollout_report`` filter: the report the rollout role writes after its release.

What each node went through, what changed, the counts before and after, what was not rolled and
why, the last error and the capacity recount, from the plan, the batches' results and the release.
Pure: the clock's reading for ``ended`` is passed in; times are UTC, RFC 3339.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_report
short_description: The report of a rollout, from its plan, its batches and its release
version_added: 0.1.0
author:
  - cloudstack.cks contributors (@cloudstack-cks)
description:
  - Used by the C(cloudstack.cks.rollout) role after the release, for the report it writes to C(rollout_report_path)
    and the outcome it shows. Takes the plan (C(cloudstack.cks.cks_node_outdated) before the first batch) and returns
    the report as a dict.
  - Each node the batches reached with its outcome, its steps (with RFC 3339 UTC times and their length in seconds),
    its changes and its error; the planned nodes no batch reached; the nodes uncordoned by the batches (back from a
    stopped rollout) and then by the release; the nodes and out-of-date nodes per node type before (the plan) and after
    (O(after)); and what the release returned (outcome, last error, nodes left cordoned, capacity, problems).
options:
  _input:
    description: The plan, as C(cloudstack.cks.cks_node_outdated) returned it before the first batch.
    type: dict
    required: true
  release:
    description: The C(release) that C(cloudstack.cks.cks_node_cycle) returned with O(cloudstack.cks.cks_node_cycle#module:mode=release).
    type: dict
    required: true
  after:
    description:
      - What is still out of date after the release, as C(cloudstack.cks.cks_node_cycle) with C(mode=release)
        returns it (its C(after)), in the keys C(cloudstack.cks.cks_node_outdated) returns them.
    type: dict
    required: true
  run_id:
    description: The id of this rollout run (the lock holder).
    type: str
    required: true
  started:
    description: When this rollout started, RFC 3339 UTC.
    type: str
  ended:
    description: When this rollout ended (now), RFC 3339 UTC.
    type: str
    required: true
  results:
    description: The node results of every batch that ran, in the order the batches ran (the role's C(rollout_results)).
    type: list
    elements: dict
    default: []
  batches:
    description: One record per batch that ran (the role's C(rollout_batches_run)), each with its C(uncordoned).
    type: list
    elements: dict
    default: []
  stored:
    description:
      - What C(cloudstack.cks.cks_node_settings) returned when it stored the settings and took the lock - C(settings),
        C(previous_settings) and C(lock), whose C(taken_over_from) names a previous rollout that stopped without release.
    type: dict
    default: {}
  hooks:
    description: The per-node hook files, C(before_drain) and C(after_verify).
    type: dict
    default: {}
  cancelled:
    description: Whether the rollout was cancelled.
    type: bool
    default: false
  pause_seconds:
    description: The pause between batches, in seconds.
    type: int
    default: 0
"""

EXAMPLES = r"""
- name: Put the rollout report together
  ansible.builtin.set_fact:
    rollout_report: >-
      {{ rollout_plan | cloudstack.cks.rollout_report(release=rollout_release.release, after=rollout_release.after,
         run_id=rollout_run_id, started=rollout_started, ended=now(utc=true, fmt='%Y-%m-%dT%H:%M:%SZ'),
         results=rollout_results, batches=rollout_batches_run, stored=rollout_stored, hooks=rollout_hooks) }}
"""

RETURN = r"""
_value:
  description:
    - The report - C(cluster), C(run_id), C(started), C(ended), C(outcome) (the health), C(result) (how it ended), C(cancelled), C(last_error),
      C(previous_rollout_stopped), C(settings), C(previous_settings), C(max_unavailable), C(worker_batch_size),
      C(canary), C(pause_seconds), C(hooks), C(selected), C(not_selected), C(batches_planned), C(batches), C(nodes),
      C(nodes_not_reached), C(uncordoned), C(left_cordoned), C(cordoned_by_others), C(pending_taint_removed),
      C(lb_exclusion_removed), C(lb_exclusion_kept), C(out_of_date_before), C(out_of_date_after), C(still_out_of_date),
      C(not_rolled), C(capacity) and C(problems).
  type: dict
"""

import time
from typing import Any, Iterable, Mapping, Optional, Sequence

RFC3339 = "%Y-%m-%dT%H:%M:%SZ"
NODE_TYPES = ("control", "worker", "etcd")


def _utc(seconds: Any) -> str:
    return time.strftime(RFC3339, time.gmtime(float(seconds)))


def _step(step: Mapping[str, Any]) -> dict[str, Any]:
    ended = step.get("ended")
    return {
        "name": step.get("name"),
        "outcome": step.get("outcome"),
        "detail": step.get("detail", ""),
        "started": _utc(step["started"]),
        "ended": _utc(ended) if ended is not None else None,
        "seconds": round(float(ended) - float(step["started"]), 3) if ended is not None else None,
    }


def _node(node: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "name": node.get("name"),
        "node_type": node.get("node_type"),
        "outcome": node.get("outcome"),
        "started": _utc(node["started"]) if node.get("started") else None,
        "ended": _utc(node["ended"]) if node.get("ended") else None,
        "steps": [_step(step) for step in node.get("steps") or []],
        "changes": node.get("changes", {}),
        "cordoned_by_others": node.get("cordoned_by_others", False),
        "error": node.get("error"),
    }


def _counts(outdated: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Nodes and out-of-date nodes per node type, as cks_node_outdated counted them."""
    by_type = outdated.get("node_types") or {}
    counts = {}
    for node_type in NODE_TYPES:
        found = by_type.get(node_type) or {}
        counts[node_type] = {"nodes": found.get("nodes", 0), "out_of_date": found.get("out_of_date", 0)}
    return counts


def _flat(items: Iterable[Any]) -> list[Any]:
    """Lists within lists as one list, nulls left out (as Ansible's ``flatten``)."""
    flat: list[Any] = []
    for item in items:
        if item is None:
            continue
        if isinstance(item, (list, tuple)):
            flat.extend(_flat(item))
        else:
            flat.append(item)
    return flat


def _uncordoned(batches: Sequence[Mapping[str, Any]], release: Mapping[str, Any]) -> list[Any]:
    # The batches uncordon nodes back from a stopped rollout before their own; release the rest.
    by_batches = _flat(batch.get("uncordoned") for batch in batches if batch.get("uncordoned"))
    return by_batches + list(release.get("uncordoned") or [])


def _not_reached(plan: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    reached = [node["name"] for node in nodes]
    return [host for host in plan.get("hosts") or [] if host not in reached]


def rollout_report(plan: Mapping[str, Any], release: Mapping[str, Any], after: Mapping[str, Any], run_id: str,
                   ended: str, started: Optional[str] = None, results: Optional[Iterable[Mapping[str, Any]]] = None,
                   batches: Optional[Sequence[Mapping[str, Any]]] = None, stored: Optional[Mapping[str, Any]] = None,
                   hooks: Optional[Mapping[str, Any]] = None, cancelled: bool = False,
                   pause_seconds: int = 0) -> dict[str, Any]:
    """The rollout report: the plan, each batch's node results and the release, in one dict."""
    stored = stored or {}
    batches = list(batches or [])
    nodes = [_node(node) for node in results or []]
    lock = stored.get("lock")
    return {
        "cluster": plan.get("cluster"),
        "run_id": run_id,
        "started": started,
        "ended": ended,
        "outcome": release.get("outcome"),
        "result": release.get("result"),
        "cancelled": bool(cancelled),
        "last_error": release.get("last_error"),
        "previous_rollout_stopped": lock.get("taken_over_from") if lock else None,
        "settings": stored.get("settings", {}),
        "previous_settings": stored.get("previous_settings", {}),
        "max_unavailable": plan.get("max_unavailable"),
        "worker_batch_size": plan.get("worker_batch_size"),
        "canary": plan.get("canary", False),
        "pause_seconds": int(pause_seconds),
        "hooks": dict(hooks or {}),
        "selected": plan.get("selected"),
        "not_selected": plan.get("not_selected", []),
        "batches_planned": plan.get("plan"),
        "batches": batches,
        "nodes": nodes,
        "nodes_not_reached": _not_reached(plan, nodes),
        "uncordoned": _uncordoned(batches, release),
        "left_cordoned": release.get("left_cordoned"),
        "cordoned_by_others": release.get("cordoned_by_others"),
        "pending_taint_removed": release.get("pending_taint_removed", []),
        "lb_exclusion_removed": release.get("lb_exclusion_removed", []),
        "lb_exclusion_kept": release.get("lb_exclusion_kept", []),
        "out_of_date_before": _counts(plan),
        "out_of_date_after": _counts(after),
        "still_out_of_date": after.get("out_of_date"),
        "not_rolled": plan.get("unrollable", {}),
        "capacity": release.get("capacity"),
        "problems": release.get("problems"),
    }


class FilterModule:
    """cloudstack.cks filters."""

    def filters(self) -> dict[str, Any]:
        return {"rollout_report": rollout_report}
