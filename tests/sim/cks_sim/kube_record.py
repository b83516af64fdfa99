"""Every Kubernetes request the sim answers, written to a file for ``make sim-diff``.

With ``CKS_SIM_KUBE_RECORD=FILE`` in its environment, a sim appends one JSON line per request
its Kubernetes API answers: method, path (without the shared server's ``/clusters/<id>``),
query, content type, whether a Table was asked for, the body's shape (its keys and value types,
never its values: a Secret's data or a token must not reach the file) and the status. The
recording is what ``tests/sim_diff`` reduces to the distinct request kinds the collection makes,
and those are what it replays against the sim and a real API server.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from werkzeug.wrappers import Request, Response

ENV = "CKS_SIM_KUBE_RECORD"
_lock = threading.Lock()


def shape(value: Any, depth: int = 0) -> Any:
    """The structure of a JSON value without its content: keys kept, leaves named by type."""
    if depth > 8:
        return "..."
    if isinstance(value, dict):
        return {key: shape(item, depth + 1) for key, item in sorted(value.items())}
    if isinstance(value, list):
        return [shape(value[0], depth + 1)] if value else []
    return type(value).__name__


def record(request: Request, response: Response, cluster_id: Any = None) -> None:
    """Append the request to the file ``CKS_SIM_KUBE_RECORD`` names (nothing when unset)."""
    path = os.environ.get(ENV)
    if not path:
        return
    parts = [p for p in request.path.split("/") if p]
    if cluster_id is None and len(parts) >= 2 and parts[0] == "clusters":
        parts = parts[2:]
    data = request.get_data(cache=True)
    try:
        body = shape(json.loads(data)) if data else None
    except ValueError:
        body = "unparsed"
    line = {"method": request.method, "path": "/" + "/".join(parts),
            "query": {key: request.args.getlist(key) for key in sorted(request.args)},
            "content_type": (request.content_type or "").split(";")[0].strip() or None,
            "table": "as=Table" in request.headers.get("Accept", ""),
            "body": body, "status": response.status_code}
    with _lock, open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(line, sort_keys=True) + "\n")
