"""The one retry policy (retry.py) and the clients' ways of settling a write whose answer was lost.

Pure logic: the HTTP layer of each client is replaced by a script. The same behaviour against
cks-sim over HTTP is in tests/integration/test_transient_faults.py.
"""

from __future__ import annotations

import json
import random
from types import SimpleNamespace
from typing import Any

import pytest
import requests
from clock import FakeClock
from scripted_cs import api_error, client_and_fake

from ansible_collections.cloudstack.cks.plugins.module_utils._clients import kube as kube_mod
from ansible_collections.cloudstack.cks.plugins.module_utils._clients import kube_http
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.retry import RetryLog, RetryPolicy, Transient, parse_retry_after, retry_report
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CloudStackError, KubernetesError
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline


# -- the policy -------------------------------------------------------------------------------------

def test_backoff_is_jittered_within_half_to_whole_step_and_capped() -> None:
    policy = RetryPolicy(base_delay=0.2, max_delay=5.0)
    rng = random.Random(1)
    for retry, step in ((1, 0.2), (2, 0.4), (3, 0.8), (6, 5.0), (12, 5.0)):
        waits = [policy.delay(retry, rng=rng) for _attempt in range(200)]
        assert all(step / 2 <= w <= step for w in waits), (retry, min(waits), max(waits))
        assert max(waits) - min(waits) > step / 4  # really jittered


def test_retry_after_wins_over_the_backoff_and_is_capped() -> None:
    policy = RetryPolicy(base_delay=0.2, max_retry_after=30.0)
    rng = random.Random(2)
    assert 3.0 <= policy.delay(1, retry_after=3, rng=rng) <= 3.2
    assert 30.0 <= policy.delay(1, retry_after=3600, rng=rng) <= 30.2
    assert parse_retry_after("7") == 7.0 and parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") is None and parse_retry_after("-1") is None


def test_run_retries_transients_then_gives_the_last_one_up() -> None:
    clock = FakeClock(0.0)
    seen: list[float] = []
    answers: list[Any] = [Transient("503"), Transient("drop"), "ok"]

    def send() -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    policy = RetryPolicy(attempts=3)
    assert policy.run(send, on_retry=lambda f, w: seen.append(w), sleep=clock.sleep, clock=clock) == "ok"
    assert len(seen) == 2
    answers[:] = [Transient("a"), Transient("b"), Transient("c"), "never"]
    with pytest.raises(Transient, match="c"):
        policy.run(send, sleep=clock.sleep, clock=clock)
    assert answers == ["never"]


def test_run_never_waits_past_the_deadline() -> None:
    clock = FakeClock(0.0)
    deadline = Deadline(1.0, clock=clock)
    calls = []

    def send() -> None:
        calls.append(clock.now)
        raise Transient("429", retry_after=0.6)

    with pytest.raises(Transient):
        RetryPolicy(attempts=100).run(send, deadline=deadline, sleep=clock.sleep, clock=clock)
    # 0, then ~0.6: a third try would start after the deadline.
    assert len(calls) == 2 and clock.now < 1.0


def test_an_unreachable_server_is_tried_until_the_deadline_not_the_attempts() -> None:
    """A control node's API server restarting (connection refused) takes minutes, not six tries."""
    clock = FakeClock(0.0)
    deadline = Deadline(120.0, clock=clock)
    calls: list[float] = []

    def refused() -> None:
        calls.append(clock.now)
        raise Transient("connection refused", maybe_done=False)

    with pytest.raises(Transient):
        RetryPolicy(attempts=6).run(refused, deadline=deadline, sleep=clock.sleep, clock=clock)
    assert len(calls) > 6 and 115.0 < clock.now <= 120.0

    # An answered fault (a 503) or one that may have reached the server keeps the attempt cap.
    for fault in (Transient("HTTP 503", status=503, maybe_done=False), Transient("reset by peer")):
        calls.clear()

        def answered(fault: Transient = fault) -> None:
            calls.append(clock.now)
            raise fault

        with pytest.raises(Transient):
            RetryPolicy(attempts=6).run(answered, deadline=Deadline(120.0, clock=clock), sleep=clock.sleep,
                                        clock=clock)
        assert len(calls) == 6


def test_without_a_deadline_an_unreachable_server_is_tried_within_the_budget() -> None:
    clock = FakeClock(0.0)
    calls: list[float] = []

    def refused() -> None:
        calls.append(clock.now)
        raise Transient("connection refused", maybe_done=False)

    with pytest.raises(Transient):
        RetryPolicy(attempts=2, budget=30.0).run(refused, sleep=clock.sleep, clock=clock)
    assert len(calls) > 2 and clock.now <= 30.0


def test_retry_log_counts_every_retry_and_settled_answer() -> None:
    log = RetryLog()
    log.retried("list nodes", "HTTP 503", 0.2)
    log.retried("list nodes", "HTTP 503", 0.3)
    log.reconciled("stopVirtualMachine", "already done: not sent again")
    report = retry_report(("cloudstack", log), ("kubernetes", None))
    assert report["total"] == 2 and report["cloudstack"]["by_action"] == {"list nodes": 2}
    assert report["cloudstack"]["lost_answers_settled"] == {"stopVirtualMachine: already done: not sent again": 1}


# -- CloudStack: run_change -------------------------------------------------------------------------

def test_cloudstack_reads_honour_retry_after_of_a_429() -> None:
    error = api_error(429, "api limit reached")
    error.response.headers = {"Retry-After": "2"}
    c, fake = client_and_fake({"listZones": [error, {"count": 1, "zone": [{"id": "z"}]}]})
    waits: list[float] = []
    c._sleep = waits.append
    assert c.list("listZones") == [{"id": "z"}]
    # The pace holds until 2 s (plus jitter) after the refusal; the sleep is what is left of that
    # when the retry comes round, a few microseconds less than the whole.
    assert len(waits) == 1 and 1.95 <= waits[0] <= 2.3
    assert c.retry_log.snapshot()["by_action"] == {"listZones": 1}


def lost() -> requests.exceptions.ConnectionError:
    return requests.exceptions.ConnectionError("Connection aborted: RemoteDisconnected")


def test_a_lost_answer_with_the_job_still_pending_is_polled_not_resent() -> None:
    jobs = {"count": 1, "asyncjobs": [{"jobid": "j1", "jobinstanceid": "vm-1", "jobstatus": 0,
                                       "cmd": "org.apache.cloudstack.api.command.admin.vm.StopVMCmdByAdmin"}]}
    c, fake = client_and_fake({
        "stopVirtualMachine": [lost()],
        "listAsyncJobs": [jobs],
        "queryAsyncJobResult": [{"jobstatus": 0}, {"jobstatus": 1, "jobresultcode": 0,
                                                   "jobresult": {"virtualmachine": {"state": "Stopped"}}}],
    }, poll_interval=0.01)
    how = c.run_change("stopVirtualMachine", Deadline(10), lambda: pytest.fail("the job says it all"),
                       instance_id="vm-1", id="vm-1")
    assert how == "polled job j1 after a lost answer"
    assert [name for name, _params in fake.sent].count("stopVirtualMachine") == 1
    assert dict(fake.sent)["listAsyncJobs"]["keyword"] == "StopVMCmd"


def test_a_lost_answer_of_a_change_already_done_is_not_resent() -> None:
    c, fake = client_and_fake({"changeServiceForVirtualMachine": [lost()]})
    how = c.run_change("changeServiceForVirtualMachine", Deadline(10), lambda: True, id="vm-1",
                       serviceofferingid="large")
    assert how == "already done after a lost answer"
    assert [name for name, _params in fake.sent] == ["changeServiceForVirtualMachine"]


def test_a_lost_answer_of_a_change_not_carried_out_is_sent_again_once() -> None:
    other = {"jobid": "old", "jobinstanceid": "vm-2", "jobstatus": 0, "cmd": "StartVMCmd"}
    c, fake = client_and_fake({
        "startVirtualMachine": [lost(), {"jobid": "j2"}],
        "listAsyncJobs": [{"count": 1, "asyncjobs": [other]}],
        "queryAsyncJobResult": [{"jobstatus": 1, "jobresultcode": 0, "jobresult": {"virtualmachine": {}}}],
    }, poll_interval=0.01)
    checks = []
    how = c.run_change("startVirtualMachine", Deadline(10), lambda: checks.append(1) or False,
                       instance_id="vm-1", id="vm-1")
    assert how == "sent again after 1 lost answer(s)" and checks == [1]
    assert [name for name, _params in fake.sent].count("startVirtualMachine") == 2


def test_a_refusal_is_never_settled_or_resent() -> None:
    c, fake = client_and_fake({"updateVMAffinityGroup": [api_error(431, "VM must be stopped")]})
    with pytest.raises(CloudStackError, match="must be stopped") as info:
        c.run_change("updateVMAffinityGroup", Deadline(10), lambda: pytest.fail("no read"), instance_id="vm-1",
                     id="vm-1", affinitygroupids="g")
    assert info.value.errorcode == 431 and len(fake.sent) == 1


# -- Kubernetes: settling writes --------------------------------------------------------------------

class ScriptedKube(kube_mod.KubeClient):
    """A KubeClient whose one HTTP request is scripted: (status, body) or an exception, per call."""

    def __init__(self, script: list[Any]) -> None:
        super().__init__(SimpleNamespace(configuration=SimpleNamespace(host="https://k:6443"), close=lambda: None),
                         kube_mod.KubeOptions())
        self.script = script
        self.sent: list[tuple[str, str]] = []
        self._sleep = lambda s: None

    def _raw(self, action: str, method: str, path: str, **kwargs: Any) -> tuple[int, str, Any]:
        self.sent.append((method, path))
        answer = self.script.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        status, body, *headers = answer
        return status, json.dumps(body), (headers[0] if headers else {})


def dropped() -> Exception:
    return kube_http._TransportFault(KubernetesError("x", "cannot reach the Kubernetes API: RemoteDisconnected"))


LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l"


def lease(holder: str, renew: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": "l", "resourceVersion": rv},
            "spec": {"holderIdentity": holder, "renewTime": renew, "leaseDurationSeconds": 10}}


def test_a_lease_replace_whose_answer_was_lost_is_found_written_and_not_sent_again() -> None:
    body = lease("me", "2026-01-01T00:00:01.000000Z", "5")
    kube = ScriptedKube([dropped(), (200, lease("me", "2026-01-01T00:00:01.000000Z", "6"))])
    written = kube.replace_lease("kube-system", "l", body)
    assert written["metadata"]["resourceVersion"] == "6"
    assert kube.sent == [("PUT", LEASE_PATH), ("GET", LEASE_PATH)]


def test_a_lease_replace_not_carried_out_is_sent_again_and_a_foreign_write_is_a_conflict() -> None:
    body = lease("me", "2026-01-01T00:00:01.000000Z", "5")
    kube = ScriptedKube([(503, {"message": "unavailable"}), (200, lease("me", "old", "5")),
                         (200, lease("me", "2026-01-01T00:00:01.000000Z", "6"))])
    assert kube.replace_lease("kube-system", "l", body)["metadata"]["resourceVersion"] == "6"
    assert [m for m, _body in kube.sent] == ["PUT", "GET", "PUT"]
    kube = ScriptedKube([dropped(), (200, lease("someone-else", "2026-01-01T00:00:02.000000Z", "7"))])
    with pytest.raises(KubernetesError) as info:
        kube.replace_lease("kube-system", "l", body)
    assert (info.value.status, info.value.reason) == (409, "Conflict")


def test_a_node_patch_already_applied_is_not_sent_again() -> None:
    node = {"metadata": {"name": "n", "resourceVersion": "9", "annotations": {"a": "1"}}, "spec": {"unschedulable": True}}
    kube = ScriptedKube([dropped(), (200, node)])
    assert kube.patch_node("n", {"metadata": {"annotations": {"a": "1", "gone": None}, "resourceVersion": "8"},
                                 "spec": {"unschedulable": True}}) == node
    assert [m for m, _body in kube.sent] == ["PATCH", "GET"]
    assert kube_http.merge_patch_applied(node, {"spec": {"unschedulable": None}}) is False
    assert kube_http.merge_patch_applied(node, {"metadata": {"labels": {"x": None}}}) is True


def test_an_eviction_is_posted_again_only_while_the_pod_is_still_there() -> None:
    pod = {"metadata": {"name": "p", "namespace": "d"}}
    limited = (429, {"reason": "TooManyRequests", "message": "Too many requests"}, {"Retry-After": "1"})
    kube = ScriptedKube([limited, (200, pod), (201, {"kind": "Status", "status": "Success"})])
    assert kube.evict("d", "p").outcome == "evicted"
    assert [m for m, _body in kube.sent] == ["POST", "GET", "POST"]
    terminating = {"metadata": {"name": "p", "namespace": "d", "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    kube = ScriptedKube([dropped(), (200, terminating)])
    assert kube.evict("d", "p").outcome == "evicted" and len(kube.sent) == 2
    kube = ScriptedKube([dropped(), (404, {"reason": "NotFound"})])
    assert kube.evict("d", "p").outcome == "gone"
    budget = (429, {"reason": "TooManyRequests", "details": {"causes": [
        {"reason": "DisruptionBudget", "message": "The disruption budget web needs 3 healthy pods"}]}})
    kube = ScriptedKube([budget])
    assert kube.evict("d", "p").outcome == "blocked" and len(kube.sent) == 1


def test_reads_retry_5xx_and_drops_and_count_them() -> None:
    kube = ScriptedKube([(503, {"message": "unavailable"}), dropped(), (200, {"items": []})])
    assert kube.list_nodes() == []
    assert kube.retry_log.snapshot()["by_action"] == {"list nodes": 2}
    kube = ScriptedKube([(500, {"message": "boom"})] * 6)
    with pytest.raises(KubernetesError) as info:
        kube.read_node("n")
    assert info.value.status == 500 and len(kube.sent) == 6
