"""A pod's life on its node, as the kubelet shows it: the start once bound, readiness (and the
readiness probe of a kube-apiserver whose node stopped serving it), restarts on a new boot,
graceful termination and the confirmation that removes the pod.

``PodLifecycle`` is an actor written against the small ``kube_cluster_api.ClusterApi``; it is
handed the nodes' hidden state, the recorder, the sim (timers, faults, timeline), the cluster's
random source (pod IPs, container IDs), ``pods_on(node)`` (a node's pods), the pods clients
created (``ClientPods``, run by the kubelet; None on a real API server, whose pods are all started
alike), and what the controllers do: ``after_change()``
once a pod started or went, ``removed(pod)`` as a pod goes.
"""

from __future__ import annotations

import hashlib
import random
from typing import TYPE_CHECKING, Any, Callable, Optional

from .kube_api_pods import ClientPods
from .kube_cluster_api import ClusterApi, Key
from .kube_helpers import _condition, _set_condition, is_api_server_of, now_time, time_after
from .kube_hidden import NodeState
from .kube_recorder import pod_ref

if TYPE_CHECKING:  # kube_nodes imports the node lifecycle, which imports this
    from .kube_nodes import NodeEvents


class PodLifecycle:
    """The kubelet's side of pods: start, readiness, restart, termination, removal."""

    def __init__(self, api: ClusterApi, nodes: dict[str, NodeState], recorder: NodeEvents, sim: Any, cluster_id: str,
                 rng: random.Random, client_pods: Optional[ClientPods], *, pods_on: Callable[[str], list[dict[str, Any]]],
                 after_change: Callable[[], None], removed: Callable[[dict[str, Any]], None]) -> None:
        self.api = api
        self.nodes = nodes
        self.recorder = recorder
        self.sim = sim
        self.cluster_id = cluster_id
        self.rng = rng
        self.client_pods = client_pods
        self.on_node = pods_on
        self.after_change = after_change
        self.removed = removed
        self._pod_timers: dict[Key, int] = {}
        self._awaiting_kubelet: set[Key] = set()  # terminating pods on a dead node
        # Control nodes whose kube-apiserver does not serve: the kubelet's readiness probe of it fails.
        self.api_servers_down: set[str] = set()

    def schedule_start(self, pod: dict[str, Any]) -> None:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        self.sim.scheduler.cancel(self._pod_timers.pop(key, None))
        self._pod_timers[key] = self.sim.scheduler.schedule(
            self.sim.delay("pod_start"), self._pod_started, key, pod["metadata"]["uid"])

    def timer_pending(self, key: Key) -> bool:
        """Whether the pod's start or the confirmation of its kill is due."""
        return key in self._pod_timers

    def _pod_started(self, key: tuple[str, str], uid: str) -> None:
        self._pod_timers.pop(key, None)
        pod = self.api.read("pods", *key)
        if pod is None or pod["metadata"]["uid"] != uid or "deletionTimestamp" in pod["metadata"]:
            return
        node = pod["spec"].get("nodeName")
        if not node or node not in self.nodes or not self.nodes[node].kubelet_posting:
            return
        if self.client_pods is not None and self.client_pods.owns(uid):
            self.client_pods.run(pod)
            return
        self.mark_running(pod)
        self.api.put("pods", pod)  # the kubelet's one status write of the start
        self.after_change()

    def _pod_ip(self, pod: dict[str, Any]) -> str:
        node = pod["spec"]["nodeName"]
        if pod["spec"].get("hostNetwork"):
            return self.nodes[node].ip
        return f"{self.nodes[node].pod_cidr_prefix}.{self.rng.randint(2, 254)}"

    def mark_running(self, pod: dict[str, Any]) -> None:
        """The pod's status Running (and Ready on a Ready node), not yet written."""
        ready = self.nodes[pod["spec"]["nodeName"]].ready == "True"
        stamp = now_time()
        status = pod["status"]
        status["phase"] = "Running"
        status.setdefault("startTime", stamp)
        ip = status.get("podIP") or self._pod_ip(pod)
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]
        conditions = status.setdefault("conditions", [])
        for kind in ("PodReadyToStartContainers", "Initialized", "PodScheduled"):
            _set_condition(conditions, _condition(kind, "True", when=stamp))
        if "containerStatuses" not in status:
            # A pod the real scheduler bound has none yet: its kubelet writes them.
            status["containerStatuses"] = [
                {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False, "restartCount": 0,
                 "started": False, "state": {"waiting": {"reason": "ContainerCreating"}}}
                for c in pod["spec"].get("containers") or []]
            state = self.nodes[pod["spec"]["nodeName"]]
            status.setdefault("hostIP", state.ip)
            status.setdefault("hostIPs", [{"ip": state.ip}])
        self._mark_ready(pod, ready)
        for cs in status.get("containerStatuses", []):
            cs.update({"started": True, "state": {"running": {"startedAt": stamp}},
                       "containerID": f"containerd://{self.rng.getrandbits(256):064x}",
                       "imageID": cs["image"].split(":")[0] + "@sha256:" + hashlib.sha256(
                           cs["image"].encode()).hexdigest()})
            if cs["restartCount"] and not cs.get("lastState"):  # a real API server shows none as {}
                cs["lastState"] = {"terminated": {"exitCode": 255, "reason": "Unknown",
                                                  "startedAt": stamp, "finishedAt": stamp}}

    def set_ready(self, pod: dict[str, Any], ready: bool) -> None:
        """The pod's Ready (its containers' too) as the kubelet's probes find it, written."""
        self._mark_ready(pod, ready)
        self.api.put("pods", pod)

    def _mark_ready(self, pod: dict[str, Any], ready: bool) -> None:
        if ready and self.probe_fails(pod):
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

    def restart(self, pod: dict[str, Any], ready_node: bool) -> None:
        """A node's new boot: the kubelet recreates the pod's containers (same pod, same UID). A container
        that had not run again since the last boot is not counted again (the real backend runs a boot
        again whose requests failed: its restarts count once)."""
        if pod["status"]["phase"] == "Running":
            for cs in pod["status"].get("containerStatuses", []):
                if "running" in (cs.get("state") or {}):
                    cs["restartCount"] += 1
                cs["started"] = False
                cs["state"] = {"waiting": {"reason": "ContainerCreating"}}
            self.set_ready(pod, False)
        if ready_node:
            self.schedule_start(pod)

    def begin_termination(self, pod: dict[str, Any], grace: Optional[int]) -> None:
        """Graceful deletion: the API's part (the deletion timestamp, which a real API server sets
        itself), then the kubelet's (``kill``), which removes the pod later."""
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        if grace is None:
            grace = int(pod["spec"].get("terminationGracePeriodSeconds", 30))
        node = pod["spec"].get("nodeName")
        if not node or pod["status"]["phase"] in ("Pending",) and not pod["status"].get("containerStatuses"):
            self.remove(key, pod["metadata"]["uid"])
            return
        if pod["status"]["phase"] in ("Succeeded", "Failed"):
            # CheckGracefulDelete (pkg/registry/core/pod/strategy.go): a terminal pod goes at once.
            self.remove(key, pod["metadata"]["uid"])
            return
        pod["metadata"]["deletionTimestamp"] = time_after(grace)
        pod["metadata"]["deletionGracePeriodSeconds"] = grace
        self.api.put("pods", pod)
        self.kill(pod, grace)

    def kill(self, pod: dict[str, Any], grace: int) -> None:
        """The kubelet's side of a graceful deletion the API server began (the deletion timestamp set):
        its containers stopped within their grace, then the kill confirmed."""
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        node = str(pod["spec"].get("nodeName"))
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
        pod = self.api.read("pods", *key)
        if pod is None or pod["metadata"]["uid"] != uid:
            return
        node = pod["spec"].get("nodeName")
        if node and not self.nodes[node].kubelet_posting:
            # Nobody confirms the kill on a dead node: the pod stays Terminating until it is back.
            self._awaiting_kubelet.add(key)
            return
        self.remove(key, uid)
        self.after_change()

    def remove(self, key: Key, uid: str) -> None:
        """The kubelet confirmed the pod's containers stopped: the pod goes, its controller reacts."""
        pod = self.api.read("pods", *key)
        if pod is None or pod["metadata"]["uid"] != uid:
            return
        if self.client_pods is not None:
            self.client_pods.forget(uid)
        self.api.remove("pods", key)
        self.sim.scheduler.cancel(self._pod_timers.pop(key, None))
        self.sim.timeline.add(cluster=self.cluster_id, node=pod["spec"].get("nodeName"), event="pod_deleted",
                              pod=f"{key[0]}/{key[1]}", uid=uid)
        self.removed(pod)

    def confirm_kill(self, key: Key, uid: str) -> None:
        """The node's kubelet (back, or restarted) confirms a terminating pod's containers stopped."""
        self._awaiting_kubelet.discard(key)
        self.remove(key, uid)

    def awaits_kubelet(self, key: Key) -> bool:
        """Whether the pod's termination waits for its node's kubelet to confirm it."""
        return key in self._awaiting_kubelet

    def settled(self, pod: dict[str, Any]) -> None:
        """The starting state: a pod already placed on a running node is Running, with no start pending."""
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        self.sim.scheduler.cancel(self._pod_timers.pop(key, None))
        self.mark_running(pod)
        self.api.put("pods", pod)

    def set_api_server_serving(self, name: str, serving: bool) -> None:
        """The node's kube-apiserver stops (or starts again) serving, the node itself still Ready.

        kubeadm's manifest probes it (cmd/kubeadm/app/phases/controlplane/manifests.go: readinessProbe
        httpGet /readyz on port 6443); the kubelet turns the mirror pod Ready=False while the probe
        fails (ContainersNotReady) and back once it passes. Lasts across boots until set again.
        """
        if serving:
            self.api_servers_down.discard(name)
        else:
            self.api_servers_down.add(name)
        for pod in self.api.select("pods", "kube-system"):
            if is_api_server_of(pod, name) and pod["status"].get("phase") == "Running":
                self.set_ready(pod, self.nodes[name].ready == "True")

    def probe_fails(self, pod: dict[str, Any]) -> bool:
        """Whether the pod is a kube-apiserver whose readiness probe fails (its node's API server is down)."""
        node = str(pod["spec"].get("nodeName"))
        return node in self.api_servers_down and is_api_server_of(pod, node)
