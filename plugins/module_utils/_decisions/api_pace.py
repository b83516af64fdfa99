# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""CloudStack's API rate limit, read and kept: the wait an answer names, and the pace of calls.

With ``api.throttling.enabled`` an account may make ``api.throttling.max`` calls per
``api.throttling.interval`` seconds (25 per 1 s by default); past that, every call of the account is
refused until the interval ends, HTTP 429 and errorcode 429, with the wait in the text (never in a
Retry-After header): "The given user has reached his/her account api limit, please retry after
[N] ms." (4.22; older releases write "after N ms.").

The refusal comes before the command runs (the API access check), so a refused call changed
nothing; a client still settles a refused change by reading what it would change before sending
it again, as it does for a lost answer.

Pacing: a client that was refused spaces its calls at a rate learnt from how many of its calls
got through in the interval before (a share of the account's budget: other clients of the account
spend the rest), or at the rate it was given (a fleet gives each of its ``parallel`` clusters an
equal share of the account's rate). Every call of the client, job polls of all the batch's nodes
included, takes its turn on that one pace.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Optional

#: ApiErrorCode.API_LIMIT_EXCEED
API_LIMIT_EXCEED = 429
#: api.throttling.interval's default (seconds): the wait when an answer names none.
DEFAULT_INTERVAL = 1.0
#: The share of a learnt or given rate actually used: CloudStack's window starts with the account's
#: first call, not on our clock, so a pace right at the limit still meets it now and then.
HEADROOM = 0.9
#: Never slower than this (calls per second), whatever was learnt: a rollout must go on.
MIN_RATE = 0.2

_WAIT = re.compile(r"account api limit, please retry after \[?(\d+)\]? ?ms", re.IGNORECASE)


def limit_wait(text: Optional[str]) -> Optional[float]:
    """Seconds the refusal asks to wait ("... retry after [N] ms." or "... after N ms."), else None."""
    found = _WAIT.search(str(text or ""))
    return int(found.group(1)) / 1000.0 if found else None


def is_rate_limited(status: Optional[int], errorcode: Optional[int], text: Optional[str]) -> bool:
    """Whether an answer is CloudStack's rate limit: a 429 (status or errorcode) with its text, or
    any 429 errorcode in CloudStack's error body (a proxy's own 429 has no such body)."""
    if errorcode == API_LIMIT_EXCEED:
        return True
    return status == API_LIMIT_EXCEED and limit_wait(text) is not None


def throttle_wait(named: Optional[float], interval: float, jitter: float) -> float:
    """Seconds to wait out a refusal: the time it names (else a whole interval), plus ``jitter``
    (0..1, a share of a tenth of the wait and at least 50 ms), so that the clients refused together
    do not come back together."""
    base = named if named is not None and named >= 0 else interval
    return base + max(0.05, base * 0.1) * min(1.0, max(0.0, jitter))


def learnt_rate(calls_in_window: int, interval: float, given: Optional[float] = None) -> float:
    """Calls per second to keep after a refusal: ``given`` (a rate set for this client) when there
    is one, else the calls this client got through in the interval before the refusal, with headroom."""
    if given is not None and given > 0:
        return given
    per_second = max(1, calls_in_window) / max(interval, 0.001)
    return max(MIN_RATE, per_second * HEADROOM)


def share_of_rate(account_rate: float, parallel: int) -> float:
    """Each of ``parallel`` rollouts' calls per second on one key of ``account_rate`` calls a second."""
    if account_rate <= 0:
        raise ValueError("the account's rate must be more than 0 calls a second")
    return max(MIN_RATE, account_rate * HEADROOM / max(1, parallel))


def interval_from_wait(longest_wait: float) -> float:
    """The interval a client can assume from the longest wait it was told: at least that, in whole
    seconds as api.throttling.interval is configured, never below the default."""
    return max(DEFAULT_INTERVAL, float(math.ceil(max(0.0, longest_wait))))


@dataclass(frozen=True)
class Slot:
    """When the next call may go (``at``) and the wait for it from ``now``."""

    at: float
    wait: float


def next_slot(now: float, free_at: float, rate: Optional[float]) -> tuple[Slot, float]:
    """The slot of one call and the time the one after it may go. Without a rate, calls go at once
    unless a refusal's wait (``free_at``) is still running."""
    at = max(now, free_at)
    following = at + (1.0 / rate if rate else 0.0)
    return Slot(at, at - now), following
