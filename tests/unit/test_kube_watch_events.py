"""The pure parts of the watch helper: folding events into the state, the stream's timeout, and
when an evicted pod counts as gone."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube_watch import (
    STREAM_SECONDS,
    Dropped,
    Gone,
    KubeWatcher,
    WatchStop,
    WatchStopped,
    WatchUnsupported,
    apply_event,
    object_key,
    stream_seconds,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import DeadlineExceeded
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.drain import still_terminating


def pod(name: str, uid: str, rv: str = "5", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": uid, "resourceVersion": rv}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


def test_object_keys_are_namespace_slash_name_or_just_the_name() -> None:
    assert object_key(pod("a", "u")) == "default/a"
    assert object_key({"metadata": {"name": "node-1"}}) == "node-1"


def test_added_modified_deleted_and_bookmark_fold_into_the_state() -> None:
    state: dict[str, dict[str, Any]] = {}
    assert apply_event(state, {"type": "ADDED", "object": pod("a", "u1", "10")}) == "10"
    assert state["default/a"]["metadata"]["uid"] == "u1"
    assert apply_event(state, {"type": "MODIFIED", "object": pod("a", "u1", "11", deleting=True)}) == "11"
    assert "deletionTimestamp" in state["default/a"]["metadata"]
    assert apply_event(state, {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}}) == "15"
    assert list(state) == ["default/a"]
    assert apply_event(state, {"type": "DELETED", "object": pod("a", "u1", "16")}) == "16"
    assert state == {}
    # A DELETED of something never seen is no error (it left before our list).
    assert apply_event(state, {"type": "DELETED", "object": pod("b", "u2", "17")}) == "17"
    assert apply_event(state, {"type": "MODIFIED", "object": {"metadata": {"name": "x"}}}) is None


@pytest.mark.parametrize("left, expected", [(0.0, 1), (0.2, 1), (1.0, 1), (1.2, 2), (45.5, 46), (10_000, STREAM_SECONDS)])
def test_stream_seconds_are_whole_at_least_one_and_capped(left: float, expected: int) -> None:
    clock = iter([0.0] * 2 + [0.0] * 10)
    deadline = Deadline(left, clock=lambda: next(clock))
    assert stream_seconds(deadline) == expected


def test_an_evicted_pod_is_gone_when_absent_or_back_under_another_uid() -> None:
    assert not still_terminating("u1", "default/a", {}, node_down=False)
    assert not still_terminating("u1", "default/a", {"default/a": pod("a", "u2")}, node_down=False)
    assert still_terminating("u1", "default/a", {"default/a": pod("a", "u1", deleting=True)}, node_down=False)
    # No kubelet on a stopped VM finishes it: marked for deletion is as good as gone.
    assert not still_terminating("u1", "default/a", {"default/a": pod("a", "u1", deleting=True)}, node_down=True)
    assert still_terminating("u1", "default/a", {"default/a": pod("a", "u1")}, node_down=True)


class _Http:
    class options:  # noqa: N801 - the attribute KubeWatcher reads
        request_timeout = 5.0

    def __init__(self) -> None:
        self.slept: list[float] = []

    def _sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def _scripted(watcher: KubeWatcher, lists: list[dict[str, Any]], streams: list[Any]) -> list[str]:
    """Replace the watcher's I/O: each list returns the next state (version "100"); each stream
    yields its events, then raises what follows them (Gone, Dropped), or ends."""
    versions: list[str] = []

    def fake_list(path: str, query: Any) -> tuple[dict[str, Any], str]:
        watcher.log.lists += 1
        return dict(lists.pop(0)), "100"

    def fake_stream(path: str, query: Any, version: str, deadline: Deadline, stop: Any = None) -> Any:
        versions.append(version)
        *events, end = streams.pop(0)
        yield from events
        if isinstance(end, BaseException):
            raise end

    watcher._list = fake_list  # type: ignore[method-assign]
    watcher._stream = fake_stream  # type: ignore[method-assign]
    return versions


def _has(name: str) -> Any:
    return lambda state: state.get(name)


def test_the_watcher_reconnects_from_the_last_version_and_relists_after_gone() -> None:
    watcher = KubeWatcher(_Http())
    versions = _scripted(watcher, [{}, {}], [
        [{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "120"}}}, Dropped("reset")],
        [Gone("too old")],
        [{"type": "ADDED", "object": {"metadata": {"name": "n", "resourceVersion": "130"}}}, None],
    ])
    found = watcher.until("/api/v1/nodes", _has("n"), Deadline(10), "n")
    assert found["metadata"]["name"] == "n"
    # After the drop: from the bookmark's version; after the 410: a new list, from its version.
    assert versions == ["100", "120", "100"]
    assert (watcher.log.lists, watcher.log.reconnects, watcher.log.relists_after_gone) == (2, 1, 1)


def test_the_watcher_gives_up_at_the_deadline_with_what_it_waited_for() -> None:
    now = [0.0]
    deadline = Deadline(3, clock=lambda: now[0])
    watcher = KubeWatcher(_Http())

    def ends_later() -> list[Any]:
        now[0] += 2.0  # each stream runs to its server-side timeout
        return [None]

    _scripted(watcher, [{}], [ends_later(), ends_later()])
    with pytest.raises(DeadlineExceeded) as caught:
        watcher.until("/api/v1/nodes", _has("n"), deadline, "node n to come back")
    assert caught.value.msg.startswith("gave up waiting for node n to come back after 4.0s (deadline 3s)")


def test_a_state_already_done_at_the_list_opens_no_stream() -> None:
    watcher = KubeWatcher(_Http())
    versions = _scripted(watcher, [{"n": {"metadata": {"name": "n"}}}], [])
    assert watcher.until("/api/v1/nodes", _has("n"), Deadline(1), "n")
    assert versions == [] and watcher.log.lists == 1


@pytest.mark.parametrize("status", [403, 405, 501])
def test_a_watch_the_server_or_the_identitys_rbac_refuses_means_poll_instead(status: int) -> None:
    # 403: RBAC that grants list but not watch (written before the rollout watched) keeps working.
    with pytest.raises(WatchUnsupported):
        KubeWatcher._refused("/api/v1/nodes", status, b'{"message": "refused"}')


def test_a_watch_refused_otherwise_is_not_taken_for_no_watch_support() -> None:
    with pytest.raises(Gone):
        KubeWatcher._refused("/api/v1/nodes", 410, b'{"message": "too old resource version"}')
    with pytest.raises(Dropped):
        KubeWatcher._refused("/api/v1/nodes", 503, b"")


def test_a_stop_asked_for_ends_the_watch_instead_of_reconnecting() -> None:
    """The batch's shared node watch is stopped while its stream breaks off (its socket shut down):
    it ends with WatchStopped, no reconnect, no relist."""
    watcher = KubeWatcher(_Http())
    stop = WatchStop()
    versions = _scripted(watcher, [], [
        [{"type": "MODIFIED", "object": {"metadata": {"name": "n", "resourceVersion": "110"}}}, Dropped("shut down")],
        [None],
    ])

    def stop_at_the_first_event(state: dict[str, Any]) -> None:
        if "n" in state:  # asked at the start too, with the state it starts from
            stop.stop()  # no stream attached here: only the flag
        return None

    with pytest.raises(WatchStopped):
        watcher.until("/api/v1/nodes", stop_at_the_first_event, Deadline(10), "the batch's nodes",
                      start=({}, "100"), stop=stop)
    assert versions == ["100"]
    assert (watcher.log.lists, watcher.log.reconnects) == (0, 0)


def test_a_stop_before_the_stream_opens_shuts_it_down_when_it_attaches() -> None:
    class _Socket:
        def __init__(self) -> None:
            self.shut: list[int] = []

        def shutdown(self, how: int) -> None:
            self.shut.append(how)

    class _Response:
        def __init__(self) -> None:
            self.connection = type("Connection", (), {})()
            self.connection.sock = _Socket()

    stop = WatchStop()
    stop.stop()
    response = _Response()
    stop.attach(response)
    assert response.connection.sock.shut and stop.streaming
    stop.detach()
    assert not stop.streaming
