# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""What the async jobs of one CloudStack client took, and how many polls each cost.

The client learns from each job it awaits what the command's jobs take (a ``Bracket``), so that
the next job of the same command (the next node of the batch) is first polled about when it ends;
a rollout hands what one batch learned to the next batch's run as ``job_seconds`` (the priors
here). The decisions are ``_decisions.job_polls``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.job_polls import Bracket, bracket_of


@dataclass(frozen=True)
class JobWait:
    """One awaited job: its command, id and target, the polls it cost and what it took; ``aimed``:
    when its first poll was aimed (seconds after the submit), ``running_at``: the last poll that saw
    it running (None: ended by the first)."""

    command: str
    jobid: str
    target: Optional[str]
    polls: int
    seconds: float
    aimed: Optional[float] = None
    running_at: Optional[float] = None

    def to_dict(self) -> dict[str, Any]:
        return {"command": self.command, "jobid": self.jobid, "target": self.target, "polls": self.polls,
                "seconds": round(self.seconds, 3),
                "aimed": None if self.aimed is None else round(self.aimed, 3),
                "running_at": None if self.running_at is None else round(self.running_at, 3)}


class JobTimes:
    """The bracket learned per command (the priors given, then each job's), and every wait so far."""

    def __init__(self, priors: Optional[Mapping[str, Any]] = None) -> None:
        self.priors: dict[str, Bracket] = {}
        self._learned: dict[str, Bracket] = {}
        self.waits: list[JobWait] = []
        self.give_priors(priors or {})

    def give_priors(self, priors: Mapping[str, Any]) -> None:
        """What each command took before this run (an earlier batch's ``job_seconds``): ``[after, by]``
        or a number of seconds."""
        given: dict[str, Bracket] = {}
        for command, value in priors.items():
            try:
                given[str(command)] = bracket_of(value)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"job_seconds.{command}: {exc}") from None
        # All checked first: a bad value leaves the priors as they were.
        self.priors.update(given)
        for command in given:
            self._learned.pop(command, None)

    def bracket(self, command: str) -> Optional[Bracket]:
        """What the command's jobs are known to take now: learned in this run, else the prior, else None."""
        return self._learned.get(command) or self.priors.get(command)

    def record(self, wait: JobWait, learned: Optional[Bracket] = None) -> None:
        """One job awaited; ``learned``: the command's bracket after it (None: unchanged, as after a
        job given up at the deadline)."""
        self.waits.append(wait)
        if learned is not None:
            self._learned[wait.command] = learned

    def learned(self) -> dict[str, list[float]]:
        """The bracket per command, ``[after, by]``, for the next batch of the rollout."""
        commands = sorted(set(self.priors) | set(self._learned))
        found = {c: self.bracket(c) for c in commands}
        return {c: b.to_list() for c, b in found.items() if b is not None}

    def polls(self) -> int:
        return sum(w.polls for w in self.waits)

    def report(self) -> dict[str, Any]:
        """The run's jobs for its result: all polls, each wait, and ``job_seconds`` for the next run."""
        return {"polls": self.polls(), "waits": [w.to_dict() for w in self.waits], "job_seconds": self.learned()}
