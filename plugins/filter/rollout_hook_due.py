# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The ``rollout_hook_due`` filter: the per-node hook due on a node after a phase of its batch.

Thin: the rule is ``_decisions/hook_steps.py``'s ``hook_due``, unit-tested there.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_hook_due
short_description: The per-node hook to run on a node after a phase of a hooked batch
version_added: 0.1.0
author:
  - cloudstack.cks contributors (@cloudstack-cks)
description:
  - Used by the C(cloudstack.cks.rollout) role after each phase run of a batch with per-node hooks.
  - After the V(cordon) phase, C(before_drain) on every node, unless the batch stopped (a run or a hook failed).
  - After the V(restart) phase, C(after_verify) on each node that phase restarted, even when another node of the
    batch failed, so that what C(before_drain) did is undone wherever a node is back.
  - V("") when no hook is due (no hook file given for it, the V(uncordon) phase, a node not restarted).
options:
  _input:
    description: The rollout object; its C(hooks) are the hook files (V("") for none).
    type: dict
    required: true
  phase:
    description: The phase that just ran.
    type: str
    required: true
    choices: [cordon, restart, uncordon]
  node:
    description: The node (C(inventory_hostname)).
    type: str
    required: true
  cycle:
    description: The phase run's C(cloudstack.cks.cks_node_cycle) result (its C(nodes)).
    type: dict
    default: {}
  stopped:
    description: The batch stopped (C(rollout_phase_stop)).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Run the hook that follows the phase on each node
  ansible.builtin.include_tasks: hook.yml
  vars:
    rollout_hook: >-
      {{ rollout_state | cloudstack.cks.rollout_hook_due(rollout_phase, inventory_hostname, cycle=rollout_cycle) }}
  when: rollout_hook | length > 0
"""

RETURN = r"""
_value:
  description: The hook due (V(before_drain) or V(after_verify)), or V("") for none.
  type: str
"""

from typing import Any, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.hook_steps import hook_due


def rollout_hook_due(state: Mapping[str, Any], phase: str, node: str, cycle: Optional[Mapping[str, Any]] = None,
                     stopped: Any = False) -> str:
    """The hook due on ``node`` after ``phase`` ("" for none)."""
    return hook_due(str(phase), (state or {}).get("hooks") or {}, str(node), (cycle or {}).get("nodes") or [],
                    bool(stopped))


class FilterModule:
    """cloudstack.cks filters."""

    def filters(self) -> dict[str, Any]:
        return {"rollout_hook_due": rollout_hook_due}
