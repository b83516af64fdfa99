"""CloudStack's API rate limit on the client side: the wait a refusal names, the pace kept after it
(``_decisions.api_pace``, ``_clients.pacing``), and the client's 429 handling with its HTTP layer
scripted. The same against cks-sim over HTTP: tests/integration/test_api_rate_limit.py."""

from __future__ import annotations

import random
import re

import pytest
from clock import FakeClock
from scripted_cs import api_error, client_and_fake

from ansible_collections.cloudstack.cks.plugins.module_utils._clients import cloudstack_options as cs_options
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.pacing import ApiPacer, api_rate_from_env
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CloudStackError, InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions import api_pace

TEXT_422 = "The given user has reached his/her account api limit, please retry after [734] ms."
TEXT_OLD = "The given user has reached his/her account api limit, please retry after 250 ms."


# -- the wait and what is a refusal ---------------------------------------------------------------

def test_the_wait_is_read_from_both_wordings_and_nothing_else() -> None:
    assert api_pace.limit_wait(TEXT_422) == 0.734
    assert api_pace.limit_wait(TEXT_OLD) == 0.25
    assert api_pace.limit_wait("HTTP 429: " + TEXT_422) == 0.734
    assert api_pace.limit_wait("please retry after 5 s") is None
    assert api_pace.limit_wait(None) is None and api_pace.limit_wait("") is None


def test_a_refusal_is_cloudstacks_429_not_any_429() -> None:
    assert api_pace.is_rate_limited(429, 429, TEXT_422)
    assert api_pace.is_rate_limited(429, 429, "whatever the text")  # CloudStack's own error body says 429
    assert api_pace.is_rate_limited(429, None, TEXT_OLD)
    assert not api_pace.is_rate_limited(429, None, "<html>Too Many Requests</html>")  # a proxy's
    assert not api_pace.is_rate_limited(503, 503, "Service Unavailable")
    assert not api_pace.is_rate_limited(530, 530, TEXT_422.replace("api limit", "cpu limit"))


def test_the_wait_is_the_named_time_else_the_interval_plus_a_bounded_jitter() -> None:
    assert api_pace.throttle_wait(0.734, 1.0, 0.0) == pytest.approx(0.734 + 0.0734 * 0)
    assert api_pace.throttle_wait(0.734, 1.0, 1.0) == pytest.approx(0.734 + 0.0734)
    assert api_pace.throttle_wait(None, 2.0, 0.5) == pytest.approx(2.0 + 0.1)
    assert api_pace.throttle_wait(0.0, 1.0, 1.0) == pytest.approx(0.05)  # at least 50 ms apart
    waits = {round(api_pace.throttle_wait(1.0, 1.0, random.Random(i).random()), 4) for i in range(20)}
    assert len(waits) > 10 and all(1.0 <= w <= 1.1 for w in waits)


def test_the_rate_is_the_given_one_else_learnt_from_what_got_through() -> None:
    assert api_pace.learnt_rate(10, 1.0, given=4.0) == 4.0
    assert api_pace.learnt_rate(10, 1.0) == pytest.approx(9.0)
    assert api_pace.learnt_rate(10, 2.0) == pytest.approx(4.5)
    assert api_pace.learnt_rate(0, 1.0) == pytest.approx(0.9)  # never nothing
    assert api_pace.learnt_rate(0, 60.0) == api_pace.MIN_RATE


def test_a_fleet_share_is_the_accounts_rate_split_with_headroom() -> None:
    assert api_pace.share_of_rate(25, 6) == pytest.approx(25 * 0.9 / 6)
    assert api_pace.share_of_rate(25, 1) == pytest.approx(22.5)
    assert api_pace.share_of_rate(1, 100) == api_pace.MIN_RATE
    with pytest.raises(ValueError, match="more than 0"):
        api_pace.share_of_rate(0, 3)
    # In any one-second window the six shares together stay under the limit: at most floor(r)+1 each.
    per_cluster = api_pace.share_of_rate(25, 6)
    assert 6 * (int(per_cluster) + 1) <= 25


def test_the_interval_is_assumed_from_the_longest_wait_in_whole_seconds() -> None:
    assert api_pace.interval_from_wait(0.734) == 1.0
    assert api_pace.interval_from_wait(4.2) == 5.0
    assert api_pace.interval_from_wait(0) == api_pace.DEFAULT_INTERVAL


def test_slots_are_spaced_by_the_rate_and_held_by_a_refusal() -> None:
    slot, after = api_pace.next_slot(10.0, 0.0, None)
    assert (slot.at, slot.wait, after) == (10.0, 0.0, 10.0)
    slot, after = api_pace.next_slot(10.0, 10.0, 4.0)
    assert (slot.wait, after) == (0.0, 10.25)
    slot, after = api_pace.next_slot(10.1, 10.25, 4.0)
    assert slot.wait == pytest.approx(0.15) and after == pytest.approx(10.5)
    slot, _after = api_pace.next_slot(10.0, 12.0, None)  # a refusal's wait still running
    assert slot.wait == 2.0


# -- the pacer ------------------------------------------------------------------------------------

def test_the_pacer_lets_calls_go_until_refused_then_holds_everyone_and_keeps_a_rate() -> None:
    clock = FakeClock()
    pacer = ApiPacer(clock=clock, rng=random.Random(3))
    assert [pacer.before_call() for _call in range(5)] == [0.0] * 5
    wait = pacer.throttled(0.5)
    assert 0.5 <= wait <= 0.55
    # Every next call (another thread's too) waits for the window to end.
    assert pacer.before_call() == pytest.approx(wait)
    clock.sleep(wait)
    assert pacer.rate == pytest.approx(5 * 0.9)  # five got through in the second before
    # The call that waited had the slot at the window's end; the ones after it are spaced by the rate.
    gaps = [pacer.before_call() for _call in range(3)]
    assert gaps == pytest.approx([1 / 4.5, 2 / 4.5, 3 / 4.5])
    assert pacer.snapshot()["refusals"] == 1


def test_a_given_rate_paces_from_the_first_call_and_is_kept_after_a_refusal() -> None:
    clock = FakeClock()
    pacer = ApiPacer(rate=2.0, clock=clock)
    assert [pacer.before_call() for _call in range(3)] == [0.0, 0.5, 1.0]
    pacer.throttled(None)
    assert pacer.rate == 2.0


def test_a_deadline_caps_a_pace_wait() -> None:
    pacer = ApiPacer(rate=0.5, clock=FakeClock())
    pacer.before_call()
    assert pacer.before_call(limit=0.3) == 0.3


def test_the_rate_from_the_environment_is_checked() -> None:
    assert api_rate_from_env(None) is None and api_rate_from_env("") is None
    assert api_rate_from_env("3.75") == 3.75
    for bad in ("0", "-1", "fast"):
        with pytest.raises(InvalidInput, match="CLOUDSTACK_API_RATE"):
            api_rate_from_env(bad)


def test_the_options_take_the_rate_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLOUDSTACK_API_RATE", "4")
    options = cs_options.CloudStackOptions.from_params({"api_url": "https://c/client/api", "api_key": "k", "api_secret": "s"})
    assert options.api_rate == 4.0
    monkeypatch.delenv("CLOUDSTACK_API_RATE")
    assert cs_options.CloudStackOptions.from_params({"api_url": "u", "api_key": "k", "api_secret": "s"}).api_rate is None


# -- the client -----------------------------------------------------------------------------------

def throttled() -> Exception:
    return api_error(429, TEXT_422)


def test_a_throttled_read_waits_the_named_time_and_spends_no_retry_attempt() -> None:
    # retries=1: one attempt for real faults; three refusals in a row still go through.
    c, fake = client_and_fake({"listZones": [throttled(), throttled(), throttled(), {"count": 1, "zone": [{"id": "z"}]}]},
                              retries=1)
    waits: list[float] = []
    c._sleep = waits.append
    assert c.list("listZones") == [{"id": "z"}]
    assert len(waits) == 3 and all(0.734 <= w for w in waits)
    snap = c.retry_log.snapshot()
    assert (snap["retries"], snap["throttled"], snap["by_action"]) == (3, 3, {"listZones": 3})
    assert snap["throttled_seconds"] >= 3 * 0.734
    assert snap["recent"][-1]["throttled"] is True and "[734] ms" in snap["recent"][-1]["cause"]


def test_a_throttle_past_the_deadline_fails_at_once_naming_the_limit_and_the_wait() -> None:
    c, _fake = client_and_fake({"listZones": [api_error(429, TEXT_422.replace("734", "30000"))]})
    with pytest.raises(CloudStackError) as caught:
        c.list("listZones", deadline=Deadline(5))
    text = str(caught.value)
    assert caught.value.errorcode == 429
    assert "API rate limit" in text and "[30000] ms" in text and "deadline leaves" in text
    assert re.search(r"waiting 3\d\.\ds", text)


def test_a_throttled_change_is_settled_by_reading_before_it_is_sent_again() -> None:
    reads: list[str] = []
    c, fake = client_and_fake({"stopVirtualMachine": [throttled(), {"jobid": "j1"}],
                               "queryAsyncJobResult": [{"jobstatus": 1, "jobresultcode": 0,
                                                        "jobresult": {"virtualmachine": {"state": "Stopped"}}}]},
                              poll_interval=0.01, retries=0)

    def done() -> bool:
        reads.append("read")
        return False

    how = c.run_change("stopVirtualMachine", Deadline(10), done, instance_id="vm-1", id="vm-1")
    assert how == "sent"
    assert reads == ["read"]
    assert [name for name, _params in fake.sent].count("stopVirtualMachine") == 2
    assert "listAsyncJobs" not in dict(fake.sent)  # refused before any job: none to look for
    snap = c.retry_log.snapshot()
    assert snap["throttled"] == 1
    assert snap["lost_answers_settled"] == {"stopVirtualMachine: not carried out: sent again": 1}


def test_a_throttled_change_found_done_is_not_sent_again() -> None:
    c, fake = client_and_fake({"startVirtualMachine": [throttled()]}, retries=0)
    how = c.run_change("startVirtualMachine", Deadline(10), lambda: True, instance_id="vm-1", id="vm-1")
    assert how == "already done after a rate limit refusal"
    assert [name for name, _params in fake.sent].count("startVirtualMachine") == 1


def test_a_throttled_change_past_the_deadline_is_not_sent_again_and_says_why() -> None:
    c, fake = client_and_fake({"startVirtualMachine": [api_error(429, TEXT_422.replace("734", "60000"))]})
    with pytest.raises(CloudStackError, match=r"API rate limit refused the call .*\[60000\] ms.*waiting 6\d"):
        c.run_change("startVirtualMachine", Deadline(10), lambda: pytest.fail("no read past the deadline"),
                     instance_id="vm-1", id="vm-1")
    assert [name for name, _params in fake.sent].count("startVirtualMachine") == 1


# -- the fleet's share ----------------------------------------------------------------------------

def test_each_cluster_of_a_fleet_gets_its_share_of_the_accounts_rate_through_the_environment() -> None:
    from ansible_collections.cloudstack.cks.plugins.module_utils._services.fleet import api_rate_env

    assert api_rate_env({"api_rate": 25.0, "parallel": 6}) == {"CLOUDSTACK_API_RATE": "3.750"}
    assert api_rate_env({"api_rate": None, "parallel": 6}) == {}
    with pytest.raises(InvalidInput, match="api_rate"):
        api_rate_env({"api_rate": -5, "parallel": 2})
