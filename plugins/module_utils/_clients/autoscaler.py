# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The reads and writes of the cluster autoscaler's part in a rollout: whether its Deployment runs
in kube-system, and the scale-down-disabled mark on the rollout's nodes (``_decisions/autoscaler``
decides what each write is)."""

from __future__ import annotations

import json
from typing import Any, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.autoscaler import HOLD_ANNOTATION, hold_patch, restore_patch

#: CKS's manifest names it so; an operator's own install usually too.
DEPLOYMENT_PATH = "/apis/apps/v1/namespaces/kube-system/deployments"


def autoscaler_deployed(kube: Any) -> bool:
    """A Deployment named cluster-autoscaler* runs in kube-system (one read; not allowed or not
    answered: False, the cluster's own autoscalingenabled still counts)."""
    status, text = kube.raw_get(DEPLOYMENT_PATH)
    if status != 200:
        return False
    try:
        items = json.loads(text).get("items") or []
    except ValueError:
        return False
    return any(str((d.get("metadata") or {}).get("name", "")).startswith("cluster-autoscaler") for d in items)


def _annotations(node: Any) -> dict[str, Any]:
    return dict((node.get("metadata") or {}).get("annotations") or {})


def hold_nodes(kube: Any, names: Sequence[str], check_mode: bool = False) -> list[str]:
    """Mark the named Kubernetes nodes scale-down-disabled (the ones not kept off already); the
    nodes marked."""
    wanted = {n.lower() for n in names}
    marked: list[str] = []
    for node in kube.list_nodes():
        name = str((node.get("metadata") or {}).get("name", "")).lower()
        if name not in wanted:
            continue
        patch = hold_patch(_annotations(node))
        if patch is not None:
            if not check_mode:
                kube.patch_node(name, patch)
            marked.append(name)
    return marked


def release_holds(kube: Any, nodes: Sequence[Any], check_mode: bool = False) -> list[str]:
    """Take the rollout's mark off every node that carries it (``nodes``: as listed), put back
    what each had; the nodes restored."""
    restored: list[str] = []
    for node in nodes:
        annotations = _annotations(node)
        if HOLD_ANNOTATION not in annotations:
            continue
        name = str((node.get("metadata") or {}).get("name", ""))
        patch = restore_patch(annotations)
        if patch is not None and not check_mode:
            kube.patch_node(name, patch)
        restored.append(name)
    return restored
