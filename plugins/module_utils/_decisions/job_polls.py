# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""When to ask CloudStack again whether an async job has ended. Pure.

A job's end is seen only by polling queryAsyncJobResult (QueryAsyncJobResultCmd, answered from the
async_job table by ApiDBUtils.findAsyncJobById), and every poll is a request on a management server
that many rollouts share. Fixed fast polls load it most while a long stop or start runs, for
nothing; a first poll aimed at what the last jobs were *seen* to take (as before) keeps the slack
of those polls for good, since a job seen ended at its first poll never says how much sooner it
ended. So what is known of a command's jobs is a ``Bracket``: they were still running ``after``
seconds after their submit and had ended ``by`` seconds. Each job narrows it:

- a wide bracket is probed in its middle: ended there, the bracket moves down below it (keeping its
  width, so that a cloud grown quicker is followed at once); still running, the next poll goes at
  ``by`` and the bracket becomes the job's own (probe, end], half as wide;
- a bracket narrower than the ``tolerance`` (a tenth of the job, between ``QUICKEST`` and the poll
  interval) is aimed at its end, one poll a job; each such job widens it downward by ``WIDEN``, so
  that every few jobs one is probed again and the slack stays within the tolerance;
- a job still running at ``by`` is late: polled once more a tolerance later, then from the poll
  interval on, backing off up to ``longest``, and always once more at the deadline
  (``waiting.wait_for``'s rule); its own polls give the new bracket.

A command never seen (no bracket: the first job of a rollout, no prior given) is polled as before:
at the interval, then backing off. ``job_seconds`` is what one job took, for the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

#: The longest pause between two polls of a job running late: its end is then noticed within this.
LONGEST_PAUSE = 4.0
#: Each pause of a late job is this much longer than the one before it.
GROWTH = 1.5
#: CloudStack dates a job in whole seconds: its own duration is known to this much either way.
DATE_RESOLUTION = 1.0
#: The shortest wait the schedule aims for (a job is not done the moment it is accepted, and a
#: poll's own round trip is a few milliseconds): the finest a bracket is worth knowing.
QUICKEST = 0.05
#: A bracket is known well enough once it is narrower than this fraction of the job's time: about
#: the slack a job keeps, for about one probe in four jobs (tests/unit/test_job_polls.py models it).
PRECISION = 0.1
#: A bracket confirmed at its end grows downward by this part of the tolerance, so that it is
#: probed again within a few jobs.
WIDEN = 0.15
#: A bracket whose probe found the job ended moves below the probe, this many times as wide.
PROBE_WIDEN = 1.5


@dataclass(frozen=True)
class PollSchedule:
    """``interval``: the module's poll_interval, the pause between two polls of a job running late
    (and the first poll of a command never seen); ``longest`` caps the back-off."""

    interval: float
    growth: float = GROWTH
    longest: float = LONGEST_PAUSE

    def __post_init__(self) -> None:
        if self.interval <= 0:
            raise ValueError(f"interval must be positive (got {self.interval})")
        if self.growth < 1:
            raise ValueError(f"growth must be 1 or more (got {self.growth})")

    @property
    def quickest(self) -> float:
        """The shortest aimed wait: QUICKEST, or the interval when the operator asked for less."""
        return min(QUICKEST, self.interval)


@dataclass(frozen=True)
class Bracket:
    """A command's jobs were still running ``after`` seconds after their submit, and had ended ``by``."""

    after: float
    by: float

    def __post_init__(self) -> None:
        if not 0 <= self.after <= self.by:
            raise ValueError(f"a job bracket needs 0 <= after <= by (got {self.after:g}, {self.by:g})")

    @property
    def width(self) -> float:
        return self.by - self.after

    def to_list(self) -> list[float]:
        return [round(self.after, 3), round(self.by, 3)]


def bracket_of(value: object) -> Bracket:
    """A prior as the role hands it on (``[after, by]``) or as an operator gives it (a number of seconds:
    the jobs end by then, and not before half of it: a guess, probed in its middle until the jobs
    narrow it). Raises ValueError or TypeError."""
    if isinstance(value, bool):
        raise TypeError(f"a number of seconds or [after, by] is needed (got {value!r})")
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise ValueError(f"[after, by] needs two numbers (got {len(value)})")
        return Bracket(float(value[0]), float(value[1]))
    seconds = float(value)  # type: ignore[arg-type]
    return Bracket(seconds / 2 if seconds >= 0 else seconds, seconds)


def tolerance(schedule: PollSchedule, bracket: Bracket) -> float:
    """How narrow a bracket needs to be to aim at its end: a tenth of the job, at least ``quickest``,
    at most the interval (a real cloud's 10 s stop: 0.5 s at the default interval)."""
    return min(schedule.interval, max(schedule.quickest, PRECISION * bracket.by))


def first_poll_at(schedule: PollSchedule, bracket: Optional[Bracket]) -> float:
    """Seconds after the submit for the first poll: the interval for a command never seen, the end of
    a narrow bracket, the middle of a wide one."""
    if bracket is None:
        return schedule.interval
    if bracket.width <= tolerance(schedule, bracket):
        return max(schedule.quickest, bracket.by)
    return max(schedule.quickest, (bracket.after + bracket.by) / 2)


def pause_before_poll(schedule: PollSchedule, polls_made: int, elapsed: float,
                      bracket: Optional[Bracket], left: float) -> float:
    """Seconds to wait before the next poll of a job submitted ``elapsed`` seconds ago.

    ``polls_made``: the polls so far (0: the first is next), all of which saw it running;
    ``bracket``: what the command's jobs are known to take (None: never seen); ``left``: seconds to
    the deadline (the pause never passes it).
    """
    if polls_made < 0:
        raise ValueError(f"polls_made cannot be negative (got {polls_made})")
    elapsed = max(0.0, elapsed)
    if polls_made == 0:
        wait = first_poll_at(schedule, bracket) - elapsed
    elif bracket is None:
        wait = _late_pause(schedule, polls_made - 1)
    else:
        aim = first_poll_at(schedule, bracket)
        probed = aim < bracket.by
        if polls_made == 1 and probed:
            # Still running in the middle of the bracket: the next poll at its end, where the jobs
            # before it had ended.
            wait = bracket.by - elapsed
        else:
            late = polls_made - (2 if probed else 1)
            # Past the bracket's end: once more shortly after (most late jobs are only a little
            # late), then as a job never seen.
            wait = tolerance(schedule, bracket) if late == 0 else _late_pause(schedule, late - 1)
    return max(0.0, min(wait, max(0.0, left)))


def _late_pause(schedule: PollSchedule, n: int) -> float:
    """The n-th pause (from 0) of a job running late: the interval, growing up to the longest."""
    longest = max(schedule.interval, schedule.longest)
    return min(longest, schedule.interval * schedule.growth ** n)


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


def next_bracket(schedule: PollSchedule, bracket: Optional[Bracket], seen_done: float,
                 last_pending: Optional[float] = None, cloud_seconds: Optional[float] = None) -> Bracket:
    """What the command's jobs are known to take after one more job, polled as ``pause_before_poll``
    said with ``bracket``: seen ended by the poll sent ``seen_done`` seconds after its submit, last
    seen running by the poll sent at ``last_pending`` (None: ended by its first poll), and
    CloudStack's own ``completed - created`` when known. Times are those the polls were sent: the
    answer's round trip would otherwise creep into the aim, job after job."""
    ended_by = job_seconds(seen_done, last_pending, cloud_seconds)
    running_at = 0.0
    if cloud_seconds is not None and cloud_seconds >= 0:
        running_at = max(0.0, cloud_seconds - DATE_RESOLUTION)
    if last_pending is not None:
        # Seen running: the job's own polls bracket it (its probe and the end, or a late job's
        # last two polls), and the next job is aimed by them.
        return Bracket(min(max(running_at, last_pending), ended_by), ended_by)
    if bracket is None:
        # The first job of a command, ended by its first poll at the interval: how much sooner is
        # not known, so the next is probed from the bottom.
        return Bracket(min(running_at, ended_by), ended_by)
    if first_poll_at(schedule, bracket) < bracket.by:
        # Ended by the probe in the middle: the jobs are quicker than the bracket said. It moves
        # down below the probe, half as wide again, so that a cloud grown much quicker is caught up
        # with in a few jobs (each one probed in the middle again).
        width = PROBE_WIDEN * bracket.width
    else:
        # Ended by the bracket's end, as expected: widened downward by a part of the tolerance, so
        # that one job in a few is probed again and a cloud grown quicker is noticed.
        width = bracket.width + WIDEN * tolerance(schedule, bracket)
    return Bracket(min(max(running_at, ended_by - width), ended_by), ended_by)
