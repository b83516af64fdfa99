# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The pace of one CloudStack client's calls under the account's API rate limit.

One ``ApiPacer`` per client, shared by the threads of a batch (every node's calls and job polls):
each call takes the next slot. Until the account is refused, calls go at once (unless a rate was
given); after a refusal every call waits for the interval to end, and then keeps the rate learnt
from it (``_decisions.api_pace``).
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from typing import Any, Callable, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.retry import RetryLog, RetryPolicy
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CloudStackError, InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.api_pace import (
    DEFAULT_INTERVAL,
    interval_from_wait,
    learnt_rate,
    next_slot,
    throttle_wait,
)

#: Calls per second one module run keeps to on its key (a fleet sets it per cluster: its share of
#: the account's rate). Unset: calls go at once until the API rate limit refuses one.
API_RATE_ENV = "CLOUDSTACK_API_RATE"


def api_rate_from_env(value: Optional[str]) -> Optional[float]:
    """Calls per second from ``CLOUDSTACK_API_RATE``; unset or empty is no rate."""
    if value in (None, ""):
        return None
    try:
        rate = float(str(value))
    except ValueError:
        rate = -1.0
    if rate <= 0:
        raise InvalidInput(API_RATE_ENV, value, "must be a number of calls per second above 0 (or unset)")
    return rate


class ChangeThrottled(CloudStackError):
    """A change the API rate limit refused (``wait``: seconds to wait it out). CloudStack refuses
    before the command runs, yet ``run_change`` still reads what it would change before sending it
    again: whatever the API's state, nothing is sent twice unread."""

    def __init__(self, command: str, message: str, wait: float, target: Optional[str] = None) -> None:
        super().__init__(command, message, errorcode=429, target=target)
        self.wait = wait
        self.target = target

    def past(self, deadline: Optional[Deadline], budget: float) -> CloudStackError:
        """The error when the wait outlasts the deadline: the limit's own words and the wait."""
        left = (f"the batch deadline leaves {max(0.0, deadline.remaining()):.1f}s" if deadline is not None
                else f"more than the {budget:g}s a request may take")
        return CloudStackError(
            self.command,
            f"CloudStack's API rate limit refused the call ({self.errortext}); waiting {self.wait:.1f}s for it is past "
            f"the deadline ({left}). The refused call changed nothing: run again once the account's calls are below "
            f"api.throttling.max (getApiLimit tells), or give the rollout a lower {API_RATE_ENV}",
            errorcode=429, target=self.target)

    def settle(self, policy: RetryPolicy, deadline: Optional[Deadline], done: Callable[[], bool], log: RetryLog) -> bool:
        """Wait the refusal out (inside the deadline, not spending the attempts meant for real
        faults), then read: True when the change is already as asked (not sent again)."""
        if not policy.fits(self.wait, deadline, 0.0):
            raise self.past(deadline, policy.budget) from None
        log.throttled(self.command, self.errortext, self.wait)
        # The pace holds the read (the client's next call) until the wait is over.
        if done():
            log.reconciled(self.command, "already done: not sent again", cause="rate limited")
            return True
        log.reconciled(self.command, "not carried out: sent again", cause="rate limited")
        return False


class ApiPacer:
    """Slots for calls: ``before_call`` waits for one, ``throttled`` learns from a refusal."""

    def __init__(self, rate: Optional[float] = None, clock: Callable[[], float] = time.monotonic,
                 rng: Optional[random.Random] = None) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._rng = rng or random.Random()
        self.given = rate if rate and rate > 0 else None
        #: Calls per second kept now (None: no pacing).
        self.rate: Optional[float] = self.given
        self._free_at = 0.0
        self._sent: deque[float] = deque(maxlen=1000)
        self.interval = DEFAULT_INTERVAL
        self.refusals = 0
        self.paced_seconds = 0.0

    def before_call(self, limit: Optional[float] = None) -> float:
        """Take the next slot; returns how long to wait for it (at most ``limit``), the caller sleeps."""
        with self._lock:
            now = self._clock()
            slot, self._free_at = next_slot(now, self._free_at, self.rate)
            wait = slot.wait if limit is None else max(0.0, min(slot.wait, limit))
            self._sent.append(now + wait)
            self.paced_seconds += wait
            return wait

    def throttled(self, named: Optional[float]) -> float:
        """A refusal naming ``named`` seconds (or none): every call waits until the interval ends, and
        the pace is learnt. Returns this caller's wait, jittered."""
        with self._lock:
            now = self._clock()
            self.refusals += 1
            if named is not None:
                self.interval = max(self.interval, interval_from_wait(named))
            window_start = now - self.interval
            got_through = sum(1 for t in self._sent if window_start <= t <= now)
            self.rate = learnt_rate(got_through, self.interval, self.given) if self.rate is None else min(
                self.rate, learnt_rate(got_through, self.interval, self.given))
            wait = throttle_wait(named, self.interval, self._rng.random())
            self._free_at = max(self._free_at, now + wait)
            return wait

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"refusals": self.refusals, "rate": round(self.rate, 2) if self.rate else None,
                    "paced_seconds": round(self.paced_seconds, 2)}
