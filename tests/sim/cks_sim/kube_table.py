"""The ``Table`` form of a read (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``).

``kubectl get`` asks for it and prints what the server's printers put in it, so the columns
and cells follow ``pkg/printers/internalversion/printers.go`` (``printNode``, ``printPod``,
``printConfigMap``, ``printNamespace``, ``printLease``, ``printPodDisruptionBudget``,
``printDeployment``, ``printReplicaSet``, ``printEvent``); everything else gets the default convertor's ``Name`` and ``Created At``
(``rest.DefaultTableConvertor``). Rows carry ``PartialObjectMetadata`` (``includeObject``
defaults to Metadata), which kubectl uses for the namespace column of ``-A`` and for ``-o name``.
"""

from __future__ import annotations

import datetime
from typing import Any, Callable, Optional


def wants_table(accept: str) -> bool:
    """The first acceptable media type asks for a meta.k8s.io/v1 Table (kubectl's order)."""
    for part in accept.split(","):
        params = {p.split("=", 1)[0].strip().lower(): p.split("=", 1)[1].strip() if "=" in p else ""
                  for p in part.split(";")[1:]}
        if params.get("as", "").lower() == "table":
            if params.get("g") == "meta.k8s.io" and params.get("v") == "v1":
                return True
            continue  # v1beta1 Tables are gone since 1.22: the next media type is tried
        return False
    return False


def _parse_time(value: Optional[str]) -> Optional[datetime.datetime]:
    if not value:
        return None
    try:
        return datetime.datetime.strptime(value[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """apimachinery duration.HumanDuration: 45s, 5m10s, 3h, 2d5h, 400d, 3y100d."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"  # within the two seconds of skew it tolerates
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{hours // 24 // 365}y{rest}d" if rest else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def age(obj: dict[str, Any], now: datetime.datetime) -> str:
    created = _parse_time(obj.get("metadata", {}).get("creationTimestamp"))
    return "<unknown>" if created is None else human_duration((now - created).total_seconds())


def _column(name: str, kind: str = "string", priority: int = 0, fmt: str = "", description: str = "") -> dict[str, Any]:
    return {"name": name, "type": kind, "format": fmt, "description": description or name, "priority": priority}


_NAME = _column("Name", fmt="name", description="Name must be unique within a namespace.")
_AGE = _column("Age", description="CreationTimestamp is a timestamp representing the server time when this object "
                                  "was created.")


# --- nodes -------------------------------------------------------------------------------------

NODE_COLUMNS = [_NAME, _column("Status", description="The status of the node"),
                _column("Roles", description="The roles of the node"), _AGE,
                _column("Version", description="Kubelet Version reported by the node."),
                _column("Internal-IP", priority=1, description="List of internal IPs for the node."),
                _column("External-IP", priority=1, description="List of external IPs for the node."),
                _column("OS-Image", priority=1, description="OS image reported by the node."),
                _column("Kernel-Version", priority=1, description="Kernel version reported by the node."),
                _column("Container-Runtime", priority=1, description="Container runtime reported by the node.")]


def _node_roles(labels: dict[str, str]) -> str:
    roles = set()
    for key, value in labels.items():
        if key.startswith("node-role.kubernetes.io/"):
            role = key.split("/", 1)[1]
            if role:
                roles.add(role)
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return ",".join(sorted(roles)) or "<none>"


def node_cells(node: dict[str, Any], now: datetime.datetime) -> list[Any]:
    status = node.get("status", {})
    ready = next((c["status"] for c in status.get("conditions", []) if c.get("type") == "Ready"), None)
    states = ["Ready" if ready == "True" else "NotReady" if ready == "False" else "Unknown"]
    if node.get("spec", {}).get("unschedulable"):
        states.append("SchedulingDisabled")
    addresses = status.get("addresses", [])
    internal = next((a["address"] for a in addresses if a.get("type") == "InternalIP"), "<none>")
    external = next((a["address"] for a in addresses if a.get("type") == "ExternalIP"), "<none>")
    info = status.get("nodeInfo", {})
    return [node["metadata"]["name"], ",".join(states), _node_roles(node["metadata"].get("labels") or {}),
            age(node, now), info.get("kubeletVersion", ""), internal, external, info.get("osImage") or "<unknown>",
            info.get("kernelVersion") or "<unknown>", info.get("containerRuntimeVersion") or "<unknown>"]


# --- pods --------------------------------------------------------------------------------------

POD_COLUMNS = [_NAME, _column("Ready", description="The aggregate readiness state of this pod for accepting "
                                                   "traffic."),
               _column("Status", description="The aggregate status of the containers in this pod."),
               _column("Restarts", description="The number of times the containers in this pod have been "
                                               "restarted and when the last container in this pod has restarted."),
               _AGE, _column("IP", priority=1, description="IP address allocated to the pod."),
               _column("Node", priority=1, description="Name of the node this pod is scheduled on."),
               _column("Nominated Node", priority=1, description="Name of the node that is nominated for "
                                                                 "the pod."),
               _column("Readiness Gates", priority=1, description="The readiness gates of this pod.")]


def pod_cells(pod: dict[str, Any], now: datetime.datetime) -> list[Any]:
    spec, status = pod.get("spec", {}), pod.get("status", {})
    containers = spec.get("containers", [])
    statuses = status.get("containerStatuses", [])
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount", 0)) for c in statuses)
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for c in statuses:
        waiting = (c.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            reason = waiting["reason"]
    if "deletionTimestamp" in pod.get("metadata", {}):
        reason = "Terminating"
    gates = spec.get("readinessGates") or []
    return [pod["metadata"]["name"], f"{ready}/{len(containers)}", reason, restarts, age(pod, now),
            status.get("podIP") or "<none>", spec.get("nodeName") or "<none>",
            status.get("nominatedNodeName") or "<none>", f"{len(gates)}" if gates else "<none>"]


# --- a few more printers ---------------------------------------------------------------------

def _pdb_value(value: Any) -> str:
    return "N/A" if value is None else str(value)


Cells = Callable[[dict[str, Any], datetime.datetime], list[Any]]


def namespace_cells(obj: dict[str, Any], now: datetime.datetime) -> list[Any]:
    return [obj["metadata"]["name"], obj.get("status", {}).get("phase", "Active"), age(obj, now)]


def configmap_cells(obj: dict[str, Any], now: datetime.datetime) -> list[Any]:
    return [obj["metadata"]["name"], len(obj.get("data") or {}) + len(obj.get("binaryData") or {}), age(obj, now)]


def lease_cells(obj: dict[str, Any], now: datetime.datetime) -> list[Any]:
    return [obj["metadata"]["name"], (obj.get("spec") or {}).get("holderIdentity") or "", age(obj, now)]


def pdb_cells(obj: dict[str, Any], now: datetime.datetime) -> list[Any]:
    spec, status = obj.get("spec", {}), obj.get("status", {})
    return [obj["metadata"]["name"], _pdb_value(spec.get("minAvailable")), _pdb_value(spec.get("maxUnavailable")),
            int(status.get("disruptionsAllowed", 0)), age(obj, now)]


def deployment_cells(obj: dict[str, Any], now: datetime.datetime) -> list[Any]:
    spec, status = obj.get("spec", {}), obj.get("status", {})
    return [obj["metadata"]["name"], f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
            int(status.get("updatedReplicas", 0)), int(status.get("availableReplicas", 0)), age(obj, now)]


def _since(value: Optional[str], now: datetime.datetime) -> str:
    """translateTimestampSince / translateMicroTimestampSince: "<unknown>" for a zero time."""
    moment = _parse_time(value)
    return "<unknown>" if moment is None else human_duration((now - moment).total_seconds())


EVENT_COLUMNS = [_column("Last Seen"), _column("Type"), _column("Reason"), _column("Object"),
                 _column("Subobject", priority=1), _column("Source", priority=1), _column("Message"),
                 _column("First Seen", priority=1), _column("Count", priority=1),
                 _column("Name", priority=1, fmt="name", description=_NAME["description"])]


def event_cells(obj: dict[str, Any], now: datetime.datetime) -> list[Any]:
    """printEvent (the server prints wide; kubectl hides the priority-1 columns)."""
    first = _since(obj.get("firstTimestamp"), now) if obj.get("firstTimestamp") else _since(obj.get("eventTime"), now)
    last = _since(obj.get("lastTimestamp"), now) if obj.get("lastTimestamp") else first
    count = int(obj.get("count") or 0)
    series = obj.get("series")
    if series:
        last, count = _since(series.get("lastObservedTime"), now), int(series.get("count") or 0)
    elif count == 0:
        count = 1  # singleton events carry no count in the events.k8s.io API
    involved = obj.get("involvedObject") or {}
    kind = str(involved.get("kind", "")).lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = obj.get("source") or {}
    # formatEventSource: the source's component (and host), else the reporting controller (and instance).
    component, host = source.get("component") or "", source.get("host") or ""
    if not component:
        component, host = obj.get("reportingComponent") or "", obj.get("reportingInstance") or ""
    shown = f"{component}, {host}" if host else component
    return [last, obj.get("type", ""), obj.get("reason", ""), target, involved.get("fieldPath", ""), shown,
            str(obj.get("message", "")).strip(), first, count, obj["metadata"]["name"]]


def _selector_text(selector: Optional[dict[str, Any]]) -> str:
    """metav1.FormatLabelSelector: matchLabels (sorted) and matchExpressions; "<none>" when empty."""
    if not selector:
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        op, values = expr.get("operator"), ",".join(expr.get("values") or [])
        parts.append({"In": f"{expr.get('key')} in ({values})", "NotIn": f"{expr.get('key')} notin ({values})",
                      "Exists": str(expr.get("key")), "DoesNotExist": f"!{expr.get('key')}"}.get(str(op), ""))
    return ",".join(parts) or "<none>"


def _template_columns(obj: dict[str, Any]) -> list[str]:
    containers = ((obj.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
    return [",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers)]


REPLICASET_COLUMNS = [_NAME, _column("Desired", "integer"), _column("Current", "integer"), _column("Ready", "integer"),
                      _AGE, _column("Containers", priority=1), _column("Images", priority=1),
                      _column("Selector", priority=1)]


def replicaset_cells(obj: dict[str, Any], now: datetime.datetime) -> list[Any]:
    spec, status = obj.get("spec", {}), obj.get("status", {})
    return [obj["metadata"]["name"], int(spec.get("replicas", 0)), int(status.get("replicas", 0)),
            int(status.get("readyReplicas", 0)), age(obj, now), *_template_columns(obj),
            _selector_text(spec.get("selector"))]


PRINTERS: dict[str, tuple[list[dict[str, Any]], Cells]] = {
    "events": (EVENT_COLUMNS, event_cells),
    "replicasets": (REPLICASET_COLUMNS, replicaset_cells),
    "nodes": (NODE_COLUMNS, node_cells),
    "pods": (POD_COLUMNS, pod_cells),
    "namespaces": ([_NAME, _column("Status", description="The status of the namespace"), _AGE], namespace_cells),
    "configmaps": ([_NAME, _column("Data", "integer"), _AGE], configmap_cells),
    "leases": ([_NAME, _column("Holder", description="Holder of the lease"), _AGE], lease_cells),
    "poddisruptionbudgets": ([_NAME, _column("Min Available"), _column("Max Unavailable"),
                              _column("Allowed Disruptions", "integer"), _AGE], pdb_cells),
    "deployments": ([_NAME, _column("Ready"), _column("Up-to-date", "integer"), _column("Available", "integer"),
                     _AGE], deployment_cells),
}

DEFAULT_COLUMNS = [_NAME, _column("Created At", "date", description=_AGE["description"])]


def _partial_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata", {})}


def table(plural: str, objects: list[dict[str, Any]], list_meta: dict[str, Any],
          now: Optional[datetime.datetime] = None, include_object: str = "Metadata") -> dict[str, Any]:
    """A meta.k8s.io/v1 Table of ``objects`` (a list's items, or the one object of a get)."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    columns, cells = PRINTERS.get(plural, (DEFAULT_COLUMNS, None))
    rows = []
    for obj in objects:
        row_cells = cells(obj, now) if cells else [obj["metadata"]["name"], obj["metadata"].get("creationTimestamp")]
        row: dict[str, Any] = {"cells": row_cells}
        if include_object == "Metadata":
            row["object"] = _partial_metadata(obj)
        elif include_object == "Object":
            row["object"] = obj
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta, "columnDefinitions": columns,
            "rows": rows}
