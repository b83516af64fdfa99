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


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "cloudstack.cks.rollout_failures"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self.failures: list[dict[str, Any]] = []

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
            json.dump({"failures": self.failures}, fh, indent=2)
        os.replace(partial, path)
