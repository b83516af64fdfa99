# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Who holds the rollout lock, as the Lease's annotations say, and whether that holder is provably gone.

The Lease names its holder (``holderIdentity``: the run id, ``awx-job-<id>`` under AWX). Beside it:

- ``CONTROLLER_ANNOTATION``: the controller that took the lock - its host and boot id, the
  ansible-playbook process (pid and start time) and the AWX job id when AWX runs it;
- ``BATCH_ANNOTATION``: the module run working the batch in progress (host, boot id, pid, start
  time), the batch's nodes and when it began; written at each batch's start;
- ``PLAN_ANNOTATION``: the plan's batches (node names), so that a batch knows its number.

A holder is provably gone only on the host it ran on (same host name and boot id), once a batch has
begun: its ansible-playbook process is not running (pid and start time, so a reused pid is not mistaken
for it) and neither is the module run of its last batch (which may live on after its controller, to
bring its batch to a safe point and release). Anywhere else only the lease's expiry, or the operator naming
the holder (``unlock``), frees the lock.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Callable, Mapping, Optional, Sequence

CONTROLLER_ANNOTATION = "cloudstack.apache.org/rollout-controller"
BATCH_ANNOTATION = "cloudstack.apache.org/rollout-batch"
PLAN_ANNOTATION = "cloudstack.apache.org/rollout-plan"
ANNOTATIONS = (CONTROLLER_ANNOTATION, BATCH_ANNOTATION, PLAN_ANNOTATION)

#: ``running(pid, start_ticks)``: whether that process still runs on this host.
Probe = Callable[[Any, Any], bool]


def parse(text: Any) -> Optional[Any]:
    """An annotation's JSON value (None when absent or unreadable: it then proves nothing)."""
    if not text:
        return None
    try:
        return json.loads(str(text))
    except ValueError:
        return None


def annotation(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def describe_controller(controller: Optional[Mapping[str, Any]]) -> str:
    """"AWX job 42, ansible-playbook pid 812 (started 2026-12-05T12:00:01Z) on awx-ee-7" or "" when unknown."""
    if not controller:
        return ""
    parts = []
    if controller.get("awx_job"):
        parts.append(f"AWX job {controller['awx_job']}")
    if controller.get("pid"):
        started = f" (started {controller['started']})" if controller.get("started") else ""
        parts.append(f"ansible-playbook pid {controller['pid']}{started}")
    host = f"on {controller['host']}" if controller.get("host") else ""
    return ", ".join(parts) + (" " if parts and host else "") + host


def batch_of(plan: Optional[Sequence[Any]], nodes: Sequence[str]) -> Optional[tuple[int, int]]:
    """(number, count) of the plan's batch holding ``nodes`` (the first of them), or None."""
    if not plan or not nodes:
        return None
    first = str(nodes[0]).lower()
    for index, batch in enumerate(plan):
        if isinstance(batch, list) and first in (str(n).lower() for n in batch):
            return index + 1, len(plan)
    return None


def describe_batch(batch: Optional[Mapping[str, Any]], plan: Optional[Sequence[Any]] = None) -> str:
    """"batch 2 of 4 (node-a, node-b)", "the batch of node-a" or "" when no batch began."""
    if not batch or not batch.get("nodes"):
        return ""
    nodes = [str(n) for n in batch["nodes"]]
    numbered = batch_of(plan, nodes)
    names = ", ".join(nodes)
    if numbered is not None:
        return f"batch {numbered[0]} of {numbered[1]} ({names})"
    return f"the batch of {names}"


def holder_gone(controller: Optional[Mapping[str, Any]], batch: Optional[Mapping[str, Any]],
                host: str, boot: str, running: Probe) -> Optional[str]:
    """Why the lock's holder is provably gone, judged on ``host`` (booted as ``boot``); None when it is
    not, or cannot be judged here (another host, a controller whose process was not recorded)."""
    if not controller or not controller.get("pid") or controller.get("start_ticks") is None:
        return None
    if controller.get("host") != host or not boot or controller.get("boot_id") != boot:
        return None
    if running(controller["pid"], controller["start_ticks"]):
        return None
    if not batch or not batch.get("pid") or batch.get("start_ticks") is None:
        # No batch has begun: a lock taken by a playbook of its own (cks_node_settings, then batches run by
        # other playbooks) is not judged by the process that took it; its lease ends it.
        return None
    if batch.get("host") != host or batch.get("boot_id") != boot:
        return None  # its last batch ran elsewhere (shipped to another host): cannot be judged here
    if running(batch["pid"], batch["start_ticks"]):
        return None  # the controller is gone, but its batch's run still brings the batch to a safe point
    return f"its controller ({describe_controller(controller)}) is no longer running, nor is any module run of it"


def run_id(given: Any, awx_job_id: Any, now: datetime, nonce: int) -> str:
    """The run id a rollout holds the lock as: the one given, else its AWX job's, else a new one.

    Under AWX the job names itself (``awx-job-<id>``), so the lock's holder, the report and ``status``
    point at the job. Elsewhere the start time (UTC) and a random ``nonce`` keep two controllers
    started in the same second apart."""
    if given not in (None, ""):
        return str(given)
    if awx_job_id not in (None, ""):
        return f"awx-job-{awx_job_id}"
    return f"rollout-{now.astimezone(timezone.utc):%Y%m%dT%H%M%S}-{int(nonce)}"
