"""One CKS cluster's Kubernetes, as its API server, kubelets and controllers would show it.

The world keeps API objects as the JSON dicts the API serves (so what a client reads is exactly
what is stored) plus a little hidden state the API cannot see: whether a node's VM is really
running, which kubelet boot is current, pending timers. Controllers act synchronously where the
real ones would within milliseconds (ReplicaSet replacements, taint mirroring) and through the
Sim scheduler where real time matters (kubelet boot, node-monitor grace, pod start and stop).

Every public method expects ``sim.lock`` to be held (the HTTP layer and the scheduler take it).
"""

from __future__ import annotations

import copy
import datetime
import hashlib
import json
import math
import random
import re
import secrets
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

from . import kube_leases, kube_run
from .kube_watch import DEFAULT_BOOKMARK_SECONDS, DEFAULT_CACHE_SIZE, WatchCache
from .selectors import object_selects as selector_matches

NODE_LEASE_NS = "kube-node-lease"
CONTROL_PLANE_TAINT = "node-role.kubernetes.io/control-plane"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
LIFECYCLE_TAINTS = (UNSCHEDULABLE_TAINT, UNREACHABLE_TAINT, NOT_READY_TAINT)
NODE_LEASE_RENEW = 10.0  # simulated seconds between kubelet lease renewals
EVENT_TTL = 3600.0  # simulated seconds an Event lives after its last write (kube-apiserver --event-ttl)
#: rand.SafeEncodeString's alphabet (apimachinery/pkg/util/rand): no vowels, no 0, 1 or 3.
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
MICROTIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$")


# ---------------------------------------------------------------------------------------------
# Resources and errors


@dataclass(frozen=True)
class Resource:
    plural: str
    kind: str
    group: str
    version: str
    namespaced: bool
    verbs: tuple[str, ...]
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def qualified(self) -> str:
        # How the API server names a resource in its messages: `leases.coordination.k8s.io`.
        return f"{self.plural}.{self.group}" if self.group else self.plural


_RW = ("create", "delete", "get", "list", "patch", "update", "watch")
_RO = ("get", "list", "watch")
RESOURCES: dict[str, Resource] = {
    r.plural: r
    for r in (
        Resource("namespaces", "Namespace", "", "v1", False, _RO, ("ns",)),
        Resource("nodes", "Node", "", "v1", False, ("get", "list", "patch", "update", "watch"), ("no",), ("status",)),
        Resource("pods", "Pod", "", "v1", True, ("create", "delete", "get", "list", "watch"), ("po",),
                 ("eviction", "exec", "log", "status")),
        Resource("configmaps", "ConfigMap", "", "v1", True, _RW, ("cm",)),
        Resource("events", "Event", "", "v1", True, _RW, ("ev",)),
        Resource("leases", "Lease", "coordination.k8s.io", "v1", True, _RW),
        Resource("poddisruptionbudgets", "PodDisruptionBudget", "policy", "v1", True, _RO, ("pdb",), ("status",)),
        Resource("deployments", "Deployment", "apps", "v1", True, _RO, ("deploy",), ("status",)),
        Resource("replicasets", "ReplicaSet", "apps", "v1", True, _RO, ("rs",), ("status",)),
        Resource("statefulsets", "StatefulSet", "apps", "v1", True, _RO, ("sts",), ("status",)),
        Resource("daemonsets", "DaemonSet", "apps", "v1", True, _RO, ("ds",), ("status",)),
        Resource("selfsubjectaccessreviews", "SelfSubjectAccessReview", "authorization.k8s.io", "v1", False,
                 ("create",)),
    )
}

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """An API answer other than success, rendered as a ``Status`` object."""

    def __init__(self, code: int, message: str, reason: Optional[str] = None,
                 details: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason if reason is not None else _REASONS.get(code, "")
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if not self.reason:
            del body["reason"]  # metav1.Status: reason is omitempty (an error with no reason)
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(res: Resource, name: str, **extra: Any) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": res.plural}
    if res.group:
        details["group"] = res.group
    details.update(extra)
    return details


def not_found(res: Resource, name: str) -> ApiError:
    return ApiError(404, f'{res.qualified} "{name}" not found', "NotFound", _details(res, name))


def conflict(res: Resource, name: str, why: str) -> ApiError:
    return ApiError(409, f'Operation cannot be fulfilled on {res.qualified} "{name}": {why}',
                    "Conflict", _details(res, name))


STALE_OBJECT = "the object has been modified; please apply your changes to the latest version and try again"


def success_status(code: int = 200, details: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


# ---------------------------------------------------------------------------------------------
# Small helpers


def now_time() -> str:
    """metav1.Time: seconds precision, UTC."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    """metav1.MicroTime: exactly six fractional digits, UTC."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def time_after(seconds: float) -> str:
    moment = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_microtime(value: Any, field_path: str, kind: str) -> str:
    """Validate a MicroTime as the API server's decoder does, and return it in canonical UTC form."""
    if value is None:
        return value
    if not isinstance(value, str) or not MICROTIME_RE.match(value):
        shown = value if isinstance(value, str) else repr(value)
        raise ApiError(
            400,
            f'{kind} in version "v1" cannot be handled as a {kind}: parsing time "{shown}" as '
            f'"2006-01-02T15:04:05.000000Z07:00": cannot parse {field_path}',
            "BadRequest",
        )
    moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def safe_encode(text: str) -> str:
    """rand.SafeEncodeString: each byte of ``text`` picks a character of SAFE_ALPHABET."""
    return "".join(SAFE_ALPHABET[ord(ch) % len(SAFE_ALPHABET)] for ch in text)


def template_hash(template: dict[str, Any]) -> str:
    """The pod-template-hash the Deployment controller gives a template (controller.ComputeHash: a
    32-bit FNV-1a of the template's dump, its decimal form safe-encoded)."""
    value = 0x811C9DC5
    for byte in json.dumps(template, sort_keys=True).encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return safe_encode(str(value))


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for tol in tolerations:
        effect = tol.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        operator = tol.get("operator", "Equal")
        key = tol.get("key")
        if not key and operator == "Exists":
            return True
        if key != taint.get("key"):
            continue
        if operator == "Exists" or tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def _int_or_percent(value: Any, total: int) -> int:
    # The disruption controller rounds percentages up (GetScaledValueFromIntOrPercent(..., true)).
    if isinstance(value, str) and value.endswith("%"):
        return int(math.ceil(int(value[:-1]) * total / 100.0))
    return int(value)


def _condition(ctype: str, status: str, reason: Optional[str] = None, message: Optional[str] = None,
               when: Optional[str] = None) -> dict[str, Any]:
    cond: dict[str, Any] = {"type": ctype, "status": status, "lastProbeTime": None,
                            "lastTransitionTime": when or now_time()}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def _set_condition(conditions: list[dict[str, Any]], new: dict[str, Any]) -> None:
    """Replace a condition by type; keep lastTransitionTime when the status did not change."""
    for i, cond in enumerate(conditions):
        if cond["type"] == new["type"]:
            if cond.get("status") == new.get("status") and "lastTransitionTime" in cond:
                new = dict(new, lastTransitionTime=cond["lastTransitionTime"])
            conditions[i] = new
            return
    conditions.append(new)


# ---------------------------------------------------------------------------------------------
# Hidden state


@dataclass
class NodeState:
    """What the API cannot see about a node: its VM's power and the kubelet's boots."""

    name: str
    node_type: str
    index: int
    cpu: int
    memory_mb: int
    vm_running: bool
    kubelet_posting: bool  # a kubelet of the current boot posts status and renews the lease
    boot_id: str
    machine_id: str
    system_uuid: str
    foreign_cordon: bool = False
    ready: str = "Unknown"  # the Ready condition's status as stored (cached for the scheduler)
    grace_timer: Optional[int] = None
    boot_timer: Optional[int] = None
    lease_renewed_at: float = 0.0  # real monotonic-ish wall time of the last lease renewal


@dataclass
class Workload:
    """A controller from the spec: Deployment, StatefulSet, DaemonSet, or a bare Pod."""

    kind: str
    namespace: str
    name: str
    replicas: int
    labels: dict[str, str]
    empty_dir: bool
    uid: str
    node: Optional[str] = None  # bare pods may be pinned
    rs_name: str = ""
    rs_uid: str = ""
    template_hash: str = ""
    grace_seconds: int = 30
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)


# ---------------------------------------------------------------------------------------------
# The world


class KubeWorld:
    def __init__(self, sim: Any, cluster_id: str, cluster_spec: dict, nodes: list[dict],
                 workloads: list[dict], pdbs: list[dict]) -> None:
        self.sim = sim
        self.cluster_id = cluster_id
        self.cluster_spec = cluster_spec
        self.name = str(cluster_spec.get("name", cluster_id))
        self.version = str(cluster_spec.get("kubernetes_version", "1.30.4")).lstrip("v")
        self.stacked_etcd = int(cluster_spec.get("etcd_nodes", 0) or 0) == 0
        # A bearer token per cluster, as a CKS kubeconfig's admin identity would be per cluster.
        self.token = secrets.token_urlsafe(32)
        self.rng = random.Random(f"{sim.spec.get('seed', 0)}/{cluster_id}")
        self._rv = 1000
        kube_spec = sim.spec.get("kube") or {}
        self.watch_cache = WatchCache(int(kube_spec.get("watch_cache_size", DEFAULT_CACHE_SIZE)))
        self.watch_enabled = bool(kube_spec.get("watch", True))
        self.watch_bookmark_seconds = float(kube_spec.get("watch_bookmark_seconds", DEFAULT_BOOKMARK_SECONDS))
        self._objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {r: {} for r in RESOURCES}
        # When each Event was last written (sim.clock time): it goes once EVENT_TTL has passed since.
        self._event_writes: dict[tuple[str, str], float] = {}
        self.event_ttl = float(kube_spec.get("event_ttl", EVENT_TTL))
        self.leader_leases = kube_leases.LeaderLeases()
        self.nodes: dict[str, NodeState] = {}
        self.workloads: dict[tuple[str, str, str], Workload] = {}
        self._pod_timers: dict[tuple[str, str], int] = {}
        self._awaiting_kubelet: set[tuple[str, str]] = set()  # terminating pods on a dead node
        # Pods created through the API: the kubelet runs their containers (kube_run.py).
        self._api_pods: set[str] = set()
        self.runs = kube_run.PodRuns(sim.lock)
        self.etcd_servers = "https://127.0.0.1:2379"  # kubeadm's for stacked etcd
        # Control nodes whose kube-apiserver does not serve: the kubelet's readiness probe of it fails.
        self.api_servers_down: set[str] = set()
        # Indices over pods (a 1,000-node cluster has thousands): node and controller of each.
        self._pod_index: dict[tuple[str, str], tuple[Optional[str], Optional[tuple[str, str, str]]]] = {}
        self._pods_by_node: dict[str, set[tuple[str, str]]] = {}
        self._pods_by_owner: dict[tuple[str, str, str], set[tuple[str, str]]] = {}
        # Nodes a pod with given tolerations may land on; dropped whenever any node changes.
        self._fit_cache: dict[str, list[str]] = {}
        # Called (sim.lock held) when a VM's power may change whether the endpoint listens.
        self.on_endpoint_change: list[Any] = []
        # Pods placed while the world is built are its starting state, not scheduling decisions.
        self._built = False
        # Timers scheduled while building fire on the scheduler thread under sim.lock: hold it
        # (re-entrant) until the world is complete.
        with sim.lock:
            self._build(nodes, workloads, pdbs)
            self._built = True

    def _build(self, nodes: list[dict], workloads: list[dict], pdbs: list[dict]) -> None:
        for ns in ("default", "kube-system", "kube-public", NODE_LEASE_NS):
            self._ensure_namespace(ns)
        for i, spec in enumerate(nodes):
            self._add_node(spec, i)
        for spec in workloads:
            self._add_workload(spec)
        for spec in pdbs:
            self._add_pdb(spec)
        for state in self.nodes.values():
            if state.node_type == "control":
                self._ensure_mirror_pods(state.name)
        self._reconcile_all()
        self.leader_leases.refresh(self)
        for key in list(self._objects["pods"]):
            # The cluster starts settled: pods already placed on running nodes are Running.
            pod = self._objects["pods"][key]
            node = pod["spec"].get("nodeName")
            if node and self.nodes[node].kubelet_posting:
                self.sim.scheduler.cancel(self._pod_timers.pop(key, None))
                self._mark_pod_running(pod)
        self._refresh_derived()

    # ----- identifiers and storage ----------------------------------------------------------

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

    def _raw(self, plural: str, namespace: str, name: str) -> Optional[dict[str, Any]]:
        return self._objects[plural].get((namespace if RESOURCES[plural].namespaced else "", name))

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

    # ----- contract: queries ----------------------------------------------------------------

    def has_node(self, name: str) -> bool:
        return name in self.nodes

    def node_ready_status(self, name: str) -> str:
        return self.nodes[name].ready

    @staticmethod
    def _ready_of(node: dict[str, Any]) -> str:
        return next((c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready"), "Unknown")

    def ready_node_count(self) -> int:
        with self.sim.lock:  # re-entrant: callers under the lock (the CKS scanner) are fine too
            return sum(1 for name in self.nodes if self.node_ready_status(name) == "True")

    def api_available(self) -> bool:
        """The API endpoint answers while a control node's VM behind it runs an API server: any
        of them behind a load balancer, only the first with ``api_endpoint: first_control_node``."""
        controls = sorted((n for n in self.nodes.values() if n.node_type == "control"), key=lambda n: n.index)
        if self.cluster_spec.get("api_endpoint") == "first_control_node":
            controls = controls[:1]
        return not controls or any(n.vm_running for n in controls)

    def api_listens(self) -> bool:
        """Whether anything accepts connections at the endpoint: a load balancer always does
        (and drops them with no API server behind it); a node's own address only while it runs."""
        return self.cluster_spec.get("api_endpoint") != "first_control_node" or self.api_available()

    def snapshot(self) -> dict:
        with self.sim.lock:
            return self._snapshot()

    def _snapshot(self) -> dict:
        nodes = []
        for name, state in sorted(self.nodes.items()):
            obj = self._raw("nodes", "", name)
            nodes.append({
                "name": name,
                "node_type": state.node_type,
                "vm_running": state.vm_running,
                "ready": self.node_ready_status(name),
                "boot_id": obj["status"]["nodeInfo"]["bootID"],
                "unschedulable": bool(obj["spec"].get("unschedulable")),
                "foreign_cordon": state.foreign_cordon,
                "annotations": dict(obj["metadata"].get("annotations") or {}),
                "taints": [f"{t['key']}:{t['effect']}" for t in obj["spec"].get("taints") or []],
                "cpu": obj["status"]["capacity"]["cpu"],
                "memory": obj["status"]["capacity"]["memory"],
            })
        pods = []
        for (ns, name), pod in sorted(self._objects["pods"].items()):
            owner = next((o for o in pod["metadata"].get("ownerReferences") or [] if o.get("controller")), None)
            pods.append({
                "namespace": ns, "name": name, "uid": pod["metadata"]["uid"],
                "node": pod["spec"].get("nodeName"), "phase": pod["status"]["phase"],
                "ready": self._pod_ready(pod), "terminating": "deletionTimestamp" in pod["metadata"],
                "owner": f"{owner['kind']}/{owner['name']}" if owner else None,
            })
        pdbs = []
        for (ns, name), pdb in sorted(self._objects["poddisruptionbudgets"].items()):
            status = self._pdb_status(pdb)
            pdbs.append({"namespace": ns, "name": name, **{k: status[k] for k in (
                "currentHealthy", "desiredHealthy", "disruptionsAllowed", "expectedPods")}})
        return {"cluster_id": self.cluster_id, "resource_version": self.current_rv(),
                "nodes": nodes, "pods": pods, "pdbs": pdbs}

    # ----- nodes ------------------------------------------------------------------------------

    def _add_node(self, spec: dict, index: int) -> None:
        name = spec["name"].lower()
        running = bool(spec.get("vm_running", True))
        state = NodeState(
            name=name, node_type=spec.get("node_type", "worker"), index=index,
            cpu=int(spec.get("cpu", 2)), memory_mb=int(spec.get("memory_mb", 4096)),
            vm_running=running, kubelet_posting=running, boot_id=self.new_uid(),
            machine_id=self.new_uid().replace("-", ""), system_uuid=self.new_uid(),
        )
        self.nodes[name] = state
        labels = {
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
        }
        taints: list[dict[str, Any]] = []
        if state.node_type == "control":
            labels["node-role.kubernetes.io/control-plane"] = ""
            labels["node.kubernetes.io/exclude-from-external-load-balancers"] = ""
            taints.append({"key": CONTROL_PLANE_TAINT, "effect": "NoSchedule"})
        created = now_time()
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": self._new_meta(
                name,
                labels=labels,
                annotations={
                    "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
                    "node.alpha.kubernetes.io/ttl": "0",
                    "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                },
            ),
            "spec": {
                "podCIDR": f"10.244.{index}.0/24",
                "podCIDRs": [f"10.244.{index}.0/24"],
                "providerID": f"cloudstack:///{name}",
                "taints": taints,
            },
            "status": {
                "addresses": [
                    {"type": "InternalIP", "address": self._node_ip(state)},
                    {"type": "Hostname", "address": name},
                ],
                "capacity": {},
                "allocatable": {},
                "conditions": [],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "images": kube_run.node_images(self.version),
                "nodeInfo": {
                    "architecture": "amd64",
                    "bootID": state.boot_id,
                    "containerRuntimeVersion": "containerd://1.7.22",
                    "kernelVersion": "5.15.0-119-generic",
                    "kubeProxyVersion": f"v{self.version}",
                    "kubeletVersion": f"v{self.version}",
                    "machineID": state.machine_id,
                    "operatingSystem": "linux",
                    "osImage": "Ubuntu 22.04.4 LTS",
                    "systemUUID": state.system_uuid,
                },
            },
        }
        self._set_capacity(node, state.cpu, state.memory_mb)
        conds = node["status"]["conditions"]
        if running:
            self._kubelet_conditions(conds, ready=True, when=created)
        else:
            self._unknown_conditions(conds)
        self._reconcile_taints(node)
        state.ready = self._ready_of(node)
        self._store("nodes", node)
        self._store("leases", {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": self._new_meta(name, NODE_LEASE_NS, ownerReferences=[{
                "apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}]),
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now_micro()},
        })
        state.lease_renewed_at = self.sim.clock.now()

    def join_node(self, name: str, node_type: str, cpu: int, memory_mb: int) -> None:
        """A node VM CKS added (a scale-up), not yet booted: kubeadm join registers its Node at the
        first boot, NotReady until then; its DaemonSet pods follow (the DaemonSet controller)."""
        self._add_node({"name": name, "node_type": node_type, "cpu": cpu, "memory_mb": memory_mb,
                        "vm_running": False}, max((n.index for n in self.nodes.values()), default=-1) + 1)
        self._fit_cache.clear()
        self._reconcile_all()

    @staticmethod
    def _node_ip(state: NodeState) -> str:
        return f"10.1.{state.index // 250}.{10 + state.index % 250}"

    def _set_capacity(self, node: dict[str, Any], cpu: int, memory_mb: int) -> None:
        disk_gb = int(self.cluster_spec.get("root_disk_size", 20) or 20)
        mem_ki = memory_mb * 1024
        storage_ki = disk_gb * 1024 * 1024
        node["status"]["capacity"] = {
            "cpu": str(cpu), "ephemeral-storage": f"{storage_ki}Ki", "hugepages-1Gi": "0",
            "hugepages-2Mi": "0", "memory": f"{mem_ki}Ki", "pods": "110",
        }
        # kubelet's default hard eviction threshold (memory.available<100Mi, nodefs 10%).
        node["status"]["allocatable"] = {
            "cpu": str(cpu), "ephemeral-storage": str(int(storage_ki * 1024 * 0.9)),
            "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": f"{max(0, mem_ki - 102400)}Ki",
            "pods": "110",
        }

    @staticmethod
    def _kubelet_conditions(conds: list[dict[str, Any]], ready: bool, when: Optional[str] = None) -> None:
        stamp = when or now_time()
        for ctype, reason, message in (
            ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ):
            _set_condition(conds, dict(_condition(ctype, "False", reason, message, stamp), lastHeartbeatTime=stamp))
        if ready:
            ready_cond = _condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", stamp)
        else:
            ready_cond = _condition(
                "Ready", "False", "KubeletNotReady",
                "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
                "message:Network plugin returns error: cni plugin not initialized", stamp)
        _set_condition(conds, dict(ready_cond, lastHeartbeatTime=stamp))
        for cond in conds:
            cond.pop("lastProbeTime", None)

    @staticmethod
    def _unknown_conditions(conds: list[dict[str, Any]]) -> None:
        # The node-lifecycle controller keeps the last heartbeat and stamps the transition now.
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

    def _reconcile_taints(self, node: dict[str, Any]) -> None:
        """The node-lifecycle controller's view: taints follow spec.unschedulable and Ready."""
        taints = [t for t in node["spec"].get("taints") or [] if t.get("key") not in LIFECYCLE_TAINTS]
        old = {(t["key"], t["effect"]): t for t in node["spec"].get("taints") or []}
        want: list[tuple[str, str]] = []
        if node["spec"].get("unschedulable"):
            want.append((UNSCHEDULABLE_TAINT, "NoSchedule"))
        ready = self._ready_of(node)
        if ready == "Unknown":
            want += [(UNREACHABLE_TAINT, "NoSchedule"), (UNREACHABLE_TAINT, "NoExecute")]
        elif ready == "False":
            want += [(NOT_READY_TAINT, "NoSchedule"), (NOT_READY_TAINT, "NoExecute")]
        for key, effect in want:
            taints.append(old.get((key, effect)) or {"key": key, "effect": effect, "timeAdded": now_time()})
        if taints:
            node["spec"]["taints"] = taints
        else:
            node["spec"].pop("taints", None)

    def set_boot_id(self, name: str, boot_id: str) -> None:
        """The boot ID the kubelet reports until the node's next boot (then a new one, as always)."""
        self.nodes[name].boot_id = boot_id
        self._raw("nodes", "", name)["status"]["nodeInfo"]["bootID"] = boot_id
        self._touch_node(name)

    def _touch_node(self, name: str) -> dict[str, Any]:
        node = self._raw("nodes", "", name)
        self._reconcile_taints(node)
        self.nodes[name].ready = self._ready_of(node)
        self._store("nodes", node)
        return node

    def _event(self, namespace: str, involved: dict[str, Any], etype: str, reason: str, message: str,
               component: str, host: Optional[str] = None, action: Optional[str] = None) -> None:
        """An Event as its component records it: through the legacy recorder (client-go
        tools/record: source, first/last timestamp, count), or with ``action`` through the
        events.k8s.io recorder (tools/events, as kube-scheduler: eventTime, action, no source)."""
        if not self._built:
            return  # the starting state's history is not replayed
        # The recorders' names: <object>.<unix nanoseconds in hex>, so a list is in time order.
        stamp_ns = time.time_ns()
        while self._raw("events", namespace, f"{involved['name']}.{stamp_ns:x}") is not None:
            stamp_ns += 1
        name = f"{involved['name']}.{stamp_ns:x}"
        event: dict[str, Any] = {"apiVersion": "v1", "kind": "Event", "metadata": self._new_meta(name, namespace),
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
        self._store("events", event)

    def expire_events(self) -> None:
        """Events past the TTL since their last write are gone (etcd's lease on each one expired)."""
        limit = self.sim.clock.real(self.event_ttl)
        now = self.sim.clock.now()
        for key, written in list(self._event_writes.items()):
            if now - written < limit:
                continue
            del self._event_writes[key]
            event = self._objects["events"].pop(key, None)
            if event is not None:
                self._deleted("events", event)

    def _pod_ref(self, pod: dict[str, Any], container: Optional[str] = None) -> dict[str, Any]:
        meta = pod["metadata"]
        ref = {"kind": "Pod", "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"],
               "apiVersion": "v1", "resourceVersion": meta.get("resourceVersion", "")}
        if container:
            ref["fieldPath"] = f"spec.containers{{{container}}}"
        return ref

    def _node_ref(self, name: str) -> dict[str, Any]:
        node = self._raw("nodes", "", name)
        return {"kind": "Node", "name": name, "uid": node["metadata"]["uid"], "apiVersion": "v1"}

    @staticmethod
    def _kubelet_node_ref(name: str) -> dict[str, Any]:
        # The kubelet's reference to its Node carries the node's NAME as uid (kubelet.go nodeRef),
        # which is why kubectl describe node asks for both.
        return {"kind": "Node", "name": name, "uid": name}

    def _api_endpoint_changed(self) -> None:
        for listener in list(self.on_endpoint_change):
            listener()

    def node_powered_off(self, name: str) -> None:
        state = self.nodes[name]
        state.vm_running = False
        self._api_endpoint_changed()
        state.kubelet_posting = False
        self.sim.scheduler.cancel(state.boot_timer)
        state.boot_timer = None
        if state.grace_timer is None:
            # Ready stays as it was until the node-monitor grace period passes without a post.
            state.grace_timer = self.sim.scheduler.schedule(
                self.sim.delay("notready_grace"), self._grace_expired, name)

    def _grace_expired(self, name: str) -> None:
        state = self.nodes[name]
        state.grace_timer = None
        if state.kubelet_posting:
            return
        node = self._raw("nodes", "", name)
        self._unknown_conditions(node["status"]["conditions"])
        self._touch_node(name)
        # MarkPodsNotReady: the controller flips the Ready condition of the node's pods.
        for pod in self._pods_on(name):
            if self._pod_ready(pod):
                self._set_pod_ready(pod, False)
                # controller/util/node MarkPodsNotReady records this on each pod it flips.
                self._event(pod["metadata"]["namespace"], self._pod_ref(pod), "Warning", "NodeNotReady",
                            "Node is not ready", "node-controller")
        self._event("default", self._node_ref(name), "Normal", "NodeNotReady",
                    f"Node {name} status is now: NodeNotReady", "node-controller")
        self.sim.timeline.add(cluster=self.cluster_id, node=name, event="notready", ready="Unknown")
        self._after_change()

    def node_powered_on(self, name: str, cpu: int, memory_mb: int) -> None:
        state = self.nodes[name]
        state.vm_running = True
        self._api_endpoint_changed()
        state.cpu, state.memory_mb = int(cpu), int(memory_mb)
        self.sim.scheduler.cancel(state.boot_timer)
        stale = self.sim.faults.take("stale_ready", node=name, cluster=self.cluster_id)
        if stale is not None:
            # The old kubelet's Ready (and boot ID) is what the API shows until the new one posts.
            node = self._raw("nodes", "", name)
            self._kubelet_conditions(node["status"]["conditions"], ready=True)
            self._touch_node(name)
            self.sim.scheduler.cancel(state.grace_timer)
            state.grace_timer = None
            delay = self.sim.clock.real(float(stale.get("seconds", self.sim.timings["boot_to_ready"])))
        else:
            delay = self.sim.delay("boot_to_ready")
        state.boot_timer = self.sim.scheduler.schedule(delay, self._booted, name)

    def _booted(self, name: str) -> None:
        state = self.nodes[name]
        state.boot_timer = None
        if not state.vm_running:
            return
        self.sim.scheduler.cancel(state.grace_timer)
        state.grace_timer = None
        never_ready = self.sim.faults.peek("never_ready", node=name, cluster=self.cluster_id) is not None
        node = self._raw("nodes", "", name)
        old_boot = node["status"]["nodeInfo"]["bootID"]
        state.boot_id = self.new_uid()
        state.kubelet_posting = True
        state.lease_renewed_at = self.sim.clock.now()
        node["status"]["nodeInfo"]["bootID"] = state.boot_id
        self._set_capacity(node, state.cpu, state.memory_mb)
        self._kubelet_conditions(node["status"]["conditions"], ready=not never_ready)
        self._touch_node(name)
        self._renew_node_lease(name)
        ref = self._kubelet_node_ref(name)
        self._event("default", ref, "Normal", "Starting", "Starting kubelet.", "kubelet", name)
        if old_boot:
            self._event("default", ref, "Warning", "Rebooted",
                        f"Node {name} has been rebooted, boot id: {state.boot_id}", "kubelet", name)
        self.sim.timeline.add(cluster=self.cluster_id, node=name, event="boot", boot_id=state.boot_id)
        # Terminations the dead kubelet could not confirm complete now; the rest restart.
        for pod in list(self._pods_on(name)):
            key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
            if "deletionTimestamp" in pod["metadata"]:
                self._awaiting_kubelet.discard(key)
                self._remove_pod(key, pod["metadata"]["uid"])
            else:
                self._restart_pod(pod, ready_node=not never_ready)
        if not never_ready:
            # kubelet_node_status.go recordNodeStatusEvent, once the new kubelet posts Ready.
            self._event("default", ref, "Normal", "NodeReady", f"Node {name} status is now: NodeReady", "kubelet", name)
            self.sim.timeline.add(cluster=self.cluster_id, node=name, event="ready")
        self._after_change()

    def _renew_node_lease(self, name: str) -> None:
        lease = self._raw("leases", NODE_LEASE_NS, name)
        if lease is not None:
            lease["spec"]["renewTime"] = now_micro()
            self._store("leases", lease)
        self.nodes[name].lease_renewed_at = self.sim.clock.now()

    def refresh_node_leases(self) -> None:
        """Renew node leases lazily, as often as a kubelet would have by now."""
        period = self.sim.clock.real(NODE_LEASE_RENEW)
        now = self.sim.clock.now()
        for name, state in self.nodes.items():
            if state.kubelet_posting and now - state.lease_renewed_at >= period:
                self._renew_node_lease(name)

    def cordon_out_of_band(self, name: str) -> None:
        """Someone other than an API client of ours (another operator, a tool) cordons the node."""
        node = self._raw("nodes", "", name)
        self.nodes[name].foreign_cordon = True
        if not node["spec"].get("unschedulable"):
            node["spec"]["unschedulable"] = True
            self._touch_node(name)
            self.sim.timeline.add(cluster=self.cluster_id, node=name, event="cordoned", by="foreign")

    def apply_fault(self, fault: dict) -> None:
        if fault.get("kind") == "foreign_cordon":
            if fault.get("cluster") not in (None, self.cluster_id):
                return
            name = str(fault.get("node", "")).lower()
            if name in self.nodes:
                self.cordon_out_of_band(name)

    # ----- workloads and pods -----------------------------------------------------------------

    def _add_workload(self, spec: dict) -> None:
        kind = spec["kind"]
        ns = spec.get("namespace", "default")
        name = spec["name"]
        self._ensure_namespace(ns)
        labels = {"app": name, **(spec.get("labels") or {})}
        wl = Workload(
            kind=kind, namespace=ns, name=name, replicas=int(spec.get("replicas", 1)), labels=labels,
            empty_dir=bool(spec.get("emptyDir", False)), uid=self.new_uid(), node=spec.get("node"),
            grace_seconds=int(spec.get("terminationGracePeriodSeconds", 30)), extra=dict(spec),
        )
        self.workloads[wl.key] = wl
        if kind == "Pod":
            return
        template = self._pod_template(wl)
        meta = self._new_meta(name, ns, labels=dict(labels), generation=1,
                              annotations={"deployment.kubernetes.io/revision": "1"} if kind == "Deployment" else None)
        meta["uid"] = wl.uid
        spec_body: dict[str, Any] = {"selector": {"matchLabels": dict(labels)}, "template": template}
        if kind in ("Deployment", "StatefulSet"):
            spec_body["replicas"] = wl.replicas
        if kind == "Deployment":
            spec_body.update({"strategy": {"type": "RollingUpdate", "rollingUpdate": {
                "maxSurge": "25%", "maxUnavailable": "25%"}}, "revisionHistoryLimit": 10,
                "progressDeadlineSeconds": 600})
        if kind == "StatefulSet":
            spec_body.update({"serviceName": name, "podManagementPolicy": "OrderedReady",
                              "updateStrategy": {"type": "RollingUpdate"}})
        if kind == "DaemonSet":
            spec_body["updateStrategy"] = {"type": "RollingUpdate"}
        plural = {"Deployment": "deployments", "StatefulSet": "statefulsets", "DaemonSet": "daemonsets"}[kind]
        self._store(plural, {"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": spec_body,
                             "status": {}})
        if kind == "Deployment":
            wl.template_hash = template_hash(template)
            wl.rs_name = f"{name}-{wl.template_hash}"
            wl.rs_uid = self.new_uid()
            rs_labels = {**labels, "pod-template-hash": wl.template_hash}
            rs_template = copy.deepcopy(template)
            rs_template["metadata"]["labels"] = dict(rs_labels)
            rs_meta = self._new_meta(
                wl.rs_name, ns, labels=rs_labels, generation=1,
                annotations={"deployment.kubernetes.io/desired-replicas": str(wl.replicas),
                             "deployment.kubernetes.io/max-replicas": str(wl.replicas + 1),
                             "deployment.kubernetes.io/revision": "1"},
                ownerReferences=[{"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                                  "uid": wl.uid, "controller": True, "blockOwnerDeletion": True}],
            )
            rs_meta["uid"] = wl.rs_uid
            self._store("replicasets", {
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": rs_meta,
                "spec": {"replicas": wl.replicas, "selector": {"matchLabels": dict(rs_labels)},
                         "template": rs_template},
                "status": {"replicas": 0},
            })
        if kind == "StatefulSet":
            wl.template_hash = f"{name}-" + hashlib.sha256(f"{ns}/{name}".encode()).hexdigest()[:10]

    def _pod_template(self, wl: Workload) -> dict[str, Any]:
        return {"metadata": {"labels": dict(wl.labels)}, "spec": self._pod_spec(wl)}

    def _pod_spec(self, wl: Workload) -> dict[str, Any]:
        image = wl.extra.get("image") or (
            f"registry.k8s.io/{wl.name}:v{self.version}" if wl.namespace == "kube-system"
            else f"registry.example.com/{wl.name}:1.0")
        container: dict[str, Any] = {
            "name": wl.name, "image": image, "imagePullPolicy": "IfNotPresent", "resources": {},
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        }
        spec: dict[str, Any] = {
            "containers": [container], "dnsPolicy": "ClusterFirst", "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority", "priority": 0, "restartPolicy": "Always",
            "schedulerName": "default-scheduler", "securityContext": {},
            "serviceAccount": "default", "serviceAccountName": "default",
            "terminationGracePeriodSeconds": wl.grace_seconds,
        }
        if wl.empty_dir:
            spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
            container["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
        if wl.kind == "DaemonSet":
            # What the DaemonSet controller adds, plus the blanket toleration node agents carry.
            spec["tolerations"] = [{"operator": "Exists"}] + [
                {"key": key, "operator": "Exists", "effect": effect} for key, effect in (
                    (NOT_READY_TAINT, "NoExecute"), (UNREACHABLE_TAINT, "NoExecute"),
                    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
                    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
                    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
                    (UNSCHEDULABLE_TAINT, "NoSchedule"))]
        else:
            spec["tolerations"] = list(wl.extra.get("tolerations") or []) + [
                {"key": NOT_READY_TAINT, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": UNREACHABLE_TAINT, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ]
        return spec

    def _pods_of(self, wl: Workload) -> list[dict[str, Any]]:
        return [self._objects["pods"][k] for k in sorted(self._pods_by_owner.get(wl.key, ()))]

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

    def _pods_on(self, node: str) -> list[dict[str, Any]]:
        return [self._objects["pods"][k] for k in sorted(self._pods_by_node.get(node, ()))]

    def pods_on_node(self, node: str) -> list[dict[str, Any]]:
        """The stored pods bound to ``node`` (references: serialise under sim.lock, do not change)."""
        return self._pods_on(node)

    def _new_pod(self, wl: Workload, name: str, node: Optional[str]) -> dict[str, Any]:
        labels = dict(wl.labels)
        owners: list[dict[str, Any]] = []
        extra_meta: dict[str, Any] = {}
        if wl.kind == "Deployment":
            labels["pod-template-hash"] = wl.template_hash
            owners.append({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": wl.rs_name,
                           "uid": wl.rs_uid, "controller": True, "blockOwnerDeletion": True})
            extra_meta["generateName"] = f"{wl.rs_name}-"
        elif wl.kind == "StatefulSet":
            labels["statefulset.kubernetes.io/pod-name"] = name
            labels["controller-revision-hash"] = wl.template_hash
            labels["apps.kubernetes.io/pod-index"] = name.rsplit("-", 1)[1]
            owners.append({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": wl.name,
                           "uid": wl.uid, "controller": True, "blockOwnerDeletion": True})
        elif wl.kind == "DaemonSet":
            labels["controller-revision-hash"] = hashlib.sha256(wl.name.encode()).hexdigest()[:10]
            labels["pod-template-generation"] = "1"
            owners.append({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": wl.name,
                           "uid": wl.uid, "controller": True, "blockOwnerDeletion": True})
            extra_meta["generateName"] = f"{wl.name}-"
        spec = self._pod_spec(wl)
        if wl.kind == "StatefulSet":
            spec["hostname"] = name
            spec["subdomain"] = wl.name
        pod = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": self._new_meta(name, wl.namespace, labels=labels, ownerReferences=owners or None,
                                       **extra_meta),
            "spec": spec,
            "status": {"phase": "Pending", "qosClass": "BestEffort"},
        }
        self._store("pods", pod)
        self._created_by_controller(wl, pod)
        self._place(pod, node)
        return pod

    def _created_by_controller(self, wl: Workload, pod: dict[str, Any]) -> None:
        """The owning controller's SuccessfulCreate (replica_set.go / daemon_controller.go "Created pod:
        %v"; stateful_pod_control.go "create Pod %s in StatefulSet %s successful")."""
        name = pod["metadata"]["name"]
        if wl.kind == "Deployment":
            ref = {"kind": "ReplicaSet", "namespace": wl.namespace, "name": wl.rs_name, "uid": wl.rs_uid,
                   "apiVersion": "apps/v1"}
            self._event(wl.namespace, ref, "Normal", "SuccessfulCreate", f"Created pod: {name}", "replicaset-controller")
        elif wl.kind in ("DaemonSet", "StatefulSet"):
            ref = {"kind": wl.kind, "namespace": wl.namespace, "name": wl.name, "uid": wl.uid, "apiVersion": "apps/v1"}
            if wl.kind == "DaemonSet":
                self._event(wl.namespace, ref, "Normal", "SuccessfulCreate", f"Created pod: {name}", "daemonset-controller")
            else:
                self._event(wl.namespace, ref, "Normal", "SuccessfulCreate",
                            f"create Pod {name} in StatefulSet {wl.name} successful", "statefulset-controller")

    def _schedulable(self, pod: dict[str, Any], node_name: str) -> bool:
        node = self._raw("nodes", "", node_name)
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
        if not candidates:
            return None
        pods = self._objects["pods"]
        same: dict[str, int] = {}
        for key in self._pods_by_owner.get(owner, ()) if owner is not None else ():
            if "deletionTimestamp" not in pods[key]["metadata"]:
                node = self._pod_index[key][0]
                if node:
                    same[node] = same.get(node, 0) + 1

        tolerations = pod["spec"].get("tolerations") or []

        def score(node: str) -> tuple[int, int, int, str]:
            # kube-scheduler's TaintToleration score: fewer PreferNoSchedule taints the pod does
            # not tolerate is better. It comes first here: the real scheduler weighs it (weight 3)
            # against its other scores, and the only other one cks-sim models, spreading a
            # controller's pods (PodTopologySpread, weight 2), rarely outweighs it.
            return (self._intolerable_soft_taints(node, tolerations), same.get(node, 0),
                    len(self._pods_by_node.get(node, ())), node)

        return min(candidates, key=score)

    def _intolerable_soft_taints(self, node_name: str, tolerations: list[dict[str, Any]]) -> int:
        node = self._raw("nodes", "", node_name)
        return sum(1 for taint in node["spec"].get("taints") or []
                   if taint.get("effect") == "PreferNoSchedule" and not tolerates(tolerations, taint))

    def _place(self, pod: dict[str, Any], node: Optional[str]) -> None:
        """Bind a new pod to ``node`` (or the scheduler's pick) and start it, or leave it Pending."""
        if node is None:
            node = self._pick_node(pod, self._owner_key(pod))
        status = pod["status"]
        if node is None:
            if any(c["type"] == "PodScheduled" and c["status"] == "False" for c in status.get("conditions", [])):
                return  # still unschedulable: nothing new to write
            total = len(self.nodes)
            status["conditions"] = [_condition(
                "PodScheduled", "False", "Unschedulable",
                f"0/{total} nodes are available: {total} node(s) were unschedulable or not ready. "
                "preemption: 0/{0} nodes are available: {0} Preemption is not helpful for scheduling.".format(total))]
            self._store("pods", pod)
            return
        pod["spec"]["nodeName"] = node
        if self._built and MIRROR_ANNOTATION not in (pod["metadata"].get("annotations") or {}):
            # kube-scheduler's binding, recorded through the events.k8s.io recorder (schedule_one.go).
            self._event(pod["metadata"]["namespace"], self._pod_ref(pod), "Normal", "Scheduled",
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
            "phase": "Pending", "hostIP": self._node_ip(state), "hostIPs": [{"ip": self._node_ip(state)}],
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
        self._store("pods", pod)
        if state.kubelet_posting:
            self._schedule_start(pod)

    def _schedule_start(self, pod: dict[str, Any]) -> None:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        self.sim.scheduler.cancel(self._pod_timers.pop(key, None))
        self._pod_timers[key] = self.sim.scheduler.schedule(
            self.sim.delay("pod_start"), self._pod_started, key, pod["metadata"]["uid"])

    def _pod_started(self, key: tuple[str, str], uid: str) -> None:
        self._pod_timers.pop(key, None)
        pod = self._objects["pods"].get(key)
        if pod is None or pod["metadata"]["uid"] != uid or "deletionTimestamp" in pod["metadata"]:
            return
        node = pod["spec"].get("nodeName")
        if not node or node not in self.nodes or not self.nodes[node].kubelet_posting:
            return
        if uid in self._api_pods:
            self._kubelet_runs(pod)
            return
        self._mark_pod_running(pod)
        self._store("pods", pod)
        self._after_change()

    # ----- pods created through the API (kube_run.py) ------------------------------------------

    def _create_pod(self, pod: dict[str, Any]) -> dict[str, Any]:
        kube_run.apply_defaults(pod)
        tolerations = pod["spec"].setdefault("tolerations", [])
        # The DefaultTolerationSeconds admission plugin, on in every API server by default.
        for key in (NOT_READY_TAINT, UNREACHABLE_TAINT):
            if not any(t.get("key") == key and t.get("effect") in (None, "", "NoExecute") for t in tolerations):
                tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
        self._store("pods", pod)
        self._api_pods.add(pod["metadata"]["uid"])
        node = pod["spec"].get("nodeName")
        if node is None:
            self._place(pod, None)
        elif node in self.nodes:
            # No scheduler: the named node's kubelet sees the pod, if it runs.
            state = self.nodes[node]
            pod["status"].update({"hostIP": self._node_ip(state), "hostIPs": [{"ip": self._node_ip(state)}]})
            self._store("pods", pod)
            if state.kubelet_posting:
                self._schedule_start(pod)
        return copy.deepcopy(pod)

    def _kubelet_runs(self, pod: dict[str, Any]) -> None:
        """The kubelet's sync of an API-created pod: admit, ensure images, run the containers."""
        status = pod["status"]
        if status["phase"] in ("Succeeded", "Failed") or status.get("containerStatuses") and any(
                "running" in cs["state"] for cs in status["containerStatuses"]):
            return  # ended, or running already: a new boot does not run a one-shot pod again
        node = self._raw("nodes", "", pod["spec"]["nodeName"])
        stamp = now_time()
        status.setdefault("startTime", stamp)
        refusal = kube_run.admission_refusal(pod, node)
        if refusal is not None:
            status.update({"phase": "Failed", "reason": refusal[0], "message": refusal[1]})
            self._store("pods", pod)
            return
        containers = pod["spec"]["containers"]
        missing = [kube_run.image_refusal(c, node) for c in containers]
        status["conditions"] = [_condition("PodScheduled", "True"), _condition("Initialized", "True"),
                                _condition("PodReadyToStartContainers", "True")]
        if any(missing):
            status["containerStatuses"] = [
                kube_run.waiting_status(c, *m) if m else kube_run.waiting_status(c, "ContainerCreating")
                for c, m in zip(containers, missing, strict=True)]
            self._store("pods", pod)
            return
        status["phase"] = "Running"
        status["containerStatuses"] = [dict(kube_run.waiting_status(c, "ContainerCreating"),
                                            started=True, state={"running": {"startedAt": stamp}})
                                       for c in containers]
        self._store("pods", pod)
        key, uid = (pod["metadata"]["namespace"], pod["metadata"]["name"]), pod["metadata"]["uid"]
        self.runs.start(uid, containers, lambda results: self._runs_finished(key, uid, stamp, results), now_time)

    def _runs_finished(self, key: tuple[str, str], uid: str, started: str, results: list[tuple[int, str]]) -> None:
        pod = self._objects["pods"].get(key)
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
        self._store("pods", pod)

    def container_log(self, namespace: str, name: str, container: str) -> Optional[str]:
        """What the kubelet kept of a container's output; None when it has not run."""
        pod = self._raw("pods", namespace, name)
        if pod is None:
            return None
        return self.runs.logs.get(pod["metadata"]["uid"], {}).get(container)

    def use_external_etcd_servers(self, urls: list[str]) -> None:
        """kubeadm's --etcd-servers for external etcd (CKS's k8s-control-node.yml writes
        http://<etcd node ip>:2379 for each): here the members' real client URLs, which are also
        what they advertise, as on a real cluster."""
        self.etcd_servers = ",".join(urls)
        for pod in self.select("pods", "kube-system"):
            if (pod["metadata"].get("labels") or {}).get("component") != "kube-apiserver":
                continue
            command = pod["spec"]["containers"][0].setdefault("command", [])
            for i, arg in enumerate(command):
                if arg.startswith("--etcd-servers="):
                    command[i] = f"--etcd-servers={self.etcd_servers}"
            self._store("pods", pod)

    def _pod_ip(self, pod: dict[str, Any]) -> str:
        node = pod["spec"]["nodeName"]
        if pod["spec"].get("hostNetwork"):
            return self._node_ip(self.nodes[node])
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
        for pod in self.select("pods", "kube-system"):
            if self._is_api_server_of(pod, name) and pod["status"].get("phase") == "Running":
                self._set_pod_ready(pod, self.node_ready_status(name) == "True")

    @staticmethod
    def _is_api_server_of(pod: dict[str, Any], node: str) -> bool:
        return ((pod["metadata"].get("labels") or {}).get("component") == "kube-apiserver"
                and pod["spec"].get("nodeName") == node)

    def _set_pod_ready(self, pod: dict[str, Any], ready: bool) -> None:
        if ready and self.api_servers_down and self._is_api_server_of(pod, str(pod["spec"].get("nodeName"))):
            ready = pod["spec"].get("nodeName") not in self.api_servers_down
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
        self._store("pods", pod)

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

    @staticmethod
    def _pod_ready(pod: dict[str, Any]) -> bool:
        return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))

    def _ensure_mirror_pods(self, node: str) -> None:
        components = ["kube-apiserver", "kube-controller-manager", "kube-scheduler"]
        if self.stacked_etcd:
            components.insert(0, "etcd")
        state = self.nodes[node]
        node_uid = self._raw("nodes", "", node)["metadata"]["uid"]
        for comp in components:
            name = f"{comp}-{node}"
            if self._raw("pods", "kube-system", name) is not None:
                continue
            config_hash = hashlib.md5(f"{comp}/{node}".encode()).hexdigest()
            annotations = {
                "kubernetes.io/config.hash": config_hash, MIRROR_ANNOTATION: config_hash,
                "kubernetes.io/config.seen": now_micro(), "kubernetes.io/config.source": "file",
            }
            if comp == "etcd":
                annotations["kubeadm.kubernetes.io/etcd.advertise-client-urls"] = f"https://{self._node_ip(state)}:2379"
            if comp == "kube-apiserver":
                annotations["kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"] = f"{self._node_ip(state)}:6443"
            wl = Workload(kind="Mirror", namespace="kube-system", name=comp, replicas=1,
                          labels={"component": comp, "tier": "control-plane"}, empty_dir=False, uid="",
                          extra={"image": f"registry.k8s.io/{comp}:v{self.version}" if comp != "etcd"
                                 else "registry.k8s.io/etcd:3.5.15-0"})
            spec = self._pod_spec(wl)
            if comp == "etcd":
                self._kubeadm_etcd_container(spec, node, f"https://{self._node_ip(state)}:2379")
            if comp == "kube-apiserver":
                # kubeadm's manifest (cmd/kubeadm/app/phases/controlplane/manifests.go,
                # getAPIServerCommand): the flags that say where etcd is.
                spec["containers"][0]["command"] = [
                    "kube-apiserver", f"--advertise-address={self._node_ip(state)}",
                    f"--etcd-servers={self.etcd_servers}", "--secure-port=6443"]
                if self.stacked_etcd:
                    spec["containers"][0]["command"][3:3] = [
                        "--etcd-cafile=/etc/kubernetes/pki/etcd/ca.crt",
                        "--etcd-certfile=/etc/kubernetes/pki/apiserver-etcd-client.crt",
                        "--etcd-keyfile=/etc/kubernetes/pki/apiserver-etcd-client.key"]
            spec.update({"hostNetwork": True, "priority": 2000001000,
                         "priorityClassName": "system-node-critical",
                         "tolerations": [{"operator": "Exists", "effect": "NoExecute"}]})
            pod = {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": self._new_meta(name, "kube-system", labels=dict(wl.labels), annotations=annotations,
                                           ownerReferences=[{"apiVersion": "v1", "kind": "Node", "name": node,
                                                             "uid": node_uid, "controller": True}]),
                "spec": spec,
                "status": {"phase": "Pending", "qosClass": "Burstable"},
            }
            self._store("pods", pod)
            self._place(pod, node)

    def _kubeadm_etcd_container(self, spec: dict[str, Any], node: str, client_url: str) -> None:
        """kubeadm's etcd manifest (cmd/kubeadm/app/phases/etcd/local.go, GetEtcdPodSpec): the
        flags that name the certificates under /etc/kubernetes/pki/etcd, and the two hostPaths."""
        ip = client_url.split("//", 1)[-1].rsplit(":", 1)[0]
        pki = "/etc/kubernetes/pki/etcd"
        container = spec["containers"][0]
        container["command"] = [
            "etcd", f"--advertise-client-urls={client_url}", f"--cert-file={pki}/server.crt",
            "--client-cert-auth=true", "--data-dir=/var/lib/etcd", "--experimental-initial-corrupt-check=true",
            "--experimental-watch-progress-notify-interval=5s", f"--initial-advertise-peer-urls=https://{ip}:2380",
            f"--initial-cluster={node}=https://{ip}:2380", f"--key-file={pki}/server.key",
            f"--listen-client-urls=https://127.0.0.1:2379,{client_url}", "--listen-metrics-urls=http://127.0.0.1:2381",
            f"--listen-peer-urls=https://{ip}:2380", f"--name={node}", f"--peer-cert-file={pki}/peer.crt",
            "--peer-client-cert-auth=true", f"--peer-key-file={pki}/peer.key", f"--peer-trusted-ca-file={pki}/ca.crt",
            "--snapshot-count=10000", f"--trusted-ca-file={pki}/ca.crt",
        ]
        container["volumeMounts"] = [{"mountPath": "/var/lib/etcd", "name": "etcd-data"},
                                     {"mountPath": pki, "name": "etcd-certs"}]
        spec["volumes"] = [{"hostPath": {"path": pki, "type": "DirectoryOrCreate"}, "name": "etcd-certs"},
                           {"hostPath": {"path": "/var/lib/etcd", "type": "DirectoryOrCreate"}, "name": "etcd-data"}]

    def use_etcd_client_urls(self, urls: dict[str, str]) -> None:
        """Show each stacked member's real client URL (the sim's loopback port) where kubeadm
        shows its node's: the pod annotation and --advertise-client-urls, so that they match
        what `etcdctl member list` answers, as they do on a cluster."""
        for node, url in urls.items():
            pod = self._raw("pods", "kube-system", f"etcd-{node}")
            if pod is None:
                continue
            pod["metadata"]["annotations"]["kubeadm.kubernetes.io/etcd.advertise-client-urls"] = url
            command = pod["spec"]["containers"][0].get("command") or []
            for i, arg in enumerate(command):
                if arg.startswith("--advertise-client-urls="):
                    command[i] = f"--advertise-client-urls={url}"
                elif arg.startswith("--listen-client-urls="):
                    command[i] = f"--listen-client-urls=https://127.0.0.1:2379,{url}"
            pod["metadata"]["resourceVersion"] = self.next_rv()
            self.watch_cache.record(pod["metadata"]["resourceVersion"], "pods", "MODIFIED", pod)

    def node_address(self, name: str) -> str:
        return self._node_ip(self.nodes[name])

    def _reconcile_all(self) -> None:
        """The controllers' loop: every workload has its pods (replacements created now)."""
        for wl in list(self.workloads.values()):
            pods = self._pods_of(wl)
            if wl.kind == "Deployment":
                active = [p for p in pods if "deletionTimestamp" not in p["metadata"]]
                for _replica in range(wl.replicas - len(active)):
                    self._new_pod(wl, f"{wl.rs_name}-{self._suffix()}", None)
            elif wl.kind == "StatefulSet":
                names = {p["metadata"]["name"] for p in pods}
                for ordinal in range(wl.replicas):
                    # A StatefulSet re-creates a pod only once the old one with that name is gone.
                    if f"{wl.name}-{ordinal}" not in names:
                        self._new_pod(wl, f"{wl.name}-{ordinal}", None)
            elif wl.kind == "DaemonSet":
                covered = {p["spec"].get("nodeName") for p in pods}
                for node in sorted(self.nodes):
                    if node not in covered:
                        self._new_pod(wl, f"{wl.name}-{self._suffix()}", node)
            elif wl.kind == "Pod" and not wl.extra.get("_created"):
                wl.extra["_created"] = True
                self._new_pod(wl, wl.name, wl.node)
        for state in self.nodes.values():
            if state.node_type == "control" and state.kubelet_posting:
                self._ensure_mirror_pods(state.name)

    def _retry_pending(self) -> None:
        for pod in list(self._objects["pods"].values()):
            if pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName") \
                    and "deletionTimestamp" not in pod["metadata"]:
                self._place(pod, None)

    def _after_change(self) -> None:
        self._reconcile_all()
        self._retry_pending()
        self._refresh_derived()

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
        self._store("pods", pod)
        if self.nodes[node].kubelet_posting:
            # kuberuntime_container.go killContainer: one Killing event per running container.
            for container in pod["spec"].get("containers") or []:
                self._event(pod["metadata"]["namespace"], self._pod_ref(pod, container["name"]), "Normal", "Killing",
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
        pod = self._objects["pods"].get(key)
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
        pod = self._objects["pods"].get(key)
        if pod is None or pod["metadata"]["uid"] != uid:
            return
        owner = self._owner_key(pod)
        del self._objects["pods"][key]
        self._unindex_pod(key)
        self._api_pods.discard(uid)
        self.runs.forget(uid)
        self._deleted("pods", pod)
        self.sim.scheduler.cancel(self._pod_timers.pop(key, None))
        self.sim.timeline.add(cluster=self.cluster_id, node=pod["spec"].get("nodeName"), event="pod_deleted",
                              pod=f"{key[0]}/{key[1]}", uid=uid)
        self._reconcile_all()
        wl = self.workloads.get(owner) if owner else None
        if wl is not None and wl.kind in ("Deployment", "StatefulSet"):
            if len(self._pods_of(wl)) < wl.replicas:
                self.sim.invariants.add(kind="pod_lost", cluster=self.cluster_id,
                                        pod=f"{key[0]}/{key[1]}", owner=f"{wl.kind}/{wl.name}")

    # ----- PDBs -------------------------------------------------------------------------------

    def _add_pdb(self, spec: dict) -> None:
        ns = spec.get("namespace", "default")
        self._ensure_namespace(ns)
        selector = spec.get("selector") or {}
        if not ({"matchLabels", "matchExpressions"} & set(selector)):
            selector = {"matchLabels": dict(selector)}
        body: dict[str, Any] = {"selector": selector}
        for key in ("minAvailable", "maxUnavailable", "unhealthyPodEvictionPolicy"):
            if spec.get(key) is not None:
                body[key] = spec[key]
        self._store("poddisruptionbudgets", {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": self._new_meta(spec["name"], ns, generation=1),
            "spec": body, "status": {},
        })

    def _pdb_pods(self, pdb: dict[str, Any]) -> list[dict[str, Any]]:
        ns = pdb["metadata"]["namespace"]
        return [p for (pns, _pod_name), p in self._objects["pods"].items()
                if pns == ns and selector_matches(pdb["spec"].get("selector"), p["metadata"].get("labels") or {})]

    def _expected_pods(self, pdb: dict[str, Any], pods: list[dict[str, Any]]) -> int:
        spec = pdb["spec"]
        if spec.get("maxUnavailable") is None and not str(spec.get("minAvailable", "")).endswith("%"):
            return len(pods)
        # Percentages and maxUnavailable scale with the controllers' desired replicas.
        owners = {self._owner_key(p) for p in pods} - {None}
        return sum(self.workloads[o].replicas for o in owners if o in self.workloads
                   and self.workloads[o].kind in ("Deployment", "StatefulSet"))

    def _pdb_status(self, pdb: dict[str, Any], true_health: bool = False) -> dict[str, Any]:
        pods = self._pdb_pods(pdb)
        expected = self._expected_pods(pdb, pods)
        healthy = 0
        for pod in pods:
            if "deletionTimestamp" in pod["metadata"] or not self._pod_ready(pod):
                continue
            node = pod["spec"].get("nodeName")
            if true_health and not (node and self.nodes[node].vm_running):
                continue
            healthy += 1
        spec = pdb["spec"]
        if spec.get("maxUnavailable") is not None:
            desired = max(0, expected - _int_or_percent(spec["maxUnavailable"], expected))
        elif spec.get("minAvailable") is not None:
            desired = _int_or_percent(spec["minAvailable"], expected)
        else:
            desired = expected
        allowed = max(0, healthy - desired)
        ns, name = pdb["metadata"]["namespace"], pdb["metadata"]["name"]
        if self.sim.faults.peek("pdb_block", namespace=ns, name=name, cluster=self.cluster_id) is not None:
            allowed = 0
        return {"currentHealthy": healthy, "desiredHealthy": desired, "disruptionsAllowed": allowed,
                "expectedPods": expected, "observedGeneration": pdb["metadata"].get("generation", 1)}

    def _refresh_derived(self) -> None:
        """Controllers' status writes: PDB and workload status, stored only when they change."""
        for pdb in self._objects["poddisruptionbudgets"].values():
            status = self._pdb_status(pdb)
            old = pdb.get("status") or {}
            allowed = status["disruptionsAllowed"] > 0
            old_cond = next(iter(old.get("conditions") or []), None)
            cond = {"type": "DisruptionAllowed", "status": "True" if allowed else "False",
                    "reason": "SufficientPods" if allowed else "InsufficientPods", "message": "",
                    "observedGeneration": status["observedGeneration"],
                    "lastTransitionTime": now_time()}
            if old_cond and old_cond["status"] == cond["status"]:
                cond["lastTransitionTime"] = old_cond["lastTransitionTime"]
            status["conditions"] = [cond]
            if status != old:
                pdb["status"] = status
                self._store("poddisruptionbudgets", pdb)
        for wl in self.workloads.values():
            if wl.kind in ("Pod", "Mirror"):
                continue
            pods = [p for p in self._pods_of(wl) if "deletionTimestamp" not in p["metadata"]]
            ready = sum(1 for p in pods if self._pod_ready(p))
            if wl.kind == "DaemonSet":
                scheduled = sum(1 for p in pods if p["spec"].get("nodeName"))
                status = {"currentNumberScheduled": scheduled, "desiredNumberScheduled": len(self.nodes),
                          "numberAvailable": ready, "numberMisscheduled": 0, "numberReady": ready,
                          "observedGeneration": 1, "updatedNumberScheduled": scheduled}
                if len(self.nodes) - ready:
                    status["numberUnavailable"] = len(self.nodes) - ready
                self._set_status("daemonsets", wl.namespace, wl.name, status)
                continue
            status = {"replicas": len(pods), "readyReplicas": ready, "availableReplicas": ready,
                      "observedGeneration": 1}
            if wl.kind == "Deployment":
                status["updatedReplicas"] = len(pods)
                if wl.replicas - ready > 0:
                    status["unavailableReplicas"] = wl.replicas - ready
                self._set_status("deployments", wl.namespace, wl.name, status)
                rs_status = {"replicas": len(pods), "readyReplicas": ready, "availableReplicas": ready,
                             "fullyLabeledReplicas": len(pods), "observedGeneration": 1}
                self._set_status("replicasets", wl.namespace, wl.rs_name, rs_status)
            else:
                status.update({"currentReplicas": len(pods), "updatedReplicas": len(pods),
                               "currentRevision": wl.template_hash, "updateRevision": wl.template_hash,
                               "collisionCount": 0})
                self._set_status("statefulsets", wl.namespace, wl.name, status)

    def _set_status(self, plural: str, ns: str, name: str, status: dict[str, Any]) -> None:
        obj = self._raw(plural, ns, name)
        if obj is not None and obj.get("status") != status:
            obj["status"] = status
            self._store(plural, obj)

    # ----- the API's verbs --------------------------------------------------------------------

    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        self._before_read(plural, namespace, name)
        obj = self._raw(plural, namespace, name)
        if obj is None:
            raise not_found(RESOURCES[plural], name)
        return copy.deepcopy(obj)

    def list(self, plural: str, namespace: Optional[str]) -> list[dict[str, Any]]:
        """Copies of the objects of a resource (one namespace or all), sorted by namespace and name."""
        return [copy.deepcopy(obj) for obj in self.select(plural, namespace)]

    def select(self, plural: str, namespace: Optional[str]) -> list[dict[str, Any]]:
        """The stored objects themselves, sorted; for readers that serialise them under sim.lock."""
        self._before_read(plural, namespace)
        items = self._objects[plural]
        return [items[k] for k in sorted(items) if namespace is None or k[0] == namespace]

    def _before_read(self, plural: str, namespace: Optional[str], name: Optional[str] = None) -> None:
        # Controllers' writes that depend on time or faults, brought up to date before a read. The
        # control plane's leases only when they can be seen: a read of another Lease of kube-system
        # (the rollout's lock) leaves the store, and its resourceVersion, as it was.
        if plural == "leases" and namespace in (None, NODE_LEASE_NS):
            self.refresh_node_leases()
        if plural == "leases" and namespace in (None, kube_leases.NAMESPACE) and (
                name is None or kube_leases.is_control_plane_lease(name)):
            self.leader_leases.refresh(self)
        if plural == "events":
            self.expire_events()
        if RESOURCES[plural].group in ("policy", "apps"):
            self._refresh_derived()

    def namespace_exists(self, ns: str) -> bool:
        return self._raw("namespaces", "", ns) is not None

    def _validate(self, res: Resource, obj: dict[str, Any]) -> None:
        if res.plural == "pods":
            causes = kube_run.validation_causes(obj)
            if causes:
                name = obj["metadata"]["name"]
                raise ApiError(422, kube_run.invalid_message(name, causes), "Invalid", _details(
                    res, name, causes=[{"reason": r, "message": d, "field": f} for f, r, d in causes]))
        if res.plural == "leases":
            spec = obj.get("spec") or {}
            for field_name in ("acquireTime", "renewTime"):
                if spec.get(field_name) is not None:
                    spec[field_name] = parse_microtime(spec[field_name], f"spec.{field_name}", "Lease")
            for field_name in ("leaseDurationSeconds", "leaseTransitions"):
                value = spec.get(field_name)
                if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                    raise ApiError(400, f'Lease in version "v1" cannot be handled as a Lease: '
                                        f'json: cannot unmarshal {type(value).__name__} into Go struct field '
                                        f'LeaseSpec.spec.{field_name} of type int32', "BadRequest")
            causes = []
            if isinstance(spec.get("leaseDurationSeconds"), int) and spec["leaseDurationSeconds"] <= 0:
                causes.append(("spec.leaseDurationSeconds", spec["leaseDurationSeconds"], "must be greater than 0"))
            if isinstance(spec.get("leaseTransitions"), int) and spec["leaseTransitions"] < 0:
                causes.append(("spec.leaseTransitions", spec["leaseTransitions"],
                               "must be greater than or equal to 0"))
            if causes:
                raise self._invalid(res, obj["metadata"]["name"], causes)
        if res.plural == "configmaps":
            for key, value in (obj.get("data") or {}).items():
                if not isinstance(value, str):
                    raise ApiError(400, f'ConfigMap in version "v1" cannot be handled as a ConfigMap: '
                                        f'json: cannot unmarshal {type(value).__name__} into Go struct field '
                                        f'ConfigMap.data of type string', "BadRequest")
                if not re.match(r"^[-._a-zA-Z0-9]+$", key):
                    raise self._invalid(res, obj["metadata"]["name"], [(
                        "data", key, "a valid config key must consist of alphanumeric characters, '-', '_' or '.'")])

    @staticmethod
    def _invalid(res: Resource, name: str, causes: list[tuple[str, Any, str]]) -> ApiError:
        text = "; ".join(f"{f}: Invalid value: {v!r}: {m}" for f, v, m in causes)
        return ApiError(422, f'{res.kind} "{name}" is invalid: {text}', "Invalid", _details(
            res, name, causes=[{"reason": "FieldValueInvalid", "message": f"Invalid value: {v!r}: {m}",
                                "field": f} for f, v, m in causes]))

    def create(self, plural: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        res = RESOURCES[plural]
        if not isinstance(body, dict):
            raise ApiError(400, "the body of the request was in an unknown format", "BadRequest")
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {}) or {}
        obj["metadata"] = meta
        if res.namespaced:
            if meta.get("namespace") not in (None, "", namespace):
                raise ApiError(400, "the namespace of the provided object does not match the namespace "
                                    "sent on the request", "BadRequest")
            if not self.namespace_exists(namespace):
                raise not_found(RESOURCES["namespaces"], namespace)
            meta["namespace"] = namespace
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = meta["generateName"] + self._suffix()
            else:
                raise self._invalid(res, "", [("metadata.name", "", "name or generateName is required")])
        name = meta["name"]
        if self._raw(plural, namespace, name) is not None:
            raise ApiError(409, f'{res.qualified} "{name}" already exists', "AlreadyExists", _details(res, name))
        if meta.get("resourceVersion"):
            raise ApiError(400, "resourceVersion should not be set on objects to be created", "BadRequest")
        self._validate(res, obj)
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        meta.update({"uid": self.new_uid(), "creationTimestamp": now_time()})
        for drop in ("deletionTimestamp", "deletionGracePeriodSeconds", "generation", "managedFields", "selfLink"):
            meta.pop(drop, None)
        if plural == "pods":
            return self._create_pod(obj)
        self._store(plural, obj)
        return copy.deepcopy(obj)

    def update(self, plural: str, namespace: str, name: str, body: dict[str, Any],
               subresource: Optional[str] = None, actor: str = "api") -> dict[str, Any]:
        """PUT semantics; PATCH ends here too, with the patched object as ``body``."""
        res = RESOURCES[plural]
        current = self._raw(plural, namespace, name)
        if current is None:
            raise not_found(res, name)
        if not isinstance(body, dict) or not isinstance(body.get("metadata") or {}, dict):
            raise ApiError(400, "the body of the request was in an unknown format", "BadRequest")
        obj = copy.deepcopy(body)
        meta = obj.get("metadata") or {}
        obj["metadata"] = meta
        if meta.get("name", name) != name:
            raise ApiError(400, f"the name of the object ({meta.get('name')}) does not match the name on the "
                                f"URL ({name})", "BadRequest")
        if res.namespaced and meta.get("namespace") not in (None, "", namespace):
            raise ApiError(400, "the namespace of the provided object does not match the namespace sent on "
                                "the request", "BadRequest")
        rv = meta.get("resourceVersion")
        if rv not in (None, "") and rv != current["metadata"]["resourceVersion"]:
            raise conflict(res, name, STALE_OBJECT)
        if meta.get("uid") not in (None, "") and meta["uid"] != current["metadata"]["uid"]:
            raise conflict(res, name, f"Precondition failed: UID in precondition: {meta['uid']}, UID in object "
                                      f"meta: {current['metadata']['uid']}")
        self._validate(res, obj)
        # What a client cannot change through this endpoint stays as stored.
        for keep in ("uid", "creationTimestamp", "generation", "deletionTimestamp", "deletionGracePeriodSeconds"):
            if keep in current["metadata"]:
                meta[keep] = current["metadata"][keep]
            else:
                meta.pop(keep, None)
        meta["name"] = name
        if res.namespaced:
            meta["namespace"] = namespace
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        if plural == "nodes":
            return self._update_node(current, obj, subresource, actor)
        if "status" in current and plural != "events":
            obj["status"] = current["status"]
        self._store(plural, obj)
        return copy.deepcopy(obj)

    def _update_node(self, current: dict[str, Any], obj: dict[str, Any], subresource: Optional[str],
                     actor: str) -> dict[str, Any]:
        name = current["metadata"]["name"]
        if subresource == "status":
            raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
        # The main resource ignores status; the kubelet owns it.
        obj["status"] = current["status"]
        obj.setdefault("spec", {})
        self._validate_taints(name, obj["spec"].get("taints"))
        was = bool(current["spec"].get("unschedulable"))
        now = bool(obj["spec"].get("unschedulable"))
        if not now:
            obj["spec"].pop("unschedulable", None)
        self._reconcile_taints(obj)
        self._store("nodes", obj)
        state = self.nodes[name]
        old_ann = current["metadata"].get("annotations") or {}
        new_ann = obj["metadata"].get("annotations") or {}
        for key in sorted(set(old_ann) | set(new_ann)):
            if old_ann.get(key) != new_ann.get(key):
                self.sim.timeline.add(cluster=self.cluster_id, node=name, event="annotated", key=key,
                                      value=new_ann.get(key))
        old_labels = current["metadata"].get("labels") or {}
        new_labels = obj["metadata"].get("labels") or {}
        for key in sorted(set(old_labels) | set(new_labels)):
            if old_labels.get(key) != new_labels.get(key):
                self.sim.timeline.add(cluster=self.cluster_id, node=name, event="labelled", key=key,
                                      value=new_labels.get(key))
        # Taints a client wrote (the lifecycle controller's own are journaled as cordon / notready).
        old_taints = {(t.get("key"), t.get("effect")) for t in current["spec"].get("taints") or []
                      if t.get("key") not in LIFECYCLE_TAINTS}
        new_taints = {(t.get("key"), t.get("effect")) for t in obj["spec"].get("taints") or []
                      if t.get("key") not in LIFECYCLE_TAINTS}
        for key, effect in sorted(new_taints - old_taints):
            self.sim.timeline.add(cluster=self.cluster_id, node=name, event="tainted", key=key, effect=effect)
        for key, effect in sorted(old_taints - new_taints):
            self.sim.timeline.add(cluster=self.cluster_id, node=name, event="untainted", key=key, effect=effect)
        if now and not was:
            self.sim.timeline.add(cluster=self.cluster_id, node=name, event="cordoned", by=actor)
        if was and not now:
            self.sim.timeline.add(cluster=self.cluster_id, node=name, event="uncordoned", by=actor)
            if state.foreign_cordon:
                self.sim.invariants.add(kind="foreign_cordon_undone", cluster=self.cluster_id, node=name,
                                        detail="a node cordoned by someone else was uncordoned through the API")
                state.foreign_cordon = False
            self._after_change()
        return copy.deepcopy(obj)

    def _validate_taints(self, name: str, taints: Any) -> None:
        """ValidateNodeTaints: a key, a known effect, and each key and effect pair once."""
        if taints is None:
            return
        if not isinstance(taints, list):
            raise ApiError(400, 'Node in version "v1" cannot be handled as a Node: json: cannot unmarshal '
                                'into Go struct field NodeSpec.spec.taints of type []v1.Taint', "BadRequest")
        causes: list[tuple[str, Any, str]] = []
        seen: set[tuple[Any, Any]] = set()
        for i, taint in enumerate(taints):
            taint = taint if isinstance(taint, dict) else {}
            if not taint.get("key"):
                causes.append((f"spec.taints[{i}].key", "", "name part must be non-empty"))
            if taint.get("effect") not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
                causes.append((f"spec.taints[{i}].effect", taint.get("effect"),
                               'supported values: "NoExecute", "NoSchedule", "PreferNoSchedule"'))
            pair = (taint.get("key"), taint.get("effect"))
            if pair in seen:
                causes.append((f"spec.taints[{i}]", taint,
                               "taints must be unique by key and effect pair"))
            seen.add(pair)
        if causes:
            raise self._invalid(RESOURCES["nodes"], name, causes)

    def delete(self, plural: str, namespace: str, name: str, options: dict[str, Any]) -> dict[str, Any]:
        res = RESOURCES[plural]
        current = self._raw(plural, namespace, name)
        if current is None:
            raise not_found(res, name)
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != current["metadata"]["uid"]:
            raise conflict(res, name, f"the UID in the precondition ({pre['uid']}) does not match the UID in "
                                      f"record ({current['metadata']['uid']}). The object might have been "
                                      f"deleted and then recreated")
        if pre.get("resourceVersion") and pre["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise conflict(res, name, f"the ResourceVersion in the precondition ({pre['resourceVersion']}) does "
                                      f"not match the ResourceVersion in record "
                                      f"({current['metadata']['resourceVersion']}). The object might have been "
                                      f"modified")
        dry_run = bool(options.get("dryRun"))
        if plural == "pods":
            if not dry_run and "deletionTimestamp" not in current["metadata"]:
                self._begin_termination(current, options.get("gracePeriodSeconds"))
                self._after_change()
            gone = self._objects["pods"].get((namespace, name))
            return copy.deepcopy(gone if gone is not None else current)
        if not dry_run:
            del self._objects[plural][(namespace if res.namespaced else "", name)]
            self._deleted(plural, current)
        return success_status(200, _details(res, name, uid=current["metadata"]["uid"]))

    def evict(self, namespace: str, name: str, body: dict[str, Any], dry_run: bool) -> dict[str, Any]:
        """policy/v1 Eviction, following the API server's eviction REST handler."""
        pod = self._raw("pods", namespace, name)
        if pod is None:
            raise not_found(RESOURCES["pods"], name)
        body_name = ((body or {}).get("metadata") or {}).get("name")
        if body_name not in (None, "", name):
            raise ApiError(400, "name in URL does not match name in Eviction object", "BadRequest")
        options = (body or {}).get("deleteOptions") or {}
        dry_run = dry_run or bool(options.get("dryRun"))
        node = pod["spec"].get("nodeName")
        pod_name = f"{namespace}/{name}"
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != pod["metadata"]["uid"]:
            raise conflict(RESOURCES["pods"], name, f"the UID in the precondition ({pre['uid']}) does not match "
                                                    f"the UID in record ({pod['metadata']['uid']}). The object "
                                                    f"might have been deleted and then recreated")

        def accept(check_budget: bool) -> dict[str, Any]:
            self.sim.timeline.add(cluster=self.cluster_id, node=node, event="eviction", pod=pod_name,
                                  result="accepted", dry_run=dry_run)
            if not dry_run:
                self._begin_termination(pod, options.get("gracePeriodSeconds"))
                self._after_change()
                if check_budget:
                    self._check_budgets(pod, pod_name)
            return success_status(201)

        if "deletionTimestamp" in pod["metadata"] or pod["status"]["phase"] in ("Succeeded", "Failed", "Pending"):
            return accept(False)
        pdbs = [p for p in self._objects["poddisruptionbudgets"].values()
                if p["metadata"]["namespace"] == namespace
                and selector_matches(p["spec"].get("selector"), pod["metadata"].get("labels") or {})]
        if len(pdbs) > 1:
            self.sim.timeline.add(cluster=self.cluster_id, node=node, event="eviction", pod=pod_name,
                                  result="multiple_pdbs")
            raise ApiError(500, "This pod has more than one PodDisruptionBudget, which the eviction "
                                "subresource does not support.", "InternalError")
        if not pdbs:
            return accept(False)
        pdb = pdbs[0]
        status = self._pdb_status(pdb)
        if not self._pod_ready(pod):
            policy = pdb["spec"].get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
            if policy == "AlwaysAllow" or status["currentHealthy"] >= status["desiredHealthy"]:
                return accept(False)
        elif status["disruptionsAllowed"] > 0:
            return accept(True)
        self.sim.timeline.add(cluster=self.cluster_id, node=node, event="eviction", pod=pod_name,
                              result="blocked", pdb=pdb["metadata"]["name"])
        raise ApiError(
            429, "Cannot evict pod as it would violate the pod's disruption budget.", "TooManyRequests",
            {"causes": [{"reason": "DisruptionBudget",
                         "message": f"The disruption budget {pdb['metadata']['name']} needs "
                                    f"{status['desiredHealthy']} healthy pods and has "
                                    f"{status['currentHealthy']} currently"}]},
        )

    def _check_budgets(self, pod: dict[str, Any], pod_name: str) -> None:
        """After an accepted eviction: does any budget really hold, counting pods on dead VMs?"""
        ns = pod["metadata"]["namespace"]
        for pdb in self._objects["poddisruptionbudgets"].values():
            if pdb["metadata"]["namespace"] != ns or not selector_matches(
                    pdb["spec"].get("selector"), pod["metadata"].get("labels") or {}):
                continue
            status = self._pdb_status(pdb, true_health=True)
            if status["currentHealthy"] < status["desiredHealthy"]:
                self.sim.invariants.add(
                    kind="pdb_below_budget", cluster=self.cluster_id, pdb=f"{ns}/{pdb['metadata']['name']}",
                    pod=pod_name, healthy=status["currentHealthy"], desired=status["desiredHealthy"])
