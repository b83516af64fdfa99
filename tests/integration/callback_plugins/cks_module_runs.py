# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""A test callback: one JSON line per module run of the collection (the tests count them: each costs a Python start)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: cks_module_runs
type: aggregate
short_description: One JSON line per cloudstack.cks module run (tests only)
description:
  - Appends, for each task of a C(cloudstack.cks) module that ran (not skipped), its module, its C(mode) if any,
    its name, and when its task started and the run ended, to the file CKS_MODULE_RUNS_PATH names.
options: {}
"""

PREFIX = "cloudstack.cks."


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "cks_module_runs"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self.path = os.environ.get("CKS_MODULE_RUNS_PATH", "")
        self.task_started: dict[str, float] = {}

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        self.task_started[task._uuid] = time.time()

    def _record(self, result: Any, failed: bool) -> None:
        task = result._task
        action = getattr(task, "resolved_action", None) or task.action
        if not self.path or not str(action).startswith(PREFIX):
            return
        args = task.args if isinstance(task.args, dict) else {}
        line = {"module": action, "mode": args.get("mode"), "task": task.get_name(), "failed": failed,
                "started": self.task_started.get(task._uuid), "ended": time.time()}
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")

    def v2_runner_on_ok(self, result: Any) -> None:
        self._record(result, failed=False)

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._record(result, failed=True)
