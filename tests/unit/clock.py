"""The one fake clock of the unit tests: time moves only when the code under test sleeps on it or the
test moves it, so waits, deadlines, back-off and lock expiry are checked at exact times without real
sleeping.

    clock = FakeClock()                       # a monotonic clock at 100.0 s
    Deadline(10, clock=clock)                 # the code takes it as a clock function ...
    wait_for(..., sleep=clock.sleep)          # ... and sleeps on it
    clock.now += 4                            # the test moves time itself
    clock.sleeps                              # every sleep asked for, in order

    clock = FakeClock(datetime(2026, 12, 1, tzinfo=timezone.utc))   # a wall clock: now is a datetime
    clock.now += timedelta(seconds=30)                               # sleep() adds a timedelta too
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Union

Instant = Union[float, datetime]


class FakeClock:
    """``now`` is the current time (seconds as a float, or a datetime); calling the clock, ``monotonic()``
    and ``time()`` read it, ``sleep(seconds)`` records the sleep and moves it on."""

    def __init__(self, start: Instant = 100.0) -> None:
        self.now: Any = start
        self.sleeps: list[float] = []

    def __call__(self) -> Any:
        return self.now

    def monotonic(self) -> Any:
        return self.now

    def time(self) -> Any:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0, f"a sleep of {seconds} s"
        self.sleeps.append(seconds)
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        """Move time on by ``seconds`` without recording a sleep (a step that takes time)."""
        self.now += timedelta(seconds=seconds) if isinstance(self.now, datetime) else seconds
