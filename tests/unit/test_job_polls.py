"""The async job poll schedule (``_decisions.job_polls``): when the next queryAsyncJobResult goes out."""

from __future__ import annotations

import itertools

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.job_polls import (
    DATE_RESOLUTION,
    LONGEST_PAUSE,
    RECENT_JOBS,
    PollSchedule,
    expected_seconds,
    job_seconds,
    pause_before_poll,
)

INTERVALS = (0.05, 0.5, 2.0, 10.0)
EXPECTED = (None, 0.0, 0.1, 0.5, 3.0, 30.0)
ELAPSED = (0.0, 0.2, 1.0, 40.0)
LEFT = (0.0, 0.3, 5.0, 1e6)
POLLS = tuple(range(0, 12))


@pytest.mark.parametrize("interval", INTERVALS)
def test_every_pause_is_within_the_interval_the_deadline_and_the_schedule(interval: float) -> None:
    """Over the whole grid: never past the deadline, never negative; the first pause brings the poll
    to max(interval, expected) after the submit; later pauses are never shorter than the interval
    (no faster fixed polls) unless the deadline is closer, and never longer than the longest."""
    schedule = PollSchedule(interval=interval)
    for polls, expected, elapsed, left in itertools.product(POLLS, EXPECTED, ELAPSED, LEFT):
        pause = pause_before_poll(schedule, polls, elapsed, expected, left)
        assert 0.0 <= pause <= left
        if polls == 0:
            target = max(interval, expected or 0.0)
            assert pause == pytest.approx(max(0.0, min(target - elapsed, left)))
        else:
            assert pause == pytest.approx(min(left, max(interval, min(max(interval, LONGEST_PAUSE),
                                                                      interval * 1.5 ** (polls - 1)))))
            assert pause >= min(interval, left)
            assert pause <= max(interval, LONGEST_PAUSE)


def test_late_polls_back_off_to_the_longest_pause_and_stay_there() -> None:
    schedule = PollSchedule(interval=0.5)
    pauses = [pause_before_poll(schedule, n, 100.0, 10.0, 1e6) for n in range(1, 10)]
    assert pauses == sorted(pauses)
    assert pauses[:3] == [0.5, 0.75, 1.125]
    assert pauses[-1] == LONGEST_PAUSE


def test_an_interval_above_the_longest_pause_is_kept() -> None:
    """The operator's poll_interval is the shortest pause: a longer one is never cut to the longest."""
    schedule = PollSchedule(interval=10.0)
    assert [pause_before_poll(schedule, n, 0.0, None, 1e6) for n in range(4)] == [10.0] * 4


def test_a_job_known_to_take_a_while_is_first_polled_then() -> None:
    schedule = PollSchedule(interval=0.5)
    assert pause_before_poll(schedule, 0, 0.0, 12.0, 1e6) == 12.0
    # The submit itself took 0.3 s of it.
    assert pause_before_poll(schedule, 0, 0.3, 12.0, 1e6) == pytest.approx(11.7)
    # Quicker than the interval: still not polled sooner than the interval.
    assert pause_before_poll(schedule, 0, 0.0, 0.1, 1e6) == 0.5
    # Past the deadline: the last poll goes out now.
    assert pause_before_poll(schedule, 0, 0.0, 12.0, 0.0) == 0.0


@pytest.mark.parametrize("bad", [{"interval": 0}, {"interval": -1}, {"interval": 1, "growth": 0.5}])
def test_a_schedule_that_would_poll_without_pause_is_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        PollSchedule(**bad)


def test_polls_made_cannot_be_negative() -> None:
    with pytest.raises(ValueError):
        pause_before_poll(PollSchedule(interval=1), -1, 0.0, None, 10.0)


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


def test_the_next_first_poll_is_the_longest_of_the_latest_jobs() -> None:
    assert expected_seconds([]) is None
    assert expected_seconds([], prior=7.0) == 7.0
    assert expected_seconds([3.0], prior=30.0) == 3.0  # what this run saw beats the prior
    assert expected_seconds([5.0, 2.0, 3.0]) == 5.0
    # Only the latest RECENT_JOBS count: an early slow job stops mattering.
    assert expected_seconds([50.0] + [2.0] * RECENT_JOBS) == 2.0
    assert expected_seconds([-1.0], prior=-2.0) is None
