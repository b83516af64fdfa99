# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The HTTP side of the Kubernetes client: one request as raw JSON, transport failures turned into
clear errors, and the retry policy (retry.py) around it: a request that changes nothing (a read, an
access review, a dry run: ``_decisions.request_kinds``) is sent again on a dropped connection, a
429 (Retry-After) or a 5xx; a write only after ``settle`` read that it did not happen."""

from __future__ import annotations

import json
import re
import ssl
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.retry import RetryLog, RetryPolicy, Transient, parse_retry_after
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.tls_failures import handshake_cut
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import KubernetesError
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.request_kinds import changes_nothing, kube_kind

try:
    import urllib3
    from kubernetes.client.exceptions import ApiException

    HAS_KUBERNETES = True
except ImportError:  # pragma: no cover - exercised only without the library
    HAS_KUBERNETES = False

    class ApiException(Exception):  # type: ignore[no-redef]
        status = 0
        body = ""

_BASE64_RUN = re.compile(r"[A-Za-z0-9+/=]{40,}")
# What a read is sent again on (kube-apiserver restarting, a proxy in front of it, load shedding).
READ_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# A write's 500 can be the API's answer (an eviction covered by two PDBs), and so is a health
# check's (/readyz answers 500 naming the check that failed): only these are retried then. A 503 is
# an API server or a proxy in front of it that cannot answer now, never a health verdict.
WRITE_RETRY_STATUSES = frozenset({429, 502, 503, 504})


def scrub_secrets(text: str) -> str:
    """Drop long base64 runs (certificate or key data, tokens) from a message."""
    return _BASE64_RUN.sub("<redacted>", text)


class KubeHttp:
    """Requests to one cluster's API (``api_client``: the kubernetes ApiClient; ``options``: KubeOptions)."""

    def __init__(self, api_client: Any, options: Any) -> None:
        self.api_client = api_client
        self.options = options
        self.host = api_client.configuration.host
        self.retry_log = RetryLog()
        self.policy = RetryPolicy()
        # The batch's deadline, when a batch runs: no retry waits past it.
        self.deadline: Optional[Deadline] = None
        self._sleep: Callable[[float], None] = time.sleep

    @property
    def _timeout(self) -> tuple[float, float]:
        t = float(self.options.request_timeout)
        return (t, t)

    # -- nodes, pods, evictions, PDBs ----------------------------------------------------------

    def _json(self, action: str, method: str, path: str, query: Optional[Mapping[str, str]] = None,
              body: Optional[Any] = None, content_type: str = "application/json",
              missing_is_none: bool = False, settle: Optional[Callable[[], Any]] = None) -> Any:
        """One request; the answer's JSON object. A non-2xx answer raises KubernetesError with the
        Status's message and reason (a 404 gives None instead with ``missing_is_none``).

        ``settle`` (writes): after a transient fault, reads what the write changes and returns the
        object as written (the write went through), or None (it did not: send it again); it raises
        the error the server would have given (409) when someone else wrote meanwhile.
        """
        answer = self._request(action, method, path, query=query, body=body, content_type=content_type,
                               settle=settle)
        if isinstance(answer, _Settled):
            return answer.value
        status, text = answer
        if missing_is_none and status == 404:
            return None
        data = _json_or_none(text)
        if not 200 <= status < 300:
            raise _status_error(action, status, data)
        if not isinstance(data, dict):
            raise KubernetesError(action, "the answer is not a JSON object", status=status)
        return data

    def raw_get(self, path: str, query: Optional[Mapping[str, str]] = None) -> tuple[int, str]:
        """GET a path that is no API object (``/readyz``, ``/readyz/etcd``, ``/version``).

        Returns the HTTP status and body text whatever the status (a 500 of /readyz is an
        answer); a dropped connection, a 429 and a 502/503/504 (the server or a proxy unable to
        answer now) are retried like any read, then their answer returned, and transport failures raise.
        """
        return self._request(f"GET {path}", "GET", path, query=query, accept="*/*", retry_statuses=WRITE_RETRY_STATUSES)

    def _request(self, action: str, method: str, path: str, query: Optional[Mapping[str, str]] = None,
                 body: Optional[Any] = None, accept: str = "application/json",
                 content_type: str = "application/json", settle: Optional[Callable[[], Any]] = None,
                 retry_statuses: Optional[frozenset[int]] = None) -> Any:
        """(status, text), or ``_Settled`` when a write's lost answer was settled by ``settle``.

        A request that changes nothing is sent again on a dropped connection, a 429 or a 5xx
        (retry.RetryPolicy), whatever its method: what it does decides (``request_kinds``), so an
        access review (a POST) is retried like a GET. A write is sent again only after ``settle``
        said it did not happen; without ``settle`` it is sent once and its fault is the caller's.
        """
        reading = changes_nothing(kube_kind(method, path, query), query)
        statuses = retry_statuses if retry_statuses is not None else (
            READ_RETRY_STATUSES if reading else WRITE_RETRY_STATUSES)

        def send() -> tuple[int, str]:
            status, text, headers = self._raw(action, method, path, query=query, body=body, accept=accept,
                                              content_type=content_type)
            if status in statuses and not _budget_refusal(status, text):
                message = _json_or_none(text)
                message = message.get("message") if isinstance(message, dict) else None
                raise _AnsweredTransient(f"HTTP {status}: {scrub_secrets(str(message or 'no message'))}", status=status,
                                         retry_after=parse_retry_after(_header(headers, "Retry-After")),
                                         answer=(status, text))
            return status, text

        def on_retry(fault: Transient, wait: float) -> None:
            self.retry_log.retried(action, fault.message, wait)

        if reading:
            try:
                return self.policy.run(send, deadline=self.deadline, on_retry=on_retry, sleep=self._sleep)
            except Transient as fault:
                return self._give_up(action, fault)
        try:
            return send()
        except Transient as fault:
            if settle is None:
                return self._give_up(action, fault)
            first: Optional[Transient] = fault

        def settled_or_sent() -> Any:
            nonlocal first
            if first is not None:
                fault, first = first, None
                raise fault
            return send()

        # Each round: read what the write changes; done -> that; not done -> the policy's next send.
        def attempt() -> Any:
            try:
                return settled_or_sent()
            except Transient as fault:
                if not fault.maybe_done and fault.retry_after is None and not isinstance(fault, _AnsweredTransient):
                    raise
                value = settle()
                if value is not None:
                    self.retry_log.reconciled(action, "already done: not sent again")
                    return _Settled(value)
                raise

        try:
            return self.policy.run(attempt, deadline=self.deadline, on_retry=on_retry, sleep=self._sleep)
        except Transient as fault:
            return self._give_up(action, fault)

    def _give_up(self, action: str, fault: Transient) -> tuple[int, str]:
        """The last fault as the caller sees it: the server's answer, or the transport's error."""
        if isinstance(fault, _AnsweredTransient):
            return fault.answer
        if isinstance(fault, _TransportFault):
            if fault.unreachable and self.deadline is not None:
                raise KubernetesError(fault.error.action, f"the Kubernetes API was unreachable until the batch "
                                                          f"deadline ({fault.message})")
            raise fault.error
        raise KubernetesError(action, fault.message)

    def _raw(self, action: str, method: str, path: str, query: Optional[Mapping[str, str]] = None,
             body: Optional[dict[str, Any]] = None, accept: str = "application/json",
             content_type: str = "application/json") -> tuple[int, str, Any]:
        """One HTTP request: (status, text, headers). A failure below HTTP raises ``_TransportFault``
        (retryable) or, for TLS, ``KubernetesError``."""
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = content_type
        query_params = list((query or {}).items())
        answer_headers: Any = {}
        try:
            if hasattr(self.api_client, "param_serialize"):
                # 37.x: build the request, then send it; a non-2xx answer does not raise.
                request = self.api_client.param_serialize(
                    method=method, resource_path=path, query_params=query_params or None,
                    header_params=headers, body=body, auth_settings=["BearerToken"])
                response = self.api_client.call_api(*request, _request_timeout=self._timeout)
                response.read()
                data = response.data
                status = int(response.status)
                answer_headers = _headers_of(response)
            else:
                # Up to 36.x: call_api does it all and raises ApiException on non-2xx.
                try:
                    response = self.api_client.call_api(
                        path, method, query_params=query_params, header_params=headers, body=body,
                        auth_settings=["BearerToken"], response_type=None, _return_http_data_only=True,
                        _preload_content=False, _request_timeout=self._timeout)
                    data = response.data
                    status = int(response.status)
                    answer_headers = _headers_of(response)
                except ApiException as exc:
                    if not exc.status:
                        raise
                    data, status = exc.body, int(exc.status)
                    answer_headers = getattr(exc, "headers", None) or {}
        except ApiException as exc:
            raise self._fault(action, exc)
        except Exception as exc:
            known = self._transport_error_or_none(action, exc)
            if known is not None:
                raise self._fault(action, exc, known)
            raise
        if isinstance(data, bytes):
            data = data.decode("utf-8", "replace")
        return status, data or "", answer_headers

    def _fault(self, action: str, exc: BaseException, error: Optional[KubernetesError] = None) -> Exception:
        """TLS failures are final; any other failure below HTTP is worth another try."""
        error = error if error is not None else self._transport_error(action, exc)
        if error.msg.startswith(f"Kubernetes {action} failed: TLS verification"):
            return error
        inner: BaseException = exc
        reason = getattr(inner, "reason", None)
        while isinstance(reason, BaseException):
            inner, reason = reason, getattr(reason, "reason", None)
        # NewConnectionError (refused: nothing listens, as while the endpoint's control node
        # restarts) is a subclass of ConnectTimeoutError in urllib3: looked at first, and retried.
        # A handshake cut off sent nothing either: a write is safe to send again as it is.
        refused = (HAS_KUBERNETES and isinstance(inner, urllib3.exceptions.NewConnectionError)) or handshake_cut(exc)
        if not refused and (isinstance(inner, TimeoutError) or (HAS_KUBERNETES and isinstance(
                inner, (urllib3.exceptions.ReadTimeoutError, urllib3.exceptions.ConnectTimeoutError)))):
            # request_timeout is the operator's bound on one request: a slow server is not
            # asked again (client-go does not retry a timeout either).
            return error
        return _TransportFault(error, maybe_done=not refused)

    # -- errors ----------------------------------------------------------------------------------

    def _transport_error(self, action: str, exc: BaseException) -> KubernetesError:
        error = self._transport_error_or_none(action, exc)
        return error if error is not None else KubernetesError(action, scrub_secrets(str(exc)))

    def _transport_error_or_none(self, action: str, exc: BaseException) -> Optional[KubernetesError]:
        """A clear KubernetesError for a failure below HTTP, or None if ``exc`` is not one."""
        inner: BaseException = exc
        reason = getattr(inner, "reason", None)
        while isinstance(reason, BaseException):
            inner, reason = reason, getattr(reason, "reason", None)
        text = str(getattr(exc, "reason", "") or exc) if isinstance(exc, ApiException) else str(inner)
        is_tls = isinstance(inner, (ssl.SSLError, urllib3.exceptions.SSLError)) or (
            isinstance(exc, ApiException) and "SSLError" in text)
        if is_tls and handshake_cut(exc):
            return KubernetesError(action, f"the TLS handshake with {self.host} was cut off, nothing answered behind "
                                           f"the endpoint: {scrub_secrets(_short(text))}")
        if is_tls:
            return KubernetesError(
                action,
                f"TLS verification of the Kubernetes API at {self.host} failed ({scrub_secrets(_short(text))}); check "
                f"the kubeconfig's certificate-authority(-data), ca_cert (K8S_AUTH_SSL_CA_CERT), or "
                f"validate_certs (K8S_AUTH_VERIFY_SSL)",
            )
        if isinstance(inner, urllib3.exceptions.NewConnectionError):
            # (a subclass of ConnectTimeoutError in urllib3, so it is looked at first)
            return KubernetesError(action, f"cannot connect to the Kubernetes API at {self.host}: "
                                           f"{scrub_secrets(_short(text))}")
        if isinstance(inner, urllib3.exceptions.ConnectTimeoutError):
            return KubernetesError(action, f"connecting to {self.host} timed out after "
                                           f"{self.options.request_timeout:g}s")
        if isinstance(inner, (urllib3.exceptions.ReadTimeoutError, TimeoutError)):
            return KubernetesError(action, f"no answer from {self.host} within {self.options.request_timeout:g}s")
        if isinstance(inner, (urllib3.exceptions.HTTPError, ConnectionError, OSError)):
            return KubernetesError(action, f"cannot reach the Kubernetes API at {self.host}: "
                                           f"{type(inner).__name__}: {scrub_secrets(_short(text))}")
        return None


class _TransportFault(Transient):
    """No HTTP answer: the connection was refused, dropped or timed out."""

    def __init__(self, error: KubernetesError, maybe_done: bool = True) -> None:
        super().__init__(error.msg, maybe_done=maybe_done)
        self.error = error


class _AnsweredTransient(Transient):
    """An HTTP answer worth another try (429, 5xx); ``answer`` is it, for when the tries run out."""

    def __init__(self, message: str, status: int, retry_after: Optional[float], answer: tuple[int, str]) -> None:
        super().__init__(message, status=status, retry_after=retry_after)
        self.answer = answer


@dataclass(frozen=True)
class _Settled:
    """A write whose answer was lost, found done by reading it back: ``value`` is the object."""

    value: Any


def merge_patch_applied(current: Mapping[str, Any], patch: Mapping[str, Any]) -> bool:
    """Whether ``current`` already is what JSON merge patch ``patch`` (RFC 7386) makes of it.

    ``metadata.resourceVersion`` is a precondition, not content: it is not compared.
    """
    for key, value in patch.items():
        if value is None:
            if key in current:
                return False
        elif isinstance(value, Mapping):
            inner = current.get(key)
            wanted = {k: v for k, v in value.items() if not (key == "metadata" and k == "resourceVersion")}
            if not isinstance(inner, Mapping):
                if any(v is not None for v in wanted.values()):
                    return False
                continue
            if not merge_patch_applied(inner, wanted):
                return False
        elif current.get(key) != value:
            return False
    return True


def _budget_refusal(status: int, text: str) -> bool:
    """A 429 of the eviction API because of a PodDisruptionBudget: an answer, not load shedding."""
    if status != 429:
        return False
    data = _json_or_none(text)
    causes = ((data or {}).get("details") or {}).get("causes") or [] if isinstance(data, dict) else []
    return any(isinstance(c, dict) and c.get("reason") == "DisruptionBudget" for c in causes)


def _headers_of(response: Any) -> Any:
    getter = getattr(response, "getheaders", None)
    if callable(getter):
        try:
            return getter() or {}
        except Exception:  # a response object without headers must not hide its answer
            return {}
    return getattr(response, "headers", None) or {}


def _header(headers: Any, name: str) -> Optional[str]:
    if not headers:
        return None
    getter = getattr(headers, "get", None)
    if callable(getter):
        value = getter(name)
        if value is None:
            value = getter(name.lower())
        return value
    return None


def _json_or_none(text: Any) -> Any:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    try:
        return json.loads(text) if text else None
    except (TypeError, ValueError):
        return None


def _status_error(action: str, status: int, data: Any) -> KubernetesError:
    data = data if isinstance(data, dict) else {}
    return KubernetesError(action, scrub_secrets(str(data.get("message") or "no message")), status=status,
                           reason=data.get("reason") or None)


def _short(text: str, limit: int = 300) -> str:
    text = re.sub(r"<[^>]*>:\s*", "", " ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 3] + "..."
