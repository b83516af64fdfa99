# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The ``rollout_start`` filter: the rollout object as the plan starts it, for the role's one fact.

Thin: the object and its start are ``_rollout/state.py``'s, typed and unit-tested there.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_start
short_description: The rollout object of a rollout that was just planned
version_added: 0.1.0
author:
  - cloudstack.cks contributors (@cloudstack-cks)
description:
  - Used by the C(cloudstack.cks.rollout) role once the plan is made and the lock taken. Returns the rollout object
    that every C(cloudstack.cks.cks_node_cycle) run then takes as its option C(rollout) and returns updated - the
    run id (the lock holder), the lock's version, the plan's summary, the stored settings, the hooks and the pause.
options:
  _input:
    description: The result of C(cloudstack.cks.cks_node_settings) with C(plan=true) and C(rollout=true).
    type: dict
    required: true
  run_id:
    description: The id of this rollout run (the lock holder).
    type: str
    required: true
  started:
    description: When the rollout started, RFC 3339 UTC.
    type: str
  hooks:
    description: The per-node hook files, C(before_drain) and C(after_verify) (V("") for none).
    type: dict
    default: {}
  pause_seconds:
    description: The pause between batches.
    type: int
    default: 0
"""

EXAMPLES = r"""
- name: Keep the rollout in one fact
  ansible.builtin.set_fact:
    rollout_state: "{{ rollout_plan | cloudstack.cks.rollout_start(run_id=rollout_run_id, started=rollout_started) }}"
"""

RETURN = r"""
_value:
  description: The rollout object (see the C(rollout) option of C(cloudstack.cks.cks_node_cycle)).
  type: dict
"""

from typing import Any, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.state import Rollout


def rollout_start(plan: Mapping[str, Any], run_id: str, started: Optional[str] = None,
                  hooks: Optional[Mapping[str, str]] = None, pause_seconds: Any = 0) -> dict[str, Any]:
    """The rollout object of the plan ``plan`` (cks_node_settings' result)."""
    return Rollout.start(plan, run_id=str(run_id), started=started, hooks=hooks,
                         pause_seconds=int(pause_seconds or 0)).to_dict()


class FilterModule:
    """cloudstack.cks filters."""

    def filters(self) -> dict[str, Any]:
        return {"rollout_start": rollout_start}
