# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The service behind cks_node_cycle (mode=taint_pending): taint the nodes the rollout will restart."""

from __future__ import annotations

from typing import Any, Mapping

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.marks import (
    PENDING_TAINT_EFFECT,
    PENDING_TAINT_KEY,
    has_pending_taint,
    pending_taint_patch,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._services.session import ClusterSession
from ansible_collections.cloudstack.cks.plugins.module_utils._state.held import held_lock


def taint_pending(session: ClusterSession, params: Mapping[str, Any], check_mode: bool = False) -> dict[str, Any]:
    """Put the pending taint on the nodes of ``params['nodes']`` (the plan's), once per rollout.

    One list of the nodes, then one write per node that lacks the taint. Nodes that are no
    Kubernetes node (external etcd VMs) are left out. With ``lock_holder`` the lock must still be
    held (and is renewed) before anything is written.
    """

    kube = session.kube
    names = list(dict.fromkeys(str(n).lower() for n in params.get("nodes") or []))
    lock = held_lock(kube, params.get("lock_holder"))
    if lock is not None and not check_mode:
        lock.renew()
    current = {str((n.get("metadata") or {}).get("name", "")).lower(): n for n in kube.list_nodes()}
    tainted: list[str] = []
    already: list[str] = []
    not_nodes: list[str] = []
    for name in names:
        node = current.get(name)
        if node is None:
            not_nodes.append(name)
        elif has_pending_taint(node):
            already.append(name)
        else:
            if not check_mode:
                kube.patch_node_checked(name, pending_taint_patch, node=node)
            tainted.append(name)
    return {"pending_taint": {"key": PENDING_TAINT_KEY, "effect": PENDING_TAINT_EFFECT, "tainted": tainted,
                              "already_tainted": already, "not_kubernetes_nodes": not_nodes},
            "changed": bool(tainted)}
