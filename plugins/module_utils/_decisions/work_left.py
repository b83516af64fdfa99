# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Work a rollout left that the out-of-date counts do not show. Pure.

A node counts as out of date only while its VM differs from the settings. A node whose change went
through but which is still down (its start refused, left Stopped by ``put_back_on_refusal: false``),
still cordoned by the rollout or still carrying its annotation has work left all the same: the
summary, the report and ``status`` name it beside the counts, so that "0 out of date" never reads as
"nothing left to do".
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence


def work_left(nodes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The nodes (as ``_decisions.outdated_report.node_record`` shapes them) with work left, each with why."""
    left = []
    for node in nodes:
        why = []
        state = node.get("vm_state")
        if state and state != "Running":
            why.append(f"VM {state}")
        if node.get("annotated"):
            why.append("cordoned by the rollout" if node.get("cordoned") else "still annotated by the rollout")
        if why:
            left.append({"node": node.get("name"), "node_type": node.get("node_type"), "why": why,
                         "message": f"{node.get('name')} ({', '.join(why)})"})
    return left


def work_left_line(entries: Sequence[Mapping[str, Any]]) -> str:
    """One line for the summary and ``status``: the nodes with work left, or ``-``."""
    return "Work left: " + (", ".join(str(e.get("message")) for e in entries) or "-")
