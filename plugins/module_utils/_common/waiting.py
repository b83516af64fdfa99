# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Deadlines and bounded waits.

Every wait of the collection (an async job, a node turning Ready, a pod going away, etcd
regaining quorum) goes through ``wait_for`` with a ``Deadline``, so that no step can hang a
rollout: a batch has one deadline, and each step inside it takes its own shorter one with
``Deadline.sub``.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Optional, TypeVar

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import DeadlineExceeded

T = TypeVar("T")


# Polling every half second keeps the time to notice a change under a second without
# loading the APIs; no jitter, so waits are reproducible in tests and benchmarks.
DEFAULT_INTERVAL = 0.5


class Deadline:
    """A point in time ``seconds`` from now, on the monotonic clock (wall-clock jumps are ignored)."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        if seconds < 0:
            raise ValueError(f"a deadline cannot be negative (got {seconds})")
        self.seconds = float(seconds)
        self._clock = clock
        self._start = clock()
        self._end = self._start + self.seconds

    def remaining(self) -> float:
        """Seconds left, never below zero."""
        return max(0.0, self._end - self._clock())

    def elapsed(self) -> float:
        return self._clock() - self._start

    def expired(self) -> bool:
        return self._clock() >= self._end

    def sub(self, seconds: float) -> Deadline:
        """A deadline for one step: ``seconds`` from now, but never later than this one."""
        return Deadline(min(float(seconds), self.remaining()), clock=self._clock)

    def __repr__(self) -> str:
        return f"Deadline({self.seconds:g}s, {self.remaining():.1f}s left)"


def wait_for(
    predicate: Callable[[], T],
    deadline: Deadline,
    interval: float = DEFAULT_INTERVAL,
    what: str = "a condition",
    details: Optional[Mapping[str, Any]] = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``predicate`` until it returns a truthy value, and return that value.

    It is asked once more when the deadline is reached (the last sleep is cut short to end
    exactly there), then ``DeadlineExceeded`` says what was waited for and for how long.
    Exceptions from ``predicate`` are not caught: a failed read is the caller's to judge.
    """
    if interval <= 0:
        raise ValueError(f"interval must be positive (got {interval})")
    while True:
        value = predicate()
        if value:
            return value
        left = deadline.remaining()
        if left <= 0:
            raise DeadlineExceeded(
                f"gave up waiting for {what} after {deadline.elapsed():.1f}s (deadline {deadline.seconds:g}s)",
                what=what,
                waited=round(deadline.elapsed(), 1),
                deadline=deadline.seconds,
                **dict(details or {}),
            )
        sleep(min(interval, left))
