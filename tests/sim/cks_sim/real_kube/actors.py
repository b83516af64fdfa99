"""What the shared actors do not yet do on a real API server (``world.py`` drives them): the pods the
real scheduler bound to a booted node run (Running and Ready after the pod-start delay), a
terminating pod's deletion confirmed (grace 0) once its containers would have stopped, kubeadm's
static pods' mirror pods on control nodes (etcd, kube-apiserver, ...), and the spec's workloads as
an operator created them.

The kubelets themselves (registration, VM power, boots and boot IDs, Leases, the kubelet's Events)
are ``kube_nodes.Kubelets``, the in-memory world's actor, over ``cluster_api.RestClusterApi``.
``PodRunner`` reads the nodes' hidden state (``kube_hidden.NodeState``) they keep: which kubelet
posts, and its boot. Every API call happens on the actors' threads, never under ``sim.lock``.
"""

from __future__ import annotations

import functools
import hashlib
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..kube_helpers import now_micro, now_time
from ..kube_hidden import NodeState
from .api import ApiRefusal, KubeApi

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
#: ``timeline(event, **fields)``: what the actors did, for the sim's timeline.
Timeline = Callable[..., None]


@dataclass
class PodRunner:
    """The pods of every node's kubelet, ticking against one API server."""

    api: KubeApi
    timeline: Timeline
    version: str
    #: seconds: pod start, pod termination (the sim's timings in real seconds)
    pod_start: float
    pod_termination: float
    nodes: dict[str, NodeState] = field(default_factory=dict)
    etcd_servers: str = ""
    stacked_etcd: bool = False
    _pods_seen: dict[str, float] = field(default_factory=dict)  # pod uid -> when first seen waiting
    _started: dict[str, str] = field(default_factory=dict)  # pod uid -> the boot ID of the kubelet that started it
    #: the Nodes and Pods as the last tick read them (what the sim's snapshot shows)
    seen: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {"nodes": [], "pods": []})
    #: ``fan_out(calls)`` runs each call with a connection of its own (the world's threads: a thousand
    #: nodes' kubelets start their pods at once); None: one after the other on ``api``.
    fan_out: Optional[Callable[[list[Callable[[KubeApi], None]]], None]] = None

    def register_mirror_pods(self, name: str, api: Optional[KubeApi] = None) -> None:
        """A control node's mirror pods, as its kubelet posts them for kubeadm's static pods."""
        api = api or self.api
        node = self.nodes[name]
        node_uid = api.get(f"/api/v1/nodes/{name}")["metadata"]["uid"]
        for pod in self._mirror_pods(node, node_uid):
            api.create("/api/v1/namespaces/kube-system/pods", pod)

    def _mirror_pods(self, node: NodeState, node_uid: str) -> list[dict[str, Any]]:
        components = ["kube-apiserver", "kube-controller-manager", "kube-scheduler"]
        if self.stacked_etcd:
            components.insert(0, "etcd")
        pods = []
        for comp in components:
            config_hash = hashlib.md5(f"{comp}/{node.name}".encode()).hexdigest()
            annotations = {"kubernetes.io/config.hash": config_hash, MIRROR_ANNOTATION: config_hash,
                           "kubernetes.io/config.seen": now_micro(), "kubernetes.io/config.source": "file"}
            command = [comp]
            if comp == "kube-apiserver":
                # kubeadm's manifest: the flags that say where etcd is.
                command += [f"--advertise-address={node.ip}", f"--etcd-servers={self.etcd_servers}",
                            "--secure-port=6443"]
                if self.stacked_etcd:
                    command[2:2] = ["--etcd-cafile=/etc/kubernetes/pki/etcd/ca.crt",
                                    "--etcd-certfile=/etc/kubernetes/pki/apiserver-etcd-client.crt",
                                    "--etcd-keyfile=/etc/kubernetes/pki/apiserver-etcd-client.key"]
                annotations["kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"] = f"{node.ip}:6443"
            if comp == "etcd":
                annotations["kubeadm.kubernetes.io/etcd.advertise-client-urls"] = f"https://{node.ip}:2379"
            image = "registry.k8s.io/etcd:3.5.15-0" if comp == "etcd" else f"registry.k8s.io/{comp}:{self.version}"
            pods.append({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{comp}-{node.name}", "namespace": "kube-system", "annotations": annotations,
                             "labels": {"component": comp, "tier": "control-plane"},
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node.name,
                                                  "uid": node_uid, "controller": True}]},
                "spec": {"nodeName": node.name, "hostNetwork": True, "priorityClassName": "system-node-critical",
                         "priority": 2000001000, "tolerations": [{"operator": "Exists", "effect": "NoExecute"}],
                         "containers": [{"name": comp, "image": image, "command": command}]},
            })
        return pods

    # -- the pods' loop (the actors' thread) -------------------------------------------------------

    def tick(self) -> None:
        """The nodes' Ready as the API has it, the pods bound to booted nodes."""
        self._observe_nodes()
        self._run_pods(time.monotonic())

    def _observe_nodes(self) -> None:
        self.seen["nodes"] = self.api.list("/api/v1/nodes")
        for raw in self.seen["nodes"]:
            node = self.nodes.get(raw["metadata"]["name"])
            if node is None:
                continue
            ready = next((c["status"] for c in (raw.get("status") or {}).get("conditions") or []
                          if c.get("type") == "Ready"), "Unknown")
            if ready != node.ready and node.ready == "True":
                self.timeline("notready", node=node.name, ready=ready)
            node.ready = ready

    def _run_pods(self, now: float) -> None:
        self.seen["pods"] = self.api.list("/api/v1/pods")
        work: list[Callable[[KubeApi], None]] = []
        for pod in self.seen["pods"]:
            meta, spec = pod["metadata"], pod.get("spec") or {}
            node = self.nodes.get(spec.get("nodeName") or "")
            if node is None or not node.kubelet_posting:
                continue
            uid = meta["uid"]
            if meta.get("deletionTimestamp"):
                # The containers got their grace (the sim's pod termination time at most) and stopped.
                stop = min(float(meta.get("deletionGracePeriodSeconds") or 0), self.pod_termination)
                if now - self._pods_seen.setdefault(uid, now) >= stop:
                    work.append(functools.partial(self._confirm_deleted, pod))
            elif not (_running_and_ready(pod) and self._started.get(uid) == node.boot_id):
                if now - self._pods_seen.setdefault(uid, now) >= self.pod_start:
                    work.append(functools.partial(self._start, pod, node))
        if self.fan_out is not None:
            self.fan_out(work)
        else:
            for call in work:
                call(self.api)

    def _confirm_deleted(self, pod: dict[str, Any], api: KubeApi) -> None:
        meta = pod["metadata"]
        try:
            api.delete(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                       {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}})
        except ApiRefusal as refusal:
            if refusal.code not in (404, 409):  # gone already, or another pod of that name now
                raise
        self._pods_seen.pop(meta["uid"], None)
        self._started.pop(meta["uid"], None)
        self.timeline("pod_deleted", node=pod["spec"].get("nodeName"), pod=f"{meta['namespace']}/{meta['name']}",
                      uid=meta["uid"])

    def _start(self, pod: dict[str, Any], node: NodeState, api: KubeApi) -> None:
        now = now_time()
        containers = pod["spec"].get("containers") or []
        status = {
            "phase": "Running", "hostIP": node.ip, "hostIPs": [{"ip": node.ip}],
            "podIP": node.ip if pod["spec"].get("hostNetwork") else f"{node.pod_cidr_prefix}.{10 + len(self._pods_seen) % 200}",
            "startTime": now, "qosClass": "BestEffort",
            "conditions": [{"type": kind, "status": "True", "lastTransitionTime": now}
                           for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                                        "PodScheduled")],
            "containerStatuses": [{"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True,
                                   "restartCount": 0, "started": True,
                                   "containerID": f"containerd://{uuid.uuid4().hex}",
                                   "state": {"running": {"startedAt": now}}} for c in containers],
        }
        meta = pod["metadata"]
        try:
            api.patch(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status",
                      {"metadata": {"uid": meta["uid"]}, "status": status})
        except ApiRefusal as refusal:
            if refusal.code not in (404, 409):  # deleted meanwhile
                raise
            return
        # Which boot ran it: a pod Ready before its node restarted is started again after.
        self._started[meta["uid"]] = node.boot_id
        self._pods_seen.pop(meta["uid"], None)


def _running_and_ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return status.get("phase") == "Running" and ready


def workload_objects(workloads: list[dict[str, Any]], pdbs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(collection path, object) for each namespace, workload and budget of the spec, in creation order."""
    named = {w.get("namespace", "default") for w in workloads} | {p.get("namespace", "default") for p in pdbs}
    namespaces = sorted(named - {"default", "kube-system", "kube-public"})
    objects: list[tuple[str, dict[str, Any]]] = [
        ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}) for ns in namespaces]
    for spec in workloads:
        ns, name, kind = spec.get("namespace", "default"), spec["name"], spec["kind"]
        labels = {"app": name, **(spec.get("labels") or {})}
        template = {"metadata": {"labels": dict(labels)}, "spec": _pod_spec(spec, kind)}
        if kind == "Pod":
            body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels},
                    "spec": dict(template["spec"], **({"nodeName": spec["node"]} if spec.get("node") else {}))}
            objects.append((f"/api/v1/namespaces/{ns}/pods", body))
            continue
        body_spec: dict[str, Any] = {"selector": {"matchLabels": dict(labels)}, "template": template}
        if kind in ("Deployment", "StatefulSet"):
            body_spec["replicas"] = int(spec.get("replicas", 1))
        if kind == "StatefulSet":
            body_spec["serviceName"] = name
        plural = {"Deployment": "deployments", "StatefulSet": "statefulsets", "DaemonSet": "daemonsets"}[kind]
        objects.append((f"/apis/apps/v1/namespaces/{ns}/{plural}", {
            "apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": body_spec}))
    for spec in pdbs:
        ns = spec.get("namespace", "default")
        body_spec = {"selector": {"matchLabels": dict(spec.get("selector") or {})}}
        for key in ("minAvailable", "maxUnavailable", "unhealthyPodEvictionPolicy"):
            if spec.get(key) is not None:
                body_spec[key] = spec[key]
        objects.append((f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": spec["name"], "namespace": ns}, "spec": body_spec}))
    return objects


def _pod_spec(spec: dict[str, Any], kind: str) -> dict[str, Any]:
    name, ns = spec["name"], spec.get("namespace", "default")
    image = spec.get("image") or (f"registry.k8s.io/{name}:v1" if ns == "kube-system" else f"registry.example.com/{name}:1.0")
    container: dict[str, Any] = {"name": name, "image": image}
    pod: dict[str, Any] = {"containers": [container],
                           "terminationGracePeriodSeconds": int(spec.get("terminationGracePeriodSeconds", 30))}
    if spec.get("emptyDir"):
        pod["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        container["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    if kind == "DaemonSet":
        pod["tolerations"] = [{"operator": "Exists"}]  # node agents run on every node, control nodes too
    elif spec.get("tolerations"):
        pod["tolerations"] = list(spec["tolerations"])
    return pod


def settled(api: KubeApi, objects: list[tuple[str, dict[str, Any]]]) -> Optional[str]:
    """None once every workload is available and every budget has a status its controller wrote; else what
    is not yet."""
    for path, body in objects:
        kind, name = body["kind"], body["metadata"]["name"]
        if kind == "Namespace":
            continue
        current = api.get(f"{path}/{name}")
        status = current.get("status") or {}
        if kind in ("Deployment", "StatefulSet"):
            if int(status.get("readyReplicas") or 0) < int(current["spec"].get("replicas", 1)):
                return f"{kind} {name}: {status.get('readyReplicas', 0)} of {current['spec'].get('replicas')} ready"
        elif kind == "DaemonSet":
            wanted = status.get("desiredNumberScheduled")
            if not wanted or int(status.get("numberReady") or 0) < int(wanted):
                return f"DaemonSet {name}: {status.get('numberReady', 0)} of {wanted} ready"
        elif kind == "PodDisruptionBudget":
            if status.get("observedGeneration") != current["metadata"].get("generation"):
                return f"PodDisruptionBudget {name}: not yet processed by the disruption controller"
        elif kind == "Pod" and (status.get("phase") != "Running"):
            return f"Pod {name}: {status.get('phase')}"
    return None
