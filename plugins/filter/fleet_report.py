# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The ``fleet_report`` filter: one report for a fleet run, from each cluster's cks_fleet_rollout result.

Pure: the results in, the report (with the lines to show) out.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: fleet_report
short_description: The report of a fleet run, from each cluster's outcome
version_added: 0.1.0
author:
  - cloudstack.cks contributors (@cloudstack-cks)
description:
  - Used by the C(cloudstack.cks.fleet) playbook after the last cluster. Takes the results that
    C(cloudstack.cks.cks_fleet_rollout) returned, one per cluster, and returns the fleet report - per cluster the
    outcome, the nodes restarted, the last error, the lock holder when it was locked, the time it took and where
    its own rollout report and log are, and in a dry run its C(plan) - with the count of each outcome and the lines to show.
options:
  _input:
    description: The results of C(cloudstack.cks.cks_fleet_rollout), one per cluster.
    type: list
    elements: dict
    required: true
  run_id:
    description: The fleet run's name.
    type: str
    required: true
  started:
    description: When the fleet run started (UTC, RFC 3339).
    type: str
  ended:
    description: When it ended (UTC, RFC 3339).
    type: str
"""

EXAMPLES = r"""
- name: Put the fleet report together
  ansible.builtin.set_fact:
    fleet_report: "{{ results | cloudstack.cks.fleet_report(run_id=fleet_run_id, started=fleet_started) }}"
"""

RETURN = r"""
_value:
  description:
    - 'The report: C(run_id), C(started), C(ended), C(clusters) (one entry per cluster, by name), C(counts) (per outcome),
      C(nodes_restarted) (the total), C(summary) (the lines to show, for example C(fleet-01: rolled, restarted w1, w2 (42.0 s)))
      and C(cancelled) (V(false) here; V(true) in the report the clusters write after a cancel of the fleet job).'
  type: dict
"""

from typing import Any, Mapping, Optional, Sequence

from ansible.errors import AnsibleFilterError

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.fleet import fleet_report_document


def fleet_report(results: Sequence[Mapping[str, Any]], run_id: str, started: Optional[str] = None,
                 ended: Optional[str] = None) -> dict[str, Any]:
    if not isinstance(results, (list, tuple)) or not all(isinstance(r, Mapping) for r in results):
        raise AnsibleFilterError("fleet_report: expects the list of cks_fleet_rollout results, one per cluster")
    # The fleet's last play runs only once every cluster ended, and never after a cancel of the job.
    return fleet_report_document(results, run_id, started, ended, cancelled=False)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"fleet_report": fleet_report}
