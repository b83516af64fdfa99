"""The words of the rollout's Events on the nodes (pure), and the writer's counting (a fake API)."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from typing import Any, Optional

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.node_events import (
    FLUSH_FLOOR,
    NodeEvents,
    events_access_warning,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import KubernetesError
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node_events import (
    AGGREGATE_WINDOW,
    COMBINED,
    NOTE_LIMIT,
    STARTED,
    WARNING,
    Correlator,
    NodeEvent,
    eviction_blocked,
    left_cordoned,
    put_back_event,
    released_event,
    step_event,
)

RUN = "run-20260105-1"


@pytest.mark.parametrize("step, detail, reason, action, note", [
    ("cordon", "unschedulable", "CordonedForRollout", "Cordon", f"Cordoned for rollout {RUN}"),
    ("drain", "3 pods evicted, 2 left (DaemonSet and mirror pods)", "Drained", "Drain",
     f"Drain done for rollout {RUN}: 3 pods evicted, 2 left (DaemonSet and mirror pods)"),
    ("stop", "Stopped", "VMStopped", "Stop", f"VM stopped for rollout {RUN} (Stopped)"),
    ("change_offering", "cks-medium -> cks-large", "ServiceOfferingChanged", "ChangeOffering",
     "Service offering changed: cks-medium -> cks-large"),
    ("resize_root_disk", "20 GB -> 30 GB", "RootDiskResized", "ResizeRootDisk", "Root disk resized: 20 GB -> 30 GB"),
    ("update_affinity_groups", "['a'] -> ['b']", "AffinityGroupsChanged", "UpdateAffinityGroups",
     "Affinity groups changed: ['a'] -> ['b']"),
    ("start", "Running", "VMStarted", "Start", f"VM started for rollout {RUN} (Running)"),
    ("verify", "Ready with new boot ID b2; VM matches the settings", "BackReady", "Verify",
     "Back: Ready with new boot ID b2; VM matches the settings"),
    ("uncordon", "uncordoned, annotation removed", "Uncordoned", "Uncordon",
     f"Uncordoned: rollout {RUN} is done with this node (uncordoned, annotation removed)"),
])
def test_each_step_that_went_through_in_the_operators_words(step: str, detail: str, reason: str, action: str,
                                                            note: str) -> None:
    assert step_event(step, "ok", detail, RUN) == NodeEvent(reason, action, note)


@pytest.mark.parametrize("step", ["annotate", "lb_wait", "recheck"])
def test_steps_with_nothing_to_tell(step: str) -> None:
    assert step_event(step, "ok", "boot ID x", RUN) is None


def test_skipped_steps_are_silent_but_a_node_left_cordoned_says_why() -> None:
    assert step_event("change_offering", "skipped", "offering already as set", RUN) is None
    event = step_event("uncordon", "skipped", "cordoned by someone else before the rollout: left cordoned", RUN)
    assert event is not None and event.reason == "LeftCordoned" and event.type == "Normal"
    assert event.note == f"Left cordoned by rollout {RUN}: cordoned by someone else before the rollout: left cordoned"


def test_drain_start_and_failures() -> None:
    assert step_event("drain", STARTED, "", RUN) == NodeEvent("DrainStarted", "Drain", f"Drain started for rollout {RUN}")
    failed = step_event("drain", "failed", "pods still on the node: default/web-x", RUN)
    assert failed == NodeEvent("DrainFailed", "Drain", f"drain failed in rollout {RUN}: pods still on the node: "
                                                       "default/web-x", WARNING)
    other = step_event("update_affinity_groups", "failed", "530: no", None)
    assert other is not None and (other.reason, other.action, other.type) == (
        "RolloutStepFailed", "UpdateAffinityGroups", WARNING)
    assert other.note == "update_affinity_groups failed in the rollout: 530: no"


def test_an_eviction_blocked_by_a_budget_relates_the_pod() -> None:
    pod = {"metadata": {"namespace": "default", "name": "web-1", "uid": "u1"}}
    event = eviction_blocked(pod, "web", "Cannot evict pod as it would violate the pod's disruption budget.")
    assert (event.reason, event.action, event.type) == ("EvictionBlocked", "Evict", WARNING)
    assert event.note.startswith("Eviction of pod default/web-1 blocked by PodDisruptionBudget default/web;")
    assert event.related == {"kind": "Pod", "namespace": "default", "name": "web-1", "uid": "u1", "apiVersion": "v1"}
    # The same refusal again is the same Event (its series grows); another pod is another Event.
    assert eviction_blocked(pod, "web").key == event.key
    assert eviction_blocked({"metadata": {"namespace": "default", "name": "web-2", "uid": "u2"}}, "web").key != event.key
    unknown = eviction_blocked(pod, "", "HTTP 429")
    assert "blocked by a PodDisruptionBudget" in unknown.note and "(HTTP 429)" in unknown.note


def test_put_back_and_left_cordoned() -> None:
    back = put_back_event("change_offering", "535: limit", None, True, RUN)
    assert (back.reason, back.type) == ("PutBack", WARNING)
    assert "refused change_offering in rollout" in back.note and "uncordoned, still out of date" in back.note
    failed = put_back_event("change_offering", "535: limit", "start: 530", True, RUN)
    assert failed.reason == "LeftCordoned" and "putting it back failed: start: 530" in failed.note
    left = left_cordoned("verify", "verify failed: not back by the batch deadline", RUN)
    assert (left.reason, left.action) == ("LeftCordoned", "Verify")
    assert left.note.endswith("the release or the next run uncordons it once it is back")


def test_what_the_release_did_with_a_node() -> None:
    back = released_event(True, "Ready with a new boot ID", RUN)
    assert (back.reason, back.action, back.type) == ("Uncordoned", "Uncordon", "Normal")
    assert back.note == f"Uncordoned by the release of rollout {RUN}: Ready with a new boot ID"
    left = released_event(False, "not Ready: Ready=Unknown", RUN)
    assert (left.reason, left.action, left.type) == ("LeftCordoned", "Release", WARNING)
    assert left.note == f"Left cordoned by the release of rollout {RUN}: not Ready: Ready=Unknown"


def test_a_long_note_is_cut_to_the_apis_limit() -> None:
    event = step_event("drain", "failed", "x" * 5000, RUN)
    assert event is not None and len(event.note.encode()) <= NOTE_LIMIT and event.note.endswith("(cut short)")


class FakeApi:
    """What the writer sends; answers as the API server would (201, 200 for a patch, 404, 403). With
    ``gate``, each request waits until the gate opens (an API server that is slow, or gone)."""

    def __init__(self, refuse: Optional[int] = None, allowed: bool = True, gate: Optional[threading.Event] = None) -> None:
        self.sent: list[tuple[str, str, Any]] = []
        self.refuse = refuse
        self.allowed = allowed
        self.gone: set[str] = set()
        self.gate = gate
        self.waiting = threading.Event()  # a request is held at the gate

    def _json(self, action: str, method: str, path: str, body: Any = None, content_type: str = "",
              missing_is_none: bool = False) -> Any:
        if self.gate is not None:
            self.waiting.set()
            self.gate.wait()
        self.sent.append((method, path, body))
        if self.refuse:
            raise KubernetesError(action, "forbidden", status=self.refuse)
        if method == "PATCH" and path.rsplit("/", 1)[1] in self.gone:
            return None
        return body if method == "POST" else {"metadata": {}}

    def review_access(self, attributes: dict[str, str]) -> dict[str, Any]:
        self.sent.append(("REVIEW", attributes["verb"], attributes))
        return {"status": {"allowed": self.allowed}}


def written(events: NodeEvents) -> None:
    assert events.wait(30), "the writer did not send what was queued"


def test_a_repeat_grows_the_series_instead_of_a_new_event() -> None:
    api = FakeApi()
    events = NodeEvents(api, run=RUN, instance="ctl")
    pod = {"metadata": {"namespace": "default", "name": "web-1", "uid": "u1"}}
    for _retry in range(3):
        events.record("w1", "uid-w1", eviction_blocked(pod, "web"))
        written(events)
    assert [m for m, _p, _b in api.sent] == ["POST", "PATCH", "PATCH"]
    method, path, created = api.sent[0]
    assert path == "/api/v1/namespaces/default/events"
    assert created["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "w1", "uid": "uid-w1"}
    assert created["related"]["name"] == "web-1" and created["reportingComponent"] == "cloudstack.cks/rollout"
    assert created["reportingInstance"] == "ctl" and created["metadata"]["namespace"] == "default"
    # Both APIs' fields: what kubectl describe sorts and shows, and the events.k8s.io view's.
    assert created["source"] == {"component": "cloudstack.cks/rollout", "host": "ctl"} and created["count"] == 1
    assert created["firstTimestamp"] == created["lastTimestamp"] and created["eventTime"].endswith("Z")
    assert created["action"] == "Evict" and created["message"].startswith("Eviction of pod default/web-1")
    assert [(b["count"], b["series"]["count"]) for _m, _p, b in api.sent[1:]] == [(2, 2), (3, 3)]
    assert events.report() == {"written": 1, "repeats": 2, "failed": 0} and events.warnings() == []
    # Past the API's TTL the Event is gone: the next occurrence is a new one.
    api.gone.add(created["metadata"]["name"])
    events.record("w1", "uid-w1", eviction_blocked(pod, "web"))
    events.flush()
    assert [m for m, _p, _b in api.sent[-2:]] == ["PATCH", "POST"]
    assert events.report() == {"written": 2, "repeats": 2, "failed": 0}


def test_recording_never_waits_for_the_api_and_repeats_queued_together_are_one_patch() -> None:
    gate = threading.Event()
    api = FakeApi(gate=gate)
    events = NodeEvents(api, run=RUN)
    cordoned = step_event("cordon", "ok", "", RUN)
    assert cordoned is not None
    pod = {"metadata": {"namespace": "default", "name": "web-1", "uid": "u1"}}
    # The API server answers nothing until the gate opens: every step goes on at once all the same.
    events.record("w1", None, cordoned)
    # The four refusals come while the writer is held on the cordon's Event, so they queue together
    # (recorded before the writer took its first round, some would be in that round instead).
    assert api.waiting.wait(30)
    for _retry in range(4):
        events.record("w1", None, eviction_blocked(pod, "web"))
    assert api.sent == [] and not events.wait(0)
    gate.set()
    events.flush()
    methods = [(m, (b or {}).get("reason"), (b or {}).get("count")) for m, _p, b in api.sent]
    # The four refusals were queued while the API server kept the writer waiting: one Event and one
    # patch of its count, not four requests (the cordon's Event is another, sent beside them).
    assert sorted(methods, key=str) == sorted([("POST", "CordonedForRollout", 1), ("POST", "EvictionBlocked", 1),
                                               ("PATCH", None, 4)], key=str), methods
    assert methods.index(("POST", "EvictionBlocked", 1)) < methods.index(("PATCH", None, 4))
    created = next(b for m, _p, b in api.sent if m == "POST" and b["reason"] == "EvictionBlocked")
    patch = next(b for m, _p, b in api.sent if m == "PATCH")
    assert patch["series"]["count"] == 4 and patch["lastTimestamp"] >= created["firstTimestamp"]
    assert events.report() == {"written": 2, "repeats": 3, "failed": 0}


def test_each_event_keeps_the_time_it_happened_not_the_time_it_was_sent() -> None:
    gate = threading.Event()
    api = FakeApi(gate=gate)
    events = NodeEvents(api, run=RUN)
    happened = time.time()
    for step in ("cordon", "stop", "start"):
        event = step_event(step, "ok", "", RUN)
        assert event is not None
        events.record("w1", None, event)
    time.sleep(0.2)
    sent = time.time()
    gate.set()
    events.flush()
    # Sent side by side, in any order: each carries the time it happened, and its name sorts by it.
    by_reason = {b["reason"]: b for _m, _p, b in api.sent}
    story = [by_reason[r] for r in ("CordonedForRollout", "VMStopped", "VMStarted")]
    times = [datetime.strptime(b["eventTime"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()
             for b in story]
    assert all(happened - 0.001 <= at < sent for at in times) and times == sorted(times), (happened, times, sent)
    names = [b["metadata"]["name"] for b in story]
    assert [int(n.split(".")[-1], 16) for n in names] == sorted(int(n.split(".")[-1], 16) for n in names)
    assert len(set(names)) == 3 and sorted(names) == names


def test_a_dead_api_server_holds_the_module_no_longer_than_the_flush_bound() -> None:
    gate = threading.Event()  # never opened: the API server never answers
    events = NodeEvents(FakeApi(gate=gate), run=RUN)
    for step in ("cordon", "stop", "start"):
        event = step_event(step, "ok", "", RUN)
        assert event is not None
        events.record("w1", None, event)
    # The batch's deadline has passed: the flush gives them FLUSH_FLOOR, then counts them as not written.
    events.flush(deadline_left=0)
    assert events.report()["failed"] == 3 and events.report()["written"] == 0
    (warning,) = events.warnings()
    assert f"did not take them within {FLUSH_FLOOR:g}s" in warning and "the rollout went on without them" in warning
    # Nothing is taken after the module returned, and the writer's late answer changes no count.
    events.record("w1", None, step_event("cordon", "ok", "", RUN))  # type: ignore[arg-type]
    gate.set()
    assert events.report()["failed"] == 4 and events.report()["written"] == 0


def test_events_that_cannot_be_written_are_counted_and_warned_never_raised() -> None:
    api = FakeApi(refuse=403)
    events = NodeEvents(api, run=RUN)
    for step in ("cordon", "stop", "start"):
        event = step_event(step, "ok", "", RUN)
        assert event is not None
        events.record("w1", None, event)
        written(events)
    assert len(api.sent) == 1  # after a 403 nothing more is sent
    events.flush()
    assert events.report()["failed"] == 3
    (warning,) = events.warnings()
    assert warning.startswith("3 Kubernetes Event(s) about the nodes could not be written (grant create and patch")


def test_a_tenth_different_note_of_one_reason_on_a_node_is_combined() -> None:
    correlator = Correlator()
    pods = [{"metadata": {"namespace": "default", "name": f"web-{i}", "uid": f"u{i}"}} for i in range(12)]
    keys = [correlator.correlate("w1", eviction_blocked(pod, "web"), 100.0 + i) for i, pod in enumerate(pods)]
    # Nine pods: nine Events, each its own (its repeats grow its series).
    assert len({key for key, _e in keys[:9]}) == 9 and all(e.related for _k, e in keys[:9])
    # From the tenth on: one combined Event of the reason on that node, whose count grows.
    combined = {key for key, _e in keys[9:]}
    assert combined == {("combined", "w1", WARNING, "EvictionBlocked")}
    event = keys[-1][1]
    assert event.note.startswith(COMBINED + "Eviction of pod default/web-11") and event.related is None
    # A repeat of one of the first nine is still its own Event; another node or reason is not combined.
    assert correlator.correlate("w1", eviction_blocked(pods[0], "web"), 120.0)[0] == keys[0][0]
    assert correlator.correlate("w2", eviction_blocked(pods[11], "web"), 120.0)[1].related
    # Ten minutes without one of them: the count of different notes starts again.
    assert correlator.correlate("w1", eviction_blocked(pods[10], "web"), 121.0 + AGGREGATE_WINDOW)[1].related


def test_the_access_check_warns_and_never_refuses() -> None:
    assert events_access_warning(FakeApi()) is None
    warning = events_access_warning(FakeApi(allowed=False))
    assert warning is not None and "may not create or patch events in default" in warning
