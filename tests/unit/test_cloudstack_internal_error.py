"""CloudStack's own INTERNAL_ERROR (530) answer to a request (issue 33): a read is sent again like a
503, with the same backoff; a write is never sent again blindly (the exception may have come after
part of it ran) but settled by reading what it changes; a job that ends 530 is the job's answer, a
refusal, and is neither retried nor settled.

ApiServer.getSerializedApiError answers it with the command's response name, ``errorcode`` 530,
``cserrorcode`` 4250 and the text, HTTP status 530 (ApiServlet writes ``getHttpCode()``); cs raises
that as CloudStackApiException. The same answer over HTTP from cks-sim's ``request_fault`` mode
``530`` is in tests/sim/tests/test_request_faults.py and, for every CloudStack kind a rollout sends,
in ``make fault-sweep``.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from scripted_cs import api_error, client_and_fake

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.cloudstack import AnswerLost
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CloudStackError
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline

TEXT = "Internal error executing command, please contact your system administrator"
VM = {"count": 1, "virtualmachine": [{"id": "vm-1", "state": "Running"}]}


def internal_error() -> Exception:
    return api_error(530, TEXT)


def sends(fake: Any, command: str) -> int:
    return [name for name, _params in fake.sent].count(command)


# -- reads ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["listVirtualMachines", "queryAsyncJobResult", "listApis"])
def test_a_read_answered_530_is_sent_again_and_succeeds(command: str) -> None:
    c, fake = client_and_fake({command: [internal_error(), internal_error(), VM]})
    assert c.call(command, target="demo-node-1") == VM
    assert sends(fake, command) == 3
    snapshot = c.retry_log.snapshot()
    assert snapshot["by_action"] == {command: 2}
    assert snapshot["recent"][0]["cause"] == f"errorcode 530: {TEXT}"


def test_a_530_waits_the_same_backoff_as_a_503() -> None:
    waits: dict[int, list[float]] = {}
    for status in (503, 530):
        c, _fake = client_and_fake({"listZones": [api_error(status, "x")] * 4 + [{"count": 0, "zone": []}]})
        c._sleep = waits.setdefault(status, []).append
        random.seed(33)
        c.list("listZones")
    assert len(waits[530]) == 4 and waits[530] == waits[503]


def test_a_read_still_530_after_the_attempts_fails_with_cloudstacks_answer() -> None:
    c, fake = client_and_fake({"listVirtualMachines": [internal_error()] * 3}, retries=2)
    with pytest.raises(CloudStackError) as info:
        c.list("listVirtualMachines", target="demo-node-1")
    assert sends(fake, "listVirtualMachines") == 3
    assert info.value.errorcode == 530 and info.value.errortext == TEXT
    assert info.value.msg == f"CloudStack listVirtualMachines on demo-node-1 failed (errorcode 530): {TEXT}"


def test_another_53x_answer_to_a_read_is_final() -> None:
    c, fake = client_and_fake({"listVirtualMachines": [api_error(531, "not permitted")]})
    with pytest.raises(CloudStackError) as info:
        c.list("listVirtualMachines")
    assert info.value.errorcode == 531 and sends(fake, "listVirtualMachines") == 1


# -- writes ---------------------------------------------------------------------------------------


def test_a_change_answered_530_but_carried_out_is_not_sent_again() -> None:
    c, fake = client_and_fake({"changeServiceForVirtualMachine": [internal_error()]})
    reads: list[int] = []
    how = c.run_change("changeServiceForVirtualMachine", Deadline(10), lambda: reads.append(1) or True,
                       target="demo-node-1", id="vm-1", serviceofferingid="large")
    assert how == "already done after a lost answer" and reads == [1]
    assert sends(fake, "changeServiceForVirtualMachine") == 1
    assert c.retry_log.snapshot()["lost_answers_settled"] == {
        "changeServiceForVirtualMachine: already done: not sent again": 1}
    assert c.retry_log.snapshot()["recent"][0]["cause"] == f"errorcode 530: {TEXT}"


def test_an_async_change_answered_530_with_its_job_running_is_polled() -> None:
    job = {"jobid": "j1", "jobinstanceid": "vm-1", "jobstatus": 0, "cmd": "StopVMCmd"}
    c, fake = client_and_fake({
        "stopVirtualMachine": [internal_error()],
        "listAsyncJobs": [{"count": 1, "asyncjobs": [job]}],
        "queryAsyncJobResult": [{"jobstatus": 1, "jobresultcode": 0, "jobresult": {"virtualmachine": {}}}],
    }, poll_interval=0.01)
    how = c.run_change("stopVirtualMachine", Deadline(10), lambda: pytest.fail("the job says it all"),
                       instance_id="vm-1", target="demo-node-1", id="vm-1")
    assert how == "polled job j1 after a lost answer" and sends(fake, "stopVirtualMachine") == 1


def test_a_change_answered_530_and_not_carried_out_is_sent_again_after_reading() -> None:
    c, fake = client_and_fake({
        "startVirtualMachine": [internal_error(), {"jobid": "j2"}],
        "listAsyncJobs": [{}],
        "queryAsyncJobResult": [{"jobstatus": 1, "jobresultcode": 0, "jobresult": {"virtualmachine": {}}}],
    }, poll_interval=0.01)
    order: list[str] = []
    how = c.run_change("startVirtualMachine", Deadline(10), lambda: order.append("read") or False,
                       instance_id="vm-1", target="demo-node-1", id="vm-1")
    assert how == "sent again after 1 lost answer(s)"
    assert [name for name, _params in fake.sent][:3] == ["startVirtualMachine", "listAsyncJobs", "startVirtualMachine"]
    assert order == ["read"]


def test_a_change_530_every_time_fails_naming_command_node_and_code() -> None:
    c, fake = client_and_fake({"changeServiceForVirtualMachine": [internal_error()] * 3}, retries=2)
    reads: list[int] = []
    with pytest.raises(CloudStackError) as info:
        c.run_change("changeServiceForVirtualMachine", Deadline(10), lambda: reads.append(1) or False,
                     target="demo-node-1", id="vm-1", serviceofferingid="large")
    # Each send after the first follows a read that found it not done; the last one is read too.
    assert sends(fake, "changeServiceForVirtualMachine") == 3 and len(reads) == 3
    assert info.value.errorcode == 530 and info.value.details["target"] == "demo-node-1"
    assert info.value.msg == ("CloudStack changeServiceForVirtualMachine on demo-node-1 failed (errorcode 530): "
                              f"{TEXT} (answered 3 time(s), read back after each: not carried out)")


def test_a_write_sent_once_answered_530_is_not_sent_again() -> None:
    """scaleVirtualMachine (ONCE): the live path hands the node to the restart path, which reads."""
    c, fake = client_and_fake({"scaleVirtualMachine": [internal_error(), {"jobid": "j"}]})
    with pytest.raises(AnswerLost) as info:
        c.run_job("scaleVirtualMachine", Deadline(10), target="demo-node-2", id="vm-2", serviceofferingid="large")
    assert sends(fake, "scaleVirtualMachine") == 1
    assert info.value.errorcode == 530 and info.value.msg == (
        f"CloudStack scaleVirtualMachine on demo-node-2 failed (errorcode 530): {TEXT} (INTERNAL_ERROR: CloudStack "
        "may or may not have carried it out; not sent again blindly: re-read what it changes before sending it again)")


# -- a job's answer ---------------------------------------------------------------------------------


def test_a_job_that_ends_530_is_a_refusal_not_a_transient_fault() -> None:
    failed = {"jobstatus": 2, "jobresultcode": 530, "jobresult": {"errorcode": 530, "errortext": "Failed to start VM"}}
    c, fake = client_and_fake({"startVirtualMachine": [{"jobid": "j3"}], "queryAsyncJobResult": [failed]},
                              poll_interval=0.01)
    with pytest.raises(CloudStackError) as info:
        c.run_change("startVirtualMachine", Deadline(10), lambda: pytest.fail("a refusal is not settled"),
                     instance_id="vm-1", target="demo-node-1", id="vm-1")
    assert not isinstance(info.value, AnswerLost)
    assert info.value.errorcode == 530 and "job j3: Failed to start VM" in info.value.msg
    assert sends(fake, "startVirtualMachine") == 1 and sends(fake, "queryAsyncJobResult") == 1
    assert c.retry_log.total == 0
