"""Deadline and wait_for, on a fake clock (no real sleeping)."""

from __future__ import annotations

import pytest
from clock import FakeClock

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import DeadlineExceeded
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline, wait_for


def test_deadline_counts_down_and_expires() -> None:
    clock = FakeClock()
    d = Deadline(10, clock=clock)
    assert d.remaining() == 10 and not d.expired()
    clock.now += 4
    assert d.remaining() == pytest.approx(6)
    clock.now += 7
    assert d.remaining() == 0 and d.expired()


def test_sub_deadline_never_outlives_its_parent() -> None:
    clock = FakeClock()
    batch = Deadline(30, clock=clock)
    clock.now += 25
    assert batch.sub(60).remaining() == pytest.approx(5)
    assert batch.sub(2).remaining() == pytest.approx(2)


def test_negative_deadline_is_refused() -> None:
    with pytest.raises(ValueError):
        Deadline(-1)


def test_wait_for_returns_the_first_truthy_value() -> None:
    clock = FakeClock()
    answers = iter([None, {}, {"ready": True}])
    value = wait_for(lambda: next(answers), Deadline(10, clock=clock), interval=0.5, sleep=clock.sleep)
    assert value == {"ready": True}
    assert clock.sleeps == [0.5, 0.5]


def test_wait_for_never_sleeps_past_the_deadline_and_checks_once_at_it() -> None:
    clock = FakeClock()
    checks: list[float] = []

    def never() -> bool:
        checks.append(clock.now)
        return False

    with pytest.raises(DeadlineExceeded) as info:
        wait_for(never, Deadline(1.2, clock=clock), interval=0.5, what="node w-1 Ready", sleep=clock.sleep)
    assert clock.sleeps == pytest.approx([0.5, 0.5, 0.2])
    assert checks[-1] == pytest.approx(101.2)  # the last look is at the deadline itself
    assert "node w-1 Ready" in info.value.msg and "1.2s" in info.value.msg
    assert info.value.details["what"] == "node w-1 Ready"


def test_wait_for_carries_extra_details() -> None:
    clock = FakeClock()
    with pytest.raises(DeadlineExceeded) as info:
        wait_for(lambda: None, Deadline(0, clock=clock), what="job", details={"jobid": "j-1"}, sleep=clock.sleep)
    assert info.value.details["jobid"] == "j-1"
    assert clock.sleeps == []


def test_predicate_errors_propagate() -> None:
    def broken() -> bool:
        raise RuntimeError("read failed")

    with pytest.raises(RuntimeError):
        wait_for(broken, Deadline(5))
