"""Which failed changes of a Stopped VM count as CloudStack's refusal (the node is then put back)."""

from __future__ import annotations

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.after_stop import (
    is_refusal,
    put_back_cause,
    refused_after_stop,
)


@pytest.mark.parametrize("code", [431, 432, 436, 530, 531, 533, 535])
def test_cloudstack_refusal_codes_are_refusals(code: int) -> None:
    assert is_refusal(code)


@pytest.mark.parametrize("code", [None, 200, 399, 503, 529, 540, True])
def test_no_answer_or_a_proxy_error_is_no_refusal(code: object) -> None:
    # None: a deadline or a lost answer (the change may still be carried out); 503: a proxy.
    assert not is_refusal(code)  # type: ignore[arg-type]


def test_only_the_changes_of_the_stopped_vm_are_put_back() -> None:
    answer = {"errorcode": 535, "command": "changeServiceForVirtualMachine"}
    assert refused_after_stop("change_offering", answer)
    assert refused_after_stop("resize_root_disk", {"errorcode": 432})
    assert refused_after_stop("update_affinity_groups", {"errorcode": 530})
    # A refused stop or start never left the node down because of a change: handled as before.
    assert not refused_after_stop("stop", answer)
    assert not refused_after_stop("start", {"errorcode": 533})
    assert not refused_after_stop("change_offering", {"errorcode": None})
    assert not refused_after_stop("change_offering", {})


def test_the_cause_names_the_refusal_first_and_where_the_node_is() -> None:
    back = put_back_cause("CloudStack resizeVolume on n1 failed (errorcode 432): too small", None, True)
    assert back.startswith("CloudStack resizeVolume on n1 failed (errorcode 432): too small; ")
    assert "uncordoned" in back and "next run retries it" in back
    assert "left cordoned" in put_back_cause("refused", None, False)
    failed = put_back_cause("refused", "start: CloudStack startVirtualMachine failed (errorcode 533)", False)
    assert failed.startswith("refused; putting the node back failed too") and "533" in failed


@pytest.mark.parametrize("code", [530, 531, 533])
def test_a_start_the_planner_refuses_after_a_group_or_offering_change_is_put_back(code: int) -> None:
    from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.after_stop import start_refused_after_change

    assert start_refused_after_change("start", {"errorcode": code}, ["update_affinity_groups"])
    assert start_refused_after_change("start", {"errorcode": code}, ["change_offering", "resize_root_disk"])


@pytest.mark.parametrize(("step", "code", "changed"), [
    ("start", 533, []),  # nothing changed in this cycle: nothing to undo, the start failed on its own
    ("start", 533, ["resize_root_disk"]),  # a grown disk is no part of the plan
    ("start", 431, ["update_affinity_groups"]),  # not the planner
    ("start", None, ["update_affinity_groups"]),  # no answer: the start may still run
    ("start", True, ["update_affinity_groups"]),
    ("verify", 533, ["update_affinity_groups"]),
])
def test_other_failed_starts_are_not_undone(step: str, code: object, changed: list[str]) -> None:
    from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.after_stop import start_refused_after_change

    assert not start_refused_after_change(step, {"errorcode": code}, changed)


def test_groups_then_offering_are_undone_and_a_grown_disk_stays() -> None:
    from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.after_stop import to_undo

    assert to_undo(["change_offering", "resize_root_disk", "update_affinity_groups"]) == [
        "update_affinity_groups", "change_offering"]
    assert to_undo(["resize_root_disk"]) == []


def test_the_start_refusal_says_what_was_undone_where_the_node_is_and_what_to_change() -> None:
    from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.after_stop import start_refusal_cause

    refused = "CloudStack startVirtualMachine on w4 failed (errorcode 533): Unable to create a deployment"
    back = start_refusal_cause(refused, ["update_affinity_groups"], None, True)
    assert back.startswith("CloudStack's deployment planner could not place the node with its new affinity groups")
    assert refused in back and "previous affinity groups were restored" in back and "uncordoned" in back
    assert "stays out of date" in back and "add Up and Enabled hosts" in back and "non-strict" in back
    both = start_refusal_cause(refused, ["update_affinity_groups", "change_offering"], None, False)
    assert "affinity groups and offering" in both and "left cordoned" in both
    failed = start_refusal_cause(refused, ["change_offering"], "start: 533 again", True)
    assert "putting the node back failed too" in failed and "start: 533 again" in failed
