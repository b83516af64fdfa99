# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The ``rollout_hook_step`` filter: a node's hook steps with a hook begun or ended.

Thin: the step record is ``_decisions/hook_steps.py``'s, typed and unit-tested there; this reads
the clock and turns a wrong call into a filter error.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_hook_step
short_description: Record a per-node hook of the rollout role as a step of its node
version_added: 0.1.0
author:
  - cloudstack.cks contributors (@cloudstack-cks)
description:
  - Used by the C(cloudstack.cks.rollout) role around each per-node hook (C(rollout_hook_before_drain),
    C(rollout_hook_after_verify)). Each node keeps its hook steps in a list shaped like the steps of
    C(cloudstack.cks.cks_node_cycle)'s node results, so the C(cloudstack.cks.rollout_batch_end) filter reports a
    batch with hooks as it reports a batch of one run.
  - Without O(outcome), the hook O(hook) begins on O(node) - recorded as failed ("did not finish") until it ends,
    as a hook task delegated to a host Ansible cannot reach takes the node out of the play with no rescue.
  - With O(outcome), the last step ends now - V(ok) with the task file as its detail, V(failed) with the task that
    failed and its error.
options:
  _input:
    description: The node's hook steps so far (V([]) for none).
    type: list
    elements: dict
    required: true
  path:
    description: The hook's task file.
    type: str
    required: true
  node:
    description: The node the hook begins on (to begin a step).
    type: str
  hook:
    description: Which hook begins (V(before_drain) or V(after_verify)); the step is named C(hook_<hook>).
    type: str
  outcome:
    description: How the hook ended (to end the last step).
    type: str
    choices: [ok, failed]
  failed_task:
    description: With O(outcome=failed), the name of the task that failed.
    type: str
  error:
    description: With O(outcome=failed), what the failed task said.
    type: str
"""

EXAMPLES = r"""
- name: Note the start of the hook
  ansible.builtin.set_fact:
    rollout_hook_steps: >-
      {{ rollout_hook_steps | default([]) | cloudstack.cks.rollout_hook_step(hook_path, node=inventory_hostname,
         hook='before_drain') }}

- name: Record the hook as a step of this node
  ansible.builtin.set_fact:
    rollout_hook_steps: "{{ rollout_hook_steps | cloudstack.cks.rollout_hook_step(hook_path, outcome='ok') }}"
"""

RETURN = r"""
_value:
  description: The node's hook steps, the one begun appended or the last one ended.
  type: list
  elements: dict
"""

import time
from typing import Any, Optional, Sequence

from ansible.errors import AnsibleFilterError

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.hook_steps import (
    HookStepError,
    hook_begun,
    hook_ended,
)


def rollout_hook_step(steps: Sequence[Any], path: str, node: Optional[str] = None, hook: Optional[str] = None,
                      outcome: Optional[str] = None, failed_task: Optional[str] = None,
                      error: Optional[str] = None) -> list[dict[str, Any]]:
    """``steps`` with a hook begun on ``node`` (no ``outcome``) or the last one ended with ``outcome``."""
    try:
        if outcome is None:
            if not node or not hook:
                raise HookStepError("a hook step begins with node and hook")
            return hook_begun(list(steps or []), str(node), str(hook), str(path), time.time())
        return hook_ended(list(steps or []), str(outcome), str(path), time.time(),
                          failed_task=failed_task, error=None if error is None else str(error))
    except HookStepError as exc:
        raise AnsibleFilterError(f"rollout_hook_step: {exc}") from exc


class FilterModule:
    """cloudstack.cks filters."""

    def filters(self) -> dict[str, Any]:
        return {"rollout_hook_step": rollout_hook_step}
