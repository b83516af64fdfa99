# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The ``rollout_outcome`` filter: the lines the rollout role shows last, read from its report.

What an operator looks at first after a rollout: how it ended, which nodes were restarted, which
were not reached, uncordoned or left cordoned, what is still out of date, the capacity, the last
error and where the report is. Pure: the report in, lines out.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_outcome
short_description: The closing lines of a rollout, from its report
version_added: 0.1.0
author:
  - cloudstack.cks contributors (@cloudstack-cks)
description:
  - Used by the C(cloudstack.cks.rollout) role after the release. Takes the report that C(cloudstack.cks.rollout_report)
    built and returns one line each for how the rollout ended (its result first, V(failed at batch 2 of 5) with the
    error, then the cluster's health), the nodes restarted (outcome V(done) or V(restarted), as the progress
    line counts them), the nodes not reached, uncordoned and left cordoned, the out-of-date counts now, the capacity, the
    last error and the report's path. An empty list shows as V(-). Nodes with work left that the counts do not
    show (a VM not Running, a node still cordoned or annotated by the rollout) get a line of their own,
    V(Work left), after the counts.
options:
  _input:
    description: The rollout report, as C(cloudstack.cks.rollout_report) returns it.
    type: dict
    required: true
  cluster:
    description: The cluster as the operator named it.
    type: str
    required: true
  after:
    description:
      - What is still out of date after the release, as C(cloudstack.cks.cks_node_cycle) with C(mode=release)
        returns it (its C(after)), in the keys C(cloudstack.cks.cks_node_outdated) returns them.
    type: dict
    required: true
  report_path:
    description: Where the report was written; V("") when it was not.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Show the outcome
  ansible.builtin.debug:
    msg: >-
      {{ rollout_report | cloudstack.cks.rollout_outcome(cluster=rollout_cluster, after=rollout_release.after,
         report_path=rollout_report_path) }}
"""

RETURN = r"""
_value:
  description:
    - 'The lines, for example C(Rollout rollout-20261203T120000-42 of demo: done; cluster health: Running) and
      C(Nodes restarted: w1, w2); with rollout_live_scale V(auto) also C(Scaled live (no restart): w1) and
      C(Live scale fell back to a restart: w2 (reason)).'
  type: list
  elements: str
"""

from typing import Any, Iterable, Mapping

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.progress import DONE_OUTCOMES
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.work_left import work_left_line


def _shown(value: Any) -> str:
    # As a value templated into text shows: none is nothing (CloudStack may not report a figure).
    return "" if value is None else str(value)


def _names(entries: Iterable[Any], key: str = "node") -> str:
    return ", ".join(str(entry.get(key)) for entry in entries or []) or "-"


def _ended(report: Mapping[str, Any]) -> str:
    """How the rollout ended, with the error of a failed one: the health alone reads as success."""
    result = report.get("result") or ("cancelled" if report.get("cancelled") else None)
    if not result:
        return "done"
    if result.startswith("failed") and report.get("last_error"):
        return f"{result}: {report['last_error']}"
    return str(result)


def _path_lines(paths: Mapping[str, Any]) -> list[str]:
    """rollout_live_scale auto: which nodes grew without a restart, which fell back and why."""
    if not paths.get("live") and not paths.get("fell_back"):
        return []
    fell = "; ".join(f"{entry.get('node')} ({entry.get('reason')})" for entry in paths.get("fell_back") or [])
    return [f"Scaled live (no restart): {', '.join(paths.get('live') or []) or '-'}",
            f"Live scale fell back to a restart: {fell or '-'}"]


def rollout_outcome(report: Mapping[str, Any], cluster: str, after: Mapping[str, Any],
                    report_path: str = "") -> list[str]:
    """The closing lines of a rollout, from its report and what the release found still out of date."""
    capacity = {key: _shown(value) for key, value in (report.get("capacity") or {}).items()}
    counted = ("controlnodesoutofdate", "workernodesoutofdate", "etcdnodesoutofdate")
    counts = {key: _shown(after.get(key)) for key in counted}
    restarted = [node for node in report.get("nodes") or [] if node.get("outcome") in DONE_OUTCOMES]
    # A node down or still cordoned by the rollout is work left even when nothing is out of date.
    left = list(after.get("work_left") or [])
    return [
        f"Rollout {_shown(report.get('run_id'))} of {_shown(cluster)}: {_ended(report)}; "
        f"cluster health: {_shown(report.get('outcome'))}",
        f"Nodes restarted: {_names(restarted, 'name')}",
        *_path_lines(report.get("paths") or {}),
        f"Not reached: {', '.join(report.get('nodes_not_reached') or []) or '-'}",
        f"Uncordoned: {_names(report.get('uncordoned') or [])}",
        f"Left cordoned: {_names(report.get('left_cordoned') or [])}",
        f"Out of date now: control {counts['controlnodesoutofdate']}, worker {counts['workernodesoutofdate']}, "
        f"etcd {counts['etcdnodesoutofdate']}",
        *([work_left_line(left)] if left else []),
        # The cluster autoscaler (when on): its min/max and the nodes it added during the rollout,
        # with why one is still out of date.
        *([str(after["autoscaler"]["words"])] if (after.get("autoscaler") or {}).get("words") else []),
        f"Capacity: {capacity.get('cores', '')} cores, {capacity.get('memory_mb', '')} MB (CloudStack reports "
        f"{capacity.get('cloudstack_cores', '')} cores, {capacity.get('cloudstack_memory_mb', '')} MB)",
        f"Last error: {report.get('last_error') or '-'}",
        f"Report: {report_path or '(not written: set rollout_report_path)'}",
    ]


class FilterModule:
    """cloudstack.cks filters."""

    def filters(self) -> dict[str, Any]:
        return {"rollout_outcome": rollout_outcome}
