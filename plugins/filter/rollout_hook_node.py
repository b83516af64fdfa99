# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The ``rollout_hook_node`` filter: what a per-node hook is told of its node.

Thin: the record is ``_decisions/hook_steps.py``'s ``hook_node``, unit-tested there.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_hook_node
short_description: The variable rollout_hook_node a per-node hook of the rollout role reads
version_added: 0.1.0
author:
  - cloudstack.cks contributors (@cloudstack-cks)
description:
  - Used by the C(cloudstack.cks.rollout) role for each per-node hook. The node's record in the plan (its node type,
    VM name, VM id and IP address; a node the plan does not list has the batch's node type and none of these),
    with the hook, the batch and the rollout the hook runs in.
options:
  _input:
    description: The plan (C(cloudstack.cks.cks_node_settings)' result with C(plan=true)); its C(nodes) are read.
    type: dict
    required: true
  node:
    description: The node (C(inventory_hostname)).
    type: str
    required: true
  hook:
    description: The hook (V(before_drain) or V(after_verify)).
    type: str
    required: true
  batch:
    description: The batch's number.
    type: int
    required: true
  batch_nodes:
    description: The batch's nodes.
    type: list
    elements: str
    required: true
  batch_type:
    description: The batch's node type.
    type: str
  cluster:
    description: The cluster.
    type: str
  run_id:
    description: The rollout run (the lock holder).
    type: str
"""

EXAMPLES = r"""
- name: Tell the hook its node
  ansible.builtin.set_fact:
    rollout_hook_node: >-
      {{ rollout_plan | cloudstack.cks.rollout_hook_node(inventory_hostname, 'before_drain', batch=1,
         batch_nodes=ansible_play_batch, batch_type='worker', cluster='prod', run_id=rollout_run_id) }}
"""

RETURN = r"""
_value:
  description: The hook's node.
  type: dict
  contains:
    name: {description: The node., type: str}
    node_type: {description: Its node type., type: str}
    vm_name: {description: Its VM's name., type: str}
    vm_id: {description: Its VM's id., type: str}
    ip_address: {description: Its IP address., type: str}
    hook: {description: The hook., type: str}
    batch: {description: The batch's number., type: int}
    batch_nodes: {description: The batch's nodes., type: list, elements: str}
    cluster: {description: The cluster., type: str}
    run_id: {description: The rollout run., type: str}
"""

from typing import Any, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.hook_steps import hook_node


def rollout_hook_node(plan: Mapping[str, Any], node: str, hook: str, batch: Any, batch_nodes: Sequence[str],
                      batch_type: Optional[str] = None, cluster: Optional[str] = None,
                      run_id: Optional[str] = None) -> dict[str, Any]:
    """``rollout_hook_node`` for ``node`` in ``hook`` of batch ``batch``."""
    return hook_node((plan or {}).get("nodes") or [], str(node), batch_type, hook=hook, batch=int(batch),
                     batch_nodes=list(batch_nodes), cluster=cluster, run_id=run_id)


class FilterModule:
    """cloudstack.cks filters."""

    def filters(self) -> dict[str, Any]:
        return {"rollout_hook_node": rollout_hook_node}
