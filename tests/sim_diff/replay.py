"""The requests replayed against both APIs, in order, from the starting objects of world.py.

Every kind the collection's rollouts make (``recorded.json``) is here, with the edge cases the
collection depends on: an eviction a budget refuses, one of a pod already gone, a Lease written
with a stale resourceVersion, a Node patched three ways, a watch resumed from a resourceVersion
the watch cache has dropped (410), selectors, Tables, access reviews, Events of both APIs and the
health endpoints. Steps change the objects as they go; both APIs get the same steps in the same
order, so they start each step from the same objects.

A part of a step may be a function of the backend's context ``c`` (what earlier answers there
held: a resourceVersion, a uid), since those differ between the two servers; ``keep`` stores
what later steps need.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

from .world import CONTROL, WORKERS

Ctx = dict[str, Any]
Part = Union[Any, Callable[[Ctx], Any]]

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
NODE = WORKERS[0]
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
CONFIGMAPS = "/api/v1/namespaces/kube-system/configmaps"
EVENTS = "/api/v1/namespaces/default/events"
EVENTS_V1 = "/apis/events.k8s.io/v1/namespaces/default/events"
PAGE = {"limit": "500"}
KUBECTL = {"timeout": "32s"}


@dataclass
class Step:
    name: str
    method: str
    path: Part
    query: Part = None
    body: Part = None
    content_type: Optional[str] = None
    accept: str = "application/json"
    watch_seconds: float = 0.0
    keep: Optional[Callable[[Ctx, Any], None]] = None
    #: what is compared of a successful answer (compare.py's extractor by name); None: by its kind
    view: Optional[str] = None
    #: the real side only, after the step: what a kubelet would do (there is none there)
    kubelet: Optional[str] = None

    def resolve(self, part: Part, ctx: Ctx) -> Any:
        return part(ctx) if callable(part) else part


def _rv(c: Ctx, key: str) -> str:
    return str(c[key])


def _keep_rv(key: str) -> Callable[[Ctx, Any], None]:
    def keep(c: Ctx, body: Any) -> None:
        c[key] = ((body or {}).get("metadata") or {}).get("resourceVersion")
    return keep


def _keep_uid(key: str) -> Callable[[Ctx, Any], None]:
    def keep(c: Ctx, body: Any) -> None:
        c[key] = ((body or {}).get("metadata") or {}).get("uid")
    return keep


def _lease(holder: str, rv: Optional[str] = None, renew: str = "2026-01-01T00:00:00.000000Z") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "cks-rollout-demo", "namespace": "kube-system"}
    if rv is not None:
        meta["resourceVersion"] = rv
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 60, "acquireTime": "2026-01-01T00:00:00.000000Z",
                     "renewTime": renew, "leaseTransitions": 0}}


def _configmap(data: dict[str, str], rv: Optional[str] = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "cks-rollout-state", "namespace": "kube-system"}
    if rv is not None:
        meta["resourceVersion"] = rv
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def _core_event(name: str, c: Ctx) -> dict[str, Any]:
    # As node_events.NodeEvents writes one: both APIs' fields on a core/v1 Event.
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": c["node_uid"]},
            "reason": "NodeCycleStarted", "message": "cks rollout: stopping the VM", "type": "Normal",
            "source": {"component": "cloudstack.cks", "host": "runner"},
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z", "count": 1,
            "eventTime": "2026-01-01T00:00:00.000000Z", "action": "Stop", "reportingComponent": "cloudstack.cks",
            "reportingInstance": "runner"}


def _v1_event(name: str) -> dict[str, Any]:
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "cloudstack.cks",
            "reportingInstance": "runner", "action": "Drain", "reason": "NodeDrained", "type": "Normal",
            "note": "drained", "regarding": {"apiVersion": "v1", "kind": "Node", "name": NODE}}


def _eviction(name: str, ns: str = "default") -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}}


def _pod(name: str) -> dict[str, Any]:
    # The external etcd check's short-lived pod (etcd_pod.py), on a node: no scheduler involved.
    metadata = {"name": name, "namespace": "kube-system", "labels": {"app": "cks-etcd-check"}}
    spec = {"nodeName": CONTROL, "restartPolicy": "Never", "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "etcdctl", "image": "registry.k8s.io/etcd:3.5.21-0",
                            "command": ["etcdctl", "endpoint", "health"]}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def steps() -> list[Step]:
    node = f"/api/v1/nodes/{NODE}"
    pod = "/api/v1/namespaces/default/pods"
    return [
        # -- health, version, discovery ------------------------------------------------------------
        Step("readyz", "GET", "/readyz", view="text"),
        Step("readyz etcd", "GET", "/readyz/etcd", view="text"),
        Step("livez", "GET", "/livez", view="text"),
        Step("healthz", "GET", "/healthz", view="text"),
        # kubectl's discovery (timeout= on each) and version read
        Step("version", "GET", "/version", {"timeout": "5s"}, view="version"),
        Step("core discovery", "GET", "/api", KUBECTL, view="api_versions"),
        Step("core resources", "GET", "/api/v1", KUBECTL, view="resources"),
        Step("group discovery", "GET", "/apis", KUBECTL, view="groups"),
        *[Step(f"{group} resources", "GET", f"/apis/{group}", KUBECTL, view="resources")
          for group in ("apps/v1", "policy/v1", "coordination.k8s.io/v1", "authorization.k8s.io/v1", "events.k8s.io/v1")],
        # -- nodes: lists, selectors, tables -------------------------------------------------------
        Step("list nodes", "GET", "/api/v1/nodes", PAGE, keep=_keep_rv("nodes_rv")),
        Step("read node", "GET", node, keep=lambda c, b: (_keep_uid("node_uid")(c, b), _keep_rv("node_rv")(c, b))),
        Step("read missing node", "GET", "/api/v1/nodes/no-such-node"),
        Step("nodes by label", "GET", "/api/v1/nodes", {"labelSelector": "node-role.kubernetes.io/control-plane"}),
        Step("nodes by label set", "GET", "/api/v1/nodes", {"labelSelector": f"kubernetes.io/hostname in ({NODE})"}),
        Step("nodes by field", "GET", "/api/v1/nodes", {"fieldSelector": f"metadata.name={NODE}"}),
        Step("nodes by unsupported field", "GET", "/api/v1/nodes", {"fieldSelector": "status.phase=Running"}),
        Step("nodes by bad label selector", "GET", "/api/v1/nodes", {"labelSelector": "a b"}),
        Step("nodes as Table", "GET", "/api/v1/nodes", accept=TABLE, view="table"),
        Step("node as Table", "GET", node, accept=TABLE, view="table"),
        # -- node writes: three patch flavours, preconditions --------------------------------------
        Step("cordon (merge patch)", "PATCH", node, body={"spec": {"unschedulable": True},
                                                          "metadata": {"annotations": {"cks.cloudstack.io/cycle": "1"}}},
             content_type=MERGE, keep=_keep_rv("cordoned_rv")),
        Step("merge patch with stale resourceVersion", "PATCH", node,
             body=lambda c: {"metadata": {"resourceVersion": c["node_rv"], "labels": {"stale": "x"}}},
             content_type=MERGE),
        Step("merge patch at current resourceVersion", "PATCH", node,
             body=lambda c: {"metadata": {"resourceVersion": c["cordoned_rv"], "labels": {"fresh": "y"}}},
             content_type=MERGE),
        Step("strategic merge patch of taints", "PATCH", node,
             body={"spec": {"taints": [{"key": "cks.cloudstack.io/cycling", "effect": "NoSchedule"}]}},
             content_type=STRATEGIC),
        Step("JSON patch of a label", "PATCH", node,
             body=[{"op": "add", "path": "/metadata/labels/cks.cloudstack.io~1batch", "value": "1"}],
             content_type=JSON_PATCH),
        Step("JSON patch with failing test", "PATCH", node,
             body=[{"op": "test", "path": "/spec/unschedulable", "value": False}], content_type=JSON_PATCH),
        Step("patch of unknown content type", "PATCH", node, body={"spec": {}}, content_type="text/plain"),
        Step("patch of a missing node", "PATCH", "/api/v1/nodes/no-such-node", body={"spec": {"unschedulable": True}},
             content_type=MERGE),
        Step("invalid taint effect", "PATCH", node, body={"spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}},
             content_type=MERGE),
        Step("uncordon (merge patch)", "PATCH", node,
             body={"spec": {"unschedulable": None, "taints": None},
                   "metadata": {"annotations": {"cks.cloudstack.io/cycle": None}}}, content_type=MERGE),
        # -- watches -------------------------------------------------------------------------------
        Step("watch node from list", "GET", "/api/v1/nodes",
             lambda c: {"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": "1",
                        "fieldSelector": f"metadata.name={NODE}", "resourceVersion": _rv(c, "nodes_rv")},
             watch_seconds=3, view="watch"),
        Step("watch nodes from list", "GET", "/api/v1/nodes",
             lambda c: {"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": "1",
                        "resourceVersion": _rv(c, "nodes_rv")}, watch_seconds=3, view="watch"),
        Step("watch nodes from an expired resourceVersion", "GET", "/api/v1/nodes",
             {"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": "1", "resourceVersion": "2"},
             watch_seconds=3, view="watch"),
        Step("watch pods on a node", "GET", "/api/v1/pods",
             lambda c: {"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": "1",
                        "fieldSelector": f"spec.nodeName={WORKERS[1]}", "resourceVersion": _rv(c, "nodes_rv")},
             watch_seconds=3, view="watch"),
        # -- pods ----------------------------------------------------------------------------------
        Step("list pods", "GET", "/api/v1/pods", PAGE, keep=_keep_rv("pods_rv")),
        Step("pods on a node", "GET", "/api/v1/pods", dict(PAGE, fieldSelector=f"spec.nodeName={NODE}")),
        Step("pods by label", "GET", pod, dict(PAGE, labelSelector="app=web")),
        Step("pods by label and field", "GET", pod, {"labelSelector": "app=web", "fieldSelector": f"spec.nodeName={NODE}"}),
        Step("pods paged", "GET", "/api/v1/pods", {"limit": "2"}, keep=lambda c, b: c.update(
            cont=((b or {}).get("metadata") or {}).get("continue"))),
        Step("pods next page", "GET", "/api/v1/pods", lambda c: {"limit": "2", "continue": c["cont"]}),
        Step("pods as Table", "GET", pod, accept=TABLE, view="table"),
        Step("read pod", "GET", f"{pod}/web-a"),
        Step("pod by name (a wait's list)", "GET", pod, dict(PAGE, fieldSelector="metadata.name=web-a"),
             keep=_keep_rv("pod_list_rv")),
        Step("watch a pod by name", "GET", pod,
             lambda c: {"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": "1",
                        "fieldSelector": "metadata.name=web-a", "resourceVersion": _rv(c, "pod_list_rv")},
             watch_seconds=3, view="watch"),
        Step("read missing pod", "GET", f"{pod}/no-such-pod"),
        Step("pod status", "GET", f"{pod}/web-a/status"),
        # -- budgets and evictions -----------------------------------------------------------------
        Step("list budgets", "GET", "/apis/policy/v1/poddisruptionbudgets", PAGE),
        Step("read budget", "GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web"),
        Step("budget as Table", "GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", accept=TABLE,
             view="table"),
        Step("read missing daemonset", "GET", "/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy"),
        Step("eviction refused by a budget", "POST", f"{pod}/web-a/eviction", body=_eviction("web-a")),
        Step("eviction, dry run", "POST", f"{pod}/free-a/eviction", {"dryRun": "All"}, body=_eviction("free-a")),
        Step("eviction with a name that differs", "POST", f"{pod}/free-a/eviction", body=_eviction("web-b")),
        Step("eviction", "POST", f"{pod}/free-a/eviction",
             body=dict(_eviction("free-a"), deleteOptions={"gracePeriodSeconds": 5}), kubelet="free-a"),
        Step("delete pod at once", "DELETE", f"{pod}/doomed",
             body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}),
        Step("eviction of a pod already gone", "POST", f"{pod}/doomed/eviction", body=_eviction("doomed")),
        Step("delete a pod already gone", "DELETE", f"{pod}/doomed", body={"apiVersion": "v1", "kind": "DeleteOptions"}),
        Step("delete pod gracefully", "DELETE", f"{pod}/victim", kubelet="victim", view="terminating"),
        Step("create pod", "POST", "/api/v1/namespaces/kube-system/pods", body=_pod("cks-etcd-check")),
        Step("create pod again", "POST", "/api/v1/namespaces/kube-system/pods", body=_pod("cks-etcd-check")),
        Step("create pod with no containers", "POST", "/api/v1/namespaces/kube-system/pods",
             body={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "empty"}, "spec": {"containers": []}}),
        Step("log of the created pod", "GET", "/api/v1/namespaces/kube-system/pods/cks-etcd-check/log",
             {"container": "etcdctl"}, view="log"),
        Step("delete created pod", "DELETE", "/api/v1/namespaces/kube-system/pods/cks-etcd-check",
             body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}),
        # -- the rollout's Lease -------------------------------------------------------------------
        Step("read missing lease", "GET", f"{LEASES}/cks-rollout-demo"),
        Step("create lease", "POST", LEASES, body=_lease("run-1"), keep=_keep_rv("lease_rv")),
        Step("create lease again", "POST", LEASES, body=_lease("run-2")),
        Step("read lease", "GET", f"{LEASES}/cks-rollout-demo"),
        Step("replace lease unchanged", "PUT", f"{LEASES}/cks-rollout-demo", body=lambda c: _lease("run-1", c["lease_rv"]),
             keep=_keep_rv("lease_rv_same")),
        Step("replace lease", "PUT", f"{LEASES}/cks-rollout-demo",
             body=lambda c: _lease("run-1", c["lease_rv_same"], renew="2026-01-01T00:00:05.000000Z"),
             keep=_keep_rv("lease_rv2")),
        Step("replace lease with stale resourceVersion", "PUT", f"{LEASES}/cks-rollout-demo",
             body=lambda c: _lease("run-2", c["lease_rv"])),
        Step("replace lease without resourceVersion", "PUT", f"{LEASES}/cks-rollout-demo", body=_lease("run-2")),
        Step("renew lease (merge patch)", "PATCH", f"{LEASES}/cks-rollout-demo",
             body=lambda c: {"metadata": {"resourceVersion": c["lease_rv2"]},
                             "spec": {"renewTime": "2026-01-01T00:00:10.000000Z"}}, content_type=MERGE),
        Step("renew lease with stale resourceVersion", "PATCH", f"{LEASES}/cks-rollout-demo",
             body=lambda c: {"metadata": {"resourceVersion": c["lease_rv2"]},
                             "spec": {"renewTime": "2026-01-01T00:00:20.000000Z"}}, content_type=MERGE),
        Step("renew lease without a precondition", "PATCH", f"{LEASES}/cks-rollout-demo",
             body={"spec": {"renewTime": "2026-01-01T00:00:30.000000Z"}}, content_type=MERGE,
             keep=_keep_rv("lease_rv3")),
        Step("lease with a bad duration", "PUT", f"{LEASES}/cks-rollout-demo",
             body=lambda c: dict(_lease("run-1", c["lease_rv3"]),
                                 spec=dict(_lease("run-1")["spec"], leaseDurationSeconds=0))),
        Step("leases by name", "GET", LEASES, {"fieldSelector": "metadata.name=cks-rollout-demo"}),
        Step("node leases", "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"),
        Step("delete lease", "DELETE", f"{LEASES}/cks-rollout-demo"),
        # -- the rollout's state ConfigMap -------------------------------------------------------
        Step("read missing configmap", "GET", f"{CONFIGMAPS}/cks-rollout-state"),
        Step("create configmap", "POST", CONFIGMAPS, body=_configmap({"batch": "1"}), keep=_keep_rv("cm_rv")),
        Step("create configmap again", "POST", CONFIGMAPS, body=_configmap({"batch": "2"})),
        Step("replace configmap", "PUT", f"{CONFIGMAPS}/cks-rollout-state",
             body=lambda c: _configmap({"batch": "2"}, c["cm_rv"]), keep=_keep_rv("cm_rv2")),
        Step("replace configmap with stale resourceVersion", "PUT", f"{CONFIGMAPS}/cks-rollout-state",
             body=lambda c: _configmap({"batch": "3"}, c["cm_rv"])),
        Step("delete configmap with stale precondition", "DELETE", f"{CONFIGMAPS}/cks-rollout-state",
             body=lambda c: {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"resourceVersion": c["cm_rv"]}}),
        Step("delete configmap", "DELETE", f"{CONFIGMAPS}/cks-rollout-state",
             body=lambda c: {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"resourceVersion": c["cm_rv2"]}}),
        Step("delete missing configmap", "DELETE", f"{CONFIGMAPS}/cks-rollout-state",
             body={"apiVersion": "v1", "kind": "DeleteOptions"}),
        # -- Events of both APIs -------------------------------------------------------------------
        Step("create core event", "POST", EVENTS, body=lambda c: _core_event(f"{NODE}.17f0000000000001", c)),
        Step("count core event (merge patch)", "PATCH", f"{EVENTS}/{NODE}.17f0000000000001",
             body={"count": 2, "lastTimestamp": "2026-01-01T00:00:05Z",
                   "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:05.000000Z"}}, content_type=MERGE),
        Step("read core event as events.k8s.io", "GET", f"{EVENTS_V1}/{NODE}.17f0000000000001"),
        Step("create events.k8s.io event", "POST", EVENTS_V1, body=_v1_event(f"{NODE}.17f0000000000002")),
        Step("read events.k8s.io event as core", "GET", f"{EVENTS}/{NODE}.17f0000000000002"),
        Step("events.k8s.io event without reportingController", "POST", EVENTS_V1,
             body=dict(_v1_event(f"{NODE}.17f0000000000003"), reportingController=None)),
        Step("core event in another namespace than its URL", "POST", EVENTS,
             body=lambda c: dict(_core_event("wrong-ns", c), metadata={"name": "wrong-ns", "namespace": "kube-system"})),
        # kubectl describe node: the node's Events in every namespace, by uid and by name (the
        # kubelet's reference carries the name as uid)
        Step("events of a node (describe node)", "GET", "/api/v1/events",
             lambda c: dict(PAGE, fieldSelector=f"involvedObject.name={NODE},involvedObject.namespace=,"
                                                f"involvedObject.kind=Node,involvedObject.uid={c['node_uid']}"),
             view="events"),
        Step("events of a node by name", "GET", "/api/v1/events",
             dict(PAGE, fieldSelector=f"involvedObject.uid={NODE},involvedObject.name={NODE},"
                                      f"involvedObject.namespace=,involvedObject.kind=Node"), view="events"),
        Step("events of an object", "GET", EVENTS, dict(PAGE, fieldSelector=f"involvedObject.name={NODE}"),
             view="events"),
        Step("events as Table (get events)", "GET", EVENTS, dict(PAGE, fieldSelector=f"involvedObject.name={NODE}"),
             accept=TABLE, view="table_events"),
        Step("events as Table", "GET", EVENTS, accept=TABLE, view="table_events"),
        Step("events.k8s.io by reason", "GET", EVENTS_V1, {"fieldSelector": "reason=NodeDrained"}, view="events"),
        Step("events.k8s.io by regarding", "GET", EVENTS_V1, {"fieldSelector": f"regarding.name={NODE}"}, view="events"),
        Step("events.k8s.io by unknown field", "GET", EVENTS_V1, {"fieldSelector": "note=drained"}),
        # -- access reviews ------------------------------------------------------------------------
        Step("access review: evict", "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
             body={"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                   "spec": {"resourceAttributes": {"namespace": "default", "verb": "create", "group": "",
                                                   "resource": "pods", "subresource": "eviction"}}}),
        Step("access review: non-resource", "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
             body={"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                   "spec": {"nonResourceAttributes": {"path": "/readyz", "verb": "get"}}}),
        Step("access review without attributes", "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
             body={"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {}}),
        # -- after the kubelets' part --------------------------------------------------------------
        Step("evicted pod is gone", "GET", f"{pod}/free-a"),
        Step("budget after the evictions", "GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web"),
    ]
