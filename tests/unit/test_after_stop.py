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
