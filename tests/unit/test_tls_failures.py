"""Which TLS failures are a dropped connection (sent again) and which are about trust (final)."""

from __future__ import annotations

import ssl

import pytest
import requests
import urllib3

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.tls_failures import handshake_cut

EOF_TEXT = "[SSL: UNEXPECTED_EOF_WHILE_READING] EOF occurred in violation of protocol (_ssl.c:1006)"


def _wrapped(inner: BaseException) -> BaseException:
    """As requests raises it: SSLError(MaxRetryError(reason=urllib3 SSLError(ssl error)))."""
    retry = urllib3.exceptions.MaxRetryError(None, "/api", reason=urllib3.exceptions.SSLError(inner))  # type: ignore[arg-type]
    return requests.exceptions.SSLError(retry)


@pytest.mark.parametrize("error", [
    ssl.SSLEOFError(8, EOF_TEXT),
    ssl.SSLZeroReturnError(6, "TLS/SSL connection has been closed (EOF) (_ssl.c:1006)"),
    ssl.SSLError(1, EOF_TEXT),  # OpenSSL 3 reports the cut as a plain SSLError with this reason
    _wrapped(ssl.SSLEOFError(8, EOF_TEXT)),
    urllib3.exceptions.MaxRetryError(None, "/api", reason=urllib3.exceptions.SSLError(EOF_TEXT)),  # type: ignore[arg-type]
])
def test_a_handshake_closed_half_way_is_the_connections_failure(error: BaseException) -> None:
    assert handshake_cut(error)


@pytest.mark.parametrize("error", [
    ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
                                    "unable to get local issuer certificate (_ssl.c:1006)"),
    _wrapped(ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
                                             "Hostname mismatch")),
    ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)"),  # plain HTTP behind
    ssl.SSLError(1, "[SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] tlsv13 alert certificate required"),
    _wrapped(ssl.SSLError(1, "[SSL: SSLV3_ALERT_BAD_CERTIFICATE] sslv3 alert bad certificate")),
    ConnectionResetError(104, "Connection reset by peer"),  # not TLS at all: the transport's own branch
])
def test_trust_failures_and_other_errors_are_not_a_cut(error: BaseException) -> None:
    assert not handshake_cut(error)


def test_a_cycle_of_causes_ends() -> None:
    first = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    second = RuntimeError("wrapper")
    # Each raised from the other: a cycle of causes, made the way code makes them.
    for error, cause in ((first, second), (second, first)):
        with pytest.raises(type(error)):
            raise error from cause
    assert second.__cause__ is first and first.__cause__ is second
    assert not handshake_cut(second)
