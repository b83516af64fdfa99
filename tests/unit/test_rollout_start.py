"""A rollout starts in one module run (not one per check): which refusal stops it before its lock, and with
which words - the same as when the role asserted them after a run of their own."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._services.start import REFUSED, refusal


@pytest.mark.parametrize(("judged", "expected"), [
    ({"etcd_check_refusal": None, "refusal_error": None}, None),
    ({"etcd_check_refusal": "may not exec into etcd-c1", "refusal_error": None}, "may not exec into etcd-c1"),
    ({"etcd_check_refusal": None, "refusal_error": "w1: account limit"}, "w1: account limit"),
    # Both: the etcd check first, as the role asserted it first.
    ({"etcd_check_refusal": "may not exec", "refusal_error": "w1: account limit"}, "may not exec"),
    # The nodes the deployment planner could not place in their strict groups, after the others.
    ({"etcd_check_refusal": None, "refusal_error": None, "placement_error": "group spread: 4 members"},
     "group spread: 4 members"),
    ({"etcd_check_refusal": None, "refusal_error": "w1: account limit", "placement_error": "group spread"},
     "w1: account limit"),
])
def test_the_refusal_before_the_lock(judged: dict[str, Any], expected: Any) -> None:
    found = refusal(judged)
    if expected is None:
        assert found is None
    else:
        assert found == "Refused before the lock (nothing changed): " + expected and found.startswith(REFUSED)
