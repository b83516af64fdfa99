"""The in-memory API's storage: one ``ObjectStore`` keeps the objects as the API serves them, names
them (uids, generateName suffixes), versions every write (resourceVersions, the watch cache's
events) and tells its listeners of each change, as client-go's ``testing/fixture.go`` tracker
does for its watchers. ``PodIndex`` is one such listener: each pod's node and controller.

Nothing here knows a rule of the API or of a controller: those are objects handed the store.
"""

from __future__ import annotations

import random
import uuid
from typing import Any, Callable, Optional

from .kube_cluster_api import Key
from .kube_helpers import now_time
from .kube_resources import RESOURCES
from .kube_watch import WatchCache

#: ``listener(plural, event, key, obj)`` after each write: event is ADDED, MODIFIED or DELETED.
Listener = Callable[[str, str, Key, dict[str, Any]], None]


class ObjectStore:
    """Every stored object of one cluster, by resource and key, at one resourceVersion sequence."""

    def __init__(self, rng: random.Random, watch_cache: WatchCache) -> None:
        self.rng = rng
        self.watch_cache = watch_cache
        self.objects: dict[str, dict[Key, dict[str, Any]]] = {r: {} for r in RESOURCES}
        self._rv = 1000
        self._listeners: list[Listener] = []

    def listen(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def new_uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def suffix(self, n: int = 5) -> str:
        # The API server's generateName alphabet (no vowels, no confusable digits).
        return "".join(self.rng.choice("bcdfghjklmnpqrstvwxz2456789") for _char in range(n))

    def next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def current_rv(self) -> str:
        return str(self._rv)

    def put(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` (added or replaced) at a new resourceVersion; the stored object is ``obj``."""
        meta = obj["metadata"]
        meta["resourceVersion"] = self.next_rv()
        key = (meta.get("namespace", ""), meta["name"])
        etype = "MODIFIED" if key in self.objects[plural] else "ADDED"
        self.objects[plural][key] = obj
        self.watch_cache.record(meta["resourceVersion"], plural, etype, obj)
        for listener in self._listeners:
            listener(plural, etype, key, obj)
        return obj

    def remove(self, plural: str, key: Key) -> Optional[dict[str, Any]]:
        """Remove the object at ``key``, if stored; the DELETED event carries it at the deletion's
        resourceVersion, as etcd3's watcher does."""
        obj = self.objects[plural].pop(key, None)
        if obj is not None:
            obj["metadata"]["resourceVersion"] = self.next_rv()
            self.watch_cache.record(obj["metadata"]["resourceVersion"], plural, "DELETED", obj)
            for listener in self._listeners:
                listener(plural, "DELETED", key, obj)
        return obj

    def read(self, plural: str, namespace: str, name: str) -> Optional[dict[str, Any]]:
        """The stored object itself (a reference: change it only to ``put`` it back)."""
        return self.objects[plural].get((namespace if RESOURCES[plural].namespaced else "", name))

    def select(self, plural: str, namespace: Optional[str]) -> list[dict[str, Any]]:
        """The stored objects of a resource (one namespace or all), sorted by namespace and name."""
        items = self.objects[plural]
        return [items[k] for k in sorted(items) if namespace is None or k[0] == namespace]

    def node(self, name: str) -> dict[str, Any]:
        """The stored Node of a node of the cluster: each has one from its start on, as the API
        neither creates nor deletes Nodes."""
        return self.objects["nodes"][("", name)]

    def new_meta(self, name: str, namespace: Optional[str] = None, **extra: Any) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name}
        if namespace is not None:
            meta["namespace"] = namespace
        meta.update({"uid": self.new_uid(), "resourceVersion": "0", "creationTimestamp": now_time()})
        meta.update({k: v for k, v in extra.items() if v is not None})
        return meta

    def ensure_namespace(self, ns: str) -> None:
        if self.read("namespaces", "", ns) is None:
            self.put("namespaces", {
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": self.new_meta(ns, labels={"kubernetes.io/metadata.name": ns}),
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            })


OwnerKey = tuple[str, str, str]  # (kind, namespace, name) of a pod's controller


class PodIndex:
    """Each stored pod's node and controller (a 1,000-node cluster has thousands of pods), kept by
    listening to the store. ``workload_of_replicaset`` names the Deployment behind a ReplicaSet."""

    def __init__(self, pods: dict[Key, dict[str, Any]],
                 workload_of: Callable[[str, str, str], Optional[OwnerKey]]) -> None:
        self._pods = pods
        self._workload_of = workload_of
        self._index: dict[Key, tuple[Optional[str], Optional[OwnerKey]]] = {}
        self._by_node: dict[str, set[Key]] = {}
        self._by_owner: dict[OwnerKey, set[Key]] = {}

    def changed(self, plural: str, event: str, key: Key, pod: dict[str, Any]) -> None:
        if plural != "pods":
            return
        if event == "DELETED":
            self._unindex(key)
        else:
            self._index_pod(key, pod)

    def _index_pod(self, key: Key, pod: dict[str, Any]) -> None:
        node = pod["spec"].get("nodeName")
        old = self._index.get(key)
        if old is not None:
            if old[0] == node:
                return
            owner = old[1]
            if old[0]:
                self._by_node.get(old[0], set()).discard(key)
        else:
            owner = self._compute_owner(pod)
            if owner is not None:
                self._by_owner.setdefault(owner, set()).add(key)
        if node:
            self._by_node.setdefault(node, set()).add(key)
        self._index[key] = (node, owner)

    def _unindex(self, key: Key) -> None:
        old = self._index.pop(key, None)
        if old is not None:
            if old[0]:
                self._by_node.get(old[0], set()).discard(key)
            if old[1] is not None:
                self._by_owner.get(old[1], set()).discard(key)

    def owner(self, pod: dict[str, Any]) -> Optional[OwnerKey]:
        entry = self._index.get((pod["metadata"]["namespace"], pod["metadata"]["name"]))
        return entry[1] if entry is not None else self._compute_owner(pod)

    def _compute_owner(self, pod: dict[str, Any]) -> Optional[OwnerKey]:
        ns = pod["metadata"]["namespace"]
        for ref in pod["metadata"].get("ownerReferences") or []:
            if not ref.get("controller"):
                continue
            return self._workload_of(ref["kind"], ns, ref["name"]) or (ref["kind"], ns, ref["name"])
        return self._workload_of("Pod", ns, pod["metadata"]["name"]) if pod["metadata"]["name"] else None

    def node_of(self, key: Key) -> Optional[str]:
        return self._index[key][0]

    def count_on(self, node: str) -> int:
        return len(self._by_node.get(node, ()))

    def keys_of(self, owner: OwnerKey) -> set[Key]:
        return self._by_owner.get(owner, set())

    def pods_on(self, node: str) -> list[dict[str, Any]]:
        return [self._pods[k] for k in sorted(self._by_node.get(node, ()))]

    def pods_of(self, owner: OwnerKey) -> list[dict[str, Any]]:
        return [self._pods[k] for k in sorted(self._by_owner.get(owner, ()))]
