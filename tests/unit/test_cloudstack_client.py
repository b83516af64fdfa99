"""Pure parts of the CloudStack client: options, paging, retry policy, job outcomes, error shaping.

The HTTP side (signing, real error answers, real jobs) is proven against cks-sim in
tests/integration/test_clients_cloudstack.py; here ``cs`` is replaced by a scripted fake.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import pytest
import requests
from clock import FakeClock
from scripted_cs import SECRET, FakeCS, api_error, client_and_fake

from ansible_collections.cloudstack.cks.plugins.module_utils._clients import cloudstack as mod
from ansible_collections.cloudstack.cks.plugins.module_utils._clients import cloudstack_options as cs_options
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CloudStackError, DeadlineExceeded, InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline


def client(script: dict[str, list[Any]], **options: Any) -> mod.CloudStackClient:
    return client_and_fake(script, **options)[0]


# -- options --------------------------------------------------------------------------------------

def test_options_from_params_defaults_and_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cs_options, "_read_cs_config", lambda: pytest.fail("ini must not be read"))
    o = cs_options.CloudStackOptions.from_params({"api_url": "https://c/client/api", "api_key": "k", "api_secret": SECRET})
    assert (o.api_http_method, o.api_timeout, o.validate_certs, o.api_verify_ssl_cert) == ("get", 10, True, None)
    assert SECRET not in repr(o)
    with pytest.raises(InvalidInput, match="api_http_method"):
        cs_options.CloudStackOptions.from_params({"api_url": "u", "api_key": "k", "api_secret": "s", "api_http_method": "put"})
    with pytest.raises(InvalidInput, match="api_timeout"):
        cs_options.CloudStackOptions.from_params({"api_url": "u", "api_key": "k", "api_secret": "s", "api_timeout": 0})


def test_options_fall_back_to_cs_config_only_for_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    ini = {"endpoint": "https://ini/client/api", "key": "ini-key", "secret": "ini-secret", "method": "post",
           "timeout": "30", "verify": "/etc/ca.pem", "dangerous_no_tls_verify": False}
    monkeypatch.setattr(cs_options, "_read_cs_config", lambda: ini)
    o = cs_options.CloudStackOptions.from_params({"api_url": None, "api_key": None, "api_secret": None, "api_timeout": 5})
    assert (o.api_url, o.api_key, o.api_secret, o.api_http_method, o.api_timeout) == (
        "https://ini/client/api", "ini-key", "ini-secret", "post", 5)
    assert o.api_verify_ssl_cert == "/etc/ca.pem" and o.validate_certs is True


def test_options_missing_everywhere_name_the_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cs_options, "_read_cs_config", lambda: {})
    with pytest.raises(InvalidInput, match="api_url"):
        cs_options.CloudStackOptions.from_params({})


def test_read_cs_config_survives_no_config_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for var in ("CLOUDSTACK_ENDPOINT", "CLOUDSTACK_KEY", "CLOUDSTACK_SECRET", "CLOUDSTACK_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert cs_options._read_cs_config() == {}  # cs itself would SystemExit here
    (tmp_path / "cloudstack.ini").write_text("[cloudstack]\nendpoint = https://x/client/api\nkey = a\nsecret = b\n")
    assert cs_options._read_cs_config()["endpoint"] == "https://x/client/api"


def test_validate_certs_false_wins_over_a_ca_path() -> None:
    c = mod.CloudStackClient(cs_options.CloudStackOptions("https://x/client/api", "k", SECRET,
                                                          api_verify_ssl_cert="/ca.pem", validate_certs=False))
    assert c._cs.verify is False
    c = mod.CloudStackClient(cs_options.CloudStackOptions("https://x/client/api", "k", SECRET, api_verify_ssl_cert="/ca.pem"))
    assert c._cs.verify == "/ca.pem"
    c = mod.CloudStackClient(cs_options.CloudStackOptions("https://x/client/api", "k", SECRET))
    assert c._cs.verify is True


# -- paging ------------------------------------------------------------------------------------------

def pages(total: int, size: int = 500, key: str = "virtualmachine") -> Callable[[dict[str, Any]], dict[str, Any]]:
    def page(params: dict[str, Any]) -> dict[str, Any]:
        start = (params["page"] - 1) * min(size, params["pagesize"])
        items = [{"id": f"vm-{i}"} for i in range(start, min(total, start + min(size, params["pagesize"])))]
        return {"count": total, key: items} if items else {}
    return page


def test_list_reads_every_page_until_count() -> None:
    c, fake = client_and_fake({"listVirtualMachines": [pages(1203)] * 3})
    items = c.list("listVirtualMachines", listall=True)
    assert [i["id"] for i in items] == [f"vm-{i}" for i in range(1203)]
    assert [p["page"] for _command, p in fake.sent] == [1, 2, 3]
    assert all(p["pagesize"] == 500 and p["listall"] is True for _command, p in fake.sent)
    assert c.calls["listVirtualMachines"] == 3


def test_list_trusts_count_when_the_server_caps_the_page_size() -> None:
    c, fake = client_and_fake({"listVolumes": [pages(250, size=100, key="volume")] * 3})
    assert len(c.list("listVolumes", type="ROOT")) == 250
    assert len(fake.sent) == 3


PAGE_LIMIT_TEXT = "Page size can't exceed max allowed page size value: 100"


def refuse_above(limit: int, total: int, key: str = "virtualmachine") -> Callable[[dict[str, Any]], Any]:
    """A cloud whose default.page.size is ``limit``: BaseListCmd.getPageSize refuses more with 431."""
    serve = pages(total, key=key)

    def answer(params: dict[str, Any]) -> Any:
        if params["pagesize"] > limit:
            raise api_error(431, f"Page size can't exceed max allowed page size value: {limit}")
        return serve(params)
    return answer


def test_list_learns_a_lower_page_size_limit_once_and_pages_with_it() -> None:
    c, fake = client_and_fake({"listVirtualMachines": [refuse_above(100, 250)] * 8})
    assert [i["id"] for i in c.list("listVirtualMachines", listall=True)] == [f"vm-{i}" for i in range(250)]
    assert [(p["page"], p["pagesize"]) for _c, p in fake.sent] == [(1, 500), (1, 100), (2, 100), (3, 100)]
    fake.sent.clear()
    # Learnt once: the next list asks for 100 at once.
    assert len(c.list("listVirtualMachines")) == 250
    assert [p["pagesize"] for _c, p in fake.sent] == [100, 100, 100]


def test_other_431s_and_a_limit_no_lower_still_fail() -> None:
    c = client({"listVirtualMachines": [api_error(431, "Unable to find zone by id=z1")]})
    with pytest.raises(CloudStackError, match="zone"):
        c.list("listVirtualMachines")
    c = client({"listVirtualMachines": [api_error(431, "Page size can't exceed max allowed page size value: 500")]})
    with pytest.raises(CloudStackError, match="max allowed page size value: 500"):
        c.list("listVirtualMachines")
    assert mod.page_size_limit(CloudStackError("listX", PAGE_LIMIT_TEXT, errorcode=431)) == 100
    assert mod.page_size_limit(CloudStackError("listX", PAGE_LIMIT_TEXT, errorcode=530)) is None


def test_list_of_nothing_is_an_empty_list() -> None:
    c = client({"listAffinityGroups": [{}]})
    assert c.list("listAffinityGroups") == []


def test_list_drops_items_repeated_across_shifted_pages() -> None:
    answers = [{"count": 3, "x": [{"id": "a"}, {"id": "b"}]}, {"count": 3, "x": [{"id": "b"}, {"id": "c"}]}]
    c = client({"listX": answers})
    assert [i["id"] for i in c.list("listX", pagesize=2)] == ["a", "b", "c"]


def test_list_key_is_the_one_list_value() -> None:
    assert mod.list_key({"count": 2, "kubernetescluster": [{}, {}]}) == "kubernetescluster"
    assert mod.list_key({}) is None
    with pytest.raises(ValueError):
        mod.list_key({"a": [], "b": []})


# -- retries --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("status, transient", [(429, True), (500, True), (502, True), (503, True), (504, True),
                                               (530, False), (531, False), (533, False), (431, False),
                                               (401, False), (511, False), (None, False)])
def test_transient_statuses(status: int | None, transient: bool) -> None:
    assert mod.is_transient_status(status) is transient


def test_reads_are_retried_on_transient_faults_then_succeed() -> None:
    c = client({"listZones": [requests.exceptions.ConnectionError("dropped"), api_error(503, "busy"),
                              {"count": 1, "zone": [{"id": "z"}]}]})
    assert c.list("listZones") == [{"id": "z"}]
    assert c.calls["listZones"] == 3


def test_reads_give_up_after_the_retry_count() -> None:
    c = client({"listZones": [api_error(503, "busy")] * 3}, retries=2)
    with pytest.raises(CloudStackError) as info:
        c.list("listZones")
    assert info.value.errorcode == 503 and c.calls["listZones"] == 3


def test_reads_are_not_retried_past_the_deadline() -> None:
    c = client({"listZones": [api_error(503, "busy")] * 5})
    with pytest.raises(CloudStackError):
        c.list("listZones", deadline=Deadline(0.1))
    assert c.calls["listZones"] == 1


def test_cloudstack_own_errors_are_not_retried() -> None:
    c = client({"listVirtualMachines": [api_error(431, "Unable to execute API command due to invalid value")]})
    with pytest.raises(CloudStackError) as info:
        c.list("listVirtualMachines", target="cluster demo")
    assert info.value.errorcode == 431 and c.calls["listVirtualMachines"] == 1
    assert "listVirtualMachines on cluster demo failed (errorcode 431)" in info.value.msg


def test_changes_are_never_retried_and_say_the_outcome_is_unknown() -> None:
    c = client({"stopVirtualMachine": [requests.exceptions.ConnectionError("reset"), {"jobid": "j"}]})
    with pytest.raises(CloudStackError) as info:
        c.run_job("stopVirtualMachine", Deadline(10), target="demo-node-1", id="vm-1")
    assert c.calls["stopVirtualMachine"] == 1
    assert "may or may not" in info.value.msg and "re-read" in info.value.msg


def test_transport_messages_carry_no_query_string_or_secret() -> None:
    url_error = requests.exceptions.ConnectionError(
        f"HTTPConnectionPool(host='127.0.0.1', port=9): Max retries exceeded with url: "
        f"/client/api?apiKey=k&command=listZones&signature=SIGNATURE%2B%3D&x={SECRET}")
    c = client({"listZones": [url_error]}, retries=0)
    with pytest.raises(CloudStackError) as info:
        c.list("listZones")
    assert "SIGNATURE" not in info.value.msg and SECRET not in info.value.msg and "apiKey" not in info.value.msg
    assert "127.0.0.1" in info.value.msg


def test_tls_failure_says_which_option_to_check() -> None:
    c = client({"listZones": [requests.exceptions.SSLError("certificate verify failed")]})
    with pytest.raises(CloudStackError) as info:
        c.list("listZones")
    assert "api_verify_ssl_cert" in info.value.msg and c.calls["listZones"] == 1


# -- async jobs ---------------------------------------------------------------------------------------------

def test_run_job_polls_until_done_and_returns_the_object() -> None:
    polls = [{"jobstatus": 0}, {"jobstatus": 0},
             {"jobstatus": 1, "jobresultcode": 0, "jobresult": {"virtualmachine": {"id": "vm-1", "state": "Stopped"}}}]
    c, fake = client_and_fake({"stopVirtualMachine": [{"jobid": "j-1"}], "queryAsyncJobResult": polls}, poll_interval=0.01)
    vm = c.run_job("stopVirtualMachine", Deadline(10), id="vm-1")
    assert vm == {"id": "vm-1", "state": "Stopped"}
    assert [p for cmd, p in fake.sent if cmd == "queryAsyncJobResult"] == [{"jobid": "j-1"}] * 3


def test_run_job_failure_carries_the_result_code_and_text() -> None:
    failed = {"jobstatus": 2, "jobresultcode": 533,
              "jobresult": {"errorcode": 533, "errortext": "Unable to create a deployment for VM"}}
    c = client({"startVirtualMachine": [{"jobid": "j-2"}], "queryAsyncJobResult": [failed]})
    with pytest.raises(CloudStackError) as info:
        c.run_job("startVirtualMachine", Deadline(10), target="demo-node-1", id="vm-1")
    assert info.value.errorcode == 533
    assert "Unable to create a deployment" in info.value.msg and "j-2" in info.value.msg


def test_run_job_deadline_names_command_and_job() -> None:
    c = client({"stopVirtualMachine": [{"jobid": "j-3"}], "queryAsyncJobResult": [{"jobstatus": 0}] * 100},
               poll_interval=0.01)
    c._sleep = time.sleep
    with pytest.raises(DeadlineExceeded) as info:
        c.run_job("stopVirtualMachine", Deadline(0.05), target="demo-node-2", id="vm-2")
    assert "stopVirtualMachine" in info.value.msg and "j-3" in info.value.msg
    assert info.value.details["jobid"] == "j-3" and info.value.details["command"] == "stopVirtualMachine"
    # The last poll comes at the deadline, and the error says how many there were.
    assert info.value.details["polls"] == c.job_times.waits[-1].polls >= 2


def clocked_client(script: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch,
                   **options: Any) -> tuple[mod.CloudStackClient, FakeCS, FakeClock]:
    clock = FakeClock(1000.0)
    monkeypatch.setattr(mod.time, "monotonic", clock.monotonic)
    c, fake = client_and_fake(script, **options)
    c._sleep = clock.sleep
    return c, fake, clock


def pauses(clock: FakeClock) -> list[float]:
    """The client's sleeps to the microsecond (its back-off multiplies floats)."""
    return [round(seconds, 6) for seconds in clock.sleeps]


def done(seconds: int = 0) -> dict[str, Any]:
    return {"jobstatus": 1, "jobresultcode": 0, "jobresult": {"virtualmachine": {"id": "vm"}},
            "created": "2026-12-03T12:00:00+0000", "completed": f"2026-12-03T12:00:{seconds:02d}+0000"}


def test_the_first_poll_waits_the_interval_then_what_the_command_took(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stops of a batch: the first is polled at the interval and backs off while it runs; seen running
    at 7.09 s and ended by 10.89 s (CloudStack's whole-second dates say 10 s: more than 9), the next
    is probed in the middle of (9.0, 10.89) and, ended there, the one after in the middle of
    (9.0, 9.95): one poll each, not one every 0.5 s."""
    pending = {"jobstatus": 0}
    first = [pending] * 6 + [done(10)]
    c, fake, clock = clocked_client({"stopVirtualMachine": [{"jobid": f"j-{i}"} for i in range(3)],
                                     "queryAsyncJobResult": first + [done(10), done(10)]}, monkeypatch)
    for i in range(3):
        c.run_job("stopVirtualMachine", Deadline(600, clock=clock.monotonic), id=f"vm-{i}")
    assert pauses(clock)[:7] == [0.5, 0.5, 0.75, 1.125, 1.6875, 2.53125, 3.796875]
    assert c.job_times.waits[0].running_at == 7.09375
    assert pauses(clock)[7:] == [9.945312, 9.472656]
    assert [w.polls for w in c.job_times.waits] == [7, 1, 1]
    assert c.job_times.polls() == 9 == c.calls["queryAsyncJobResult"]
    assert c.job_times.learned() == {"stopVirtualMachine": [9.0, 9.473]}


def test_a_job_later_than_learned_is_polled_at_the_interval_again(monkeypatch: pytest.MonkeyPatch) -> None:
    c, _calls, clock = clocked_client({"startVirtualMachine": [{"jobid": "j-1"}],
                                       "queryAsyncJobResult": [{"jobstatus": 0}, {"jobstatus": 0}, done()]},
                                      monkeypatch)
    c.job_times.give_priors({"startVirtualMachine": [19.9, 20]})
    c.run_job("startVirtualMachine", Deadline(600, clock=clock.monotonic), id="vm-1")
    # At the bracket's end, a tolerance later (0.5 s: a tenth of 20 s is more than the interval),
    # then at the interval.
    assert pauses(clock) == [20.0, 0.5, 0.5]


def test_polls_stop_at_the_deadline_with_one_last_poll_there(monkeypatch: pytest.MonkeyPatch) -> None:
    c, _calls, clock = clocked_client({"stopVirtualMachine": [{"jobid": "j-1"}],
                                       "queryAsyncJobResult": [{"jobstatus": 0}] * 20}, monkeypatch)
    c.job_times.give_priors({"stopVirtualMachine": [30, 30]})
    with pytest.raises(DeadlineExceeded) as info:
        c.run_job("stopVirtualMachine", Deadline(3, clock=clock.monotonic), id="vm-1")
    assert pauses(clock) == [3.0, 0.0] or pauses(clock) == [3.0]
    assert info.value.details["polls"] == len(pauses(clock))


def test_a_job_polled_again_after_a_lost_answer_is_on_the_schedule_too(monkeypatch: pytest.MonkeyPatch) -> None:
    c, _calls, clock = clocked_client({"queryAsyncJobResult": [done(2)]}, monkeypatch)
    c.await_job("resizeVolume", "j-9", Deadline(60, clock=clock.monotonic), target="node-1")
    assert pauses(clock) == [0.5]
    assert c.job_times.waits[0].to_dict() == {"command": "resizeVolume", "jobid": "j-9", "target": "node-1",
                                              "polls": 1, "seconds": 0.5, "aimed": 0.5, "running_at": None}
    # It ran for an unknown time before this wait began: what the resizes take is not learned from it.
    assert c.job_times.learned() == {}


def test_job_object_unwraps_one_object() -> None:
    assert mod.job_object({"volume": {"id": "v"}}) == {"id": "v"}
    assert mod.job_object({"success": True, "displaytext": "x"}) == {"success": True, "displaytext": "x"}
