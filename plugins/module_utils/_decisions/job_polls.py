# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""When to ask CloudStack again whether an async job has ended. Pure.

A job's end is seen only by polling queryAsyncJobResult (QueryAsyncJobResultCmd, answered from the
async_job table by ApiDBUtils.findAsyncJobById), and every poll is a request on a management server
that many rollouts share. Fixed fast polls load it most while a long stop or start runs, for
nothing. So a job is first polled once it has run as long as that step took before (in this
batch, an earlier batch of the rollout, or a prior the operator gave), never sooner than the
poll interval; a job running late is then polled at the interval, backing off up to ``longest``,
and always once more at the deadline (``waiting.wait_for``'s rule).

``job_seconds`` is what one job took, from what the polls saw and CloudStack's own ``created`` and
``completed`` dates (AsyncJobResponse; whole seconds). ``expected_seconds`` turns the jobs of a
command seen so far into the wait before the next one's first poll.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

#: How many of a command's latest jobs the next first poll is judged on: enough that one quick job
#: does not make the next ones poll early, few enough that a cloud getting slower shows soon.
RECENT_JOBS = 3
#: The longest pause between two polls of a job running late: its end is then noticed within this.
LONGEST_PAUSE = 4.0
#: Each pause of a late job is this much longer than the one before it.
GROWTH = 1.5
#: CloudStack dates a job in whole seconds: its own duration is up to this much short.
DATE_RESOLUTION = 1.0


@dataclass(frozen=True)
class PollSchedule:
    """``interval``: the shortest pause between two polls (the module's poll_interval)."""

    interval: float
    growth: float = GROWTH
    longest: float = LONGEST_PAUSE

    def __post_init__(self) -> None:
        if self.interval <= 0:
            raise ValueError(f"interval must be positive (got {self.interval})")
        if self.growth < 1:
            raise ValueError(f"growth must be 1 or more (got {self.growth})")


def pause_before_poll(schedule: PollSchedule, polls_made: int, elapsed: float,
                      expected: Optional[float], left: float) -> float:
    """Seconds to wait before the next poll of a job submitted ``elapsed`` seconds ago.

    ``polls_made``: the polls so far (0: the first is next); ``expected``: what the step is known
    to take (None: not known yet); ``left``: seconds to the deadline (the pause never passes it).
    """
    if polls_made < 0:
        raise ValueError(f"polls_made cannot be negative (got {polls_made})")
    if polls_made == 0:
        # A job is not done the moment it is accepted: the first poll waits at least the interval.
        wait = max(schedule.interval, expected or 0.0) - max(0.0, elapsed)
    else:
        longest = max(schedule.interval, schedule.longest)
        wait = min(longest, schedule.interval * schedule.growth ** (polls_made - 1))
    return max(0.0, min(wait, max(0.0, left)))


def job_seconds(seen_done: float, last_pending: Optional[float] = None,
                cloud_seconds: Optional[float] = None) -> float:
    """What one job took: at most ``seen_done`` (seconds from its submit to the poll that saw it
    ended), at least ``last_pending`` (the last poll that saw it running), and, when CloudStack's
    ``completed - created`` is known, no longer than that plus a date's resolution."""
    took = seen_done
    if cloud_seconds is not None and cloud_seconds >= 0:
        took = min(took, cloud_seconds + DATE_RESOLUTION)
    if last_pending is not None:
        took = max(took, last_pending)
    return max(0.0, took)


def expected_seconds(durations: Sequence[float], prior: Optional[float] = None) -> Optional[float]:
    """The wait before the first poll of a command's next job: the longest of its ``RECENT_JOBS``
    latest jobs (so that most next jobs are done at their first poll), else the prior, else None."""
    recent = [d for d in durations[-RECENT_JOBS:] if d >= 0]
    if recent:
        return max(recent)
    if prior is not None and prior >= 0:
        return float(prior)
    return None
