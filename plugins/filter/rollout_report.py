# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The ``rollout_report`` filter: the report the release writes (``cks_node_cycle`` mode=release, ``report``).

What each node went through, what changed, the counts before and after, what was not rolled and
why, the last error and the capacity recount, from the plan, the batches' results and the release.
Pure: the clock's reading for ``ended`` is passed in; times are UTC, RFC 3339.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_report
short_description: The report of a rollout, from its plan, its batches and its release
version_added: 0.1.0
author:
  - cloudstack.cks contributors (@cloudstack-cks)
description:
  - Used by the C(cloudstack.cks.rollout) role after the release, for the report it writes to C(rollout_report_path)
    and the outcome it shows. Takes the plan (C(cloudstack.cks.cks_node_outdated) before the first batch) and returns
    the report as a dict.
  - Each node the batches reached with its outcome, its steps (with RFC 3339 UTC times and their length in seconds),
    its changes and its error; the planned nodes no batch reached; the nodes uncordoned by the batches (back from a
    stopped rollout) and then by the release; the nodes and out-of-date nodes per node type before (the plan) and after
    (O(after)); and what the release returned (outcome, last error, nodes left cordoned, capacity, problems).
options:
  _input:
    description: The plan, as C(cloudstack.cks.cks_node_outdated) returned it before the first batch.
    type: dict
    required: true
  release:
    description: The C(release) that C(cloudstack.cks.cks_node_cycle) returned with O(cloudstack.cks.cks_node_cycle#module:mode=release).
    type: dict
    required: true
  after:
    description:
      - What is still out of date after the release, as C(cloudstack.cks.cks_node_cycle) with C(mode=release)
        returns it (its C(after)), in the keys C(cloudstack.cks.cks_node_outdated) returns them.
    type: dict
    required: true
  run_id:
    description: The id of this rollout run (the lock holder).
    type: str
    required: true
  started:
    description: When this rollout started, RFC 3339 UTC.
    type: str
  ended:
    description: When this rollout ended (now), RFC 3339 UTC.
    type: str
    required: true
  results:
    description: The node results of every batch that ran, in the order the batches ran (the role's C(rollout_results)).
    type: list
    elements: dict
    default: []
  batches:
    description: One record per batch that ran (the role's C(rollout_batches_run)), each with its C(uncordoned).
    type: list
    elements: dict
    default: []
  stored:
    description:
      - What C(cloudstack.cks.cks_node_settings) returned when it stored the settings and took the lock - C(settings),
        C(previous_settings) and C(lock), whose C(taken_over_from) names a previous rollout that stopped without release.
    type: dict
    default: {}
  hooks:
    description: The per-node hook files, C(before_drain) and C(after_verify).
    type: dict
    default: {}
  cancelled:
    description: Whether the rollout was cancelled.
    type: bool
    default: false
  pause_seconds:
    description: The pause between batches, in seconds.
    type: int
    default: 0
"""

EXAMPLES = r"""
- name: Put the rollout report together
  ansible.builtin.set_fact:
    rollout_report: >-
      {{ rollout_plan | cloudstack.cks.rollout_report(release=rollout_release.release, after=rollout_release.after,
         run_id=rollout_run_id, started=rollout_started, ended=now(utc=true, fmt='%Y-%m-%dT%H:%M:%SZ'),
         results=rollout_results, batches=rollout_batches_run, stored=rollout_stored, hooks=rollout_hooks) }}
"""

RETURN = r"""
_value:
  description:
    - The report - C(cluster), C(run_id), C(started), C(ended), C(outcome) (the health), C(result) (how it ended), C(cancelled), C(last_error),
      C(previous_rollout_stopped), C(settings), C(previous_settings), C(max_unavailable), C(worker_batch_size),
      C(canary), C(pause_seconds), C(hooks), C(selected), C(not_selected), C(batches_planned), C(batches), C(nodes),
      C(nodes_not_reached), C(uncordoned), C(left_cordoned), C(cordoned_by_others), C(pending_taint_removed),
      C(lb_exclusion_removed), C(lb_exclusion_kept), C(out_of_date_before), C(out_of_date_after), C(still_out_of_date),
      C(work_left) (the nodes whose VM is not Running or that the rollout left cordoned or annotated, each with why),
      C(not_rolled), C(capacity), C(problems) and C(paths) (with rollout_live_scale V(auto) - C(live), the nodes
      grown without a restart, and C(fell_back), each C(node) the live path handed to the restart path with its C(reason)).
  type: dict
"""

from typing import Any

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.rollout_report import rollout_report


class FilterModule:
    """cloudstack.cks filters."""

    def filters(self) -> dict[str, Any]:
        return {"rollout_report": rollout_report}
