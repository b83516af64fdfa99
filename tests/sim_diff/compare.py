"""What of an answer is compared: the status, a Status's reason and details, and the fields the
collection (and kubectl, in the tests) reads of each kind of object. What the server sets on
its own (uids, resourceVersions, timestamps) never is: the two servers differ there by design.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from .world import Answer


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def status_view(body: dict[str, Any]) -> dict[str, Any]:
    details = dict(body.get("details") or {})
    details.pop("uid", None)
    if "causes" in details:
        details["causes"] = sorted(details["causes"], key=lambda c: (c.get("field", ""), c.get("reason", "")))
    return {"kind": "Status", "status": body.get("status"), "reason": body.get("reason"), "code": body.get("code"),
            "details": details or None}


def node_view(obj: dict[str, Any]) -> dict[str, Any]:
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    return {"kind": obj.get("kind"), "name": meta.get("name"), "labels": meta.get("labels"),
            "annotations": {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith("cks.")},
            "unschedulable": bool(spec.get("unschedulable")),
            "taints": sorted((t.get("key"), t.get("effect"), t.get("value")) for t in spec.get("taints") or []),
            "conditions": {c.get("type"): c.get("status") for c in status.get("conditions") or []},
            "bootID": (status.get("nodeInfo") or {}).get("bootID"), "has_resourceVersion": bool(meta.get("resourceVersion"))}


def pod_view(obj: dict[str, Any]) -> dict[str, Any]:
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    return {"kind": obj.get("kind"), "name": meta.get("name"), "namespace": meta.get("namespace"),
            "labels": meta.get("labels"), "owners": [r.get("kind") for r in meta.get("ownerReferences") or []],
            "mirror": "kubernetes.io/config.mirror" in (meta.get("annotations") or {}),
            "terminating": bool(meta.get("deletionTimestamp")), "nodeName": spec.get("nodeName"),
            "phase": status.get("phase"),
            "ready": {c.get("type"): c.get("status") for c in status.get("conditions") or []}.get("Ready")}


def pdb_view(obj: dict[str, Any]) -> dict[str, Any]:
    status = obj.get("status") or {}
    return {"kind": obj.get("kind"), "name": _meta(obj).get("name"), "spec": obj.get("spec"),
            **{k: status.get(k) for k in ("currentHealthy", "desiredHealthy", "disruptionsAllowed", "expectedPods")},
            "processed": status.get("observedGeneration") == _meta(obj).get("generation")}


def lease_view(obj: dict[str, Any]) -> dict[str, Any]:
    return {"kind": obj.get("kind"), "name": _meta(obj).get("name"),
            "spec": {k: v for k, v in (obj.get("spec") or {}).items() if k != "renewTime" or _meta(obj).get("namespace") != "kube-node-lease"}}


def event_view(obj: dict[str, Any]) -> dict[str, Any]:
    regarding = obj.get("involvedObject") or obj.get("regarding") or {}
    return {"kind": obj.get("kind"), "apiVersion": obj.get("apiVersion"), "name": _meta(obj).get("name"),
            "reason": obj.get("reason"), "type": obj.get("type"), "action": obj.get("action"),
            "note": obj.get("message", obj.get("note")), "regarding": (regarding.get("kind"), regarding.get("name")),
            "count": obj.get("count", (obj.get("deprecatedCount"))),
            "series": (obj.get("series") or {}).get("count"),
            "component": obj.get("reportingComponent", obj.get("reportingController"))}


def generic_view(obj: dict[str, Any]) -> dict[str, Any]:
    return {"kind": obj.get("kind"), "name": _meta(obj).get("name"), "data": obj.get("data"),
            "status": obj.get("status") if obj.get("kind", "").endswith("AccessReview") else None}


VIEWS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "Node": node_view, "Pod": pod_view, "PodDisruptionBudget": pdb_view, "Lease": lease_view, "Event": event_view,
}


def object_view(obj: Any) -> Any:
    if not isinstance(obj, dict):
        return obj
    kind = obj.get("kind") or ""
    if kind == "Status":
        return status_view(obj)
    if kind.endswith("List"):
        meta = _meta(obj)
        return {"kind": kind, "items": sorted(object_name(i) for i in obj.get("items") or []),
                "has_resourceVersion": bool(meta.get("resourceVersion")), "continues": bool(meta.get("continue"))}
    return VIEWS.get(kind, generic_view)(obj)


def object_name(obj: dict[str, Any]) -> str:
    meta = _meta(obj)
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta.get("name"))


def table_view(body: dict[str, Any], names_only: bool = False) -> dict[str, Any]:
    rows = body.get("rows") or []
    return {"kind": body.get("kind"), "apiVersion": body.get("apiVersion"),
            "columns": [c.get("name") for c in body.get("columnDefinitions") or []],
            "rows": sorted(str(r["cells"][0]) for r in rows) if not names_only
            else len([r for r in rows if ".17f" in str(r["cells"][-1])]),
            "objects": sorted({(r.get("object") or {}).get("kind", "") for r in rows})}


def watch_view(answer: Answer) -> Any:
    out = []
    for event in answer.events or []:
        obj = event.get("object") or {}
        if event.get("type") == "BOOKMARK":
            continue  # when a bookmark comes is the cache's business
        out.append((event.get("type"), status_view(obj) if obj.get("kind") == "Status" else object_name(obj)))
    return out


def _version(body: Any) -> Any:
    return sorted(body) if isinstance(body, dict) else body


def _resources(body: Any) -> Any:
    return {r["name"]: (r.get("namespaced"), r.get("kind")) for r in (body or {}).get("resources") or []}


def view(answer: Answer, name: Optional[str]) -> Any:
    """The comparable part of ``answer`` under the step's view ``name`` (None: by the object's kind)."""
    body = answer.body
    out: dict[str, Any] = {"status": answer.status}
    if isinstance(body, dict) and body.get("kind") == "Status":
        out["body"] = status_view(body)
        return out
    if answer.status >= 400:
        out["body"] = body
        return out
    if name == "log":
        out["body"] = "text" if isinstance(body, str) else body
    elif name == "text":
        out["body"] = body
    elif name == "version":
        out["body"] = _version(body)
    elif name == "api_versions":
        out["body"] = {"kind": body.get("kind"), "versions": body.get("versions")}
    elif name == "resources":
        out["body"] = _resources(body)
    elif name == "groups":
        out["body"] = sorted(g["name"] for g in body.get("groups") or [])
    elif name in ("table", "table_events"):
        out["body"] = table_view(body, names_only=name == "table_events")
    elif name == "watch":
        out["body"] = watch_view(answer)
    elif name == "events":
        # The replay's own Events only: the real node controller records RegisteredNode for each
        # node the seeding created, history that cks-sim's built state does not replay.
        out["body"] = sorted(n for n in (event_view(i)["name"] for i in body.get("items") or [])
                             if ".17f" in str(n))
    elif name == "terminating":
        out["body"] = {k: v for k, v in pod_view(body).items() if k != "terminating"}
    else:
        out["body"] = object_view(body)
    return out


def differences(sim: Any, real: Any, path: str = "") -> list[str]:
    """Where two views differ, as JSON-ish paths."""
    if isinstance(sim, dict) and isinstance(real, dict):
        found = []
        for key in sorted(set(sim) | set(real), key=str):
            found += differences(sim.get(key), real.get(key), f"{path}.{key}" if path else str(key))
        return found
    return [] if sim == real else [path or "$"]
