# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Work left that the out-of-date counts do not show (``_decisions.work_left``)."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.work_left import work_left, work_left_line


def node(name: str = "w4", **fields: Any) -> dict[str, Any]:
    return dict({"name": name, "node_type": "worker", "vm_state": "Running", "annotated": False, "cordoned": False,
                 "out_of_date": False}, **fields)


def test_a_stopped_node_cordoned_by_the_rollout_is_work_left_though_up_to_date() -> None:
    left = work_left([node("w1"), node("w4", vm_state="Stopped", annotated=True, cordoned=True)])
    assert left == [{"node": "w4", "node_type": "worker", "why": ["VM Stopped", "cordoned by the rollout"],
                     "message": "w4 (VM Stopped, cordoned by the rollout)"}]
    assert work_left_line(left) == "Work left: w4 (VM Stopped, cordoned by the rollout)"


@pytest.mark.parametrize(("fields", "why"), [
    ({"vm_state": "Stopped"}, ["VM Stopped"]),
    ({"vm_state": "Error"}, ["VM Error"]),
    ({"annotated": True}, ["still annotated by the rollout"]),
    ({"annotated": True, "cordoned": True}, ["cordoned by the rollout"]),
])
def test_each_kind_of_work_left(fields: dict[str, Any], why: list[str]) -> None:
    assert [e["why"] for e in work_left([node(**fields)])] == [why]


def test_a_node_someone_else_cordoned_is_theirs_not_work_left() -> None:
    assert work_left([node(cordoned=True)]) == []
    assert work_left_line([]) == "Work left: -"
