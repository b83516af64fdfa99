"""The state of one cluster's Kubernetes, declared in one place: the API objects as stored, the
hidden state the API cannot see (a node's VM power and kubelet boots, the spec's workloads), the
indexes and caches over them, timers, and the settings read from the spec.

``KubeWorld`` (kube.py) is this state plus the concern mixins (kube_store, kube_queries,
kube_recorder, kube_nodes, kube_workloads, kube_pods, kube_api_pods, kube_control_plane,
kube_pdbs, kube_evictions, kube_verbs): they hold the behaviour and set no attribute of their own;
every attribute they read and write is declared by ``KubeState.__init__``.
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass, field
from typing import Any, Optional

from . import kube_leases, kube_run
from .kube_resources import EVENT_TTL
from .kube_store import ObjectStore, PodIndex
from .kube_watch import DEFAULT_BOOKMARK_SECONDS, DEFAULT_CACHE_SIZE, WatchCache

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
    # cpu / memory_mb are what the guest has online; the Node shows what its kubelet saw when it
    # started (a boot, or a `systemctl restart kubelet`), so a live scale shows only after a restart.
    kubelet_restart_timer: Optional[int] = None


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
# The world's state


class KubeState:
    """Every attribute of a ``KubeWorld``; the world builds its objects once this is set."""

    def __init__(self, sim: Any, cluster_id: str, cluster_spec: dict) -> None:
        self.sim = sim
        self.cluster_id = cluster_id
        self.cluster_spec = cluster_spec
        self.name = str(cluster_spec.get("name", cluster_id))
        self.version = str(cluster_spec.get("kubernetes_version", "1.30.4")).lstrip("v")
        self.stacked_etcd = int(cluster_spec.get("etcd_nodes", 0) or 0) == 0
        # A bearer token per cluster, as a CKS kubeconfig's admin identity would be per cluster.
        self.token = secrets.token_urlsafe(32)
        self.rng = random.Random(f"{sim.spec.get('seed', 0)}/{cluster_id}")
        kube_spec = sim.spec.get("kube") or {}
        self.store = ObjectStore(self.rng, WatchCache(int(kube_spec.get("watch_cache_size", DEFAULT_CACHE_SIZE))))
        self.watch_enabled = bool(kube_spec.get("watch", True))
        self.watch_bookmark_seconds = float(kube_spec.get("watch_bookmark_seconds", DEFAULT_BOOKMARK_SECONDS))
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
        self.pod_index = PodIndex(self.store.objects["pods"], self._workload_of)
        self.store.listen(self.pod_index.changed)
        # Nodes a pod with given tolerations may land on; dropped whenever any node changes.
        self._fit_cache: dict[str, list[str]] = {}
        # Called (sim.lock held) when a VM's power may change whether the endpoint listens.
        self.on_endpoint_change: list[Any] = []
        # Pods placed while the world is built are its starting state, not scheduling decisions.
        self._built = False
        self.store.listen(self._noted)

    def _workload_of(self, kind: str, namespace: str, name: str) -> Optional[tuple[str, str, str]]:
        """The spec's workload behind a pod's controller (a Deployment behind its ReplicaSet), or
        the bare pod itself."""
        if kind == "ReplicaSet":
            return next((wl.key for wl in self.workloads.values()
                         if wl.kind == "Deployment" and wl.namespace == namespace and wl.rs_name == name), None)
        return (kind, namespace, name) if kind == "Pod" and (kind, namespace, name) in self.workloads else None

    def _noted(self, plural: str, event: str, key: tuple[str, str], obj: dict[str, Any]) -> None:
        if plural == "nodes":
            self._fit_cache.clear()
        elif plural == "events":
            if event == "DELETED":
                self._event_writes.pop(key, None)
            else:
                self._event_writes[key] = self.sim.clock.now()
