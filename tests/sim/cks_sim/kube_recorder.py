"""The Events the cluster's components record (kubelet, node and workload controllers, scheduler,
leader election), the object references they carry, and their expiry after the API server's
``--event-ttl``: a ``Recorder`` over the store, which it listens to for each Event's last write.
"""

from __future__ import annotations

import time
from typing import Any, Optional

from .kube_helpers import now_micro, now_time
from .kube_store import Key, ObjectStore


def pod_ref(pod: dict[str, Any], container: Optional[str] = None) -> dict[str, Any]:
    meta = pod["metadata"]
    ref = {"kind": "Pod", "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"],
           "apiVersion": "v1", "resourceVersion": meta.get("resourceVersion", "")}
    if container:
        ref["fieldPath"] = f"spec.containers{{{container}}}"
    return ref


def kubelet_node_ref(name: str) -> dict[str, Any]:
    # The kubelet's reference to its Node carries the node's NAME as uid (kubelet.go nodeRef),
    # which is why kubectl describe node asks for both.
    return {"kind": "Node", "name": name, "uid": name}


class Recorder:
    """Events as the components record them, and their time to live. ``clock`` is the sim's
    (``now()``, ``real(seconds)``); nothing is recorded until ``recording`` is set, as the
    starting state's history is not replayed."""

    def __init__(self, store: ObjectStore, clock: Any, event_ttl: float) -> None:
        self.store = store
        self.clock = clock
        self.event_ttl = event_ttl
        self.recording = False
        # When each Event was last written (clock time): it goes once the TTL has passed since.
        self._writes: dict[Key, float] = {}
        store.listen(self._changed)

    def _changed(self, plural: str, event: str, key: Key, obj: dict[str, Any]) -> None:
        if plural != "events":
            return
        if event == "DELETED":
            self._writes.pop(key, None)
        else:
            self._writes[key] = self.clock.now()

    def record(self, namespace: str, involved: dict[str, Any], etype: str, reason: str, message: str,
               component: str, host: Optional[str] = None, action: Optional[str] = None) -> None:
        """An Event as its component records it: through the legacy recorder (client-go
        tools/record: source, first/last timestamp, count), or with ``action`` through the
        events.k8s.io recorder (tools/events, as kube-scheduler: eventTime, action, no source)."""
        if not self.recording:
            return
        # The recorders' names: <object>.<unix nanoseconds in hex>, so a list is in time order.
        stamp_ns = time.time_ns()
        while self.store.read("events", namespace, f"{involved['name']}.{stamp_ns:x}") is not None:
            stamp_ns += 1
        name = f"{involved['name']}.{stamp_ns:x}"
        event: dict[str, Any] = {"apiVersion": "v1", "kind": "Event", "metadata": self.store.new_meta(name, namespace),
                                 "involvedObject": involved, "reason": reason, "message": message, "type": etype}
        if action is None:
            stamp = now_time()
            source = {"component": component}
            if host:
                source["host"] = host
            event.update({"source": source, "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
                          "eventTime": None, "reportingComponent": component, "reportingInstance": host or ""})
        else:
            event.update({"source": {}, "firstTimestamp": None, "lastTimestamp": None, "eventTime": now_micro(),
                          "action": action, "reportingComponent": component,
                          "reportingInstance": f"{component}-{host or 'control-plane'}"})
        self.store.put("events", event)

    def expire(self) -> None:
        """Events past the TTL since their last write are gone (etcd's lease on each one expired)."""
        limit = self.clock.real(self.event_ttl)
        now = self.clock.now()
        for key, written in list(self._writes.items()):
            if now - written >= limit:
                del self._writes[key]
                self.store.remove("events", key)

    def node_ref(self, name: str) -> dict[str, Any]:
        node = self.store.node(name)
        return {"kind": "Node", "name": name, "uid": node["metadata"]["uid"], "apiVersion": "v1"}
