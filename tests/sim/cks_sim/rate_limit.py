"""CloudStack's API rate limit (the ``rate-limit`` plugin), as ``ApiRateLimitServiceImpl`` keeps it.

- ``checkAccess(Account, command)``: a root admin account is let through before anything is
  counted ("API limit does not apply"); every other account's call - any command, list, query
  or async alike - increments the account's ``StoreEntry`` (``hasApiRateLimitBeenExceeded``);
  past ``api.throttling.max`` the call is refused with ``RequestLimitException``, whose text
  ``throwExceptionDueToApiRateLimitReached`` builds from the entry's ``getExpireDuration()``.
- The entry (``StoreEntryImpl``) is made by the first call of an account and expires
  ``api.throttling.interval`` seconds later (``expiry = now + timeToLive * 1000``): a fixed window
  from the first call, counting refused calls too; the next call after it starts a new one.
- ``ApiServer.commandAvailable`` turns the exception into ``ServerApiException(API_LIMIT_EXCEED)``:
  HTTP 429 and errorcode 429, before the command's parameters are even read.
- ``searchApiLimit`` (getApiLimit) and ``resetApiLimit`` read and reset the entries.

The window is given in simulated seconds (spec ``cloud.api_throttling_interval``) and kept in
real ones; the texts and ``expireAfter`` name real milliseconds: the wait a client must keep.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

# ApiRateLimitServiceImpl.throwExceptionDueToApiRateLimitReached as 4.22 words it (the bracketed
# form); older releases' checkAccess said LEGACY_LIMIT_TEXT. The sim answers the 4.22 text.
LIMIT_TEXT = "The given user has reached his/her account api limit, please retry after [{ms}] ms."
LEGACY_LIMIT_TEXT = "The given user has reached his/her account api limit, please retry after {ms} ms."
# ApiErrorCode.API_LIMIT_EXCEED
API_LIMIT_EXCEED = 429
# GetApiLimitCmd / ResetApiLimitCmd.execute when api.throttling.enabled is false: UNSUPPORTED_ACTION_ERROR.
DISABLED_TEXT = "This api is only available when api.throttling.enabled = true."
UNSUPPORTED_ACTION_ERROR = 432


@dataclass
class StoreEntry:
    """StoreEntryImpl: the expiry (real, monotonic seconds) and the counter of one account."""

    expiry: float
    counter: int = 0

    def expired(self, now: float) -> bool:
        return now > self.expiry

    def expire_duration_ms(self, now: float) -> int:
        return 0 if self.expired(now) else int((self.expiry - now) * 1000)


class ApiRateLimit:
    """The limit store and the check, read from the cloud's options on every call (so that
    ``set_config`` can turn the limit on, off or change it on a running sim)."""

    def __init__(self, options: Callable[[], dict[str, Any]], real_seconds: Callable[[float], float],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._options = options
        self._real = real_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._store: dict[str, StoreEntry] = {}

    # -- configuration -----------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        return int(self._options().get("api_throttling_max", -1)) >= 0

    @property
    def max_allowed(self) -> int:
        return int(self._options().get("api_throttling_max", -1))

    @property
    def interval(self) -> float:
        """api.throttling.interval in simulated seconds."""
        return float(self._options().get("api_throttling_interval", 1))

    def _ttl(self) -> float:
        return self._real(self.interval)

    @staticmethod
    def text(ms: int) -> str:
        return LIMIT_TEXT.format(ms=ms)

    # -- the store ---------------------------------------------------------------------------

    def _entry(self, account_id: str, now: float) -> StoreEntry:
        # EhcacheLimitStore.get answers null for an expired entry: the next call makes a new one.
        entry = self._store.get(account_id)
        if entry is None or entry.expired(now):
            entry = self._store[account_id] = StoreEntry(now + self._ttl())
        return entry

    def check(self, account_id: str, root_admin: bool) -> Optional[int]:
        """None when the call may go on; else the milliseconds the refusal names."""
        if not self.enabled or root_admin:
            return None
        now = self._clock()
        with self._lock:
            entry = self._entry(account_id, now)
            entry.counter += 1
            if entry.counter <= self.max_allowed:
                return None
            return entry.expire_duration_ms(now)

    def search(self, account_id: str) -> dict[str, Any]:
        """searchApiLimit's apiIssued, apiAllowed and expireAfter for the caller's account."""
        now = self._clock()
        with self._lock:
            entry = self._store.get(account_id)
            if entry is None or entry.expired(now):
                # A new entry answers the configured timeToLive as it is (seconds), not the ms left.
                self._store[account_id] = StoreEntry(now + self._ttl())
                return {"apiIssued": 0, "apiAllowed": self.max_allowed, "expireAfter": int(self.interval)}
            return {"apiIssued": entry.counter, "apiAllowed": self.max_allowed - entry.counter,
                    "expireAfter": entry.expire_duration_ms(now)}

    def reset(self, account_id: Optional[str]) -> None:
        """resetApiLimit: a fresh entry for one account, or every counter reset."""
        now = self._clock()
        with self._lock:
            if account_id is not None:
                self._store[account_id] = StoreEntry(now + self._ttl())
            else:
                for entry in self._store.values():
                    entry.counter = 0
