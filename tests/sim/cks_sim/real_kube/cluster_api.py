"""``kube_cluster_api.ClusterApi`` over a real API server: the adapter the shared actors (the
kubelets of ``kube_nodes``, ``kube_pods``, ...) and the recorder of their Events use on the real
backend, over ``api.RestApi``.

What the in-memory store does by handing out its objects, this does by HTTP, with the API server's
rules:

- ``read``: a GET of the object's path (``kube_resources.RESOURCES`` names each resource's group,
  version and plural); a 404 is None.
- ``select``: a GET of the list (one namespace or all), sorted by namespace and name as the store
  sorts them; ``pods_on(node)`` a list with ``fieldSelector=spec.nodeName=<node>``. An object listed
  counts as read (a put of it compares with it).
- ``put``: a POST when the object has no resourceVersion yet (``new_meta`` gives none: the API
  server assigns uid, resourceVersion and creationTimestamp), else a PUT. Of a resource with a
  status subresource (a Node, a Pod: a kubelet owns their status) the status goes by a PUT of
  ``/status``, as the main resource's PUT drops it; an object read here is compared with what was
  read, so that only what changed is written (a kubelet's status post is one call); a status write
  refused (409) because a controller changed the object meanwhile is sent again at the newer
  resourceVersion, the status being its writer's own, and so is a node's Lease refused for a renewal of
  the same kubelet's that came first (``WRITER_OWNED``); a put that changes nothing makes no request. The object is
  changed in place to the one stored (a new resourceVersion, the uid of a created one), as the
  in-memory store's ``put`` leaves the actor holding the stored object.
- ``remove``: a DELETE with ``gracePeriodSeconds: 0`` (the kubelet's confirmation that a pod's
  containers stopped, ``preconditions.uid`` of the object as last read); the object as it was, None
  when it was gone already (404) or another of that name took its place (409).
"""

from __future__ import annotations

import copy
import uuid
from typing import Any, Optional

from ..kube_resources import NODE_LEASE_NS, RESOURCES
from .api import ApiRefusal, KubeApi

Key = tuple[str, str]
#: Resources whose status an actor writes (the kubelet's): through their ``/status`` subresource.
STATUS_WRITTEN = frozenset(plural for plural, res in RESOURCES.items() if "status" in res.subresources)
#: ... of which a create drops the status (pkg/registry/core/pod/strategy.go PrepareForCreate makes it
#: Pending); a Node keeps the one its kubelet registers with (node/strategy.go clears only its config).
STATUS_DROPPED_ON_CREATE = frozenset({"pods"})
#: (resource, namespace) of the objects an actor writes whole as their one writer: the nodes' Leases, each
#: its kubelet's. A replace refused (409) because a write of the same writer came first (a boot's renewal
#: and the heartbeat thread's) is sent again at the newer resourceVersion, as the kubelet's lease
#: controller does (retryUpdateLease: on a conflict it reads the Lease again and renews that).
WRITER_OWNED = frozenset({("leases", NODE_LEASE_NS)})
#: How often a write of what its writer owns (a status, a Lease) refused for a newer resourceVersion is sent.
STATUS_ATTEMPTS = 3


def collection_path(plural: str, namespace: Optional[str]) -> str:
    """The REST path of a resource's objects (of one namespace, or of all with None)."""
    res = RESOURCES[plural]
    base = f"/apis/{res.group}/{res.version}" if res.group else f"/api/{res.version}"
    if res.namespaced and namespace is not None:
        return f"{base}/namespaces/{namespace}/{plural}"
    return f"{base}/{plural}"


def object_path(plural: str, namespace: str, name: str) -> str:
    return f"{collection_path(plural, namespace if RESOURCES[plural].namespaced else None)}/{name}"


class RestClusterApi:
    """``ClusterApi`` over one connection to a real API server (each actor thread its own)."""

    def __init__(self, api: KubeApi) -> None:
        self.api = api
        #: (plural, namespace, name) -> the object as last read here (what a put compares with)
        self._as_read: dict[tuple[str, str, str], dict[str, Any]] = {}

    def _remember(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        if plural in STATUS_WRITTEN:
            meta = obj["metadata"]
            self._as_read[(plural, meta.get("namespace", ""), meta["name"])] = copy.deepcopy(obj)
        return obj

    def read(self, plural: str, namespace: str, name: str) -> Optional[dict[str, Any]]:
        try:
            return self._remember(plural, self.api.get(object_path(plural, namespace, name)))
        except ApiRefusal as refusal:
            if refusal.code == 404:
                return None
            raise

    def select(self, plural: str, namespace: Optional[str]) -> list[dict[str, Any]]:
        items = [self._remember(plural, item) for item in self.api.list(collection_path(plural, namespace))]
        return sorted(items, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))

    def pods_on(self, node: str) -> list[dict[str, Any]]:
        """The pods bound to ``node`` (the kubelet's own list)."""
        items = [self._remember("pods", item)
                 for item in self.api.list(collection_path("pods", None), fieldSelector=f"spec.nodeName={node}")]
        return sorted(items, key=lambda o: (o["metadata"]["namespace"], o["metadata"]["name"]))

    def put(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        namespace = meta.get("namespace", "")
        if not meta.get("resourceVersion"):
            stored = self.api.create(collection_path(plural, namespace or None), obj)
            if plural in STATUS_DROPPED_ON_CREATE and obj.get("status"):
                # A created pod's status is the API server's (Pending); a kubelet's Node keeps its own.
                stored = self._put_status(plural, dict(obj, metadata=stored["metadata"]))
        else:
            stored = self._replace(plural, obj)
        self._remember(plural, stored)  # what the next put of it compares with
        obj.clear()
        obj.update(stored)
        return obj

    def _replace(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        path = object_path(plural, meta.get("namespace", ""), meta["name"])
        if (plural, meta.get("namespace", "")) in WRITER_OWNED:
            return self._put_owned(path, obj)
        if plural not in STATUS_WRITTEN:
            return self.api.replace(path, obj)
        before = self._as_read.get((plural, meta.get("namespace", ""), meta["name"]))
        unread = before is None or before["metadata"].get("resourceVersion") != meta["resourceVersion"]
        stored: Optional[dict[str, Any]] = None
        if unread or _without_status(before) != _without_status(obj):  # type: ignore[arg-type]
            stored = self.api.replace(path, obj)
        if unread or (before or {}).get("status") != obj.get("status"):
            rv = stored["metadata"]["resourceVersion"] if stored else meta["resourceVersion"]
            stored = self._put_status(plural, dict(obj, metadata=dict(meta, resourceVersion=rv)))
        # Nothing changed since it was read: the object stored is the one read.
        return stored if stored is not None else copy.deepcopy(before)  # type: ignore[arg-type]

    def _put_status(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        """The status written by its owner: a write refused because a controller changed the object
        meanwhile (its spec, its taints) is sent again at the newer resourceVersion, as the status is
        the writer's own."""
        meta = obj["metadata"]
        return self._put_owned(object_path(plural, meta.get("namespace", ""), meta["name"]), obj, "/status")

    def _put_owned(self, path: str, obj: dict[str, Any], subresource: str = "") -> dict[str, Any]:
        """A PUT of what ``obj``'s writer owns (the object at ``path``, or its ``subresource``), sent again
        at the newer resourceVersion when refused for an older one (409), the object still the same (uid)."""
        meta = obj["metadata"]
        for attempt in range(STATUS_ATTEMPTS):
            try:
                return self.api.replace(path + subresource, obj)
            except ApiRefusal as refusal:
                if refusal.code != 409 or attempt == STATUS_ATTEMPTS - 1:
                    raise
                current = self.api.get(path)
                if current["metadata"]["uid"] != meta.get("uid", current["metadata"]["uid"]):
                    raise
                obj = dict(obj, metadata=dict(meta, resourceVersion=current["metadata"]["resourceVersion"]))
        raise AssertionError("unreachable")

    def remove(self, plural: str, key: Key) -> Optional[dict[str, Any]]:
        namespace, name = key
        body: dict[str, Any] = {"gracePeriodSeconds": 0}
        before = self._as_read.pop((plural, namespace, name), None)
        if before is not None:
            body["preconditions"] = {"uid": before["metadata"]["uid"]}
        try:
            answer = self.api.delete(object_path(plural, namespace, name), body)
        except ApiRefusal as refusal:
            if refusal.code in (404, 409):  # gone already, or another object of that name now
                return None
            raise
        if isinstance(answer, dict) and answer.get("kind") != "Status":
            return answer
        return before or {"metadata": {"name": name, "namespace": namespace}}

    def new_uid(self) -> str:
        return str(uuid.uuid4())

    def new_meta(self, name: str, namespace: Optional[str] = None, **extra: Any) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name}
        if namespace is not None:
            meta["namespace"] = namespace
        meta.update({k: v for k, v in extra.items() if v is not None})
        return meta


def _without_status(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k != "status"}
