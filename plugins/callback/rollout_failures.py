# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Keeps the failed tasks of a rollout run in a JSON file, for the fleet that started the run."""

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_failures
type: aggregate
short_description: Write the failed tasks of a rollout run to a JSON file
version_added: 0.1.0
author:
  - cloudstack.cks contributors (@cloudstack-cks)
description:
  - Enabled by C(cloudstack.cks.cks_fleet_rollout) for each cluster's rollout run, next to the usual output. At the
    end of the run it writes, to the file named by O(path), each failed task (its host, name, C(msg) and, when a
    rollout lock was refused, its C(holder)), so the fleet reads how the run ended instead of parsing its output.
  - It also keeps two answers the fleet reads, by the name each task registers them under, not by the task's
    name - the plan (C(rollout_plan), from C(cloudstack.cks.cks_node_settings) with C(plan=true)) as its node
    types' out-of-date counts and its batches, so a dry run of the fleet (C(--check)) reports per cluster what would be rolled; and the cancel
    (C(rollout_cancel), from C(cloudstack.cks.cks_node_settings) with C(cancel_rollout)) as whether it was taken.
  - Only those keys are kept; nothing else of a result is written.
options:
  path:
    description: The JSON file to write; nothing is written without it.
    type: path
    env:
      - name: CKS_ROLLOUT_FAILURES_PATH
requirements:
  - enabled in C(callbacks_enabled)
"""

import json
import os
from typing import Any

from ansible.plugins.callback import CallbackBase

KEPT_KEYS = ("msg", "holder")
#: The registered answers kept, by the name the rollout's (and the cancel's) task registers them under.
PLAN_REGISTER = "rollout_plan"
CANCEL_REGISTER = "rollout_cancel"


def plan_digest(found: dict[str, Any]) -> dict[str, Any]:
    """What a fleet report says of a plan: per node type how many are out of date, and the batches."""
    given = found.get("node_types")
    node_types: dict[str, Any] = given if isinstance(given, dict) else {}
    batches = [{"node_type": str(batch.get("node_type")), "nodes": [str(node) for node in batch.get("nodes") or []]}
               for batch in found.get("plan") or [] if isinstance(batch, dict)]
    return {"out_of_date": {str(name): int((entry or {}).get("out_of_date") or 0) for name, entry in sorted(node_types.items())},
            "batches": batches}


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "cloudstack.cks.rollout_failures"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self.failures: list[dict[str, Any]] = []
        self.answers: dict[str, Any] = {}

    def v2_runner_on_ok(self, result: Any) -> None:
        found = result._result if isinstance(result._result, dict) else {}
        register = getattr(result._task, "register", None)
        if register == PLAN_REGISTER and "plan" in found:
            self.answers["plan"] = plan_digest(found)
        elif register == CANCEL_REGISTER:
            self.answers["cancel"] = {"cancel_requested": bool(found.get("cancel_requested")), "msg": str(found.get("msg") or "")}

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        if ignore_errors:
            return
        found = result._result if isinstance(result._result, dict) else {}
        entry: dict[str, Any] = {key: str(found[key]) for key in KEPT_KEYS if found.get(key) is not None}
        entry.update(host=result._host.get_name(), task=result._task.get_name(), failed=True)
        self.failures.append(entry)

    def v2_playbook_on_stats(self, stats: Any) -> None:
        path = self.get_option("path")
        if not path:
            return
        partial = f"{path}.part"
        with open(partial, "w", encoding="utf-8") as fh:
            json.dump(dict(self.answers, failures=self.failures), fh, indent=2)
        os.replace(partial, path)
