"""The run id a rollout holds its lock as (``_decisions.holder.run_id`` and the ``rollout_run_id`` filter)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from ansible_collections.cloudstack.cks.plugins.filter.rollout_run_id import rollout_run_id
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.holder import run_id

NOW = datetime(2026, 12, 5, 17, 4, 9, tzinfo=timezone.utc)


@pytest.mark.parametrize("given, awx_job_id, expected", [
    ("nightly-7", 42, "nightly-7"),          # the operator's own id wins, under AWX too
    ("", 42, "awx-job-42"),
    (None, "42", "awx-job-42"),
    ("", "", "rollout-20261205T170409-123"),
    (None, None, "rollout-20261205T170409-123"),
])
def test_the_given_id_else_the_awx_jobs_else_a_new_one(given: Any, awx_job_id: Any, expected: str) -> None:
    assert run_id(given, awx_job_id, NOW, 123) == expected


def test_a_new_id_reads_the_start_in_utc_whatever_the_clocks_zone() -> None:
    local = NOW.astimezone(timezone(timedelta(hours=-5)))
    assert run_id("", "", local, 9) == "rollout-20261205T170409-9"


def test_two_controllers_started_in_the_same_second_get_different_ids() -> None:
    ids = {rollout_run_id("", awx_job_id="") for _attempt in range(20)}
    assert len(ids) > 1
    assert all(re.fullmatch(r"rollout-\d{8}T\d{6}-\d+", one) for one in ids)
    assert rollout_run_id("", awx_job_id=4711) == "awx-job-4711"
