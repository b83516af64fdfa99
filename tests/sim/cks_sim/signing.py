"""CloudStack request signing, checked the way the management server checks it.

``ApiServer.verifyRequest``: every parameter except ``signature``, names sorted as received
(case-sensitive), values URL-encoded like Java's ``URLEncoder`` with ``+`` turned into ``%20``,
joined with ``&``, the whole string lowercased, HMAC-SHA1 with the secret key, base64.
Signature version 3 adds ``expires``; a request whose ``expires`` lies in the past is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import datetime, timezone
from typing import Mapping, Optional

# Java's URLEncoder leaves exactly these unencoded (and turns space into '+', which the
# server then replaces with %20). Python's quote() also keeps '~', Java does not.
_JAVA_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-*_")


class SignatureError(Exception):
    """The request is not signed by a known user (answered as 401, reason kept for the log)."""


def java_url_encode(value: str) -> str:
    out = []
    for byte in value.encode("utf-8"):
        if byte in _JAVA_SAFE:
            out.append(chr(byte))
        else:
            out.append("%%%02X" % byte)
    return "".join(out)


def string_to_sign(params: Mapping[str, str]) -> str:
    pairs = [
        f"{name}={java_url_encode(params[name])}"
        for name in sorted(params)
        if name.lower() != "signature"
    ]
    return "&".join(pairs).lower()


def sign(params: Mapping[str, str], secret: str) -> str:
    digest = hmac.new(secret.encode("utf-8"), string_to_sign(params).encode("utf-8"), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def parse_expires(value: str) -> datetime:
    """``DateUtil.parseTZDateString``: ISO-8601 with a numeric offset, optionally milliseconds."""
    for fmt in ("%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S.%f%z"):
        try:
            parsed = datetime.strptime(value, fmt)
        except ValueError:
            continue
        if parsed.tzinfo is None:
            break
        return parsed
    raise SignatureError(f"incorrect date format for expires: {value!r}")


def _get(params: Mapping[str, str], name: str) -> Optional[str]:
    for key, value in params.items():
        if key.lower() == name:
            return value
    return None


def verify(params: Mapping[str, str], secret_for_key: Mapping[str, str], now: Optional[datetime] = None) -> str:
    """Return the api key of the caller, or raise SignatureError.

    ``params`` holds one (the first) value per parameter name, as the servlet hands them over.
    """
    signature = _get(params, "signature")
    api_key = _get(params, "apikey")
    if signature is None or api_key is None:
        raise SignatureError("missing signature or apikey")
    if _get(params, "signatureversion") == "3":
        expires = _get(params, "expires")
        if expires is None:
            raise SignatureError("signature version 3 without expires")
        when = parse_expires(expires)
        if when < (now or datetime.now(timezone.utc)):
            raise SignatureError("request expired")
    secret = secret_for_key.get(api_key)
    if secret is None:
        raise SignatureError("apikey does not map to a valid user")
    if not hmac.compare_digest(sign(params, secret), signature):
        raise SignatureError("signature mismatch")
    return api_key
