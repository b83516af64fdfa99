"""Pods created through the API: admission defaults, the kubelet running their containers
(kube_run.py), their end, and the logs it keeps.

``ClientPods`` is written against the small ``kube_cluster_api.ClusterApi``; it is handed the
nodes' hidden state, the lock the containers' threads take to write their end, and the
scheduler's ``place(pod, None)`` and the kubelet's ``schedule_start(pod)``.
"""

from __future__ import annotations

import copy
import threading
from typing import Any, Callable, Optional

from . import kube_run
from .kube_cluster_api import ClusterApi
from .kube_helpers import _condition, now_time
from .kube_hidden import NodeState
from .kube_resources import (
    NOT_READY_TAINT,
    UNREACHABLE_TAINT,
)


class ClientPods:
    """Pods a client created, run by the kubelet."""

    def __init__(self, api: ClusterApi, nodes: dict[str, NodeState], lock: threading.RLock, *,
                 place: Callable[[dict[str, Any], Optional[str]], None],
                 schedule_start: Callable[[dict[str, Any]], None]) -> None:
        self.api = api
        self.nodes = nodes
        self.place = place
        self.schedule_start = schedule_start
        self._uids: set[str] = set()
        self.runs = kube_run.PodRuns(lock)

    def owns(self, uid: str) -> bool:
        return uid in self._uids

    def forget(self, uid: str) -> None:
        """The pod is gone: its containers' record and logs go with it."""
        self._uids.discard(uid)
        self.runs.forget(uid)

    def create(self, pod: dict[str, Any]) -> dict[str, Any]:
        kube_run.apply_defaults(pod)
        tolerations = pod["spec"].setdefault("tolerations", [])
        # The DefaultTolerationSeconds admission plugin, on in every API server by default.
        for key in (NOT_READY_TAINT, UNREACHABLE_TAINT):
            if not any(t.get("key") == key and t.get("effect") in (None, "", "NoExecute") for t in tolerations):
                tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
        self.api.put("pods", pod)
        self._uids.add(pod["metadata"]["uid"])
        node = pod["spec"].get("nodeName")
        if node is None:
            self.place(pod, None)
        elif node in self.nodes:
            # No scheduler: the named node's kubelet sees the pod, if it runs.
            state = self.nodes[node]
            pod["status"].update({"hostIP": state.ip, "hostIPs": [{"ip": state.ip}]})
            self.api.put("pods", pod)
            if state.kubelet_posting:
                self.schedule_start(pod)
        return copy.deepcopy(pod)

    def run(self, pod: dict[str, Any]) -> None:
        """The kubelet's sync of an API-created pod: admit, ensure images, run the containers."""
        status = pod["status"]
        if status["phase"] in ("Succeeded", "Failed") or status.get("containerStatuses") and any(
                "running" in cs["state"] for cs in status["containerStatuses"]):
            return  # ended, or running already: a new boot does not run a one-shot pod again
        node = self.api.read("nodes", "", pod["spec"]["nodeName"]) or {}
        stamp = now_time()
        status.setdefault("startTime", stamp)
        refusal = kube_run.admission_refusal(pod, node)
        if refusal is not None:
            status.update({"phase": "Failed", "reason": refusal[0], "message": refusal[1]})
            self.api.put("pods", pod)
            return
        containers = pod["spec"]["containers"]
        missing = [kube_run.image_refusal(c, node) for c in containers]
        status["conditions"] = [_condition("PodScheduled", "True"), _condition("Initialized", "True"),
                                _condition("PodReadyToStartContainers", "True")]
        if any(missing):
            status["containerStatuses"] = [
                kube_run.waiting_status(c, *m) if m else kube_run.waiting_status(c, "ContainerCreating")
                for c, m in zip(containers, missing, strict=True)]
            self.api.put("pods", pod)
            return
        status["phase"] = "Running"
        status["containerStatuses"] = [dict(kube_run.waiting_status(c, "ContainerCreating"),
                                            started=True, state={"running": {"startedAt": stamp}})
                                       for c in containers]
        self.api.put("pods", pod)
        if all(kube_run.keeps_running(c) for c in containers):
            return  # `sleep`: running until the pod is deleted
        key, uid = (pod["metadata"]["namespace"], pod["metadata"]["name"]), pod["metadata"]["uid"]
        self.runs.start(uid, containers, lambda results: self._runs_finished(key, uid, stamp, results), now_time)

    def _runs_finished(self, key: tuple[str, str], uid: str, started: str, results: list[tuple[int, str]]) -> None:
        pod = self.api.read("pods", *key)
        if pod is None or pod["metadata"]["uid"] != uid:
            return  # deleted while it ran
        finished = now_time()
        containers = pod["spec"]["containers"]
        statuses = [kube_run.terminated_status(c, code, started, finished, error)
                    for c, (code, error) in zip(containers, results, strict=True)]
        failed = any(code != 0 for code, _error in results)
        policy = pod["spec"].get("restartPolicy")
        status = pod["status"]
        if policy == "Always" or (policy == "OnFailure" and failed):
            # The kubelet would start them again after a back-off; the sim lets them wait there.
            for cs in statuses:
                if policy == "Always" or cs["state"]["terminated"]["exitCode"] != 0:
                    cs["lastState"], cs["restartCount"] = cs["state"], 1
                    cs["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}
            status["containerStatuses"] = statuses
        else:
            status["containerStatuses"] = statuses
            status["phase"] = "Failed" if failed else "Succeeded"
            status["conditions"] = [_condition("PodScheduled", "True"), _condition("Initialized", "True"),
                                    _condition("PodReadyToStartContainers", "False"),
                                    _condition("Ready", "False", "PodCompleted"),
                                    _condition("ContainersReady", "False", "PodCompleted")]
        self.api.put("pods", pod)

    def container_log(self, namespace: str, name: str, container: str) -> Optional[str]:
        """What the kubelet kept of a container's output; None when it has not run."""
        pod = self.api.read("pods", namespace, name)
        if pod is None:
            return None
        return self.runs.logs.get(pod["metadata"]["uid"], {}).get(container)
