"""The node-lifecycle controller of the in-memory API (kube-controller-manager's on a real cluster):
a node whose kubelet stopped posting is marked Unknown once the node-monitor grace period passes.

It is told by the kubelets (``kube_nodes.Kubelets``) when one stops posting (its VM powered off)
and when one posts again (a boot, or a stale Ready shown after a start), the way the real controller
sees the Node's heartbeats stop and resume. On the real backend kube-controller-manager does this
job itself (its ``--node-monitor-grace-period`` set by ``real_kube``), so the kubelets there are
handed ``SILENT_CONTROLLER``, which does nothing.

When the grace period passes (pkg/controller/nodelifecycle/node_lifecycle_controller.go
tryUpdateNodeHealth): every condition the kubelet owned becomes Unknown, reason NodeStatusUnknown,
message "Kubelet stopped posting node status."; MarkPodsNotReady flips the Ready condition of the
node's pods, recording NodeNotReady on each; the node's NodeNotReady Event comes from
node-controller.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Protocol

from .kube_cluster_api import ClusterApi
from .kube_helpers import _set_condition, mirror_lifecycle_taints, node_ready, now_time, pod_ready
from .kube_hidden import NodeState
from .kube_pods import PodLifecycle
from .kube_recorder import Recorder, pod_ref


class NodeHeartbeats(Protocol):
    """What the kubelets tell the node-lifecycle controller about their nodes' heartbeats."""

    def stopped_posting(self, name: str) -> None:
        """The node's kubelet went silent (its VM stopped)."""

    def posting(self, name: str) -> None:
        """The node's kubelet posts its status again."""

    def starts_silent(self, node: dict[str, Any]) -> None:
        """A Node about to be registered whose VM is off: what the controller shows of it."""

    def status_posted(self, node: dict[str, Any]) -> None:
        """A kubelet's Node about to be written: what the controller makes of its conditions."""


class _Silent:
    """The kubelets' heartbeats told to no one: a real kube-controller-manager watches them itself."""

    def stopped_posting(self, name: str) -> None:
        pass

    def posting(self, name: str) -> None:
        pass

    def starts_silent(self, node: dict[str, Any]) -> None:
        pass

    def status_posted(self, node: dict[str, Any]) -> None:
        pass


SILENT_CONTROLLER: NodeHeartbeats = _Silent()


def unknown_conditions(conds: list[dict[str, Any]]) -> None:
    """The kubelet's conditions as the controller marks them: Unknown, the last heartbeat kept and
    the transition stamped now (kept if it was Unknown already)."""
    stamp = now_time()
    for ctype in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready"):
        old = next((c for c in conds if c["type"] == ctype), {})
        new = {
            "type": ctype, "status": "Unknown", "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status.",
            "lastHeartbeatTime": old.get("lastHeartbeatTime", stamp),
            "lastTransitionTime": stamp,
        }
        if old.get("status") == "Unknown":
            new["lastTransitionTime"] = old.get("lastTransitionTime", stamp)
        _set_condition(conds, new)


class NodeLifecycle:
    """The node-monitor grace period of each silent node, and what the controller does when it passes."""

    def __init__(self, api: ClusterApi, nodes: dict[str, NodeState], recorder: Recorder, pods: PodLifecycle,
                 sim: Any, cluster_id: str, *, after_change: Callable[[], None]) -> None:
        self.api = api
        self.nodes = nodes
        self.recorder = recorder
        self.pods = pods
        self.sim = sim
        self.cluster_id = cluster_id
        self.after_change = after_change
        self._grace: dict[str, Optional[int]] = {}  # node -> its grace timer

    def stopped_posting(self, name: str) -> None:
        if self._grace.get(name) is None:
            # Ready stays as it was until the node-monitor grace period passes without a post.
            self._grace[name] = self.sim.scheduler.schedule(self.sim.delay("notready_grace"), self._expired, name)

    def posting(self, name: str) -> None:
        self.sim.scheduler.cancel(self._grace.pop(name, None))

    def starts_silent(self, node: dict[str, Any]) -> None:
        unknown_conditions(node["status"]["conditions"])

    def status_posted(self, node: dict[str, Any]) -> None:
        # The lifecycle taints follow Ready (and the cordon) at once, where the real controller takes a moment.
        mirror_lifecycle_taints(node)

    def _expired(self, name: str) -> None:
        self._grace.pop(name, None)
        state = self.nodes[name]
        if state.kubelet_posting:
            return
        node = self.api.read("nodes", "", name)
        if node is None:
            return
        unknown_conditions(node["status"]["conditions"])
        mirror_lifecycle_taints(node)
        state.ready = node_ready(node)
        self.api.put("nodes", node)
        # MarkPodsNotReady: the controller flips the Ready condition of the node's pods.
        for pod in self.pods.on_node(name):
            if pod_ready(pod):
                self.pods.set_ready(pod, False)
                # controller/util/node MarkPodsNotReady records this on each pod it flips.
                self.recorder.record(pod["metadata"]["namespace"], pod_ref(pod), "Warning", "NodeNotReady",
                                     "Node is not ready", "node-controller")
        self.recorder.record("default", self.recorder.node_ref(name), "Normal", "NodeNotReady",
                             f"Node {name} status is now: NodeNotReady", "node-controller")
        self.sim.timeline.add(cluster=self.cluster_id, node=name, event="notready", ready="Unknown")
        self.after_change()
