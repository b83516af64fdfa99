"""The async job poll schedule (``_decisions.job_polls``): when the next queryAsyncJobResult goes out,
and what each job teaches about the next one of its command.

The last tests run the schedule against modelled jobs (a clock moved only by the schedule's own
pauses): the slack a job keeps converges to within the tolerance, at a bounded number of polls per
job, from a prior too high, too low or none, and follows a cloud that gets quicker or slower.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from typing import Optional

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.job_polls import (
    DATE_RESOLUTION,
    LONGEST_PAUSE,
    QUICKEST,
    Bracket,
    PollSchedule,
    bracket_of,
    first_poll_at,
    job_seconds,
    next_bracket,
    pause_before_poll,
    tolerance,
)

INTERVALS = (0.01, 0.05, 0.5, 2.0, 10.0)
BRACKETS = (None, Bracket(0.0, 0.0), Bracket(0.0, 0.1), Bracket(0.5, 0.52), Bracket(0.4, 0.8), Bracket(9.5, 10.0),
            Bracket(2.0, 30.0))
ELAPSED = (0.0, 0.2, 1.0, 40.0)
LEFT = (0.0, 0.3, 5.0, 1e6)
POLLS = tuple(range(0, 12))


def late_pause(interval: float, n: int) -> float:
    return min(max(interval, LONGEST_PAUSE), interval * 1.5 ** n)


@pytest.mark.parametrize("interval", INTERVALS)
def test_every_pause_over_the_grid(interval: float) -> None:
    """Never past the deadline, never negative; the first poll at the interval (never seen), the end of
    a narrow bracket or the middle of a wide one; a probe still running polled again at the bracket's
    end; a job past the bracket's end once more a tolerance later, then from the interval on, backing
    off, never longer than the longest pause (nor the interval, if longer)."""
    schedule = PollSchedule(interval=interval)
    quickest = min(QUICKEST, interval)
    for polls, bracket, elapsed, left in itertools.product(POLLS, BRACKETS, ELAPSED, LEFT):
        pause = pause_before_poll(schedule, polls, elapsed, bracket, left)
        assert 0.0 <= pause <= left
        if polls == 0:
            if bracket is None:
                aim = interval
            elif bracket.width <= tolerance(schedule, bracket):
                aim = max(quickest, bracket.by)
            else:
                aim = max(quickest, (bracket.after + bracket.by) / 2)
            expected = aim - elapsed
        elif bracket is None:
            expected = late_pause(interval, polls - 1)
        else:
            probed = first_poll_at(schedule, bracket) < bracket.by
            if polls == 1 and probed:
                expected = bracket.by - elapsed
            else:
                late = polls - (2 if probed else 1)
                expected = tolerance(schedule, bracket) if late == 0 else late_pause(interval, late - 1)
        assert pause == pytest.approx(max(0.0, min(expected, left)))
        if polls > 0 and not (bracket is not None and polls == 1):
            # No fast fixed polls: past the bracket, never quicker than the tolerance, and from the
            # second late poll on never quicker than the interval.
            assert pause <= max(interval, LONGEST_PAUSE)


def test_the_tolerance_is_a_tenth_of_the_job_between_quickest_and_the_interval() -> None:
    schedule = PollSchedule(interval=0.5)
    assert tolerance(schedule, Bracket(0.0, 0.1)) == QUICKEST
    assert tolerance(schedule, Bracket(0.7, 0.75)) == pytest.approx(0.075)
    assert tolerance(schedule, Bracket(10.0, 10.0)) == 0.5
    # An operator's interval below QUICKEST is the floor instead.
    assert tolerance(PollSchedule(interval=0.01), Bracket(0.0, 0.05)) == 0.01


def test_a_command_never_seen_is_polled_at_the_interval_and_backs_off() -> None:
    schedule = PollSchedule(interval=0.5)
    pauses = [pause_before_poll(schedule, n, 0.0, None, 1e6) for n in range(10)]
    assert pauses[:4] == [0.5, 0.5, 0.75, 1.125]
    assert pauses == sorted(pauses) and pauses[-1] == LONGEST_PAUSE


def test_an_interval_above_the_longest_pause_is_kept() -> None:
    """The operator's poll_interval is the late jobs' pause: a longer one is never cut to the longest."""
    schedule = PollSchedule(interval=10.0)
    assert [pause_before_poll(schedule, n, 0.0, None, 1e6) for n in range(4)] == [10.0] * 4


def test_a_narrow_bracket_is_aimed_at_its_end_a_wide_one_probed_in_its_middle() -> None:
    schedule = PollSchedule(interval=0.5)
    assert first_poll_at(schedule, Bracket(0.48, 0.52)) == 0.52
    assert first_poll_at(schedule, Bracket(0.0, 0.5)) == 0.25
    # Never sooner than QUICKEST after the submit.
    assert first_poll_at(schedule, Bracket(0.0, 0.0)) == QUICKEST
    # A probe still running: next at the bracket's end; still running there: a tolerance later.
    wide = Bracket(0.4, 0.8)
    assert pause_before_poll(schedule, 1, 0.61, wide, 1e6) == pytest.approx(0.19)
    assert pause_before_poll(schedule, 2, 0.81, wide, 1e6) == pytest.approx(0.08)
    assert pause_before_poll(schedule, 3, 0.9, wide, 1e6) == 0.5
    # Past the deadline: the last poll goes out now.
    assert pause_before_poll(schedule, 0, 0.0, Bracket(12.0, 12.0), 0.0) == 0.0


@pytest.mark.parametrize("bad", [{"interval": 0}, {"interval": -1}, {"interval": 1, "growth": 0.5}])
def test_a_schedule_that_would_poll_without_pause_is_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        PollSchedule(**bad)


def test_polls_made_cannot_be_negative() -> None:
    with pytest.raises(ValueError):
        pause_before_poll(PollSchedule(interval=1), -1, 0.0, None, 10.0)


@pytest.mark.parametrize("value,bracket", [
    (11, Bracket(5.5, 11.0)), ("16.5", Bracket(8.25, 16.5)), (0, Bracket(0.0, 0.0)), ([0.5, 0.55], Bracket(0.5, 0.55)),
    ((0, 2), Bracket(0.0, 2.0)),
])
def test_a_prior_is_a_number_or_after_and_by(value: object, bracket: Bracket) -> None:
    assert bracket_of(value) == bracket
    assert bracket_of(bracket.to_list()) == bracket


@pytest.mark.parametrize("bad", [-1, [2, 1], [1], [1, 2, 3], "soon", None, True, {"by": 1}, [-1, 2]])
def test_a_bad_prior_is_refused(bad: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        bracket_of(bad)


@pytest.mark.parametrize("seen,pending,cloud,took", [
    (11.0, None, None, 11.0),  # only the polls: the poll that saw it ended
    (11.0, None, 4.0, 4.0 + DATE_RESOLUTION),  # CloudStack's dates say it ended well before
    (11.0, None, 20.0, 11.0),  # dates later than what was seen (clock skew): the polls win
    (11.0, 10.6, 4.0, 10.6),  # still running at 10.6 s: at least that
    (0.5, None, 0.0, 0.5),  # a job inside one second
    (3.0, None, -5.0, 3.0),  # a negative date difference is ignored
])
def test_what_a_job_took(seen: float, pending: float | None, cloud: float | None, took: float) -> None:
    assert job_seconds(seen, pending, cloud) == pytest.approx(took)


def test_a_job_seen_running_gives_its_own_bracket() -> None:
    schedule = PollSchedule(interval=0.5)
    # Probed at 0.6 in (0.4, 0.8) and still running, ended by 0.8: (0.6, 0.8), half as wide.
    assert next_bracket(schedule, Bracket(0.4, 0.8), 0.8, 0.6) == Bracket(0.6, 0.8)
    # Never seen before, polled at 0.5 (running) and 1.0: (0.5, 1.0).
    assert next_bracket(schedule, None, 1.0, 0.5) == Bracket(0.5, 1.0)
    # CloudStack's dates narrow a long job: 10 s by them, seen running at 4 s and ended by 12 s.
    assert next_bracket(schedule, None, 12.0, 4.0, 10.0) == Bracket(9.0, 11.0)


def test_a_job_ended_by_its_first_poll_moves_the_bracket_down() -> None:
    schedule = PollSchedule(interval=0.5)
    # Never seen, ended by the first poll at the interval: probed from the bottom next.
    assert next_bracket(schedule, None, 0.5) == Bracket(0.0, 0.5)
    # Ended by the probe at 0.6 in (0.4, 0.8): below it, half as wide again (0.4 * 1.5).
    moved = next_bracket(schedule, Bracket(0.4, 0.8), 0.6)
    assert moved.by == 0.6 and moved.after == pytest.approx(0.0)
    # Ended by the end of a narrow bracket: widened downward by part of the tolerance.
    after = next_bracket(schedule, Bracket(0.49, 0.52), 0.52)
    assert after.by == 0.52 and 0.49 - 0.05 < after.after < 0.49
    # Never below what CloudStack's dates prove.
    assert next_bracket(schedule, Bracket(0.0, 30.0), 15.0, None, 14.0).after == 13.0


# -- the schedule against modelled jobs ------------------------------------------------------------------


@dataclass
class Rollout:
    polls: list[int]
    slack: list[float]
    bracket: Optional[Bracket]


def model(durations: list[float], interval: float = 0.5, prior: Optional[Bracket] = None,
          round_trip: float = 0.005) -> Rollout:
    """Each job polled as the schedule says on a clock moved by its pauses and each poll's round trip;
    a poll sees the job ended when the job ended by the time the server answers it (half the trip)."""
    schedule = PollSchedule(interval=interval)
    bracket, polls, slack = prior, [], []
    for took in durations:
        clock, made, running_at = 0.0, 0, None
        while True:
            clock += pause_before_poll(schedule, made, clock, bracket, 1e6)
            asked = clock
            made += 1
            clock += round_trip
            if asked + round_trip / 2 >= took:
                slack.append(asked + round_trip / 2 - took)
                bracket = next_bracket(schedule, bracket, asked, running_at)
                break
            running_at = asked
        polls.append(made)
    return Rollout(polls, slack, bracket)


def mean(values: list[float] | list[int]) -> float:
    return sum(values) / len(values)


# cks-sim's jobs at the bench's time scale (0.05): a resize 0.1 s, a stop 0.5 s, a start 0.75 s.
@pytest.mark.parametrize("took", [0.1, 0.5, 0.75])
@pytest.mark.parametrize("prior", [None, "twice", "half"])
def test_the_slack_converges_within_the_tolerance(took: float, prior: Optional[str]) -> None:
    given = None if prior is None else bracket_of({"twice": 2 * took, "half": took / 2}[prior])
    run = model([took] * 40, prior=given)
    settled = run.slack[10:]
    tol = tolerance(PollSchedule(interval=0.5), Bracket(took, took))
    # Each settled job is seen ended within the tolerance (and a poll's round trip) of its end...
    assert max(settled) <= tol + 0.01
    # ... at one poll, plus a probe every few jobs, never three polls.
    assert mean(run.polls[10:]) <= 1.5 and max(run.polls[10:]) <= 2
    # The old schedule (first poll at what the jobs were seen to take, never below the interval)
    # kept 0.5 - 0.1 s of slack on every resize, and the poll interval on a job just longer than it.
    assert mean(settled) < 0.05


def test_the_slack_shrinks_over_a_rollout_from_no_prior() -> None:
    """Without a prior the first job of a command is polled at the interval and backs off: its slack
    can be the interval; the schedule then narrows it job after job."""
    run = model([0.1] * 13)
    assert run.slack[0] > 0.35
    assert mean(run.slack[6:]) < run.slack[0] / 5


def test_a_cloud_getting_quicker_or_slower_is_followed() -> None:
    quicker = model([1.0] * 15 + [0.5] * 15)
    assert max(quicker.slack[-5:]) <= 0.06
    slower = model([0.5] * 15 + [1.0] * 15)
    # The first slow job is late (polled a tolerance past the bracket, then at the interval)...
    assert slower.polls[15] >= 3
    # ... and the next ones are aimed by it.
    assert max(slower.slack[-5:]) <= 0.11 and max(slower.polls[-5:]) <= 2


def test_jobs_that_vary_cost_a_bounded_number_of_polls() -> None:
    """Stops of 10 s give or take a few tenths (a real cloud, no dates used): about 1.5 polls a job,
    the slack about the tolerance (half a second here), none polled more than a handful of times."""
    rng = random.Random(7)
    run = model([rng.gauss(10.0, 0.3) for _job in range(200)])
    assert mean(run.polls) <= 1.8 and max(run.polls[5:]) <= 5
    assert mean(run.slack[5:]) <= 0.5
