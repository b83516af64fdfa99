# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Ansible callback for the benchmarks: one JSON line per play, task start and task result.

Enabled only by bench/ (ANSIBLE_CALLBACK_PLUGINS=bench/callback_plugins,
ANSIBLE_CALLBACKS_ENABLED=bench_timer, BENCH_TIMER_FILE=<path>). The times are Unix time, the
clock cks-sim stamps its call log and timeline with, so both can be laid side by side.
Only names, hosts, statuses and cks_node_cycle's step times are written: never task arguments
or any other result.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: bench_timer
type: aggregate
short_description: Time stamps of plays, tasks and task results for bench/
description:
  - Writes one JSON line per play start, task start, task result and playbook end to E(BENCH_TIMER_FILE).
requirements:
  - the BENCH_TIMER_FILE environment variable
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "bench_timer"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        path = os.environ.get("BENCH_TIMER_FILE")
        self._out = open(path, "a", encoding="utf-8") if path else None  # pylint: disable=consider-using-with

    def _write(self, event: str, **fields: Any) -> None:
        if self._out is None:
            return
        self._out.write(json.dumps({"t": time.time(), "event": event, **fields}) + "\n")
        self._out.flush()

    def v2_playbook_on_play_start(self, play: Any) -> None:
        self._write("play", name=play.get_name())

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        self._write("task", name=task.get_name(), uuid=task._uuid, action=task.action)

    def v2_playbook_on_include(self, included_file: Any) -> None:
        self._write("include", path=os.path.basename(str(included_file._filename)))

    def _result(self, status: str, result: Any) -> None:
        self._write("result", status=status, host=result._host.get_name(), uuid=result._task._uuid)

    def _cycle(self, result: Any) -> None:
        # The batch's step times at full precision, whatever the report makes of them. Names,
        # types, outcomes and times only. Read from the result as the worker returned it: the
        # callback's own copy (``result._result``) converts the whole result first, the rollout
        # object in it too, which costs a batch of the later batches tenths of a second that a
        # rollout without this callback does not spend.
        if not str(result._task.action).endswith("cks_node_cycle"):
            return
        raw = getattr(result, "_return_data", None)
        data = raw if isinstance(raw, dict) else result._result
        if "batch" not in data:
            return
        self._write("cycle", batch=[str(n) for n in data.get("batch") or []], nodes=[{
            "name": _text(n.get("name")), "node_type": _text(n.get("node_type")), "outcome": _text(n.get("outcome")),
            "steps": [{"name": _text(s.get("name")), "started": _number(s.get("started")),
                       "ended": _number(s.get("ended")), "outcome": _text(s.get("outcome"))}
                      for s in n.get("steps") or []],
        } for n in data.get("nodes") or []])

    def v2_runner_on_ok(self, result: Any) -> None:
        self._result("ok", result)
        self._cycle(result)

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._result("failed", result)
        self._cycle(result)

    def v2_runner_on_skipped(self, result: Any) -> None:
        self._result("skipped", result)

    def v2_runner_on_unreachable(self, result: Any) -> None:
        self._result("unreachable", result)

    def v2_playbook_on_stats(self, stats: Any) -> None:
        self._write("end")
        if self._out is not None:
            self._out.close()
            self._out = None


def _text(value: Any) -> Any:
    return None if value is None else str(value)


def _number(value: Any) -> Any:
    """A step's Unix time as a plain float (strings, such as a report's ISO times, pass as they are)."""
    if isinstance(value, bool) or value is None:
        return value
    return float(value) if isinstance(value, (int, float)) else str(value)
