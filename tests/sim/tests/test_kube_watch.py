"""Watches as the official client's ``watch.Watch().stream`` sees them.

Each rule cites what it follows in kubernetes/kubernetes, staging/src/k8s.io/apiserver:
``pkg/endpoints/handlers/watch.go`` (serveWatch: chunked JSON event lines),
``pkg/storage/cacher/watch_cache.go`` (getAllEventsSinceLocked: the event window, 410),
``pkg/storage/cacher/cacher.go`` (Watch, errWatcher, bookmarks, waitUntilFreshAndBlock),
``pkg/storage/cacher/cache_watcher.go`` (convertToWatchEvent: selectors), and
staging/src/k8s.io/apimachinery ``pkg/apis/meta/internalversion/validation`` (ValidateListOptions).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import urllib3
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from kubekit import CONTROL, WORKERS, KubeEnv, node_ready

NODE = WORKERS[1]


def _events(env: KubeEnv, func: Any, limit: int, **kwargs: Any) -> list[dict[str, Any]]:
    """Up to ``limit`` events of one watch, as (type, raw object) dicts; the watch ends at its timeout."""
    watcher = k8s_watch.Watch()
    got: list[dict[str, Any]] = []
    for event in watcher.stream(func, **kwargs):
        got.append({"type": event["type"], "object": event["raw_object"]})
        if len(got) >= limit:
            watcher.stop()
    return got


def test_watch_from_the_lists_version_sees_the_node_go_unknown(kube_env: KubeEnv) -> None:
    """cacher.Watch from a resourceVersion: only the changes after it, as MODIFIED events."""
    listed = kube_env.core.list_node()
    rv = listed.metadata.resource_version
    kube_env.power_off(NODE)
    events = _events(kube_env, kube_env.core.list_node, 10, resource_version=rv, timeout_seconds=5,
                     field_selector=f"metadata.name={NODE}")
    assert events, "no event before the timeout"
    assert {e["type"] for e in events} == {"MODIFIED"}
    assert {e["object"]["metadata"]["name"] for e in events} == {NODE}
    assert all(int(e["object"]["metadata"]["resourceVersion"]) > int(rv) for e in events)
    last = events[-1]["object"]
    ready = next(c for c in last["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "Unknown"
    assert last["kind"] == "Node" and last["apiVersion"] == "v1"


def test_watch_without_a_version_starts_with_every_object_added(kube_env: KubeEnv) -> None:
    """getIntervalFromStoreLocked: resourceVersion unset or "0" sends the current state as ADDED."""
    for rv in (None, "0"):
        kwargs: dict[str, Any] = {"timeout_seconds": 1}
        if rv is not None:
            kwargs["resource_version"] = rv
        events = _events(kube_env, kube_env.core.list_node, 7, **kwargs)
        assert [e["type"] for e in events] == ["ADDED"] * 7
        assert {e["object"]["metadata"]["name"] for e in events} == set(CONTROL + WORKERS)


def test_timeout_seconds_ends_the_stream_cleanly(kube_env: KubeEnv) -> None:
    """watch.go serveWatch: the stream closes at timeoutSeconds; the client's generator just ends."""
    rv = kube_env.core.list_node().metadata.resource_version
    started = time.monotonic()
    events = _events(kube_env, kube_env.core.list_node, 100, resource_version=rv, timeout_seconds=1,
                     field_selector=f"metadata.name={NODE}")
    took = time.monotonic() - started
    assert events == []
    assert 0.9 <= took < 2.5, took


def test_bookmarks_carry_only_the_resource_version(make_kube_env: Any) -> None:
    """cacher.go: with allowWatchBookmarks a BOOKMARK (metadata.resourceVersion only) comes every
    bookmarkFrequency; without it, none."""
    env = make_kube_env({"kube": {"watch_bookmark_seconds": 20}})  # 0.2 s real at time_scale 0.01
    rv = env.core.list_node().metadata.resource_version
    watcher = k8s_watch.Watch()
    bookmarks = []
    for event in watcher.stream(env.core.list_node, resource_version=rv, timeout_seconds=1,
                                allow_watch_bookmarks=True, field_selector=f"metadata.name={NODE}"):
        if event["type"] == "BOOKMARK":
            bookmarks.append(event["raw_object"])
    assert len(bookmarks) >= 2
    assert bookmarks[-1]["kind"] == "Node" and set(bookmarks[-1]["metadata"]) == {"resourceVersion", "creationTimestamp"}
    assert int(bookmarks[-1]["metadata"]["resourceVersion"]) >= int(rv)
    assert watcher.resource_version == bookmarks[-1]["metadata"]["resourceVersion"]
    plain = _events(env, env.core.list_node, 100, resource_version=rv, timeout_seconds=1,
                    field_selector=f"metadata.name={NODE}")
    assert all(e["type"] != "BOOKMARK" for e in plain)


def test_a_compacted_version_is_410_gone_as_an_error_event(make_kube_env: Any) -> None:
    """watch_cache.go getAllEventsSinceLocked: older than the oldest buffered event minus one gives
    NewResourceExpired "too old resource version: RV (OLDEST)", sent by cacher's errWatcher as an
    ERROR event (HTTP 200); the client raises ApiException 410 when it may not retry."""
    env = make_kube_env({"kube": {"watch_cache_size": 3}})
    old = env.core.list_node().metadata.resource_version
    for name in WORKERS:
        env.core.patch_node(name, {"metadata": {"labels": {"touched": "yes"}}})
    with pytest.raises(k8s.ApiException) as caught:
        _events(env, env.core.list_node, 1, resource_version=old, timeout_seconds=2)
    assert caught.value.status == 410
    oldest = int(env.world.store.current_rv()) - 3
    assert f"Expired: too old resource version: {old} ({oldest})" in str(caught.value.reason)
    # A version inside the window still watches.
    recent = str(oldest)
    events = _events(env, env.core.list_node, 3, resource_version=recent, timeout_seconds=1)
    assert len(events) == 3 and {e["type"] for e in events} == {"MODIFIED"}


def test_compaction_and_the_expired_fault_force_410(kube_env: KubeEnv) -> None:
    rv = kube_env.core.list_node().metadata.resource_version
    kube_env.core.patch_node(NODE, {"metadata": {"labels": {"touched": "yes"}}})
    kube_env.world.store.watch_cache.compact()
    with pytest.raises(k8s.ApiException) as caught:
        _events(kube_env, kube_env.core.list_node, 1, resource_version=rv, timeout_seconds=2)
    assert caught.value.status == 410
    fresh = kube_env.core.list_node().metadata.resource_version
    kube_env.sim.faults.add({"kind": "watch_expired", "resource": "nodes", "count": 1})
    with pytest.raises(k8s.ApiException) as caught:
        _events(kube_env, kube_env.core.list_node, 1, resource_version=fresh, timeout_seconds=2)
    assert caught.value.status == 410 and "too old resource version" in str(caught.value.reason)
    # One shot: the next watch from the same version is served.
    assert _events(kube_env, kube_env.core.list_node, 1, resource_version=fresh, timeout_seconds=1) == []


def test_the_client_retries_a_410_once_from_its_last_version_without_timeout(make_kube_env: Any) -> None:
    """kubernetes.watch.Watch.stream without timeout_seconds retries once after a 410 (its docstring)."""
    env = make_kube_env({"kube": {"watch_cache_size": 2}})
    old = env.core.list_node().metadata.resource_version
    for name in WORKERS:
        env.core.patch_node(name, {"metadata": {"labels": {"touched": "yes"}}})
    with pytest.raises(k8s.ApiException) as caught:
        _events(env, env.core.list_node, 1, resource_version=old)
    assert caught.value.status == 410


def test_selectors_send_added_and_deleted_as_objects_enter_and_leave(kube_env: KubeEnv) -> None:
    """cache_watcher.go convertToWatchEvent: matching now but not before is ADDED; before but not now
    is DELETED; neither is not sent."""
    rv = kube_env.core.list_node().metadata.resource_version
    kube_env.core.patch_node(WORKERS[0], {"metadata": {"labels": {"pool": "blue"}}})
    kube_env.core.patch_node(WORKERS[2], {"metadata": {"labels": {"pool": "green"}}})
    kube_env.core.patch_node(WORKERS[0], {"metadata": {"labels": {"pool": "red"}}})
    events = _events(kube_env, kube_env.core.list_node, 5, resource_version=rv, timeout_seconds=1,
                     label_selector="pool=blue")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", WORKERS[0]), ("DELETED", WORKERS[0])]
    assert events[1]["object"]["metadata"]["labels"]["pool"] == "red"


def test_pods_on_a_node_evicted_then_deleted_by_uid(kube_env: KubeEnv) -> None:
    """An evicted pod: MODIFIED (deletionTimestamp) then DELETED at its own resourceVersion;
    a field selector on spec.nodeName keeps other nodes' pods out."""
    pods = kube_env.core.list_namespaced_pod("default", field_selector=f"spec.nodeName={NODE}")
    web = next(p for p in pods.items if p.metadata.name.startswith("web-"))
    body = k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name=web.metadata.name, namespace="default"))
    kube_env.core.create_namespaced_pod_eviction(web.metadata.name, "default", body)
    events = _events(kube_env, kube_env.core.list_namespaced_pod, 50, namespace="default",
                     resource_version=pods.metadata.resource_version, timeout_seconds=2,
                     field_selector=f"spec.nodeName={NODE}")
    mine = [e for e in events if e["object"]["metadata"]["uid"] == web.metadata.uid]
    assert [e["type"] for e in mine][-1] == "DELETED"
    assert "deletionTimestamp" in mine[0]["object"]["metadata"]
    assert all(e["object"]["spec"].get("nodeName") == NODE for e in events)
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and len(set(rvs)) == len(rvs)


def test_a_dropped_stream_breaks_off_mid_way(kube_env: KubeEnv) -> None:
    """The admin fault cuts the connection with no final chunk: urllib3 sees the body end early."""
    kube_env.sim.faults.add({"kind": "watch_drop", "resource": "nodes", "after_events": 2, "count": 1})
    got: list[str] = []
    with pytest.raises(urllib3.exceptions.ProtocolError):
        for event in k8s_watch.Watch().stream(kube_env.core.list_node, timeout_seconds=3):
            got.append(event["raw_object"]["metadata"]["name"])
    assert len(got) == 2
    # One shot: the next watch is whole.
    assert len(_events(kube_env, kube_env.core.list_node, 7, timeout_seconds=1)) == 7


def test_watch_options_are_validated(kube_env: KubeEnv) -> None:
    """ValidateListOptions: resourceVersionMatch on a watch needs sendInitialEvents (422)."""
    status, body = kube_env.raw("GET", "/api/v1/nodes?watch=1&resourceVersion=1&resourceVersionMatch=NotOlderThan")
    assert status == 422 and body["reason"] == "Invalid"
    assert body["message"] == ('ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
                               'resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided')
    status, body = kube_env.raw("GET", "/api/v1/nodes?watch=true&resourceVersion=abc")
    assert status == 400 and body["reason"] == "BadRequest"


def test_list_resource_version_match_rules(kube_env: KubeEnv) -> None:
    """ValidateListOptions for a list, then the cacher: Exact at the current version is served."""
    status, body = kube_env.raw("GET", "/api/v1/nodes?resourceVersionMatch=NotOlderThan")
    assert status == 422 and body["message"].endswith(
        "resourceVersionMatch is forbidden unless resourceVersion is provided")
    status, body = kube_env.raw("GET", "/api/v1/nodes?resourceVersion=0&resourceVersionMatch=Exact")
    assert status == 422 and body["message"].endswith(
        'resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
    status, body = kube_env.raw("GET", "/api/v1/nodes?resourceVersion=1&resourceVersionMatch=Sometime")
    assert status == 422 and 'Unsupported value: "Sometime"' in body["message"]
    rv = kube_env.core.list_node().metadata.resource_version
    listed = kube_env.core.list_node(resource_version=rv, resource_version_match="Exact")
    assert listed.metadata.resource_version == rv and len(listed.items) == 7
    older = kube_env.core.list_node(resource_version="1", resource_version_match="NotOlderThan")
    assert int(older.metadata.resource_version) >= int(rv)


def test_a_future_version_waits_then_504(kube_env: KubeEnv) -> None:
    """cacher waitUntilFreshAndBlock: 3 s for the cache to reach it, then "Too large resource version"."""
    ahead = str(int(kube_env.world.store.current_rv()) + 1000)
    started = time.monotonic()
    status, body = kube_env.raw("GET", f"/api/v1/nodes?resourceVersion={ahead}")
    assert status == 504 and body["reason"] == "Timeout"
    assert body["message"].startswith(f"Too large resource version: {ahead}, current: ")
    assert body["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    assert time.monotonic() - started >= 2.9


def test_a_server_without_watch_answers_405(make_kube_env: Any) -> None:
    """A proxy that does not pass watches (kube.watch: false): what the fallback to polling meets."""
    env = make_kube_env({"kube": {"watch": False}})
    status, body = env.raw("GET", "/api/v1/nodes?watch=1")
    assert status == 405 and body["reason"] == "MethodNotAllowed"
    assert env.raw("GET", "/api/v1/nodes")[0] == 200


def test_watch_calls_are_logged_with_their_verb(kube_env: KubeEnv) -> None:
    _events(kube_env, kube_env.core.list_node, 1, timeout_seconds=1)
    watches = [c for c in kube_env.sim.calls.list() if c.get("verb") == "watch"]
    assert watches and watches[-1]["resource"] == "nodes" and watches[-1]["status"] == 200
    assert node_ready(kube_env.core.read_node(NODE)) == "True"
