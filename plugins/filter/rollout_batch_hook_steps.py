# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The ``rollout_batch_hook_steps`` filter: a hooked batch's hook steps, gathered from its nodes.

Thin: ``_decisions/hook_steps.py``'s ``batch_hook_steps``, unit-tested there.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_batch_hook_steps
short_description: Every per-node hook step of a batch's nodes
version_added: 0.1.0
author:
  - cloudstack.cks contributors (@cloudstack-cks)
description:
  - Used by the C(cloudstack.cks.rollout) role for a batch with per-node hooks. Each node keeps its own hook steps
    (C(rollout_hook_steps), see C(cloudstack.cks.rollout_hook_step)); this gathers them, node by node, for
    C(cloudstack.cks.rollout_batch_end) and C(cloudstack.cks.rollout_hook_failed).
options:
  _input:
    description: C(hostvars).
    type: dict
    required: true
  nodes:
    description: The batch's nodes.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Put the phases and hooks of the batch together
  ansible.builtin.set_fact:
    rollout_state: >-
      {{ rollout_state | cloudstack.cks.rollout_batch_end(ansible_play_batch,
         hostvars | cloudstack.cks.rollout_batch_hook_steps(ansible_play_batch)) }}
"""

RETURN = r"""
_value:
  description: The hook steps of the batch's nodes.
  type: list
  elements: dict
"""

from typing import Any, Mapping, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.hook_steps import batch_hook_steps


def rollout_batch_hook_steps(hostvars: Mapping[str, Any], nodes: Sequence[str]) -> list[dict[str, Any]]:
    """The hook steps every node of ``nodes`` recorded (its ``rollout_hook_steps``)."""
    return batch_hook_steps([hostvars[node].get("rollout_hook_steps") or [] for node in nodes])


class FilterModule:
    """cloudstack.cks filters."""

    def filters(self) -> dict[str, Any]:
        return {"rollout_batch_hook_steps": rollout_batch_hook_steps}
