# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Wait for Kubernetes objects by watching them instead of polling, inside a deadline.

The shape is kubernetes.core's waiter and client-go's reflector: list (that read is the state
and its ``resourceVersion``), then watch from that version, asking the condition again after
every event. A server that ends the stream at ``timeoutSeconds`` is watched again from the last
version seen (bookmarks move it on without events); a dropped stream is reconnected from there
too; a 410 Gone ("too old resource version", the watch cache moved past it) lists again. No
wait outlives its ``Deadline``: ``timeoutSeconds`` and the socket's read timeout are cut to
what is left, and ``DeadlineExceeded`` says what was waited for, as ``wait_for`` does.

A server that answers the watch itself with 405, 404 or 400 (a proxy that does not pass
watches) raises ``WatchUnsupported``: the caller falls back to polling.
"""

from __future__ import annotations

import json
import math
import socket
import threading
from typing import Any, Callable, Iterator, Mapping, Optional, TypeVar

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import DeadlineExceeded, KubernetesError
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline

try:
    import urllib3

    HAS_URLLIB3 = True
except ImportError:  # pragma: no cover - exercised only without the library
    HAS_URLLIB3 = False

T = TypeVar("T")
State = dict[str, dict[str, Any]]

# A server-side timeout per stream: long enough that a wait is one or two streams, short enough
# that a silently dead connection is noticed (client-go's reflector picks 5-10 minutes).
STREAM_SECONDS = 290
# Statuses that mean "this server does not watch here", not "this wait failed". 403: an identity
# whose RBAC grants list but not watch (made before the rollout watched, docs/rbac.yml) polls as
# before instead of failing its batch after the stop.
UNSUPPORTED_STATUSES = frozenset({400, 403, 404, 405, 406, 501})


class WatchUnsupported(Exception):
    """The server answered a watch request with a refusal: poll instead."""


class WatchLog:
    """What the watches of one client did (for results and tests): streams, relists, reconnects."""

    def __init__(self) -> None:
        self.lists = 0
        self.streams = 0
        self.relists_after_gone = 0
        self.reconnects = 0


def object_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def apply_event(state: State, event: Mapping[str, Any]) -> Optional[str]:
    """Fold one watch event into ``state``; returns the resourceVersion it moves the watch to.

    Pure, so that the event rules are unit-tested: ADDED and MODIFIED put the object in,
    DELETED takes it out, BOOKMARK only moves the version on.
    """
    etype = event.get("type")
    obj = event.get("object") or {}
    version = (obj.get("metadata") or {}).get("resourceVersion")
    if etype in ("ADDED", "MODIFIED"):
        state[object_key(obj)] = obj
    elif etype == "DELETED":
        state.pop(object_key(obj), None)
    return str(version) if version else None


def stream_seconds(deadline: Deadline) -> int:
    """timeoutSeconds for the next stream: whole seconds (the API's unit), never past the deadline
    by more than the rounding, at least 1."""
    return max(1, min(STREAM_SECONDS, int(math.ceil(deadline.remaining()))))


class WatchStopped(Exception):
    """The watch was stopped by its owner (``WatchStop.stop``): nothing more is waited for."""


class WatchStop:
    """Ends a long-running watch from another thread (a batch's shared node watch once its batch is done).

    A stream blocked in a read does not notice a flag, and closing a socket from another thread
    does not wake a blocked ``recv`` on Linux: ``stop`` shuts the open stream's socket down, which
    does, and the watch then ends with ``WatchStopped`` instead of reconnecting. ``streaming`` says
    whether a stream is open now (not between a drop and its reconnect, nor relisting).
    """

    def __init__(self) -> None:
        self.requested = threading.Event()
        self._response: Any = None
        self._mutex = threading.Lock()

    @property
    def streaming(self) -> bool:
        with self._mutex:
            return self._response is not None

    def attach(self, response: Any) -> None:
        with self._mutex:
            self._response = response
        if self.requested.is_set():
            _shut_down(response)

    def detach(self) -> None:
        with self._mutex:
            self._response = None

    def stop(self) -> None:
        self.requested.set()
        with self._mutex:
            response = self._response
        if response is not None:
            _shut_down(response)


class Gone(Exception):
    """The watch's resourceVersion is too old (410): list again."""


class Dropped(Exception):
    """The stream broke off (no final chunk, reset, read timeout): watch again from the last version."""


class KubeWatcher:
    """Watches through one KubeHttp's ApiClient (``http``: the collection's KubeClient)."""

    def __init__(self, http: Any) -> None:
        self.http = http
        self.log = WatchLog()

    def until(self, path: str, done: Callable[[State], Optional[T]], deadline: Deadline, what: str,
              field_selector: Optional[str] = None, interval: float = 0.5,
              start: Optional[tuple[State, str]] = None, stop: Optional[WatchStop] = None) -> T:
        """The first truthy ``done(state)``; ``state`` maps "namespace/name" to the objects the
        list and watch of ``path`` (with ``field_selector``) currently show.

        ``start``: a state and the resourceVersion it was read at (a list or a write the caller
        made already): the watch follows from there instead of listing again. After a 410 it lists.
        ``stop``: another thread may end the watch with it (``WatchStopped``).
        """
        query = {"fieldSelector": field_selector} if field_selector else {}
        # At the deadline a watch cannot run: one list still tells how things stand now.
        known = start if start is not None and start[1] and not deadline.expired() else None
        while True:
            if known is not None:
                (state, version), known = (dict(known[0]), known[1]), None
            else:
                state, version = self._list(path, query)
            value = done(state)
            if value:
                return value
            try:
                return self._follow(path, query, state, version, done, deadline, what, interval, stop)
            except Gone:
                self.log.relists_after_gone += 1
                if stop is not None and stop.requested.is_set():
                    raise WatchStopped() from None

    def _list(self, path: str, query: Mapping[str, str]) -> tuple[State, str]:
        self.log.lists += 1
        items: list[dict[str, Any]] = []
        token: Optional[str] = None
        version = ""
        while True:
            page_query = dict(query, limit="500")
            if token:
                page_query["continue"] = token
            page = self.http._json(f"list {path}", "GET", path, query=page_query)
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            version = version or str(meta.get("resourceVersion") or "")
            token = meta.get("continue")
            if not token:
                return {object_key(i): i for i in items}, version

    def _follow(self, path: str, query: Mapping[str, str], state: State, version: str,
                done: Callable[[State], Optional[T]], deadline: Deadline, what: str, interval: float,
                stop: Optional[WatchStop] = None) -> T:
        while True:
            if stop is not None and stop.requested.is_set():
                raise WatchStopped()
            if deadline.expired():
                raise DeadlineExceeded(
                    f"gave up waiting for {what} after {deadline.elapsed():.1f}s (deadline {deadline.seconds:g}s)",
                    what=what, waited=round(deadline.elapsed(), 1), deadline=deadline.seconds)
            try:
                for event in self._stream(path, query, version, deadline, stop):
                    moved = apply_event(state, event)
                    if moved:
                        version = moved
                    if event.get("type") == "BOOKMARK":
                        continue
                    value = done(state)
                    if value:
                        return value
            except Dropped:
                _raise_if_stopped(stop)
                self.log.reconnects += 1
                # A reset right after a reconnect would spin: the next try waits one poll interval.
                self.http._sleep(min(interval, deadline.remaining()))
            except Exception:
                # A stream shut down by ``stop`` breaks off in whatever way its read was at.
                _raise_if_stopped(stop)
                raise

    def _stream(self, path: str, query: Mapping[str, str], version: str, deadline: Deadline,
                stop: Optional[WatchStop] = None) -> Iterator[dict[str, Any]]:
        seconds = stream_seconds(deadline)
        watch_query = dict(query, watch="1", allowWatchBookmarks="true", timeoutSeconds=str(seconds))
        if version:
            watch_query["resourceVersion"] = version
        # The read timeout covers the server's own timeout plus one request's worth of slack, but
        # never the deadline plus more than a moment: a silent server cannot stretch the wait.
        read = min(seconds + float(self.http.options.request_timeout), deadline.remaining() + 0.5)
        response = self._open(path, watch_query, max(0.5, read))
        self.log.streams += 1
        if stop is not None:
            stop.attach(response)
        try:
            for line in _lines(response):
                event = json.loads(line)
                if not isinstance(event, dict) or "type" not in event:
                    raise WatchUnsupported(f"the answer to a watch of {path} is not a stream of events")
                if event["type"] == "ERROR":
                    status = event.get("object") or {}
                    if int(status.get("code") or 0) == 410:
                        raise Gone(status.get("message"))
                    raise KubernetesError(f"watch {path}", str(status.get("message") or "the watch failed"),
                                          status=status.get("code"), reason=status.get("reason"))
                yield event
        except (ValueError, OSError) as exc:
            raise Dropped(str(exc)) from None
        except Exception as exc:
            if HAS_URLLIB3 and isinstance(exc, urllib3.exceptions.HTTPError):
                raise Dropped(str(exc)) from None
            raise
        finally:
            if stop is not None:
                stop.detach()
            _close(response)

    def _open(self, path: str, query: Mapping[str, str], read_timeout: float) -> Any:
        """The streaming urllib3 response of a watch request; refusals raise."""
        api_client = self.http.api_client
        headers = {"Accept": "application/json"}
        timeout = (float(self.http.options.request_timeout), read_timeout)
        try:
            if hasattr(api_client, "param_serialize"):
                request = api_client.param_serialize(method="GET", resource_path=path,
                                                     query_params=list(query.items()), header_params=headers,
                                                     auth_settings=["BearerToken"])
                answer = api_client.call_api(*request, _request_timeout=timeout)
                status, raw = int(answer.status), answer.response
            else:
                raw = api_client.call_api(path, "GET", query_params=list(query.items()), header_params=headers,
                                          auth_settings=["BearerToken"], response_type=None,
                                          _return_http_data_only=True, _preload_content=False,
                                          _request_timeout=timeout)
                status = int(raw.status)
        except Exception as exc:
            status = int(getattr(exc, "status", 0) or 0)
            if status:
                raw = None
                body = getattr(exc, "body", "") or ""
                self._refused(path, status, body)
            # Below HTTP (refused, reset): the same as a stream that broke off at once.
            fault = self.http._fault(f"watch {path}", exc)
            if isinstance(fault, KubernetesError):
                raise fault
            raise Dropped(str(exc)) from None
        if not 200 <= status < 300:
            body = raw.data if raw is not None else ""
            _close(raw)
            self._refused(path, status, body)
        return raw

    @staticmethod
    def _refused(path: str, status: int, body: Any) -> None:
        if isinstance(body, bytes):
            body = body.decode("utf-8", "replace")
        try:
            data = json.loads(body) if body else {}
        except ValueError:
            data = {}
        message = data.get("message") if isinstance(data, dict) else None
        if status in UNSUPPORTED_STATUSES:
            raise WatchUnsupported(f"HTTP {status}: {message or 'watch refused'}")
        if status == 410:
            raise Gone(message)
        if status in (429, 500, 502, 503, 504):
            raise Dropped(f"HTTP {status}: {message}")
        raise KubernetesError(f"watch {path}", str(message or "refused"), status=status,
                              reason=data.get("reason") if isinstance(data, dict) else None)


def _lines(response: Any) -> Iterator[str]:
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=False):
        buffer += chunk if isinstance(chunk, bytes) else chunk.encode("utf-8")
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line.decode("utf-8", "replace")
    if buffer.strip():
        yield buffer.decode("utf-8", "replace")


def _raise_if_stopped(stop: Optional[WatchStop]) -> None:
    if stop is not None and stop.requested.is_set():
        raise WatchStopped() from None


def _shut_down(response: Any) -> None:
    """Shut the socket under a streaming urllib3 response down (both ways): a read blocked on it
    returns at once. Without a socket to reach, the stream ends at its own timeout instead."""
    for sock in _sockets(response):
        try:
            sock.shutdown(socket.SHUT_RDWR)
            return
        except (OSError, ValueError):  # already closed: the read has ended anyway
            continue


def _sockets(response: Any) -> Iterator[Any]:
    """Where the socket of a urllib3 response is: its connection's, while the connection keeps it;
    else (http.client hands a closing connection's socket to the response) the response's reader's."""
    connection = getattr(response, "connection", None) or getattr(response, "_connection", None)
    reader = getattr(getattr(getattr(response, "_fp", None), "fp", None), "raw", None)
    for sock in (getattr(connection, "sock", None), getattr(reader, "_sock", None)):
        if sock is not None and hasattr(sock, "shutdown"):
            yield sock


def _close(response: Any) -> None:
    if response is None:
        return
    try:
        response.close()
        response.release_conn()
    except Exception:  # closing a broken stream may fail again; nothing is left to do with it
        pass
