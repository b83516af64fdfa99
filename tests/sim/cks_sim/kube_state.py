"""The state of one cluster's Kubernetes, declared in one place: the API's store (kube_store) and
the rules' objects built over it (the Event recorder, the budgets), the hidden state the API
cannot see (kube_hidden: a node's VM power and kubelet boots, the spec's workloads), caches,
timers, and the settings read from the spec.

``KubeWorld`` (kube.py) is this state plus the concern mixins that remain (kube_queries,
kube_nodes, kube_workloads, kube_pods, kube_api_pods, kube_control_plane, kube_verbs): they hold
the behaviour and set no attribute of their own; every attribute they read and write is declared
by ``KubeState`` (``__init__``, or annotated on the class for what ``KubeWorld`` builds).
"""

from __future__ import annotations

import random
import secrets
from typing import Any, Optional

from . import kube_leases
from .kube_api_pods import ClientPods
from .kube_control_plane import StaticPods
from .kube_evictions import Evictions
from .kube_hidden import NodeState, Workload
from .kube_pdbs import Budgets
from .kube_recorder import Recorder
from .kube_resources import EVENT_TTL
from .kube_store import ObjectStore, PodIndex
from .kube_verbs import Verbs
from .kube_watch import DEFAULT_BOOKMARK_SECONDS, DEFAULT_CACHE_SIZE, WatchCache

# ---------------------------------------------------------------------------------------------
# The world's state


class KubeState:
    """Every attribute of a ``KubeWorld``; the world builds its objects once this is set."""

    # Built by KubeWorld: what they are handed includes the pods' termination and the controllers.
    evictions: Evictions
    verbs: Verbs
    static_pods: StaticPods
    client_pods: ClientPods

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
        self.recorder = Recorder(self.store, sim.clock, float(kube_spec.get("event_ttl", EVENT_TTL)))
        self.nodes: dict[str, NodeState] = {}
        self.workloads: dict[tuple[str, str, str], Workload] = {}
        self._pod_timers: dict[tuple[str, str], int] = {}
        self._awaiting_kubelet: set[tuple[str, str]] = set()  # terminating pods on a dead node
        self.pod_index = PodIndex(self.store.objects["pods"], self._workload_of)
        self.store.listen(self.pod_index.changed)
        # Nodes a pod with given tolerations may land on; dropped whenever any node changes.
        self._fit_cache: dict[str, list[str]] = {}
        # Called (sim.lock held) when a VM's power may change whether the endpoint listens.
        self.on_endpoint_change: list[Any] = []
        # Pods placed while the world is built are its starting state, not scheduling decisions.
        self._built = False
        self.store.listen(self._nodes_changed)
        self.leader_leases = kube_leases.LeaderLeases(self.store, self.recorder, sim.clock, self.nodes)
        self.budgets = Budgets(self.store, self.pod_index, self.workloads, self.nodes, sim.faults, cluster_id)

    def _workload_of(self, kind: str, namespace: str, name: str) -> Optional[tuple[str, str, str]]:
        """The spec's workload behind a pod's controller (a Deployment behind its ReplicaSet), or
        the bare pod itself."""
        if kind == "ReplicaSet":
            return next((wl.key for wl in self.workloads.values()
                         if wl.kind == "Deployment" and wl.namespace == namespace and wl.rs_name == name), None)
        return (kind, namespace, name) if kind == "Pod" and (kind, namespace, name) in self.workloads else None

    def _nodes_changed(self, plural: str, event: str, key: tuple[str, str], obj: dict[str, Any]) -> None:
        if plural == "nodes":
            self._fit_cache.clear()
