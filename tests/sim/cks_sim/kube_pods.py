"""A pod's life after its controller created it: the scheduler's pick and binding, the kubelet's
start, readiness and restarts, graceful termination and removal.

A mixin of ``KubeWorld`` (kube.py): methods only; the state is ``kube_state.KubeState``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Optional

from .kube_contract import KubeConcern
from .kube_helpers import _condition, _set_condition, now_time, time_after, tolerates
from .kube_recorder import pod_ref
from .kube_requests import fits, insufficient, pod_requests
from .kube_resources import (
    MIRROR_ANNOTATION,
    UNSCHEDULABLE_TAINT,
)


class KubePods(KubeConcern):
    """Scheduling, starting, readiness and termination of pods."""

    def _pods_on(self, node: str) -> list[dict[str, Any]]:
        return self.pod_index.pods_on(node)

    def pods_on_node(self, node: str) -> list[dict[str, Any]]:
        """The stored pods bound to ``node`` (references: serialise under sim.lock, do not change)."""
        return self._pods_on(node)

    def _schedulable(self, pod: dict[str, Any], node_name: str) -> bool:
        node = self.store.node(node_name)
        if self.node_ready_status(node_name) != "True":
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
            candidates = [n for n in sorted(self.nodes) if self._schedulable(pod, n)]
            self._fit_cache[signature] = candidates
        if any(pod_requests(pod)):
            # NodeResourcesFit: a pod with requests only where they fit (not cached: it changes with each pod).
            candidates = [n for n in candidates if fits(self, pod, n)]
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

    def _place(self, pod: dict[str, Any], node: Optional[str]) -> None:
        """Bind a new pod to ``node`` (or the scheduler's pick) and start it, or leave it Pending."""
        if node is None:
            node = self._pick_node(pod, self.pod_index.owner(pod))
        status = pod["status"]
        if node is None:
            if any(c["type"] == "PodScheduled" and c["status"] == "False" for c in status.get("conditions", [])):
                return  # still unschedulable: nothing new to write
            total = len(self.nodes)
            open_nodes = [n for n in sorted(self.nodes) if self._schedulable(pod, n)]
            why = insufficient(self, pod, open_nodes) if open_nodes and any(pod_requests(pod)) else ""
            closed = total - len(open_nodes) if why else total
            reasons = ", ".join(r for r in (why, f"{closed} node(s) were unschedulable or not ready" if closed else "") if r)
            status["conditions"] = [_condition(
                "PodScheduled", "False", "Unschedulable",
                f"0/{total} nodes are available: {reasons}. "
                "preemption: 0/{0} nodes are available: {0} Preemption is not helpful for scheduling.".format(total))]
            self.store.put("pods", pod)
            return
        pod["spec"]["nodeName"] = node
        if self._built and MIRROR_ANNOTATION not in (pod["metadata"].get("annotations") or {}):
            # kube-scheduler's binding, recorded through the events.k8s.io recorder (schedule_one.go).
            self.recorder.record(pod["metadata"]["namespace"], pod_ref(pod), "Normal", "Scheduled",
                        f"Successfully assigned {pod['metadata']['namespace']}/{pod['metadata']['name']} to {node}",
                        "default-scheduler", action="Binding")
        if self._built:
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
            self._schedule_start(pod)

    def _schedule_start(self, pod: dict[str, Any]) -> None:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        self.sim.scheduler.cancel(self._pod_timers.pop(key, None))
        self._pod_timers[key] = self.sim.scheduler.schedule(
            self.sim.delay("pod_start"), self._pod_started, key, pod["metadata"]["uid"])

    def _pod_started(self, key: tuple[str, str], uid: str) -> None:
        self._pod_timers.pop(key, None)
        pod = self.store.objects["pods"].get(key)
        if pod is None or pod["metadata"]["uid"] != uid or "deletionTimestamp" in pod["metadata"]:
            return
        node = pod["spec"].get("nodeName")
        if not node or node not in self.nodes or not self.nodes[node].kubelet_posting:
            return
        if self.client_pods.owns(uid):
            self.client_pods.run(pod)
            return
        self._mark_pod_running(pod)
        self.store.put("pods", pod)
        self._after_change()

    def _pod_ip(self, pod: dict[str, Any]) -> str:
        node = pod["spec"]["nodeName"]
        if pod["spec"].get("hostNetwork"):
            return self.nodes[node].ip
        return f"10.244.{self.nodes[node].index}.{self.rng.randint(2, 254)}"

    def _mark_pod_running(self, pod: dict[str, Any]) -> None:
        ready = self.node_ready_status(pod["spec"]["nodeName"]) == "True"
        stamp = now_time()
        status = pod["status"]
        status["phase"] = "Running"
        status.setdefault("startTime", stamp)
        ip = status.get("podIP") or self._pod_ip(pod)
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]
        for cond in status.get("conditions", []):
            if cond["type"] in ("PodReadyToStartContainers", "Initialized", "PodScheduled"):
                _set_condition(status["conditions"], _condition(cond["type"], "True", when=stamp))
        self._set_pod_ready(pod, ready)
        for cs in status.get("containerStatuses", []):
            cs.update({"started": True, "state": {"running": {"startedAt": stamp}},
                       "containerID": f"containerd://{self.rng.getrandbits(256):064x}",
                       "imageID": cs["image"].split(":")[0] + "@sha256:" + hashlib.sha256(
                           cs["image"].encode()).hexdigest()})
            if cs["restartCount"] and "lastState" not in cs:
                cs["lastState"] = {"terminated": {"exitCode": 255, "reason": "Unknown",
                                                  "startedAt": stamp, "finishedAt": stamp}}

    def _set_pod_ready(self, pod: dict[str, Any], ready: bool) -> None:
        if ready and self.static_pods.probe_fails(pod):
            ready = False
        status = pod["status"]
        conds = status.setdefault("conditions", [])
        names = ", ".join(c["name"] for c in pod["spec"]["containers"])
        if ready:
            _set_condition(conds, _condition("Ready", "True"))
            _set_condition(conds, _condition("ContainersReady", "True"))
        else:
            _set_condition(conds, _condition("Ready", "False", "ContainersNotReady",
                                             f"containers with unready status: [{names}]"))
            _set_condition(conds, _condition("ContainersReady", "False", "ContainersNotReady",
                                             f"containers with unready status: [{names}]"))
        for cs in status.get("containerStatuses", []):
            cs["ready"] = ready
        self.store.put("pods", pod)

    def _restart_pod(self, pod: dict[str, Any], ready_node: bool) -> None:
        """A node's new boot: the kubelet recreates the pod's containers (same pod, same UID)."""
        if pod["status"]["phase"] == "Running":
            for cs in pod["status"].get("containerStatuses", []):
                cs["restartCount"] += 1
                cs["started"] = False
                cs["state"] = {"waiting": {"reason": "ContainerCreating"}}
            self._set_pod_ready(pod, False)
        if ready_node:
            self._schedule_start(pod)

    def _begin_termination(self, pod: dict[str, Any], grace: Optional[int]) -> None:
        """Graceful deletion: set the deletion timestamp; the kubelet removes the pod later."""
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        if grace is None:
            grace = int(pod["spec"].get("terminationGracePeriodSeconds", 30))
        node = pod["spec"].get("nodeName")
        if not node or pod["status"]["phase"] in ("Pending",) and not pod["status"].get("containerStatuses"):
            self._remove_pod(key, pod["metadata"]["uid"])
            return
        if pod["status"]["phase"] in ("Succeeded", "Failed"):
            # CheckGracefulDelete (pkg/registry/core/pod/strategy.go): a terminal pod goes at once.
            self._remove_pod(key, pod["metadata"]["uid"])
            return
        pod["metadata"]["deletionTimestamp"] = time_after(grace)
        pod["metadata"]["deletionGracePeriodSeconds"] = grace
        self.store.put("pods", pod)
        if self.nodes[node].kubelet_posting:
            # kuberuntime_container.go killContainer: one Killing event per running container.
            for container in pod["spec"].get("containers") or []:
                self.recorder.record(pod["metadata"]["namespace"], pod_ref(pod, container["name"]), "Normal", "Killing",
                            f"Stopping container {container['name']}", "kubelet", node)
        slow = self.sim.faults.peek("slow_drain", node=node, cluster=self.cluster_id)
        if slow is not None:
            delay = self.sim.clock.real(float(slow.get("seconds", 60)))
        elif grace == 0:
            delay = 0.0
        else:
            delay = self.sim.delay("pod_termination")
        self.sim.scheduler.cancel(self._pod_timers.pop(key, None))
        self._pod_timers[key] = self.sim.scheduler.schedule(delay, self._termination_done, key,
                                                            pod["metadata"]["uid"])

    def _termination_done(self, key: tuple[str, str], uid: str) -> None:
        self._pod_timers.pop(key, None)
        pod = self.store.objects["pods"].get(key)
        if pod is None or pod["metadata"]["uid"] != uid:
            return
        node = pod["spec"].get("nodeName")
        if node and not self.nodes[node].kubelet_posting:
            # Nobody confirms the kill on a dead node: the pod stays Terminating until it is back.
            self._awaiting_kubelet.add(key)
            return
        self._remove_pod(key, uid)
        self._after_change()

    def _remove_pod(self, key: tuple[str, str], uid: str) -> None:
        pod = self.store.objects["pods"].get(key)
        if pod is None or pod["metadata"]["uid"] != uid:
            return
        owner = self.pod_index.owner(pod)
        self.client_pods.forget(uid)
        self.store.remove("pods", key)
        self.sim.scheduler.cancel(self._pod_timers.pop(key, None))
        self.sim.timeline.add(cluster=self.cluster_id, node=pod["spec"].get("nodeName"), event="pod_deleted",
                              pod=f"{key[0]}/{key[1]}", uid=uid)
        self._reconcile_all()
        wl = self.workloads.get(owner) if owner else None
        if wl is not None and wl.kind in ("Deployment", "StatefulSet"):
            if len(self._pods_of(wl)) < wl.replicas:
                self.sim.invariants.add(kind="pod_lost", cluster=self.cluster_id,
                                        pod=f"{key[0]}/{key[1]}", owner=f"{wl.kind}/{wl.name}")
