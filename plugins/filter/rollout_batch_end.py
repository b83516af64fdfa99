# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The ``rollout_batch_end`` filter: the rollout object once a batch run in phases ended, or a batch
failed outside its module runs.

Thin: the merge of the phases and hooks, the batch record and the progress line are
``_rollout/state.py``'s, typed and unit-tested there.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_batch_end
short_description: End a batch in the rollout object
version_added: 0.1.0
author:
  - cloudstack.cks contributors (@cloudstack-cks)
description:
  - Used by the C(cloudstack.cks.rollout) role. A batch in one C(cloudstack.cks.cks_node_cycle) run ends in that
    run; a batch with per-node hooks runs in phases, and this puts its phase runs (kept in the rollout object) and
    its nodes' hook steps together - each node once, its steps in the order they ran - and records the batch.
  - With O(error), the batch of O(nodes) failed outside its runs (a task of the role failed); it is recorded as
    failed with that error and what its runs returned so far.
  - The returned object's C(progress) is the batch's progress line, its C(batches) ends with the batch's record.
options:
  _input:
    description: The rollout object (the role's C(rollout_state)).
    type: dict
    required: true
  nodes:
    description: The batch's nodes.
    type: list
    elements: str
    required: true
  hook_steps:
    description:
      - The hook steps of the batch's nodes, each with C(node), C(name), C(started) and C(ended) (Unix times),
        C(outcome) (V(ok) or V(failed)) and C(detail).
    type: list
    elements: dict
    default: []
  error:
    description: Why the batch failed outside its runs.
    type: str
"""

EXAMPLES = r"""
- name: Put the phases and hooks of the batch together
  ansible.builtin.set_fact:
    rollout_state: "{{ rollout_state | cloudstack.cks.rollout_batch_end(ansible_play_batch, hook_steps) }}"
"""

RETURN = r"""
_value:
  description: The rollout object with the batch recorded.
  type: dict
"""

from typing import Any, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.state import Rollout


def rollout_batch_end(rollout: Mapping[str, Any], nodes: Sequence[str],
                      hook_steps: Optional[Sequence[Mapping[str, Any]]] = None,
                      error: Optional[str] = None) -> dict[str, Any]:
    """The rollout object with the batch of ``nodes`` ended (phases and hooks merged), or failed with ``error``."""
    state = Rollout.from_dict(rollout)
    if error is not None:
        state.batch_failed([str(n) for n in nodes], str(error))
    else:
        state.end_batch([str(n) for n in nodes], list(hook_steps or []))
    return state.to_dict()


class FilterModule:
    """cloudstack.cks filters."""

    def filters(self) -> dict[str, Any]:
        return {"rollout_batch_end": rollout_batch_end}
