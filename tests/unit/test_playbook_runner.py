"""How a rollout run is watched for a cancel of the fleet's job: SIGTERM/SIGINT noted instead of
ending the module, the controller above it seen gone, the cancel asked again until it is taken, and
the run stopped (SIGTERM to its process group) only once the bound has passed. Real processes: a
sleeping Python stands in for the rollout's ansible-playbook run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.playbook import (
    CancelPolicy,
    CancelSignals,
    ControllerWatch,
    RunWatch,
    parent_of,
)


def sleeper(seconds: float = 30) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"], start_new_session=True)


def test_parent_of_reads_the_parent_and_none_once_the_process_is_gone() -> None:
    assert parent_of(os.getpid()) == os.getppid()
    proc = sleeper(0)
    proc.wait()
    assert parent_of(proc.pid) is None


def test_outside_ansible_playbook_the_controller_is_never_seen_gone() -> None:
    watch = ControllerWatch()
    assert watch.chain == [] and watch.gone() is False


def test_sigterm_is_noted_while_watching_and_the_old_handler_comes_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with CancelSignals() as signals:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        assert signals.received == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_cancel_not_taken_is_asked_again_and_the_run_is_stopped_after_the_bound() -> None:
    asked: list[float] = []

    def request() -> bool:
        asked.append(time.monotonic())
        return False

    signals = CancelSignals()
    signals.received = "SIGTERM"
    proc = sleeper()
    begun = time.monotonic()
    watch = RunWatch(proc, None, CancelPolicy(request, timeout=2.0, retry_seconds=0.6), signals, ControllerWatch()).wait()
    assert watch.cancelled_by == "SIGTERM" and watch.stopped and not watch.timed_out
    assert watch.rc == -signal.SIGTERM
    assert 2.0 <= time.monotonic() - begun < 10
    assert len(asked) >= 3


def test_a_run_that_ends_after_the_cancel_was_taken_is_not_stopped() -> None:
    signals = CancelSignals()
    signals.received = "SIGINT"
    proc = sleeper(1.5)
    asked: list[bool] = []
    watch = RunWatch(proc, None, CancelPolicy(lambda: asked.append(True) or True, timeout=30), signals, ControllerWatch()).wait()
    assert watch.cancelled_by == "SIGINT" and not watch.stopped and watch.rc == 0
    assert asked == [True]  # taken the first time: not asked again


def test_without_a_cancel_the_run_is_stopped_at_its_timeout() -> None:
    proc = sleeper()
    watch = RunWatch(proc, 1.0, CancelPolicy(lambda: True, timeout=30), CancelSignals(), ControllerWatch()).wait()
    assert watch.timed_out and watch.cancelled_by is None and watch.rc == -signal.SIGTERM


def test_a_cancel_in_the_poll_the_run_ended_in_is_not_passed_on_but_the_job_counts_as_cancelled() -> None:
    """The run ended by itself: nothing to stop, no cancel asked; the fleet's last play will not run, though."""
    signals = CancelSignals()
    proc = sleeper(0)
    proc.wait()
    signals.received = "SIGTERM"
    asked: list[bool] = []
    watch = RunWatch(proc, None, CancelPolicy(lambda: asked.append(True) or True, timeout=30), signals, ControllerWatch()).wait()
    assert watch.cancelled_by is None and not watch.stopped and asked == []
    assert watch.job_cancelled


def test_a_run_that_ends_without_a_cancel_does_not_count_as_cancelled() -> None:
    watch = RunWatch(sleeper(0), None, CancelPolicy(lambda: True, timeout=30), CancelSignals(), ControllerWatch()).wait()
    assert watch.cancelled_by is None and not watch.job_cancelled
