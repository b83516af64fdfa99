"""The cluster's machines, played against a real API server (``KubeApi``): a kubelet per node, and the
spec's workloads as an operator created them.

A kubelet (``Kubelets``, one object plays them all, as kwok does) registers its Node with the
spec's name, labels and the capacity of its VM's offering; while its VM runs it renews its Lease in
kube-node-lease and posts Ready; when the VM stops it goes silent (the real node lifecycle
controller then marks the node Unknown and taints it); when the VM starts it comes back, after the
boot delay, with a new boot ID, recording Starting, Rebooted and NodeReady as the kubelet does. On
a booted node it runs what the scheduler bound there (Running and Ready after the pod-start delay)
and confirms a terminating pod's deletion (grace 0) once its containers would have stopped. On
control nodes it posts kubeadm's static pods' mirror pods (etcd, kube-apiserver, ...).

Power changes arrive from the CloudStack half under ``sim.lock`` and only flip flags; every API
call happens on the actors' threads (``tick``, and ``beat`` for each due lease on threads of its
own, so that a large cluster's slow tick never delays a renewal), never under that lock.
"""

from __future__ import annotations

import functools
import hashlib
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .api import MERGE, ApiRefusal, KubeApi, now_micro, now_rfc3339

NODE_LEASE_NS = "kube-node-lease"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
CONTROL_PLANE_TAINT = "node-role.kubernetes.io/control-plane"
#: ``timeline(event, **fields)``: what the actors did, for the sim's timeline.
Timeline = Callable[..., None]


@dataclass
class KubeletNode:
    """One node's kubelet and what it cannot show through the API: its VM's power and boot."""

    name: str
    node_type: str
    index: int
    cpu: int
    memory_mb: int
    vm_running: bool
    boot_id: str = ""
    posting: bool = False  # the kubelet of the current boot posts status and renews the lease
    boot_due: Optional[float] = None  # monotonic time the booting kubelet first posts
    ready: str = "Unknown"  # the Ready condition as last read from the API server
    last_lease: float = 0.0
    off_since: Optional[float] = None  # wall-clock time its VM stopped (None: running)

    @property
    def ip(self) -> str:
        # .10 to .249 of each /24, then the next one: a valid address for any number of nodes.
        return f"10.1.{self.index // 240}.{10 + self.index % 240}"

    @property
    def pod_cidr_prefix(self) -> str:
        """The first three octets of its pods' /24, as the node IPAM gives each node one of a /14 (10.244-247.x)."""
        return f"10.{244 + self.index // 256}.{self.index % 256}"


@dataclass
class Kubelets:
    """Every node's kubelet, ticking against one API server."""

    api: KubeApi
    timeline: Timeline
    version: str
    root_disk_gb: int
    #: seconds: lease renewal, pod start, pod termination, boot (the sim's timings in real seconds)
    heartbeat: float
    pod_start: float
    pod_termination: float
    nodes: dict[str, KubeletNode] = field(default_factory=dict)
    etcd_servers: str = ""
    stacked_etcd: bool = False
    _pods_seen: dict[str, float] = field(default_factory=dict)  # pod uid -> when first seen waiting
    _started: dict[str, str] = field(default_factory=dict)  # pod uid -> the boot ID of the kubelet that started it
    #: the Nodes and Pods as the last tick read them (what the sim's snapshot shows)
    seen: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {"nodes": [], "pods": []})
    #: seconds: the longest a posting kubelet went between two lease renewals
    worst_gap: float = 0.0
    #: ``fan_out(calls)`` runs each call with a connection of its own (the world's threads: a thousand
    #: nodes' kubelets start their pods at once); None: one after the other on ``api``.
    fan_out: Optional[Callable[[list[Callable[[KubeApi], None]]], None]] = None

    # -- power, from the CloudStack half (under sim.lock: flags only) ------------------------------

    def power_off(self, name: str) -> None:
        node = self.nodes[name]
        node.vm_running, node.posting, node.boot_due = False, False, None
        node.off_since = time.time()

    def power_on(self, name: str, cpu: int, memory_mb: int, boot_delay: float) -> None:
        node = self.nodes[name]
        node.vm_running, node.cpu, node.memory_mb, node.off_since = True, int(cpu), int(memory_mb), None
        node.boot_due = time.monotonic() + boot_delay

    # -- registering (at start) --------------------------------------------------------------------

    def register(self, node: KubeletNode, api: Optional[KubeApi] = None) -> None:
        """One node as kubeadm init/join left it: the Node, its Lease, a control node's mirror pods (on
        ``api``: the connection of the thread registering it, as each kubelet has its own)."""
        api = api or self.api
        created = api.create("/api/v1/nodes", self._node_object(node))
        if node.vm_running:
            self._boot(node, created, first=True, api=api)
        if node.node_type == "control":
            for pod in self._mirror_pods(node, created["metadata"]["uid"]):
                api.create("/api/v1/namespaces/kube-system/pods", pod)

    def _node_object(self, node: KubeletNode) -> dict[str, Any]:
        labels = {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  "kubernetes.io/hostname": node.name, "kubernetes.io/os": "linux"}
        taints: list[dict[str, Any]] = []
        if node.node_type == "control":
            labels.update({"node-role.kubernetes.io/control-plane": "",
                           "node.kubernetes.io/exclude-from-external-load-balancers": ""})
            taints.append({"key": CONTROL_PLANE_TAINT, "effect": "NoSchedule"})
        return {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node.name, "labels": labels, "annotations": {
                "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
            "spec": {"providerID": f"cloudstack:///{node.name}", "taints": taints},
        }

    def _status(self, node: KubeletNode, ready: bool, transition: bool) -> dict[str, Any]:
        now = now_rfc3339()
        mem_ki, disk_ki = node.memory_mb * 1024, self.root_disk_gb * 1024 * 1024
        capacity = {"cpu": str(node.cpu), "memory": f"{mem_ki}Ki", "pods": "110",
                    "ephemeral-storage": f"{disk_ki}Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
        allocatable = dict(capacity, memory=f"{max(mem_ki - 102400, 0)}Ki", **{"ephemeral-storage": f"{disk_ki * 9 // 10}Ki"})

        def condition(kind: str, status: str, reason: str, message: str) -> dict[str, Any]:
            entry = {"type": kind, "status": status, "reason": reason, "message": message, "lastHeartbeatTime": now}
            if transition:
                entry["lastTransitionTime"] = now
            return entry

        return {"status": {
            "addresses": [{"type": "InternalIP", "address": node.ip}, {"type": "Hostname", "address": node.name}],
            "capacity": capacity, "allocatable": allocatable,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"architecture": "amd64", "bootID": node.boot_id, "containerRuntimeVersion": "containerd://1.7.22",
                         "kernelVersion": "5.15.0-119-generic", "kubeProxyVersion": self.version,
                         "kubeletVersion": self.version, "machineID": hashlib.md5(node.name.encode()).hexdigest(),
                         "operatingSystem": "linux", "osImage": "Ubuntu 22.04.4 LTS",
                         "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_DNS, node.name))},
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True" if ready else "False", "KubeletReady" if ready else "KubeletNotReady",
                          "kubelet is posting ready status" if ready else "container runtime is down"),
            ],
        }}

    def _mirror_pods(self, node: KubeletNode, node_uid: str) -> list[dict[str, Any]]:
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

    # -- the kubelets' loop (the actors' thread) ---------------------------------------------------

    def tick(self) -> None:
        """Boots due, the nodes' Ready as the API has it, the pods bound to booted nodes (the heartbeats
        are ``beat``'s, on threads of their own: a slow tick of a large cluster must not delay them)."""
        now = time.monotonic()
        for node in list(self.nodes.values()):
            if node.vm_running and not node.posting and node.boot_due is not None and now >= node.boot_due:
                self._boot(node, self.api.get(f"/api/v1/nodes/{node.name}"), first=False)
        self._observe_nodes()
        self._run_pods(now)

    def due_heartbeats(self) -> list[KubeletNode]:
        """The nodes whose kubelet runs and whose Lease is due for renewal."""
        now = time.monotonic()
        return [n for n in list(self.nodes.values()) if n.posting and now - n.last_lease >= self.heartbeat]

    def beat(self, node: KubeletNode, api: Optional[KubeApi] = None) -> None:
        """The node's Lease renewed (on ``api``, the renewing thread's connection). Its NodeStatus is
        posted only on a change (the kubelet's nodeStatusReportFrequency, 5 minutes, is longer than any
        test): when the node lifecycle controller marked it Unknown while its lease lapsed."""
        if not node.posting:
            return  # its VM stopped since it was found due
        api = api or self.api
        self._renew_lease(node, api=api)
        if node.ready != "True":
            api.patch(f"/api/v1/nodes/{node.name}/status", self._status(node, ready=True, transition=True))

    def _boot(self, node: KubeletNode, current: dict[str, Any], first: bool, api: Optional[KubeApi] = None) -> None:
        api = api or self.api
        old_boot = ((current.get("status") or {}).get("nodeInfo") or {}).get("bootID")
        node.boot_id, node.boot_due = str(uuid.uuid4()), None
        api.patch(f"/api/v1/nodes/{node.name}/status", self._status(node, ready=True, transition=True))
        self._renew_lease(node, owner_uid=current["metadata"]["uid"], api=api)
        node.posting = True
        if not first:
            # The kubelet's own Events of a restart (kubelet.go, kubelet_node_status.go).
            self._event(node, "Normal", "Starting", "Starting kubelet.")
            if old_boot:
                self._event(node, "Warning", "Rebooted", f"Node {node.name} has been rebooted, boot id: {node.boot_id}")
            self._event(node, "Normal", "NodeReady", f"Node {node.name} status is now: NodeReady")
            self.timeline("boot", node=node.name, boot_id=node.boot_id)
            self.timeline("ready", node=node.name)

    def _renew_lease(self, node: KubeletNode, owner_uid: Optional[str] = None, api: Optional[KubeApi] = None) -> None:
        api = api or self.api
        path = f"/apis/coordination.k8s.io/v1/namespaces/{NODE_LEASE_NS}/leases"
        spec = {"holderIdentity": node.name, "leaseDurationSeconds": 40, "renewTime": now_micro()}
        try:
            api.patch(f"{path}/{node.name}", {"spec": spec}, MERGE)
        except ApiRefusal as refusal:
            if refusal.code != 404:
                raise
            owner = owner_uid or api.get(f"/api/v1/nodes/{node.name}")["metadata"]["uid"]
            api.create(path, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": spec,
                              "metadata": {"name": node.name, "namespace": NODE_LEASE_NS, "ownerReferences": [
                                  {"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": owner}]}})
        now = time.monotonic()
        if node.last_lease and node.posting:
            # The longest a running kubelet went between two renewals: what the node lifecycle
            # controller's grace period has to cover (the sim's /state shows it).
            self.worst_gap = max(self.worst_gap, now - node.last_lease)
        node.last_lease = now

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
            if node is None or not node.posting:
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

    def _start(self, pod: dict[str, Any], node: KubeletNode, api: KubeApi) -> None:
        now = now_rfc3339()
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

    def _event(self, node: KubeletNode, kind: str, reason: str, message: str) -> None:
        now = now_rfc3339()
        self.api.create("/api/v1/namespaces/default/events", {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{node.name}.{uuid.uuid4().hex[:16]}", "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": node.name, "uid": node.name, "apiVersion": "v1"},
            "reason": reason, "message": message, "type": kind, "count": 1,
            "firstTimestamp": now, "lastTimestamp": now,
            "source": {"component": "kubelet", "host": node.name},
            "reportingComponent": "kubelet", "reportingInstance": node.name,
        })


def _running_and_ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return status.get("phase") == "Running" and ready


# -- the spec's workloads, as an operator created them --------------------------------------------

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
