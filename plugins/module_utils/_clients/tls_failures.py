# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Which TLS failures are the connection's, not the certificate's.

A TLS error is final when it is about trust (a certificate that does not verify, a client
certificate the server refuses, plain HTTP where TLS was expected): sending again gives the same
answer, and the operator must fix the CA or the endpoint. But a handshake cut off half-way is the
connection's failure: a load balancer with no server behind its rule (every API server of a stacked
control plane restarting, a CKS network's load-balancer rule between two backends) accepts the
connection and closes it at once, which the client sees as an EOF during the handshake. That is a
dropped connection like any other: worth another try, and nothing was sent yet.
"""

from __future__ import annotations

import ssl

# What OpenSSL and Python call an EOF in the handshake (3.10+ text, and OpenSSL 3's reason code).
_CUT_TEXTS = ("EOF occurred in violation of protocol", "UNEXPECTED_EOF_WHILE_READING",
              "TLS/SSL connection has been closed")
_CAUSE_LINKS = ("reason", "__cause__", "__context__")


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps (urllib3 and requests nest the ssl error in ``reason`` or ``args``)."""
    seen: list[BaseException] = []
    pending = [exc]
    while pending:
        current = pending.pop()
        if any(current is s for s in seen):
            continue
        seen.append(current)
        links = [getattr(current, name, None) for name in _CAUSE_LINKS] + list(getattr(current, "args", ()) or ())
        pending.extend(link for link in links if isinstance(link, BaseException))
    return seen


def handshake_cut(exc: BaseException) -> bool:
    """Whether ``exc`` is a TLS handshake the other end closed before it was done (transient)."""
    for error in _chain(exc):
        if isinstance(error, ssl.SSLCertVerificationError):
            return False
        if isinstance(error, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
            return True
        if any(text in str(error) for text in _CUT_TEXTS):
            return True
    return False
