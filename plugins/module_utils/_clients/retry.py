# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The one retry policy of both API clients, and the count of what it retried.

A kube-apiserver answers 503 while it restarts and 429 (with Retry-After) while it sheds load;
the proxies in front of a CloudStack management server drop connections. None of that may fail
a rollout. The clients classify each failure (``Transient`` or final); this module decides how
often and how long to try again:

- jittered exponential backoff (AWS's "equal jitter": half the step fixed, half random), so the
  controllers of several clusters behind one proxy do not retry in lockstep;
- a server's Retry-After wins over the backoff (client-go does the same), capped, so a server
  cannot park a rollout;
- never past the batch's deadline (nor, without one, past ``budget`` seconds for one request).

Reads are simply sent again. Writes are never sent again blindly: the clients first read what
the write would have changed and send it again only when it did not happen (see
``CloudStackClient.run_change`` and the Kubernetes client's write checks).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Optional, TypeVar

from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import RetrySnapshots
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline

T = TypeVar("T")

DEFAULT_ATTEMPTS = 6
DEFAULT_BASE_DELAY = 0.2
DEFAULT_MAX_DELAY = 5.0
# A Retry-After beyond this is not waited for in one go: the step fails and the batch says why.
DEFAULT_MAX_RETRY_AFTER = 30.0
DEFAULT_BUDGET = 60.0
# How many retries the result lists one by one (the counts stay complete).
RECENT_LIMIT = 20


class Transient(Exception):
    """A failure another try may cure: a 5xx or 429 answer, or no answer at all.

    ``retry_after``: seconds the server asked to wait (Retry-After), if it did. ``maybe_done``:
    False only when the request surely never reached the server (the connection was refused or
    never established); a write whose answer was lost may have been carried out.
    """

    def __init__(self, message: str, status: Optional[int] = None, retry_after: Optional[float] = None,
                 maybe_done: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.maybe_done = maybe_done

    @property
    def unreachable(self) -> bool:
        """The server was never reached (connection refused, not established): it is down or
        restarting, which takes as long as it takes, not a few tries."""
        return not self.maybe_done and self.status is None


class Throttled(Transient):
    """CloudStack's API rate limit refused the call (HTTP 429, errorcode 429) before it ran.

    ``retry_after`` is the wait to keep: the time the answer names, jittered, or the interval; the
    client's pace (``pacing.ApiPacer``) already holds its next call that long. It is waited out
    inside the deadline without spending the attempts meant for real faults.
    """

    def __init__(self, message: str, wait: float, named: Optional[float]) -> None:
        super().__init__(message, status=429, retry_after=wait, maybe_done=False)
        self.named = named

    @property
    def unreachable(self) -> bool:
        return False


def parse_retry_after(value: Any) -> Optional[float]:
    """Seconds from a Retry-After header (delta-seconds only: API servers send no HTTP dates)."""
    if value in (None, ""):
        return None
    try:
        seconds = float(str(value).strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


@dataclass(frozen=True)
class RetryPolicy:
    """How many times and how long to try one request again.

    ``attempts`` counts the first try. ``budget`` bounds the time from the first try to the last
    when the caller has no deadline.
    """

    attempts: int = DEFAULT_ATTEMPTS
    base_delay: float = DEFAULT_BASE_DELAY
    max_delay: float = DEFAULT_MAX_DELAY
    max_retry_after: float = DEFAULT_MAX_RETRY_AFTER
    budget: float = DEFAULT_BUDGET

    def delay(self, retry: int, retry_after: Optional[float] = None,
              rng: Optional[random.Random] = None) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first retry)."""
        uniform = rng.uniform if rng is not None else random.uniform
        if retry_after is not None:
            # A little jitter on top, so that every client told "1 s" does not come back at once.
            return min(retry_after, self.max_retry_after) + uniform(0, self.base_delay)
        step = min(self.max_delay, self.base_delay * 2 ** max(0, retry - 1))
        return step / 2 + uniform(0, step / 2)

    def may_retry(self, retry: int, wait: float, deadline: Optional[Deadline], spent: float,
                  unreachable: bool = False) -> bool:
        """Whether retry number ``retry``, after waiting ``wait`` s, still fits (``spent``: seconds
        since the first try). A server that is ``unreachable`` (an API server whose control node
        restarts, a management server restarting) is tried until the deadline or budget, however
        many tries that takes."""
        if retry >= self.attempts and not unreachable:
            return False
        if deadline is not None:
            return deadline.remaining() > wait
        return spent + wait <= self.budget

    def fits(self, wait: float, deadline: Optional[Deadline], spent: float) -> bool:
        """Whether a wait of ``wait`` s still leaves time before the deadline (or within the budget)."""
        if deadline is not None:
            return deadline.remaining() > wait
        return spent + wait <= self.budget

    def run(self, send: Callable[[], T], deadline: Optional[Deadline] = None,
            on_retry: Optional[Callable[[Transient, float], None]] = None,
            sleep: Callable[[float], None] = time.sleep, rng: Optional[random.Random] = None,
            clock: Callable[[], float] = time.monotonic) -> T:
        """``send()`` until it returns; ``Transient`` raised by it is retried while the policy allows,
        then raised again (the caller turns it into its own error)."""
        retry = 0
        started = clock()
        while True:
            try:
                return send()
            except Throttled as fault:
                # The client's pace holds the next call (this one's and every other thread's) until
                # the wait is over: nothing to sleep here. Only the deadline or budget bounds it,
                # never the attempts meant for real faults.
                wait = fault.retry_after or 0.0
                if not self.fits(wait, deadline, clock() - started):
                    raise
                if on_retry is not None:
                    on_retry(fault, wait)
            except Transient as fault:
                retry += 1
                wait = self.delay(retry, fault.retry_after, rng)
                if not self.may_retry(retry, wait, deadline, clock() - started, unreachable=fault.unreachable):
                    raise
                if on_retry is not None:
                    on_retry(fault, wait)
                sleep(wait)


class RetryLog:
    """What a client retried: counts per action and the last few retries with their cause.

    Thread-safe: the nodes of a batch run in threads that share the clients.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._reconciled: Counter[str] = Counter()
        self._throttled: Counter[str] = Counter()
        self._throttled_wait = 0.0
        self._recent: list[dict[str, Any]] = []

    def retried(self, action: str, cause: str, wait: float) -> None:
        with self._lock:
            self._counts[action] += 1
            self._remember({"action": action, "cause": cause, "waited": round(wait, 2)})

    def throttled(self, action: str, cause: str, wait: float) -> None:
        """A call the API rate limit refused, sent again after ``wait`` s: a retry, counted apart too."""
        with self._lock:
            self._counts[action] += 1
            self._throttled[action] += 1
            self._throttled_wait += wait
            self._remember({"action": action, "cause": cause, "waited": round(wait, 2), "throttled": True})

    def reconciled(self, action: str, how: str, cause: str = "answer lost") -> None:
        """A write whose answer was lost (or refused by the rate limit), settled by reading what it
        would have changed."""
        with self._lock:
            self._reconciled[f"{action}: {how}"] += 1
            self._remember({"action": action, "cause": cause, "settled": how})

    def _remember(self, item: dict[str, Any]) -> None:
        self._recent.append(item)
        if len(self._recent) > RECENT_LIMIT:
            del self._recent[0]

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self._counts.values())

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"retries": sum(self._counts.values()), "by_action": dict(self._counts),
                    "lost_answers_settled": dict(self._reconciled), "recent": [dict(r) for r in self._recent],
                    "throttled": sum(self._throttled.values()), "throttled_by_action": dict(self._throttled),
                    "throttled_seconds": round(self._throttled_wait, 2)}


def retry_report(*logs: tuple[str, Optional[RetrySnapshots]]) -> dict[str, Any]:
    """``{"total": n, "cloudstack": {...}, "kubernetes": {...}}`` for a batch's or a release's result."""
    report: dict[str, Any] = {"total": 0}
    for name, log in logs:
        if log is None:
            continue
        snap = log.snapshot()
        report[name] = snap
        report["total"] += snap["retries"]
    return report
