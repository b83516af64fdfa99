# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Return a node to service in one write: uncordoned, the rollout's marks off."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import NodesApi
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.marks import Marks, marks_of, return_patch, taints_of


def return_to_service(kube: NodesApi, name: str, marks: Marks, uncordon: bool,
                      node: Optional[Mapping[str, Any]] = None) -> Optional[dict[str, Any]]:
    """Write ``return_patch`` to the node: uncordon it (if ``uncordon``) and take ``marks`` off.

    With the pending taint the list is written whole, so it is computed from the node as read
    (``node``, else a fresh read) and sent only onto that version; a mark gone meanwhile is left alone.
    Returns the node as the write answered (None: nothing to write).
    """
    if marks.pending_taint:
        def build(current: Mapping[str, Any]) -> Optional[dict[str, Any]]:
            now = marks_of(current)
            wanted = Marks(now.pending_taint, marks.lb_exclusion and now.lb_exclusion)
            return return_patch(wanted, uncordon, taints_of(current))

        return kube.patch_node_checked(name, build, node=dict(node) if node is not None else None)
    patch = return_patch(marks, uncordon)
    return kube.patch_node(name, patch) if patch is not None else None
