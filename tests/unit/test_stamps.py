"""The one UTC stamp format of records, reports, annotations and Events."""

from __future__ import annotations

import time
from typing import Any

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._common import stamps


@pytest.mark.parametrize(("seconds", "stamp"), [
    (0, "1970-01-01T00:00:00Z"),
    (1796659967.9, "2026-12-07T16:12:47Z"),  # fractions are cut, never rounded up into the next second
    ("1796659967", "2026-12-07T16:12:47Z"),  # as a record stored it
])
def test_a_given_moment_is_stamped_in_utc_to_the_second(seconds: Any, stamp: str) -> None:
    assert stamps.utc_stamp(seconds) == stamp


def test_no_moment_is_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time", lambda: 86400.5)
    assert stamps.utc_stamp() == "1970-01-02T00:00:00Z"
