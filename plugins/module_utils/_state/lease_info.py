# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The rollout lock as read from its Lease: its times (Kubernetes MicroTime), who holds it (``LockInfo``),
and the refusal a rollout gets when it is held."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import LockHeld
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.holder import describe_batch, describe_controller

MICROTIME = "%Y-%m-%dT%H:%M:%S.%fZ"


_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:?\d\d)?$")


Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def format_microtime(moment: datetime) -> str:
    """A Kubernetes MicroTime: UTC, exactly six fraction digits, ``Z`` (the server rejects others)."""
    if moment.tzinfo is None:
        raise ValueError("a MicroTime needs an aware datetime")
    return moment.astimezone(timezone.utc).strftime(MICROTIME)


def parse_microtime(text: str) -> datetime:
    """Read a MicroTime or RFC 3339 time as an aware UTC datetime (any fraction length, Z or offset)."""
    found = _TIME.match(str(text).strip())
    if not found:
        raise ValueError(f"not an RFC 3339 time: {text!r}")
    base, fraction, zone = found.groups()
    micro = (fraction or "0")[:6].ljust(6, "0")
    if zone in (None, "Z"):
        zone = "+00:00"
    elif ":" not in zone:
        zone = f"{zone[:3]}:{zone[3:]}"
    return datetime.fromisoformat(f"{base}.{micro}{zone}").astimezone(timezone.utc)


@dataclass(frozen=True)
class LockInfo:
    holder: Optional[str]
    acquire_time: Optional[str]
    renew_time: Optional[str]
    duration_seconds: int
    transitions: int
    resource_version: Optional[str]
    expired: bool
    # Set by acquire when it took over a lease whose holder stopped renewing without release.
    taken_over_from: Optional[dict[str, Any]] = None
    #: The controller that took the lock (``_decisions.holder``), the batch in progress, the plan's batches.
    controller: Optional[dict[str, Any]] = None
    batch: Optional[dict[str, Any]] = None
    plan: Optional[list[Any]] = None
    #: Why the holder is provably gone (its processes on this host are not running); counted as expired.
    gone: Optional[str] = None

    @property
    def held(self) -> bool:
        return bool(self.holder) and not self.expired

    def ends_at(self) -> Optional[datetime]:
        """When the lease ends unless it is renewed (None: its times cannot be read)."""
        try:
            return parse_microtime(self.renew_time or self.acquire_time or "") + timedelta(seconds=self.duration_seconds)
        except ValueError:
            return None

    def who(self) -> str:
        """The holder with its controller and batch: "awx-job-42 (AWX job 42, ansible-playbook pid 9 on h; batch 2 of 4 (n))"."""
        details = "; ".join(x for x in (describe_controller(self.controller), describe_batch(self.batch, self.plan)) if x)
        return f"{self.holder} ({details})" if details else str(self.holder)

    def summary(self) -> dict[str, Any]:
        """What status and the refusals show of the holder."""
        ends = self.ends_at()
        return {"holder": self.holder, "controller": self.controller,
                "controller_text": describe_controller(self.controller) or None, "batch": describe_batch(self.batch, self.plan) or None,
                "batch_nodes": list((self.batch or {}).get("nodes") or []), "batch_started": (self.batch or {}).get("started"),
                "ends": format_microtime(ends) if ends is not None else None, "gone": self.gone}


def held_refusal(info: LockInfo, where: str, now: Optional[datetime] = None) -> LockHeld:
    """The refusal of a rollout that finds the lock held: by whom (its controller, its batch), since
    when, and when the lock ends unless renewed; what to do instead."""
    ends = info.ends_at()
    until = ""
    if ends is not None:
        left = (ends - (now or utcnow())).total_seconds()
        until = (f"; the lock ends at {format_microtime(ends)} (in about {max(0, round(left))}s) unless it is renewed "
                 f"(a working batch renews it every {max(1, info.duration_seconds // 3)}s)")
    return LockHeld(
        f"a rollout holds the lock {where} of this cluster: {info.who()}, since {info.acquire_time}, last renewed "
        f"{info.renew_time} (for {info.duration_seconds}s){until}. Wait for it to end, or cancel it: "
        f"ansible-playbook cloudstack.cks.cancel -e rollout_cluster=<cluster> (it stops before its next batch); "
        f"if its controller is gone (its host down), free the lock at once: ansible-playbook cloudstack.cks.unlock "
        f"-e rollout_cluster=<cluster> -e rollout_holder={info.holder}",
        holder=info.holder, since=info.acquire_time, renew_time=info.renew_time,
        duration_seconds=info.duration_seconds, controller=info.controller, lock_ends=format_microtime(ends) if ends else None,
    )
