# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The live path's commands in the check before the lock: a key without them has the live-path nodes
planned on the restart path, with the reason (pure)."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.api_access import (
    EVERY_NODE,
    FOR_LIVE_PATH,
    FOR_OFFERING,
    ApiAccessReads,
    live_path_refusal,
    without_live_scale,
)

EVERYTHING = frozenset(EVERY_NODE + FOR_OFFERING + FOR_LIVE_PATH)


@pytest.mark.parametrize("allowed, words", [
    (EVERYTHING, None),
    (None, None),  # listApis not read: not judged (noted as not checked by the read)
    (EVERYTHING - {"scaleVirtualMachine"}, "the API key may not call scaleVirtualMachine"),
    (EVERYTHING - {"listCapabilities"}, "the API key may not call listCapabilities"),
    (EVERYTHING - {"listServiceOfferings"}, "the API key may not call listServiceOfferings"),
    (EVERYTHING - {"scaleVirtualMachine", "listCapabilities"},
     "the API key may not call scaleVirtualMachine, listCapabilities"),
])
def test_the_live_path_needs_its_commands(allowed: Optional[frozenset[str]], words: Optional[str]) -> None:
    assert live_path_refusal(ApiAccessReads(allowed)) == words


def record(name: str, kinds: list[str], path: str) -> dict[str, Any]:
    return {"name": name, "reasons": [{"kind": k} for k in kinds], "path": {"path": path, "reason": "as decided"}}


def test_the_live_nodes_move_to_the_restart_path_and_the_batches_run_without_it() -> None:
    plan = {
        "nodes": [record("w-1", ["offering"], "live"), record("w-2", ["kubelet_capacity"], "live"),
                  record("w-3", ["offering", "root_disk"], "restart"), {"name": "c-1", "reasons": []}],
        "live_paths": {"live": ["w-1", "w-2"], "restart": ["w-3"]},
        "hosts": ["w-1", "w-2", "w-3"],
    }
    why = "the API key may not call scaleVirtualMachine"
    moved = without_live_scale(plan, why)
    paths = {n["name"]: n.get("path") for n in moved["nodes"]}
    assert paths["w-1"] == paths["w-2"] == {"path": "restart", "reason": why}
    assert paths["w-3"] == {"path": "restart", "reason": "as decided"}  # a restart stays as decided
    assert "path" not in next(n for n in moved["nodes"] if n["name"] == "c-1")
    assert moved["live_paths"] == {"live": [], "restart": ["w-3", "w-1", "w-2"]}
    assert moved["live_scale_refused"] == why
    assert moved["hosts"] == plan["hosts"]
    assert plan["nodes"][0]["path"]["path"] == "live"  # the plan given is left as it was


def test_a_plan_without_live_paths_is_left_alone() -> None:
    plan = {"nodes": [record("w-1", ["offering"], "restart")]}
    assert without_live_scale(plan, "the API key may not call scaleVirtualMachine") == plan
