"""Transient faults ridden out (a busy cloud answers 5xx or drops a connection now and then), against cks-sim through the collection's real clients.

- The answer to each CloudStack change (stop, change offering, resize, affinity, start) is lost
  after CloudStack carried it out (cks-sim's ``lost_answer``): the cycle settles it by reading
  what the command would have changed and the VM's pending jobs, and never sends it twice.
- CloudStack's own INTERNAL_ERROR (530) answer to a change (cks-sim's ``request_fault`` mode
  ``530``, before it ran): settled by reading like a lost answer, then sent again; to a read: asked
  again like a 503.
- A 429 with Retry-After on an eviction: the pod is checked and the eviction posted again after
  the time the server asked for.
- A 503 on the release's lease write: the release tries again and gives the lock back; an API
  that stays down past the release's bound gets a clear account of what is left.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import Lock
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.release_steps import Release, ReleaseUnfinished
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import RecordStore

from helpers import ClusterSim

STEP_OF = {
    "stopVirtualMachine": "stop",
    "changeServiceForVirtualMachine": "change_offering",
    "resizeVolume": "resize_root_disk",
    "updateVMAffinityGroup": "update_affinity_groups",
    "startVirtualMachine": "start",
}


def every_change(sim: ClusterSim) -> Settings:
    """Workers to cks-large, a 30 GB root disk, and the workers-spread group: all five changes."""
    return Settings(worker=TypeSettings(sim.offering_id("cks-large"), 30, (sim.group_id("workers-spread"),)))


def sent(sim: ClusterSim, command: str) -> list[dict[str, Any]]:
    return [c for c in sim.calls() if c.get("api") == "cloudstack" and c.get("command") == command]


@pytest.mark.parametrize("command", list(STEP_OF))
def test_a_lost_answer_to_a_change_is_settled_and_never_sent_twice(cycle_sim: Callable[..., ClusterSim],
                                                                   command: str) -> None:
    sim = cycle_sim("small.yml")
    node = sim.names("worker")[0]
    sim.fault(kind="lost_answer", command=command, count=1)

    result = sim.cycle([node], every_change(sim))

    assert result.error is None, result.error
    calls = sent(sim, command)
    # Carried out once, its answer lost, and not sent again.
    assert [c["status"] for c in calls] == [0], calls
    assert calls[0]["fault"] == "lost_answer"
    step = next(s for s in result.results[0].steps if s.name == STEP_OF[command])
    assert step.outcome == "ok" and "lost answer" in step.detail, step
    settled = result.to_dict()["retries"]["cloudstack"]["lost_answers_settled"]
    assert sum(n for how, n in settled.items() if how.startswith(command)) == 1, settled
    if command != "changeServiceForVirtualMachine":
        # An async change: its job was looked for (pending: polled; done: skipped).
        assert sent(sim, "listAsyncJobs"), "the pending jobs were never read"
    after = sim.view().node(node)
    assert after.vm_state == "Running" and after.ready and not after.unschedulable
    assert after.offering_name == "cks-large" and after.root_disk_gb == 30
    assert sim.invariants() == []


@pytest.mark.parametrize("command", list(STEP_OF))
def test_a_530_answer_to_a_change_is_settled_by_reading_then_sent_again(cycle_sim: Callable[..., ClusterSim],
                                                                        command: str) -> None:
    sim = cycle_sim("small.yml", etcd=False)
    node = sim.names("worker")[0]
    sim.fault(kind="request_fault", request=f"cloudstack {command}", mode="530", count=1)

    result = sim.cycle([node], every_change(sim))

    assert result.error is None, result.error
    calls = sent(sim, command)
    assert [(c["status"], c.get("fault")) for c in calls] == [(530, "request_fault"), (200, None)], calls
    step = next(s for s in result.results[0].steps if s.name == STEP_OF[command])
    assert step.outcome == "ok" and "(sent again after 1 lost answer(s))" in step.detail, step
    retries = result.to_dict()["retries"]["cloudstack"]
    assert retries["lost_answers_settled"] == {f"{command}: not carried out: sent again": 1}, retries
    after = sim.view().node(node)
    assert after.vm_state == "Running" and after.ready and not after.unschedulable
    assert after.offering_name == "cks-large" and after.root_disk_gb == 30
    assert sim.invariants() == []


def test_a_530_answer_to_a_read_is_asked_again(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml", etcd=False)
    sim.fault(kind="request_fault", request="cloudstack listVirtualMachines", mode="530", count=1)
    assert sim.cloud.list("listVirtualMachines", listall=True)
    calls = sent(sim, "listVirtualMachines")
    assert [(c["status"], c.get("fault")) for c in calls] == [(530, "request_fault"), (200, None)], calls
    assert sim.cloud.retry_log.snapshot()["by_action"] == {"listVirtualMachines": 1}


def test_a_change_whose_request_never_arrived_is_sent_again(cycle_sim: Callable[..., ClusterSim]) -> None:
    """A drop before CloudStack ran the stop: no pending job, the VM still Running, so it is sent again."""
    sim = cycle_sim("small.yml")
    node = sim.names("worker")[0]
    view = sim.view()
    assert view.node(node).vm_state == "Running"

    from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.vm_changes import VmChanges
    from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline

    changes = VmChanges(sim.cloud, view.node(node).vm_id, target=node)
    # The next CloudStack request (the stop) is dropped before CloudStack sees it.
    sim.fault(kind="transient", api="cloudstack", rate=1.0, mode="drop", count=1)
    how = changes.stop(Deadline(60))
    assert how == "sent again after 1 lost answer(s)", how
    calls = sent(sim, "stopVirtualMachine")
    assert [c["status"] for c in calls] == [0, 200], calls
    assert sim.view().node(node).vm_state == "Stopped"
    assert changes.start(Deadline(60)) == "sent"


def test_an_eviction_answered_429_with_retry_after_is_posted_again_after_it(
        cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    node = next(n for n in sim.names("worker")
                if any(p["metadata"]["name"].startswith("web-") for p in sim.kube.list_pods(n)))
    pod = next(p for p in sim.kube.list_pods(node) if p["metadata"]["name"].startswith("web-"))
    name = pod["metadata"]["name"]
    # As the max-in-flight / priority-and-fairness filters shed load: no DisruptionBudget cause.
    sim.fault(kind="kube_error", verb="create", resource="pods/eviction", name=name, status=429,
              reason="TooManyRequests", message="Too many requests, please try again later.",
              retry_after=1, count=1)

    result = sim.cycle([node], Settings(worker=TypeSettings(sim.offering_id("cks-large"), None, None)))

    assert result.error is None, result.error
    posts = [c for c in sim.calls() if c.get("api") == "kubernetes" and c.get("verb") == "create"
             and c.get("resource") == "pods/eviction" and c.get("name") == name]
    assert [c["status"] for c in posts] == [429, 201], posts
    assert posts[1]["t"] - posts[0]["t"] >= 1.0, "the eviction came back before Retry-After"
    # Between the two posts the pod was read (still there, not terminating).
    reads = [c for c in sim.calls() if c.get("api") == "kubernetes" and c.get("verb") == "get"
             and c.get("resource") == "pods" and c.get("name") == name and posts[0]["t"] <= c["t"] <= posts[1]["t"]]
    assert reads, "the pod was not checked before the eviction was posted again"
    retries = result.to_dict()["retries"]["kubernetes"]
    assert retries["by_action"].get(f"evict pod default/{name}") == 1, retries
    assert sim.invariants() == []


def lease_writes(sim: ClusterSim) -> list[dict[str, Any]]:
    return [c for c in sim.calls() if c.get("api") == "kubernetes" and c.get("resource") == "leases"
            and c.get("verb") in ("update", "patch")]


def test_a_503_on_the_release_lease_write_is_ridden_out(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml", etcd=False)
    lock = Lock(sim.kube, holder_identity="run-503")
    lock.acquire()
    # The release's write: one merge patch on the version the acquire left (the lock knows it).
    sim.fault(kind="kube_error", verb="patch", resource="leases", status=503, count=2,
              reason="ServiceUnavailable", message="the server is currently unable to handle the request")

    result = sim.release(lock=lock)

    assert result.lock_released, result.to_dict()
    assert [c["status"] for c in lease_writes(sim)][-3:] == [503, 503, 200]
    assert Lock(sim.kube).read().holder is None
    kube_retries = result.retries["kubernetes"]["by_action"]
    assert sum(n for action, n in kube_retries.items() if "lease" in action) == 2, kube_retries


def test_a_503_on_the_conditional_renewal_is_ridden_out_and_written_once(cycle_sim: Callable[..., ClusterSim]) -> None:
    """The renewal's one write (a merge patch on the version last written) answered 503 twice: each
    time a read shows the version still there (it did not happen) and it is sent again, once it lands."""
    sim = cycle_sim("small.yml", etcd=False)
    lock = Lock(sim.kube, holder_identity="run-503-renew")
    taken = lock.acquire()
    sim.fault(kind="kube_error", verb="patch", resource="leases", status=503, count=2,
              reason="ServiceUnavailable", message="the server is currently unable to handle the request")
    since = len(sim.calls())

    renewed = lock.renew()

    leases = [(c["verb"], c["status"]) for c in sim.calls()[since:] if c.get("resource") == "leases"]
    assert leases == [("patch", 503), ("get", 200), ("patch", 503), ("get", 200), ("patch", 200)], leases
    assert renewed.holder == "run-503-renew" and renewed.acquire_time == taken.acquire_time
    assert Lock(sim.kube).read().resource_version == renewed.resource_version == lock.written_version


def test_a_release_whose_api_stays_down_says_what_it_left(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml", etcd=False)
    lock = Lock(sim.kube, holder_identity="run-down", duration_seconds=300)
    taken = lock.acquire()
    sim.fault(kind="kube_error", verb="patch", resource="leases", status=503,
              reason="ServiceUnavailable", message="the server is currently unable to handle the request")
    release = Release(sim.cloud, sim.kube, sim.loader, sim.cluster_id, RecordStore(sim.kube), lock, seconds=3)
    started = time.monotonic()

    with pytest.raises(ReleaseUnfinished) as info:
        release.run()

    took = time.monotonic() - started
    assert took < 3 + 12, took  # bounded: the release's seconds, plus one last try of each step
    message = info.value.msg
    assert "release did not finish within 3s" in message and "give the lock back" in message, message
    assert "stays held by run-down until" in message and "expires" in message, message
    assert taken.renew_time[:16] in message or "T" in message.split("until ")[1], message
    details = info.value.details["release"]
    assert details["lock_released"] is False and details["unfinished"][0]["step"] == "give the lock back"
    # Nothing else was left undone, and the lease is as it was: held by the run, to expire.
    assert details["left_cordoned"] == []
    sim.clear_faults()
    assert Lock(sim.kube).read().holder == "run-down"


@pytest.mark.parametrize("mode", ["503", "drop"])
def test_an_access_review_is_asked_again_after_a_fault_as_a_read_is(cycle_sim: Callable[..., ClusterSim], mode: str) -> None:
    """Issue 33: a SelfSubjectAccessReview is a POST that changes nothing; one 503 (or a dropped
    connection) on the one the etcd checks ask before the lock failed the rollout."""
    sim = cycle_sim("small.yml", etcd=False)
    sim.fault(kind="request_fault", request="kubernetes create selfsubjectaccessreviews", mode=mode, count=1)

    review = sim.kube.review_access({"namespace": "kube-system", "verb": "create", "resource": "pods",
                                     "subresource": "exec"})

    assert review["status"]["allowed"] is True
    calls = [c for c in sim.calls() if c.get("request") == "kubernetes create selfsubjectaccessreviews"]
    assert [c["status"] for c in calls] == ([503, 201] if mode == "503" else [0, 201]), calls
    assert sim.kube.retry_log.snapshot()["by_action"] == {"review access": 1}


def test_a_503_on_a_health_check_is_asked_again_and_its_500_is_the_answer(cycle_sim: Callable[..., ClusterSim]) -> None:
    """The sweep's finding: a 503 on /readyz/etcd (an API server or proxy that cannot answer now) was
    read as "etcd not ready" and failed the preflight. A 503 is asked again; a 500 is the verdict."""
    sim = cycle_sim("small.yml", etcd=False)
    sim.fault(kind="request_fault", request="kubernetes get /readyz", mode="503", count=1)
    status, text = sim.kube.raw_get("/readyz")
    assert status == 200, text
    assert [c["status"] for c in sim.calls() if c.get("request") == "kubernetes get /readyz"] == [503, 200]

    sim.fault(kind="kube_error", verb="get", path="/readyz", status=500, message="[-]etcd failed", count=1)
    status, _text = sim.kube.raw_get("/readyz")
    assert status == 500
    assert [c["status"] for c in sim.calls() if c.get("request") == "kubernetes get /readyz"] == [503, 200, 500]
