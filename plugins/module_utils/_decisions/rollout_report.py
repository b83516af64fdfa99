# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The rollout report: what each node went through, what changed, the counts before and after, what was
not rolled and why, the last error and the capacity recount, from the plan, the batches' results and
the release. Pure: the clock's reading for ``ended`` is passed in; times are UTC, RFC 3339.

The release (``_services.release``) writes it; the ``rollout_report`` filter gives it to playbooks.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._common.stamps import utc_stamp

NODE_TYPES = ("control", "worker", "etcd")


def _step(step: Mapping[str, Any]) -> dict[str, Any]:
    ended = step.get("ended")
    return {
        "name": step.get("name"),
        "outcome": step.get("outcome"),
        "detail": step.get("detail", ""),
        "started": utc_stamp(step["started"]),
        "ended": utc_stamp(ended) if ended is not None else None,
        "seconds": round(float(ended) - float(step["started"]), 3) if ended is not None else None,
    }


def _node(node: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "name": node.get("name"),
        "node_type": node.get("node_type"),
        "outcome": node.get("outcome"),
        "started": utc_stamp(node["started"]) if node.get("started") else None,
        "ended": utc_stamp(node["ended"]) if node.get("ended") else None,
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


def node_paths(nodes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """With rollout_live_scale auto: the nodes that grew live, and those the live path handed to a restart."""
    live, fell_back = [], []
    for node in nodes:
        path = (node.get("changes") or {}).get("path") or {}
        if path.get("path") == "live":
            live.append(node.get("name"))
        elif path.get("fell_back_from"):
            fell_back.append({"node": node.get("name"), "reason": path.get("reason")})
    return {"live": live, "fell_back": fell_back}


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
        "paths": node_paths(nodes),
        "uncordoned": _uncordoned(batches, release),
        "left_cordoned": release.get("left_cordoned"),
        "cordoned_by_others": release.get("cordoned_by_others"),
        "pending_taint_removed": release.get("pending_taint_removed", []),
        "lb_exclusion_removed": release.get("lb_exclusion_removed", []),
        "lb_exclusion_kept": release.get("lb_exclusion_kept", []),
        "out_of_date_before": _counts(plan),
        "out_of_date_after": _counts(after),
        "still_out_of_date": after.get("out_of_date"),
        "work_left": after.get("work_left") or [],
        "not_rolled": plan.get("unrollable", {}),
        "capacity": release.get("capacity"),
        "problems": release.get("problems"),
    }
