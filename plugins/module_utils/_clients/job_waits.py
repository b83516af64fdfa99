# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""What the async jobs of one CloudStack client took, and how many polls each cost.

The client learns from each job it awaits, so the next job of the same command (the next node of
the batch) is first polled when it is likely done; a rollout hands what one batch learned to the
next batch's run as ``job_seconds`` (the priors here). The decisions are ``_decisions.job_polls``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.job_polls import expected_seconds


@dataclass(frozen=True)
class JobWait:
    """One awaited job: its command, id and target, the polls it cost and what it took."""

    command: str
    jobid: str
    target: Optional[str]
    polls: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"command": self.command, "jobid": self.jobid, "target": self.target, "polls": self.polls,
                "seconds": round(self.seconds, 3)}


class JobTimes:
    """The durations learned per command, the priors given, and every wait so far."""

    def __init__(self, priors: Optional[Mapping[str, float]] = None) -> None:
        self.priors: dict[str, float] = {}
        self.give_priors(priors or {})
        self._durations: dict[str, list[float]] = defaultdict(list)
        self.waits: list[JobWait] = []

    def give_priors(self, priors: Mapping[str, Any]) -> None:
        """What each command took before this run (an earlier batch's ``job_seconds``)."""
        given = {str(command): float(seconds) for command, seconds in priors.items()}
        for command, value in given.items():
            if value < 0:
                raise ValueError(f"job_seconds.{command}: cannot be negative (got {value:g})")
        # All checked first: a bad value leaves the priors as they were.
        self.priors.update(given)

    def expected(self, command: str) -> Optional[float]:
        return expected_seconds(self._durations.get(command, []), self.priors.get(command))

    def record(self, wait: JobWait) -> None:
        self.waits.append(wait)
        self._durations[wait.command].append(wait.seconds)

    def learned(self) -> dict[str, float]:
        """The wait before the next first poll per command, for the next batch of the rollout."""
        commands = set(self.priors) | set(self._durations)
        found = {c: self.expected(c) for c in sorted(commands)}
        return {c: round(v, 3) for c, v in found.items() if v is not None}

    def polls(self) -> int:
        return sum(w.polls for w in self.waits)

    def report(self) -> dict[str, Any]:
        """The run's jobs for its result: all polls, each wait, and ``job_seconds`` for the next run."""
        return {"polls": self.polls(), "waits": [w.to_dict() for w in self.waits], "job_seconds": self.learned()}
