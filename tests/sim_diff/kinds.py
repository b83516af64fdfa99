"""A request's kind: what makes two requests the same request to the API server.

The method, the path with its names and namespace replaced by placeholders, the query's keys
(their values are names and versions), a patch's content type and whether a Table was asked
for. ``GET /api/v1/namespaces/{namespace}/pods/{name}/eviction`` is one kind whatever pod it
names; a list and the watch of the same collection are two (the watch has ``watch`` in its query).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Iterable, Mapping, Optional

# Query keys whose value changes what the request is (the others carry names and versions).
MEANINGFUL_VALUES = ("dryRun",)


def template(path: str) -> str:
    """``/api/v1/namespaces/kube-system/pods/etcd-x/exec`` -> ``/api/v1/namespaces/{namespace}/pods/{name}/exec``."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        head, rest = parts[:2], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        head, rest = parts[:3], parts[3:]
    else:
        return "/" + "/".join(parts)  # /readyz, /readyz/etcd, /version, discovery
    if len(rest) >= 3 and rest[0] == "namespaces":
        head, rest = head + ["namespaces", "{namespace}"], rest[2:]
    if len(rest) >= 2:
        rest = [rest[0], "{name}"] + rest[2:]
    return "/" + "/".join(head + rest)


def kind_of(method: str, path: str, query: Optional[Mapping[str, Any]] = None, content_type: Optional[str] = None,
            table: bool = False) -> str:
    keys = []
    for key in sorted(query or {}):
        value = (query or {})[key]
        if key in MEANINGFUL_VALUES:
            keys.append(f"{key}={value[0] if isinstance(value, list) else value}")
        else:
            keys.append(key)
    text = f"{method} {template(path)}"
    if keys:
        text += "?" + "&".join(keys)
    if method in ("PATCH",) and content_type:
        text += f" [{content_type}]"
    if table:
        text += " [Table]"
    return text


def kind_of_record(line: Mapping[str, Any]) -> str:
    return kind_of(line["method"], line["path"], line.get("query"), line.get("content_type"), bool(line.get("table")))


def recorded_kinds(lines: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Each kind in a recording: how often it was made, its statuses and a body shape."""
    counts: Counter[str] = Counter()
    found: dict[str, dict[str, Any]] = {}
    for text in lines:
        if not text.strip():
            continue
        line = json.loads(text)
        kind = kind_of_record(line)
        counts[kind] += 1
        entry = found.setdefault(kind, {"statuses": [], "body": line.get("body")})
        if line["status"] not in entry["statuses"]:
            entry["statuses"].append(line["status"])
        if entry["body"] is None and line.get("body") is not None:
            entry["body"] = line["body"]
    for kind, entry in found.items():
        entry["count"] = counts[kind]
        entry["statuses"].sort()
    return dict(sorted(found.items()))
