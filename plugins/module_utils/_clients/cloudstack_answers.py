# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""How to read what came back from CloudStack or from the transport under it: whether sending
again may help, the error code and text, dates, and the text without the request's query string
(it carries the API key and the signature) or the secret."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.retry import Transient, parse_retry_after
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.request_kinds import changes_nothing, cloudstack_kind

# CloudStack's own server-side codes (ApiErrorCode): the command ran and failed; sending it
# again gives the same answer. 511 is the 2FA challenge. A 530 in CloudStack's JSON error body is
# the exception (``InternalError``): the HTTP status alone, a proxy's page, is still final.
CLOUDSTACK_SERVER_CODES = frozenset({511, *range(530, 538)})
# ApiErrorCode.INTERNAL_ERROR: ApiServer's answer (HTTP 530, the command's error body) to an
# exception no command turned into a code of its own (a lost database connection, a management
# server shutting down under the request). It says nothing about the request itself, so a read
# is sent again; a write may have run part-way and is settled by reading (``run_change``).
INTERNAL_ERROR = 530

_QUERY = re.compile(r"\?[^\s'\"<>)]*")


def is_idempotent(command: str) -> bool:
    """Whether ``command`` changes nothing (``_decisions.request_kinds``): safe to send again after a
    transient fault. A change is settled by reading what it changes (``run_change``) instead."""
    return changes_nothing(cloudstack_kind(command))


def is_transient_status(status: Optional[int]) -> bool:
    """HTTP answers worth retrying: rate limited, or a proxy / server that is not CloudStack's error."""
    if status is None:
        return False
    return status == 429 or (500 <= status < 600 and status not in CLOUDSTACK_SERVER_CODES)


def redact(text: str, *secrets: Optional[str]) -> str:
    """Drop query strings (they carry apiKey and signature) and any secret from ``text``."""
    text = _QUERY.sub("?<query removed>", text)
    for secret in secrets:
        if secret:
            text = text.replace(secret, "<redacted>")
    return text


class InternalError(Transient):
    """CloudStack answered a request INTERNAL_ERROR (530) itself: sent again like a 503 if it is a
    read; a write may or may not have been carried out. A job that ends 530 is not this: it is
    the job's answer (a refusal), read from queryAsyncJobResult."""

    def __init__(self, errortext: str, retry_after: Optional[float] = None) -> None:
        super().__init__(f"errorcode {INTERNAL_ERROR}: {errortext}", status=INTERNAL_ERROR, retry_after=retry_after)
        self.errortext = errortext


class FinalAnswer(Exception):
    def __init__(self, errortext: str, errorcode: Optional[int]) -> None:
        super().__init__(errortext)
        self.errortext = errortext
        self.errorcode = errorcode


def retry_after(exc: BaseException) -> Optional[float]:
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    return parse_retry_after(headers.get("Retry-After")) if hasattr(headers, "get") else None


def reached_server(exc: BaseException) -> bool:
    """False when the connection was refused (nothing was sent); True when it broke later."""
    inner: Any = exc
    while inner is not None:
        if isinstance(inner, (ConnectionRefusedError,)) or type(inner).__name__ == "NewConnectionError":
            return False
        nxt = getattr(inner, "reason", None) or (inner.args[0] if getattr(inner, "args", None) else None)
        inner = nxt if isinstance(nxt, BaseException) and nxt is not inner else None
    return True


def parse_cloudstack_time(value: Any) -> Optional[float]:
    """Unix time of a CloudStack date (``2026-12-03T12:49:18+0000``), or None."""
    if not value:
        return None
    try:
        return datetime.strptime(str(value), "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except ValueError:
        return None


def int_or_none(value: Any) -> Optional[int]:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def transport_reason(exc: BaseException, secret: Optional[str]) -> str:
    """The innermost cause of a requests/urllib3 error, as short text without the request URL."""
    inner: BaseException = exc
    while True:
        nxt = getattr(inner, "reason", None)
        if isinstance(nxt, BaseException) and nxt is not inner:
            inner = nxt
            continue
        if inner.args and isinstance(inner.args[0], BaseException) and inner.args[0] is not inner:
            inner = inner.args[0]
            continue
        break
    text = str(inner)
    # urllib3 prefixes its messages with the connection object's repr.
    text = re.sub(r"<[^>]*>:\s*", "", text)
    return redact(f"{type(inner).__name__}: {text}" if text else type(inner).__name__, secret)
