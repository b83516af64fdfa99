"""HTTP status lines as the real servers write them, not as Werkzeug does (``404 NOT FOUND``).

Clients read the reason phrase: kubernetes.core's ``k8s_drain`` waits on
``exc.reason == "Not Found"``, and the Python ``kubernetes`` client puts the phrase in every
``ApiException``. So each API of the sim is wrapped to write its server's phrases:

- the Kubernetes API: Go's ``net/http`` (``http.StatusText``; an unknown code is written
  ``status code N``, as ``http.response.WriteHeader`` -> ``writeStatusLine`` does);
- CloudStack: Jetty 9.4 under the management server. ``ApiServlet`` answers through
  ``HttpUtils.writeHttpResponse`` -> ``resp.setStatus(code)`` with no reason, so Jetty's
  ``HttpGenerator.generateResponseLine`` writes ``HttpStatus.Code``'s message, and for a code
  it does not know (CloudStack's 432, 530, 531, 533, 535...) the number again: ``530 530``.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any, Callable, Iterable

# Go's net/http status.go, where it differs from Python's HTTPStatus phrases.
_GO_DIFFERENT = {414: "Request URI Too Long", 418: "I'm a teapot"}
_GO_KNOWN = {s.value for s in HTTPStatus} - {103}

# Jetty 9.4's HttpStatus.Code messages.
_JETTY = {
    100: "Continue", 101: "Switching Protocols", 102: "Processing", 200: "OK", 201: "Created", 202: "Accepted",
    203: "Non Authoritative Information", 204: "No Content", 205: "Reset Content", 206: "Partial Content",
    207: "Multi-Status", 300: "Multiple Choices", 301: "Moved Permanently", 302: "Found", 303: "See Other",
    304: "Not Modified", 305: "Use Proxy", 307: "Temporary Redirect", 308: "Permanent Redirect", 400: "Bad Request",
    401: "Unauthorized", 402: "Payment Required", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
    406: "Not Acceptable", 407: "Proxy Authentication Required", 408: "Request Timeout", 409: "Conflict",
    410: "Gone", 411: "Length Required", 412: "Precondition Failed", 413: "Payload Too Large", 414: "URI Too Long",
    415: "Unsupported Media Type", 416: "Range Not Satisfiable", 417: "Expectation Failed", 418: "I'm a Teapot",
    421: "Misdirected Request", 422: "Unprocessable Entity", 423: "Locked", 424: "Failed Dependency",
    426: "Upgrade Required", 428: "Precondition Required", 429: "Too Many Requests",
    431: "Request Header Fields Too Large", 451: "Unavailable For Legal Reasons", 500: "Server Error",
    501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
    505: "HTTP Version Not Supported", 507: "Insufficient Storage", 508: "Loop Detected", 510: "Not Extended",
    511: "Network Authentication Required",
}


def go_status_line(code: int) -> str:
    if code in _GO_DIFFERENT:
        return f"{code} {_GO_DIFFERENT[code]}"
    if code in _GO_KNOWN:
        return f"{code} {HTTPStatus(code).phrase}"
    return f"{code} status code {code}"


def jetty_status_line(code: int) -> str:
    return f"{code} {_JETTY.get(code, str(code))}"


class StatusLines:
    """WSGI middleware: the wrapped app's status line rewritten with ``phrase(code)``."""

    def __init__(self, app: Callable[..., Iterable[bytes]], phrase: Callable[[int], str]) -> None:
        self.app = app
        self.phrase = phrase

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        def restated(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            code = int(status.split(None, 1)[0])
            return start_response(self.phrase(code), headers, exc_info)

        return self.app(environ, restated)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)  # the wrapped app's attributes stay reachable
