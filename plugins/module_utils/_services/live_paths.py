# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Each planned node's path under ``live_scale: auto``, for cks_node_outdated, cks_node_settings'
plan and the dry run: the same decision the node cycle makes (``_decisions.scale_path``) from the
same reads, so an operator sees which nodes would grow without a restart and why the others would
not. Only the nodes whose one change is their offering cost reads (their VM and two offerings);
listCapabilities is read once.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.live_scale import read_capabilities, read_facts
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node import change_plan
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.scale_path import (
    AUTO,
    LIVE,
    LIVE_SCALE_CHOICES,
    NEVER,
    kubelet_unaware,
    scale_path,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ClusterView
from ansible_collections.cloudstack.cks.plugins.module_utils._services.session import ClusterSession


def live_scale_mode(params: Mapping[str, Any]) -> str:
    mode = str(params.get("live_scale") or NEVER)
    if mode not in LIVE_SCALE_CHOICES:
        raise InvalidInput("live_scale", mode, f"must be one of {', '.join(LIVE_SCALE_CHOICES)}")
    return mode


def with_paths(result: dict[str, Any], session: ClusterSession, view: ClusterView, settings: Settings,
               mode: str, phased: bool = False) -> dict[str, Any]:
    """``result`` with ``path`` on each planned node's record and ``live_paths`` (live and restart
    names); unchanged under ``never``."""
    if mode != AUTO:
        return result
    planned = set(result.get("hosts") or [])
    caps: Optional[dict[str, Any]] = None
    live: list[str] = []
    restart: list[str] = []
    for record in result.get("nodes") or []:
        if record.get("name") not in planned:
            continue
        node = view.node(str(record["name"]))
        plan = change_plan(node, settings[node.node_type])
        changes = frozenset(k for k in ("offering", "root_disk", "affinity_groups") if getattr(plan, k))
        facts = None
        if changes == {"offering"} and plan.offering is not None and node.is_kubernetes_node:
            if caps is None:
                try:
                    caps = read_capabilities(session.cloud)
                except CksError:
                    caps = {}
            scope = {"projectid": view.project_id} if view.project_id else {}
            facts = read_facts(session.cloud, node.vm_id, plan.offering.to, scope, caps)
        unaware = kubelet_unaware(node.kubelet_cpu, node.kubelet_memory, node.cpu, node.memory_mb) \
            if node.running and node.is_kubernetes_node else None
        decided = scale_path(mode, changes, facts, phased=phased, unaware=unaware)
        record["path"] = decided.to_dict()
        (live if decided.path == LIVE else restart).append(node.name)
    result["live_paths"] = {"live": live, "restart": restart}
    return result
