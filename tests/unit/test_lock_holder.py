"""Who holds the lock and whether that holder is provably gone (``_decisions.holder``), and the Lock
taking over at once a holder whose processes on this host are gone - never one whose batch run lives on,
nor one of another host."""

from __future__ import annotations

import json
import socket
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from clock import FakeClock
from fakes import FakeKube

from ansible_collections.cloudstack.cks.plugins.module_utils._clients import processes
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import LockHeld
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions import holder as h
from ansible_collections.cloudstack.cks.plugins.module_utils._state import record as rec

# The lock is taken at this time (the messages name when it ends).
T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=timezone.utc)
HOST, BOOT = "ctl-1", "boot-a"
CONTROLLER = {"host": HOST, "boot_id": BOOT, "pid": 100, "start_ticks": 5000, "started": "2026-12-05T12:00:00Z"}
BATCH = {"host": HOST, "boot_id": BOOT, "pid": 200, "start_ticks": 9000, "nodes": ["n-2"]}


def alive(*running: int) -> h.Probe:
    return lambda pid, ticks: int(pid) in running


def test_a_controller_still_running_is_not_gone() -> None:
    assert h.holder_gone(CONTROLLER, BATCH, HOST, BOOT, alive(100)) is None


def test_a_dead_controller_whose_batch_run_lives_on_is_not_gone() -> None:
    assert h.holder_gone(CONTROLLER, BATCH, HOST, BOOT, alive(200)) is None


def test_a_dead_controller_and_batch_run_on_this_host_are_gone() -> None:
    why = h.holder_gone(CONTROLLER, BATCH, HOST, BOOT, alive())
    assert why is not None and "ansible-playbook pid 100" in why and HOST in why


@pytest.mark.parametrize("controller, batch, host, boot", [
    (dict(CONTROLLER, host="ctl-2"), BATCH, HOST, BOOT),            # another host: cannot be judged here
    (dict(CONTROLLER, boot_id="boot-b"), BATCH, HOST, BOOT),        # rebooted since: pids mean nothing
    ({"host": HOST, "boot_id": BOOT}, BATCH, HOST, BOOT),           # no ansible-playbook recorded
    (CONTROLLER, dict(BATCH, host="bastion"), HOST, BOOT),          # its batch ran on another host
    (CONTROLLER, BATCH, HOST, ""),                                  # no boot id here (no /proc)
    (None, None, HOST, BOOT),
])
def test_what_cannot_be_judged_here_is_never_gone(controller: Any, batch: Any, host: str, boot: str) -> None:
    assert h.holder_gone(controller, batch, host, boot, alive()) is None


def test_a_pid_reused_by_another_process_is_not_the_controller() -> None:
    # The probe is asked with pid and start time: a reused pid (other start) reads as not running.
    asked: list[tuple[Any, Any]] = []

    def probe(pid: Any, ticks: Any) -> bool:
        asked.append((pid, ticks))
        return False
    assert h.holder_gone(CONTROLLER, BATCH, HOST, BOOT, probe) is not None
    assert asked == [(100, 5000), (200, 9000)]


def test_a_lock_no_batch_has_begun_under_is_left_to_its_lease() -> None:
    # Taken by a playbook of its own (the settings stored with rollout=true): its end proves nothing.
    assert h.holder_gone(CONTROLLER, None, HOST, BOOT, alive()) is None


def test_the_probe_checks_pid_and_start_time_together() -> None:
    me = processes.process_identity()
    assert processes.running(me["pid"], me["start_ticks"])
    assert not processes.running(me["pid"], me["start_ticks"] + 1)


def test_batch_numbers_and_descriptions() -> None:
    plan = [["e-1"], ["c-1"], ["n-1", "n-2"], ["n-3"]]
    assert h.batch_of(plan, ["N-2"]) == (3, 4)
    assert h.batch_of(plan, ["x"]) is None and h.batch_of(None, ["n-1"]) is None
    assert h.describe_batch({"nodes": ["n-1", "n-2"]}, plan) == "batch 3 of 4 (n-1, n-2)"
    assert h.describe_batch({"nodes": ["x"]}, plan) == "the batch of x"
    assert h.describe_controller(dict(CONTROLLER, awx_job="42")) == \
        "AWX job 42, ansible-playbook pid 100 (started 2026-12-05T12:00:00Z) on ctl-1"
    assert h.describe_controller({"host": "h"}) == "on h" and h.describe_controller(None) == ""


def _left_by(kube: FakeKube, clock: FakeClock, controller: dict[str, Any], batch: Any = None) -> None:
    old = rec.Lock(kube, holder_identity="run-a", duration_seconds=60, clock=clock)
    old.controller = controller
    old.plan = [["n-1"], ["n-2"]]
    old.acquire()
    if batch is not None:
        old.batch_run = batch
        old.renew_at_batch_start()


def test_a_holder_gone_from_this_host_is_taken_over_at_once() -> None:
    kube, clock = FakeKube(), FakeClock(T0)
    here = dict(CONTROLLER, host=socket.gethostname(), boot_id=processes.boot_id())
    _left_by(kube, clock, here, dict(BATCH, host=here["host"], boot_id=here["boot_id"]))
    taken = rec.Lock(kube, holder_identity="run-b", clock=clock, probe=alive()).acquire()
    assert taken.holder == "run-b"
    assert taken.taken_over_from is not None and "ansible-playbook pid 100" in taken.taken_over_from["gone"]
    assert taken.taken_over_from["batch"] == "batch 2 of 2 (n-2)"
    # The new holder's own controller is in the lease now, the old batch note gone.
    lease = kube.objects[("lease", rec.LOCK_NAME)]
    assert json.loads(lease["metadata"]["annotations"][h.CONTROLLER_ANNOTATION])["host"] == socket.gethostname()
    assert h.BATCH_ANNOTATION not in lease["metadata"]["annotations"]


def test_a_holder_whose_batch_run_lives_on_is_refused_naming_it_and_when_the_lock_ends() -> None:
    kube, clock = FakeKube(), FakeClock(T0)
    here = dict(CONTROLLER, host=socket.gethostname(), boot_id=processes.boot_id(), awx_job="4711")
    _left_by(kube, clock, here, dict(BATCH, host=here["host"], boot_id=here["boot_id"]))
    clock.now += timedelta(seconds=20)
    with pytest.raises(LockHeld) as refused:
        rec.Lock(kube, holder_identity="run-b", clock=clock, probe=alive(200)).acquire()
    msg = refused.value.msg
    assert "run-a (AWX job 4711, ansible-playbook pid 100" in msg and "batch 2 of 2 (n-2)" in msg
    assert "the lock ends at 2026-12-01T12:01:00.000000Z (in about 40s)" in msg
    assert "cloudstack.cks.unlock" in msg and "rollout_holder=run-a" in msg


def test_the_release_takes_the_holder_notes_off() -> None:
    kube, clock = FakeKube(), FakeClock(T0)
    lock = rec.Lock(kube, holder_identity="run-a", clock=clock)
    lock.acquire()
    assert lock.release()
    lease = kube.objects[("lease", rec.LOCK_NAME)]
    assert not (lease["metadata"].get("annotations") or {}).get(h.CONTROLLER_ANNOTATION)
