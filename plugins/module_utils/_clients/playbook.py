# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""One ``ansible-playbook`` run of the collection's rollout playbook, as a process of its own.

A fleet rolls each cluster as its own run so that a cluster's failure, its facts, its
``rollout_nodes`` group and its batches stay its own: the rollout playbook runs unchanged.
Its output is the usual one (kept as the cluster's log); the collection's ``rollout_failures``
callback writes its failed tasks to a JSON file, so how it ended is read, not guessed from text.

A run is in a session of its own, so a signal to the fleet's job does not reach it by itself.
When the job is cancelled - SIGTERM or SIGINT reach this module (ansible-playbook passes them to
its workers, TaskQueueManager._signal_handler and WorkerProcess._term), or the controller above
it is gone (ansible-runner, AWX's engine, SIGKILLs ansible-playbook's process group on a cancel,
Runner.handle_termination, which the workers' own sessions survive) - the run is asked to stop
the way cancel.yml asks (its batch finishes, its release runs), given a bound to end in, and only
then stopped with SIGTERM to its process group.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from types import FrameType
from typing import Any, Callable, Mapping, Optional, Sequence

# What the parent's job set up for its own events (AWX / ansible-runner): a child writing its
# events there would mix them into the parent's job, so the child gets none of it.
PARENT_ONLY_ENV = ("ANSIBLE_CALLBACK_PLUGINS", "ANSIBLE_CALLBACKS_ENABLED", "ANSIBLE_CALLBACK_WHITELIST",
                   "AWX_ISOLATED_DATA_DIR", "RUNNER_OMIT_EVENTS", "RUNNER_ONLY_FAILED_EVENTS")


#: Seconds between two looks at the run, the signals and the controller.
POLL_SECONDS = 0.5
#: Seconds between SIGTERM and SIGKILL when a run has to be stopped.
STOP_GRACE_SECONDS = 60.0
CANCEL_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclass
class PlaybookRun:
    rc: int
    output: Mapping[str, Any]
    timed_out: bool = False
    #: The signal's name when the fleet's job was cancelled while the run went on ("controller gone" without one).
    cancelled_by: Optional[str] = None
    #: Whether the run had to be stopped after the cancel (it did not end within the bound).
    stopped: bool = False
    #: Whether the fleet's job was cancelled by the time the run ended, also when the run ended by itself
    #: first (``cancelled_by`` None): the fleet's last play will not run, so this cluster writes the fleet report.
    job_cancelled: bool = False


@dataclass
class CancelPolicy:
    """How a run is stopped when the fleet's job is cancelled."""

    #: Asks the run to stop before its next batch; True once that was taken (it may be too early: the
    #: run has not taken its lock yet), so it is asked again every ``retry_seconds`` until then.
    request: Callable[[], bool]
    #: Seconds the run may go on after the cancel before it is stopped.
    timeout: float
    retry_seconds: float = 5.0


class CancelSignals:
    """SIGTERM and SIGINT noted instead of ending this process, while a run goes on."""

    def __init__(self) -> None:
        self.received: Optional[str] = None
        self._previous: dict[int, Any] = {}

    def _note(self, signum: int, _frame: Optional[FrameType]) -> None:
        self.received = signal.Signals(signum).name

    def __enter__(self) -> CancelSignals:
        for signum in CANCEL_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._note)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def parent_of(pid: int) -> Optional[int]:
    """The parent of ``pid`` (None: it is gone, or there is no /proc to ask)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            # The command name may hold spaces and parentheses: the fields start after the last ")".
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]) if len(fields) > 1 and fields[0] != "Z" else None


def command_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


class ControllerWatch:
    """Notices that the ansible-playbook above this module is gone (killed with its process group).

    The processes from here up to the highest ancestor running ansible-playbook (its workers are forks
    of it, with the same command line) are remembered with their parents; one of them gone, or given
    another parent, means the controller is gone. Without /proc, or outside ansible-playbook, it never says so.
    """

    def __init__(self) -> None:
        chain: list[tuple[int, int]] = []
        pid = os.getpid()
        found = False
        for _depth in range(12):
            parent = parent_of(pid)
            if parent is None or parent <= 1:
                break
            chain.append((pid, parent))
            if "ansible-playbook" in command_of(parent) or "ansible.cli.playbook" in command_of(parent):
                found = True
            elif found:
                break
            pid = parent
        self.chain = chain if found else []

    def gone(self) -> bool:
        return any(parent_of(pid) != parent for pid, parent in self.chain)


class PlaybookRunner:
    """Runs a playbook with ``python -m ansible.cli.playbook`` (the same Ansible as the caller)."""

    def __init__(self, python: str, collections_path: Optional[str] = None) -> None:
        self.python = python
        self.collections_path = collections_path

    def environment(self) -> dict[str, str]:
        env = {name: value for name, value in os.environ.items() if name not in PARENT_ONLY_ENV}
        env["ANSIBLE_STDOUT_CALLBACK"] = "ansible.builtin.default"
        env["ANSIBLE_CALLBACKS_ENABLED"] = "cloudstack.cks.rollout_failures"
        env["ANSIBLE_RETRY_FILES_ENABLED"] = "0"
        env["ANSIBLE_NOCOLOR"] = "1"
        if self.collections_path:
            current = env.get("ANSIBLE_COLLECTIONS_PATH") or env.get("ANSIBLE_COLLECTIONS_PATHS") or ""
            env["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join(p for p in (self.collections_path, current) if p)
            env.pop("ANSIBLE_COLLECTIONS_PATHS", None)
        return env

    def run(self, playbook: str, vars_path: str, log_path: str, failures_path: str, cwd: str,
            timeout: Optional[float] = None, extra_args: Sequence[str] = (), cancel: Optional[CancelPolicy] = None,
            env: Optional[Mapping[str, str]] = None) -> PlaybookRun:
        """Run to the end (or ``timeout`` seconds); its output goes to ``log_path``.

        With ``cancel``, a cancel of the fleet's job (see the module's docstring) is passed on to the run.
        ``env``: variables the run gets on top of this process's (the cluster's share of the API rate).
        """
        # "-i ," is an inventory of no hosts: the rollout's plays run on the implicit localhost
        # and on the nodes its plan adds, never on hosts of an inventory found by default.
        command = [self.python, "-m", "ansible.cli.playbook", playbook, "-i", ",", "-e", f"@{vars_path}", *extra_args]
        with open(log_path, "w", encoding="utf-8") as log:
            env = dict(self.environment(), **(env or {}), CKS_ROLLOUT_FAILURES_PATH=failures_path)
            # Not AnsibleModule.run_command: the run's output must go to its log file as it comes (a
            # rollout runs for an hour), in a session of its own, and be stopped at the fleet's timeout.
            proc = subprocess.Popen(command, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,  # pylint: disable=ansible-bad-function
                                    stdin=subprocess.DEVNULL, start_new_session=True)
            if cancel is None:
                rc, timed_out = self._wait(proc, timeout)
                return PlaybookRun(rc, read_failures(failures_path), timed_out)
            with CancelSignals() as signals:
                run = RunWatch(proc, timeout, cancel, signals, ControllerWatch()).wait()
        return PlaybookRun(run.rc, read_failures(failures_path), run.timed_out, run.cancelled_by, run.stopped, run.job_cancelled)

    @staticmethod
    def _wait(proc: subprocess.Popen[bytes], timeout: Optional[float]) -> tuple[int, bool]:
        try:
            return proc.wait(timeout=timeout), False
        except subprocess.TimeoutExpired:
            return stop(proc), True


def stop(proc: subprocess.Popen[bytes]) -> int:
    """SIGTERM to the run's process group (ansible-playbook passes it on to its workers), SIGKILL after the grace."""
    signal_group(proc, signal.SIGTERM)
    try:
        return proc.wait(timeout=STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        signal_group(proc, signal.SIGKILL)
        return proc.wait()


def signal_group(proc: subprocess.Popen[bytes], signum: int) -> None:
    try:
        os.killpg(proc.pid, signum)
    except ProcessLookupError:
        pass


class RunWatch:
    """Waits for one run, for its timeout, and for the fleet's job to be cancelled."""

    def __init__(self, proc: subprocess.Popen[bytes], timeout: Optional[float], cancel: CancelPolicy,
                 signals: CancelSignals, controller: ControllerWatch) -> None:
        self.proc = proc
        self.timeout = timeout
        self.cancel = cancel
        self.signals = signals
        self.controller = controller
        self.rc = 0
        self.timed_out = False
        self.cancelled_by: Optional[str] = None
        self.stopped = False
        self.job_cancelled = False

    def wait(self) -> RunWatch:
        begun = time.monotonic()
        cancelled_at: Optional[float] = None
        taken = False
        asked_at = 0.0
        while True:
            try:
                self.rc = self.proc.wait(timeout=POLL_SECONDS)
                # A cancel in the poll the run ended in is not passed on (nothing left to stop) but still counts.
                self.job_cancelled = cancelled_at is not None or self.signals.received is not None or self.controller.gone()
                return self
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if cancelled_at is None:
                why = self.signals.received or ("controller gone" if self.controller.gone() else None)
                if why is not None:
                    self.cancelled_by, cancelled_at = why, now
            if cancelled_at is not None:
                if not taken and now - asked_at >= self.cancel.retry_seconds:
                    asked_at = now
                    taken = self.cancel.request()
                if now - cancelled_at >= self.cancel.timeout:
                    self.rc, self.stopped, self.job_cancelled = stop(self.proc), True, True
                    return self
            elif self.timeout and now - begun >= self.timeout:
                self.rc, self.timed_out = stop(self.proc), True
                return self


def read_failures(path: str) -> Mapping[str, Any]:
    """What the rollout_failures callback wrote ({} when the run ended before it could)."""
    try:
        with open(path, encoding="utf-8") as fh:
            found = json.load(fh)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}
