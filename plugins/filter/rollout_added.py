# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The ``rollout_added`` filter: later batches for the nodes the cluster autoscaler added while the
planned batches ran, for the playbook's play that rolls them.

Thin: which nodes and batches is ``_decisions/autoscaler.py``'s ``added_batches``, the rollout
object's part ``_rollout/state.py``'s ``Rollout.add_batches``, both unit-tested there.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_added
short_description: Later batches for the nodes the cluster autoscaler added during a rollout
version_added: 0.1.0
author:
  - cloudstack.cks contributors (@cloudstack-cks)
description:
  - Used by C(cloudstack.cks.rollout) after the planned batches. Takes the rollout object and what
    C(cloudstack.cks.cks_node_outdated) says now; returns the batches of the out-of-date nodes the first plan did not
    know (the cluster autoscaler added them with the cluster's CKS settings), the rollout object and the plan with
    those batches added, and the C(serial) and hosts for the play that rolls them.
options:
  _input:
    description: The rollout object (C(rollout_state)).
    type: dict
    required: true
  plan:
    description: The plan as C(cloudstack.cks.cks_node_settings) returned it (C(rollout_plan)).
    type: dict
    required: true
  outdated:
    description: The result of C(cloudstack.cks.cks_node_outdated) read after the planned batches.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Plan the nodes the autoscaler added
  ansible.builtin.set_fact:
    rollout_added: "{{ rollout_state | cloudstack.cks.rollout_added(plan=rollout_plan, outdated=rollout_now) }}"
"""

RETURN = r"""
_value:
  description: C(rollout) (the rollout object), C(plan) (the plan with the added batches), C(batches), C(hosts),
    C(serial) and C(batch_count).
  type: dict
"""

from typing import Any, Mapping

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.autoscaler import added_batches
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.state import Rollout


def rollout_added(state: Mapping[str, Any], plan: Mapping[str, Any], outdated: Mapping[str, Any]) -> dict[str, Any]:
    rollout = Rollout.from_dict(state)
    autoscaler = rollout.plan.get("autoscaler") or {}
    batches = added_batches(outdated.get("plan") or [], autoscaler.get("known_nodes") or []) if autoscaler.get("on") else []
    rollout.add_batches(batches)
    extended = dict(plan)
    extended["plan"] = list(plan.get("plan") or []) + batches
    hosts = [n for b in batches for n in b["nodes"]]
    return {"rollout": rollout.to_dict(), "plan": extended, "batches": batches, "hosts": hosts,
            "serial": [len(b["nodes"]) for b in batches], "batch_count": len(extended["plan"])}


class FilterModule:
    """cloudstack.cks filters."""

    def filters(self) -> dict[str, Any]:
        return {"rollout_added": rollout_added}
