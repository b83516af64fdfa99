"""Reading CloudStack's API rate limit out of cks-sim's call log: which calls were refused, and for
how long the account was refused (each refusal names the milliseconds left of its window)."""

from __future__ import annotations

from typing import Any, Optional


def throttled_calls(calls: list[dict[str, Any]], account: Optional[str] = None) -> list[dict[str, Any]]:
    return [c for c in calls if c.get("throttled") and (account is None or c.get("account") == account)]


def throttled_seconds(calls: list[dict[str, Any]], account: Optional[str] = None) -> float:
    """The time the account spent refused: the union of [t, t + the wait each refusal named]."""
    spans = []
    for call in throttled_calls(calls, account):
        wait = int(call.get("retry_after_ms") or 0) / 1000
        spans.append((call["t"], call["t"] + wait))
    total, end = 0.0, float("-inf")
    for start, stop in sorted(spans):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total
