# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The ``rollout_hook_failed`` filter: whether a per-node hook of the batch failed.

Thin: ``_decisions/hook_steps.py``'s ``hook_failed``, unit-tested there.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_hook_failed
short_description: Whether a per-node hook of a batch failed
version_added: 0.1.0
author:
  - cloudstack.cks contributors (@cloudstack-cks)
description:
  - Used by the C(cloudstack.cks.rollout) role after each hook of a batch with per-node hooks; the batch stops when
    a hook failed, or did not finish, on one of its nodes.
options:
  _input:
    description: The batch's hook steps (C(cloudstack.cks.rollout_batch_hook_steps)).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Stop the batch after a hook that failed
  ansible.builtin.set_fact:
    rollout_phase_stop: true
  when: hostvars | cloudstack.cks.rollout_batch_hook_steps(ansible_play_batch) | cloudstack.cks.rollout_hook_failed
"""

RETURN = r"""
_value:
  description: True when a hook step failed.
  type: bool
"""

from typing import Any, Mapping, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.hook_steps import hook_failed


def rollout_hook_failed(steps: Sequence[Mapping[str, Any]]) -> bool:
    """A hook failed or did not finish on one of the batch's nodes."""
    return hook_failed(steps)


class FilterModule:
    """cloudstack.cks filters."""

    def filters(self) -> dict[str, Any]:
        return {"rollout_hook_failed": rollout_hook_failed}
