"""kube-scheduler of the in-memory API: which nodes a pod may land on (taints, readiness,
NodeResourcesFit), the pick among them (TaintToleration, then spreading a controller's pods), the
binding and its Event, or the pod left Pending with the scheduler's words.

``Scheduler`` is handed the store (whose node writes drop its fit cache), the pod index, the nodes'
hidden state, the recorder, the sim (timeline) and ``start(pod)``: the kubelet of the node it bound
the pod to starts it.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

from .kube_helpers import _condition, now_time, tolerates
from .kube_hidden import NodeState
from .kube_recorder import Recorder, pod_ref
from .kube_requests import fits, insufficient, pod_requests
from .kube_resources import MIRROR_ANNOTATION, UNSCHEDULABLE_TAINT
from .kube_store import Key, ObjectStore, PodIndex


class Scheduler:
    """kube-scheduler's filters, scores and binding."""

    def __init__(self, store: ObjectStore, pod_index: PodIndex, nodes: dict[str, NodeState], recorder: Recorder,
                 sim: Any, cluster_id: str, *, start: Callable[[dict[str, Any]], None]) -> None:
        self.store = store
        self.pod_index = pod_index
        self.nodes = nodes
        self.recorder = recorder
        self.sim = sim
        self.cluster_id = cluster_id
        self.start = start
        # Nodes a pod with given tolerations may land on; dropped whenever any node changes.
        self._fit_cache: dict[str, list[str]] = {}
        store.listen(self._changed)

    def _changed(self, plural: str, event: str, key: Key, obj: dict[str, Any]) -> None:
        if plural == "nodes":
            self._fit_cache.clear()

    def schedulable(self, pod: dict[str, Any], node_name: str) -> bool:
        node = self.store.node(node_name)
        if self.nodes[node_name].ready != "True":
            return False
        tolerations = pod["spec"].get("tolerations") or []
        if node["spec"].get("unschedulable") and not tolerates(
                tolerations, {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}):
            return False
        for taint in node["spec"].get("taints") or []:
            if taint["effect"] in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
                return False
        return True

    def _pick_node(self, pod: dict[str, Any], owner: Optional[tuple[str, str, str]]) -> Optional[str]:
        signature = json.dumps(pod["spec"].get("tolerations") or [], sort_keys=True)
        candidates = self._fit_cache.get(signature)
        if candidates is None:
            candidates = [n for n in sorted(self.nodes) if self.schedulable(pod, n)]
            self._fit_cache[signature] = candidates
        if any(pod_requests(pod)):
            # NodeResourcesFit: a pod with requests only where they fit (not cached: it changes with each pod).
            candidates = [n for n in candidates if fits(self.store, self.pod_index, pod, n)]
        if not candidates:
            return None
        pods = self.store.objects["pods"]
        same: dict[str, int] = {}
        for key in self.pod_index.keys_of(owner) if owner is not None else ():
            if "deletionTimestamp" not in pods[key]["metadata"]:
                node = self.pod_index.node_of(key)
                if node:
                    same[node] = same.get(node, 0) + 1

        tolerations = pod["spec"].get("tolerations") or []

        def score(node: str) -> tuple[int, int, int, str]:
            # kube-scheduler's TaintToleration score: fewer PreferNoSchedule taints the pod does
            # not tolerate is better. It comes first here: the real scheduler weighs it (weight 3)
            # against its other scores, and the only other one cks-sim models, spreading a
            # controller's pods (PodTopologySpread, weight 2), rarely outweighs it.
            return (self._intolerable_soft_taints(node, tolerations), same.get(node, 0),
                    self.pod_index.count_on(node), node)

        return min(candidates, key=score)

    def _intolerable_soft_taints(self, node_name: str, tolerations: list[dict[str, Any]]) -> int:
        node = self.store.node(node_name)
        return sum(1 for taint in node["spec"].get("taints") or []
                   if taint.get("effect") == "PreferNoSchedule" and not tolerates(tolerations, taint))

    def place(self, pod: dict[str, Any], node: Optional[str]) -> None:
        """Bind a new pod to ``node`` (or the scheduler's pick) and start it, or leave it Pending."""
        if node is None:
            node = self._pick_node(pod, self.pod_index.owner(pod))
        status = pod["status"]
        if node is None:
            if any(c["type"] == "PodScheduled" and c["status"] == "False" for c in status.get("conditions", [])):
                return  # still unschedulable: nothing new to write
            total = len(self.nodes)
            open_nodes = [n for n in sorted(self.nodes) if self.schedulable(pod, n)]
            why = insufficient(self.store, self.pod_index, pod, open_nodes) if open_nodes and any(pod_requests(pod)) else ""
            closed = total - len(open_nodes) if why else total
            reasons = ", ".join(r for r in (why, f"{closed} node(s) were unschedulable or not ready" if closed else "") if r)
            status["conditions"] = [_condition(
                "PodScheduled", "False", "Unschedulable",
                f"0/{total} nodes are available: {reasons}. "
                "preemption: 0/{0} nodes are available: {0} Preemption is not helpful for scheduling.".format(total))]
            self.store.put("pods", pod)
            return
        pod["spec"]["nodeName"] = node
        if self.recorder.recording and MIRROR_ANNOTATION not in (pod["metadata"].get("annotations") or {}):
            # kube-scheduler's binding, recorded through the events.k8s.io recorder (schedule_one.go).
            self.recorder.record(pod["metadata"]["namespace"], pod_ref(pod), "Normal", "Scheduled",
                                 f"Successfully assigned {pod['metadata']['namespace']}/{pod['metadata']['name']} to {node}",
                                 "default-scheduler", action="Binding")
        if self.recorder.recording:
            owner = next((o for o in pod["metadata"].get("ownerReferences") or [] if o.get("controller")), None)
            self.sim.timeline.add(cluster=self.cluster_id, node=node, event="scheduled",
                                  pod=f"{pod['metadata']['namespace']}/{pod['metadata']['name']}",
                                  uid=pod["metadata"]["uid"],
                                  owner=f"{owner['kind']}/{owner['name']}" if owner else None)
        state = self.nodes[node]
        status.update({
            "phase": "Pending", "hostIP": state.ip, "hostIPs": [{"ip": state.ip}],
            "startTime": now_time(),
        })
        c = pod["spec"]["containers"][0]
        status["conditions"] = [
            _condition("PodReadyToStartContainers", "False"),
            _condition("Initialized", "True"),
            _condition("Ready", "False", "ContainersNotReady", f"containers with unready status: [{c['name']}]"),
            _condition("ContainersReady", "False", "ContainersNotReady",
                       f"containers with unready status: [{c['name']}]"),
            _condition("PodScheduled", "True"),
        ]
        status["containerStatuses"] = [{
            "name": c["name"], "image": c["image"], "imageID": "", "ready": False, "restartCount": 0,
            "started": False, "state": {"waiting": {"reason": "ContainerCreating"}},
        }]
        self.store.put("pods", pod)
        if state.kubelet_posting:
            self.start(pod)
