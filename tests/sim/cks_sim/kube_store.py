"""Identifiers and storage of one cluster's Kubernetes: uids, names, resourceVersions, the object
store with its watch-cache records, and the indexes over pods (their node and their controller).

A mixin of ``KubeWorld`` (kube.py): methods only; the state it reads and writes is declared in
``kube_state.KubeState``.
"""

from __future__ import annotations

import uuid
from typing import Any, Optional

from .kube_helpers import now_time
from .kube_resources import (
    RESOURCES,
)
from .kube_state import KubeState


class KubeStore(KubeState):
    """Where API objects are kept, named and indexed."""

    def new_uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def _suffix(self, n: int = 5) -> str:
        # The API server's generateName alphabet (no vowels, no confusable digits).
        return "".join(self.rng.choice("bcdfghjklmnpqrstvwxz2456789") for _char in range(n))

    def next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def current_rv(self) -> str:
        return str(self._rv)

    def _deleted(self, plural: str, obj: dict[str, Any]) -> None:
        # The DELETED event carries the object at the deletion's resourceVersion, as etcd3's watcher does.
        obj["metadata"]["resourceVersion"] = self.next_rv()
        self.watch_cache.record(obj["metadata"]["resourceVersion"], plural, "DELETED", obj)

    def _store(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        if plural == "nodes":
            self._fit_cache.clear()
        meta = obj["metadata"]
        meta["resourceVersion"] = self.next_rv()
        key = (meta.get("namespace", ""), meta["name"])
        etype = "MODIFIED" if key in self._objects[plural] else "ADDED"
        self._objects[plural][key] = obj
        self.watch_cache.record(meta["resourceVersion"], plural, etype, obj)
        if plural == "pods":
            self._index_pod(key, obj)
        elif plural == "events":
            self._event_writes[key] = self.sim.clock.now()
        return obj

    def _index_pod(self, key: tuple[str, str], pod: dict[str, Any]) -> None:
        node = pod["spec"].get("nodeName")
        old = self._pod_index.get(key)
        if old is not None:
            if old[0] == node:
                return
            owner = old[1]
            if old[0]:
                self._pods_by_node.get(old[0], set()).discard(key)
        else:
            owner = self._compute_owner_key(pod)
            if owner is not None:
                self._pods_by_owner.setdefault(owner, set()).add(key)
        if node:
            self._pods_by_node.setdefault(node, set()).add(key)
        self._pod_index[key] = (node, owner)

    def _unindex_pod(self, key: tuple[str, str]) -> None:
        old = self._pod_index.pop(key, None)
        if old is not None:
            if old[0]:
                self._pods_by_node.get(old[0], set()).discard(key)
            if old[1] is not None:
                self._pods_by_owner.get(old[1], set()).discard(key)

    def _owner_key(self, pod: dict[str, Any]) -> Optional[tuple[str, str, str]]:
        entry = self._pod_index.get((pod["metadata"]["namespace"], pod["metadata"]["name"]))
        return entry[1] if entry is not None else self._compute_owner_key(pod)

    def _compute_owner_key(self, pod: dict[str, Any]) -> Optional[tuple[str, str, str]]:
        ns = pod["metadata"]["namespace"]
        for ref in pod["metadata"].get("ownerReferences") or []:
            if not ref.get("controller"):
                continue
            if ref["kind"] == "ReplicaSet":
                for wl in self.workloads.values():
                    if wl.kind == "Deployment" and wl.namespace == ns and wl.rs_name == ref["name"]:
                        return wl.key
            return (ref["kind"], ns, ref["name"])
        if pod["metadata"]["name"] and ("Pod", ns, pod["metadata"]["name"]) in self.workloads:
            return ("Pod", ns, pod["metadata"]["name"])
        return None

    def _raw(self, plural: str, namespace: str, name: str) -> Optional[dict[str, Any]]:
        return self._objects[plural].get((namespace if RESOURCES[plural].namespaced else "", name))

    def _node_object(self, name: str) -> dict[str, Any]:
        """The stored Node of one of ``nodes``: each has one from its start (``_add_node``) on, as
        the API neither creates nor deletes Nodes."""
        return self._objects["nodes"][("", name)]

    def _new_meta(self, name: str, namespace: Optional[str] = None, **extra: Any) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name}
        if namespace is not None:
            meta["namespace"] = namespace
        meta.update({"uid": self.new_uid(), "resourceVersion": "0", "creationTimestamp": now_time()})
        meta.update({k: v for k, v in extra.items() if v is not None})
        return meta

    def _ensure_namespace(self, ns: str) -> None:
        if self._raw("namespaces", "", ns) is None:
            self._store("namespaces", {
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": self._new_meta(ns, labels={"kubernetes.io/metadata.name": ns}),
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            })
