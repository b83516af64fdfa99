# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Each planned node's path under ``live_scale: auto``, for cks_node_outdated, cks_node_settings'
plan and the dry run: the same decision the node cycle makes (``_decisions.scale_path``) from the
same reads, so an operator sees which nodes would grow without a restart and why the others would
not. Only the nodes whose one change is their offering cost reads (their VM and two offerings);
listCapabilities is read once. A live path that adds vCPUs also depends on the running domain's
maximum, which no API shows: the rollout's plan asks the guest (a short-lived pod per node, read
only), the dry run says the cycle checks it.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.live_scale import read_capabilities, read_facts
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node import change_plan
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.scale_path import (
    AUTO,
    LIVE,
    LIVE_SCALE_CHOICES,
    NEVER,
    GuestView,
    LiveFacts,
    ScalePath,
    kubelet_unaware,
    needs_headroom,
    scale_path,
    with_headroom,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ClusterView
from ansible_collections.cloudstack.cks.plugins.module_utils._services.session import ClusterSession


def live_scale_mode(params: Mapping[str, Any]) -> str:
    mode = str(params.get("live_scale") or NEVER)
    if mode not in LIVE_SCALE_CHOICES:
        raise InvalidInput("live_scale", mode, f"must be one of {', '.join(LIVE_SCALE_CHOICES)}")
    return mode


#: What a guest probe answers per node: what it read (or None), why not, the pod left behind.
GuestProbe = Callable[[list[str]], Mapping[str, tuple[Optional[GuestView], Optional[str], Optional[str]]]]


def with_paths(result: dict[str, Any], session: ClusterSession, view: ClusterView, settings: Settings,
               mode: str, phased: bool = False, probe: Optional[GuestProbe] = None) -> dict[str, Any]:
    """``result`` with ``path`` on each planned node's record and ``live_paths`` (live and restart
    names); unchanged under ``never``.

    ``probe``: asks the guests of the nodes whose live path adds vCPUs how many their running domain
    has room for (``_clients.live_scale.probe_guests``), before the lock - CloudStack does not show
    it. Without it (a dry run, cks_node_outdated: they create nothing) such a path says the cycle
    checks it before the scale.
    """
    if mode != AUTO:
        return result
    planned = set(result.get("hosts") or [])
    caps: Optional[dict[str, Any]] = None
    decided: list[tuple[dict[str, Any], str, ScalePath, Optional[LiveFacts]]] = []
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
        decided.append((record, node.name, scale_path(mode, changes, facts, phased=phased, unaware=unaware), facts))
    asked = [name for _record, name, path, facts in decided if needs_headroom(path, facts)]
    guests = probe(asked) if probe is not None and asked else {}
    live: list[str] = []
    restart: list[str] = []
    left: list[str] = []
    for record, name, path, facts in decided:
        guest, error, left_behind = guests.get(name, (None, None, None))
        final = with_headroom(path, facts, guest, error)
        record["path"] = final.to_dict()
        if left_behind:
            left.append(f"{name}: pod kube-system/{left_behind} could not be seen deleted (it ends by itself)")
        (live if final.path == LIVE else restart).append(name)
    result["live_paths"] = {"live": live, "restart": restart}
    if left:
        result["warnings"] = list(result.get("warnings") or []) + [
            "the guest probe before the lock left pods behind: " + "; ".join(left)]
    return result
