# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The ``rollout_batch`` filter: which batch of the plan the rolling play's batch is.

Thin: the plan's batches are the rollout object's (``_rollout/state.py``), unit-tested there.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_batch
short_description: The batch of the rollout's plan that the rolling play runs now
version_added: 0.1.0
author:
  - cloudstack.cks contributors (@cloudstack-cks)
description:
  - Used by the C(cloudstack.cks.rollout) role at the start of each batch of its rolling play. Finds the batch's
    nodes (C(ansible_play_batch)) among the plan's batches kept in the rollout object and says its number, its node
    type and whether the rollout runs per-node hooks (the batch then runs in phases).
  - Fails when the nodes are no batch of the plan (the play's C(serial) is the plan's, so they always are one).
options:
  _input:
    description: The rollout object (C(cloudstack.cks.rollout_start)'s, as the last run returned it).
    type: dict
    required: true
  nodes:
    description: The batch's nodes, in play order (C(ansible_play_batch)).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Record the nodes of this batch
  ansible.builtin.set_fact:
    rollout_batch_number: "{{ (rollout_state | cloudstack.cks.rollout_batch(ansible_play_batch)).number }}"
"""

RETURN = r"""
_value:
  description: The batch.
  type: dict
  contains:
    number:
      description: The batch's number in the plan, from 1.
      type: int
    node_type:
      description: The node type of the batch (V(control), V(worker) or V(etcd)).
      type: str
    hooked:
      description: Whether the rollout runs a per-node hook (C(rollout_hook_before_drain) or C(rollout_hook_after_verify)).
      type: bool
"""

from typing import Any, Mapping, Sequence

from ansible.errors import AnsibleFilterError

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.state import Rollout


def rollout_batch(state: Mapping[str, Any], nodes: Sequence[str]) -> dict[str, Any]:
    """The batch of ``nodes`` in the plan of the rollout object ``state``."""
    try:
        rollout = Rollout.from_dict(state)
    except InvalidInput as exc:
        raise AnsibleFilterError(f"rollout_batch: {exc.msg}") from exc
    found = rollout.batch_in_plan([str(n) for n in nodes])
    if found is None:
        raise AnsibleFilterError(f"rollout_batch: the nodes {list(nodes)} are no batch of the plan")
    number, node_type = found
    return {"number": number, "node_type": node_type, "hooked": any(rollout.hooks.values())}


class FilterModule:
    """cloudstack.cks filters."""

    def filters(self) -> dict[str, Any]:
        return {"rollout_batch": rollout_batch}
