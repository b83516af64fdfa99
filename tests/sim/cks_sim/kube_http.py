"""How the API server reads a boolean query parameter and writes its answers: JSON bodies,
``Status`` errors and plain text.
"""

from __future__ import annotations

import json
from typing import Any

from werkzeug.wrappers import Response

from .kube_resources import ApiError

# strconv.ParseBool, as the apiserver reads a boolean query parameter: the python-legacy client
# (kubernetes 35) sends watch=True.
GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})


def json_response(body: Any, code: int = 200) -> Response:
    return Response(json.dumps(body), status=code, content_type="application/json")


def status_response(err: ApiError) -> Response:
    # The eviction handler's budget 429 has retryAfterSeconds 0, hence no Retry-After header.
    return json_response(err.status(), err.code)


def text_response(text: str, code: int = 200) -> Response:
    resp = Response(text, status=code, content_type="text/plain; charset=utf-8")
    resp.headers["X-Content-Type-Options"] = "nosniff"
    return resp
