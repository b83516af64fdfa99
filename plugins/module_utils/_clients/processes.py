# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Who runs this module: the host, the ansible-playbook process above it, and whether a process
recorded earlier still runs.

A process is named by its pid and its start time (``/proc/<pid>/stat`` field 22, clock ticks since
boot) together with the host's boot id: a pid the kernel hands out again later has another start
time, and a start time means nothing after a reboot. Without ``/proc`` (not Linux) nothing is
known, and nothing is ever judged gone from here.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.playbook import command_of

#: Set by AWX in every job's environment (RunJob.build_env): the job's id.
AWX_JOB_ENV = "JOB_ID"

_PLAYBOOK_COMMANDS = ("ansible-playbook", "ansible.cli.playbook")


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _stat(pid: int) -> Optional[list[str]]:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first); None: no such process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            # The command name may hold spaces and parentheses: the fields start after the last ")".
            return fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_ticks(pid: int) -> Optional[int]:
    """When ``pid`` started (clock ticks since boot); None when it is gone or a zombie (killed, not reaped)."""
    fields = _stat(pid)
    if not fields or len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    try:
        return int(fields[19])
    except ValueError:
        return None


def parent_of(pid: int) -> Optional[int]:
    fields = _stat(pid)
    if not fields or len(fields) < 2 or fields[0] == "Z":
        return None
    return int(fields[1])


def started_at(ticks: int) -> Optional[str]:
    """A process start (ticks since boot) as UTC RFC 3339, from the boot time in ``/proc/stat``."""
    try:
        with open("/proc/stat", encoding="utf-8") as fh:
            btime = next(int(line.split()[1]) for line in fh if line.startswith("btime "))
        moment = btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, StopIteration, ValueError):
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def playbook_pid() -> Optional[int]:
    """The ansible-playbook process this module runs under (its workers are forks of it, with the same
    command line: the highest one of the chain), or None outside ansible-playbook."""
    found: Optional[int] = None
    pid = os.getpid()
    for _depth in range(12):
        parent = parent_of(pid)
        if parent is None or parent <= 1:
            break
        if any(name in command_of(parent) for name in _PLAYBOOK_COMMANDS):
            found = parent
        elif found is not None:
            break
        pid = parent
    return found


def process_identity(pid: Optional[int] = None) -> dict[str, Any]:
    """``pid`` (this process by default) as the lease records it: host, boot id, pid, start ticks."""
    pid = os.getpid() if pid is None else pid
    identity: dict[str, Any] = {"host": socket.gethostname(), "boot_id": boot_id()}
    ticks = start_ticks(pid)
    if ticks is not None:
        identity.update(pid=pid, start_ticks=ticks, started=started_at(ticks))
    return identity


def controller_identity() -> dict[str, Any]:
    """The controller running this rollout: its host, the ansible-playbook process (when this runs
    under one on this host) and the AWX job (when AWX runs it)."""
    pid = playbook_pid()
    identity = process_identity(pid) if pid is not None else {"host": socket.gethostname(), "boot_id": boot_id()}
    job = os.environ.get(AWX_JOB_ENV)
    if job:
        identity["awx_job"] = str(job)
    return identity


def running(pid: Any, ticks: Any) -> bool:
    """Whether the process ``pid`` that started at ``ticks`` still runs on this host."""
    try:
        return start_ticks(int(pid)) == int(ticks)
    except (TypeError, ValueError):
        return True  # a record nobody can read proves nothing
