"""The Kubernetes API's resources and errors as cks-sim serves them: the resource table (kinds,
groups, verbs, subresources), the ``Status`` errors and their texts, and the well-known names
(namespaces, taints, annotations) the concerns of ``KubeWorld`` share.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

NODE_LEASE_NS = "kube-node-lease"
CONTROL_PLANE_TAINT = "node-role.kubernetes.io/control-plane"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
LIFECYCLE_TAINTS = (UNSCHEDULABLE_TAINT, UNREACHABLE_TAINT, NOT_READY_TAINT)
NODE_LEASE_RENEW = 10.0  # simulated seconds between kubelet lease renewals
EVENT_TTL = 3600.0  # simulated seconds an Event lives after its last write (kube-apiserver --event-ttl)


@dataclass(frozen=True)
class Resource:
    plural: str
    kind: str
    group: str
    version: str
    namespaced: bool
    verbs: tuple[str, ...]
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def qualified(self) -> str:
        # How the API server names a resource in its messages: `leases.coordination.k8s.io`.
        return f"{self.plural}.{self.group}" if self.group else self.plural


_RW = ("create", "delete", "get", "list", "patch", "update", "watch")
_RO = ("get", "list", "watch")
RESOURCES: dict[str, Resource] = {
    r.plural: r
    for r in (
        Resource("namespaces", "Namespace", "", "v1", False, _RO, ("ns",)),
        Resource("nodes", "Node", "", "v1", False, ("get", "list", "patch", "update", "watch"), ("no",), ("status",)),
        Resource("pods", "Pod", "", "v1", True, ("create", "delete", "get", "list", "watch"), ("po",),
                 ("eviction", "exec", "log", "status")),
        Resource("configmaps", "ConfigMap", "", "v1", True, _RW, ("cm",)),
        Resource("events", "Event", "", "v1", True, _RW, ("ev",)),
        Resource("leases", "Lease", "coordination.k8s.io", "v1", True, _RW),
        Resource("poddisruptionbudgets", "PodDisruptionBudget", "policy", "v1", True, _RO, ("pdb",), ("status",)),
        Resource("deployments", "Deployment", "apps", "v1", True, _RO, ("deploy",), ("status",)),
        Resource("replicasets", "ReplicaSet", "apps", "v1", True, _RO, ("rs",), ("status",)),
        Resource("statefulsets", "StatefulSet", "apps", "v1", True, _RO, ("sts",), ("status",)),
        Resource("daemonsets", "DaemonSet", "apps", "v1", True, _RO, ("ds",), ("status",)),
        Resource("selfsubjectaccessreviews", "SelfSubjectAccessReview", "authorization.k8s.io", "v1", False,
                 ("create",)),
    )
}

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """An API answer other than success, rendered as a ``Status`` object."""

    def __init__(self, code: int, message: str, reason: Optional[str] = None,
                 details: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason if reason is not None else _REASONS.get(code, "")
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if not self.reason:
            del body["reason"]  # metav1.Status: reason is omitempty (an error with no reason)
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(res: Resource, name: str, **extra: Any) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": res.plural}
    if res.group:
        details["group"] = res.group
    details.update(extra)
    return details


def not_found(res: Resource, name: str) -> ApiError:
    return ApiError(404, f'{res.qualified} "{name}" not found', "NotFound", _details(res, name))


def conflict(res: Resource, name: str, why: str) -> ApiError:
    return ApiError(409, f'Operation cannot be fulfilled on {res.qualified} "{name}": {why}',
                    "Conflict", _details(res, name))


def precondition_failed(res: Resource, name: str, why: str) -> ApiError:
    """A delete's precondition that does not hold: a Conflict whose details name the Kind, as the
    store's checkPreconditions answers (where a stale update names the resource)."""
    return ApiError(409, f'Operation cannot be fulfilled on {res.qualified} "{name}": {why}',
                    "Conflict", _details(res, name, kind=res.kind))


# Resources whose strategy refuses an update without metadata.resourceVersion
# (AllowUnconditionalUpdate false): the Lease's (pkg/registry/coordination/lease/strategy.go).
UNCONDITIONAL_UPDATE_REFUSED = frozenset({"leases"})


def unchanged(current: dict[str, Any], new: dict[str, Any]) -> bool:
    """An update that changes nothing: the store writes nothing and the resourceVersion stays
    (etcd3 store GuaranteedUpdate: the same bytes are not written again, and no watch event)."""
    def strip(obj: dict[str, Any]) -> dict[str, Any]:
        meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in ("resourceVersion", "managedFields")}
        return dict(obj, metadata=meta)

    return strip(current) == strip(new)


def go_value(value: Any) -> str:
    """A value as field.Invalid prints it (%#v-like): strings quoted, nil as null."""
    if isinstance(value, (str, bool, int, float)) or value is None:
        return json.dumps(value)
    return repr(value)


STALE_OBJECT = "the object has been modified; please apply your changes to the latest version and try again"


def success_status(code: int = 200, details: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body
