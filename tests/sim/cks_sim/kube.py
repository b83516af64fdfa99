"""One CKS cluster's Kubernetes, as its API server, kubelets and controllers would show it.

The world keeps API objects as the JSON dicts the API serves (so what a client reads is exactly
what is stored) plus a little hidden state the API cannot see (kube_hidden): whether a node's VM is
really running, which kubelet boot is current, pending timers. Controllers act synchronously where
the real ones would within milliseconds (ReplicaSet replacements, taint mirroring) and through the
Sim scheduler where real time matters (kubelet boot, node-monitor grace, pod start and stop).

Every public method expects ``sim.lock`` to be held (the HTTP layer and the scheduler take it).

``KubeWorld`` is the composition root: it builds two halves of plain objects, hands each what it
needs, and answers what the CloudStack half, the HTTP layer and the admin API ask.

- The API (client-go's ``testing/fixture.go`` is the model: a tracker and its reactors):
  kube_store (``ObjectStore``: objects, resourceVersions, watch records, change listeners;
  ``PodIndex``), kube_recorder (Events), kube_pdbs (budgets, the controllers' status),
  kube_evictions, kube_verbs (get, list, create, update, delete), kube_leases (the control
  plane's Leases), kube_scheduler, kube_workloads and kube_node_lifecycle (kube-scheduler and
  the controllers, which a real cluster runs beside its API server).
- The actors standing in for the machines, written against ``kube_cluster_api.ClusterApi``:
  kube_nodes (``Kubelets``: registration, power, boots, leases; it tells the node-lifecycle
  controller when a kubelet stops and resumes posting),
  kube_pods (``PodLifecycle``), kube_api_pods (``ClientPods``), kube_control_plane
  (``StaticPods``).

Where one object calls another that is built after it (the kubelets tell the controllers of a
change; the controllers place pods through the scheduler, which starts them through the kubelets),
the call is a function handed at construction; no module imports one that imports it back.
"""

from __future__ import annotations

import random
import secrets
from typing import Any, Callable, Optional

from .kube_api_pods import ClientPods
from .kube_control_plane import StaticPods
from .kube_evictions import Evictions
from .kube_helpers import SAFE_ALPHABET, pod_ready
from .kube_hidden import NodeState, Workload
from .kube_leases import LeaderLeases
from .kube_node_lifecycle import NodeLifecycle
from .kube_nodes import Kubelets
from .kube_pdbs import Budgets
from .kube_pods import PodLifecycle
from .kube_recorder import Recorder
from .kube_resources import EVENT_TTL, NODE_LEASE_NS, RESOURCES, ApiError, Resource, _details
from .kube_scheduler import Scheduler
from .kube_store import ObjectStore, OwnerKey, PodIndex
from .kube_verbs import Verbs
from .kube_watch import DEFAULT_BOOKMARK_SECONDS, DEFAULT_CACHE_SIZE, WatchCache
from .kube_workloads import Controllers

# Imported from here by kube_api's neighbours (rbac, kube_exec, kube_events) and the tests.
__all__ = ["RESOURCES", "SAFE_ALPHABET", "ApiError", "KubeWorld", "Resource", "_details"]


class KubeWorld:
    """One cluster's Kubernetes: its API and actors, built from the spec's nodes, workloads and
    budgets into a settled starting state."""

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
        kube_spec = sim.spec.get("kube") or {}
        self.watch_enabled = bool(kube_spec.get("watch", True))
        self.watch_bookmark_seconds = float(kube_spec.get("watch_bookmark_seconds", DEFAULT_BOOKMARK_SECONDS))
        self.nodes: dict[str, NodeState] = {}
        self.workloads: dict[OwnerKey, Workload] = {}
        # Called (sim.lock held) when a VM's power may change whether the endpoint listens.
        self.on_endpoint_change: list[Callable[[], None]] = []

        # The API.
        self.store = ObjectStore(self.rng, WatchCache(int(kube_spec.get("watch_cache_size", DEFAULT_CACHE_SIZE))))
        self.pod_index = PodIndex(self.store.objects["pods"], self._workload_of)
        self.store.listen(self.pod_index.changed)
        self.recorder = Recorder(self.store, sim.clock, float(kube_spec.get("event_ttl", EVENT_TTL)))
        self.budgets = Budgets(self.store, self.pod_index, self.workloads, self.nodes, sim.faults, cluster_id)
        self.leader_leases = LeaderLeases(self.store, self.recorder, sim.clock, self.nodes)

        # The actors, and kube-scheduler and the controllers between them. They call each other, so
        # each is handed a call that finds the other when it runs (built later than itself).
        def place(pod: dict[str, Any], node: Optional[str]) -> None:
            self.scheduler.place(pod, node)

        def schedule_start(pod: dict[str, Any]) -> None:
            self.pods.schedule_start(pod)

        def after_change() -> None:
            self.controllers.after_change()

        def removed(pod: dict[str, Any]) -> None:
            self.controllers.pod_removed(pod)

        self.client_pods = ClientPods(self.store, self.nodes, sim.lock, place=place, schedule_start=schedule_start)
        self.pods = PodLifecycle(self.store, self.nodes, self.recorder, sim, cluster_id, self.rng, self.client_pods,
                                 pods_on=self.pod_index.pods_on, after_change=after_change, removed=removed)
        self.scheduler = Scheduler(self.store, self.pod_index, self.nodes, self.recorder, sim, cluster_id,
                                   start=self.pods.schedule_start)
        self.static_pods = StaticPods(self.store, self.nodes, self.version, self.stacked_etcd,
                                      place=self.scheduler.place)
        self.controllers = Controllers(self.store, self.pod_index, self.workloads, self.nodes, self.recorder,
                                       self.budgets, sim, cluster_id, self.version, place=self.scheduler.place,
                                       ensure_mirror_pods=self.static_pods.ensure_mirror_pods)
        self.node_lifecycle = NodeLifecycle(self.store, self.nodes, self.recorder, self.pods, sim, cluster_id,
                                            after_change=self.controllers.after_change)
        self.kubelets = Kubelets(self.store, self.nodes, self.recorder, self.pods, sim, cluster_id, cluster_spec,
                                 self.version, reconcile=self.controllers.reconcile_all,
                                 after_change=self.controllers.after_change,
                                 on_endpoint_change=self.on_endpoint_change, heartbeats=self.node_lifecycle)

        # The API's verbs, whose writes the cluster reacts to.
        self.evictions = Evictions(self.store, self.budgets, sim, cluster_id, self._terminate)
        self.verbs = Verbs(self.store, sim, cluster_id, self.nodes, self.recorder, self.budgets, self.leader_leases,
                           renew_node_leases=self.kubelets.renew_leases, create_pod=self.client_pods.create,
                           terminate=self._terminate, after_change=self.controllers.after_change)
        # Timers scheduled while building fire on the scheduler thread under sim.lock: hold it
        # (re-entrant) until the world is complete.
        with sim.lock:
            self._build(nodes, workloads, pdbs)
            self.recorder.recording = True

    def _workload_of(self, kind: str, namespace: str, name: str) -> Optional[OwnerKey]:
        """The spec's workload behind a pod's controller (a Deployment behind its ReplicaSet), or
        the bare pod itself."""
        if kind == "ReplicaSet":
            return next((wl.key for wl in self.workloads.values()
                         if wl.kind == "Deployment" and wl.namespace == namespace and wl.rs_name == name), None)
        return (kind, namespace, name) if kind == "Pod" and (kind, namespace, name) in self.workloads else None

    def _terminate(self, pod: dict[str, Any], grace: Optional[int]) -> None:
        """A pod's graceful deletion begins (an eviction, a DELETE), and the controllers react."""
        self.pods.begin_termination(pod, grace)
        self.controllers.after_change()

    def _build(self, nodes: list[dict], workloads: list[dict], pdbs: list[dict]) -> None:
        for ns in ("default", "kube-system", "kube-public", NODE_LEASE_NS):
            self.store.ensure_namespace(ns)
        for i, spec in enumerate(nodes):
            self.kubelets.add(spec, i)
        for spec in workloads:
            self.controllers.add(spec)
        for spec in pdbs:
            self.budgets.add(spec)
        for state in self.nodes.values():
            if state.node_type == "control":
                self.static_pods.ensure_mirror_pods(state.name)
        self.controllers.reconcile_all()
        self.leader_leases.refresh()
        for pod in list(self.store.objects["pods"].values()):
            # The cluster starts settled: pods already placed on running nodes are Running.
            node = pod["spec"].get("nodeName")
            if node and self.nodes[node].kubelet_posting:
                self.pods.settled(pod)
        self.budgets.refresh()

    # What the CloudStack half tells either backend (real_kube's world has the same names).
    def node_powered_off(self, name: str) -> None:
        self.kubelets.powered_off(name)

    def node_powered_on(self, name: str, cpu: int, memory_mb: int) -> None:
        self.kubelets.powered_on(name, cpu, memory_mb)

    def node_scaled_live(self, name: str, cpu: int, memory_mb: int) -> None:
        self.kubelets.scaled_live(name, cpu, memory_mb)

    def join_node(self, name: str, node_type: str, cpu: int, memory_mb: int) -> None:
        self.kubelets.join(name, node_type, cpu, memory_mb)

    def apply_fault(self, fault: dict) -> None:
        self.kubelets.apply_fault(fault)

    def use_external_etcd_servers(self, urls: list[str]) -> None:
        self.static_pods.use_external_etcd_servers(urls)

    def use_etcd_client_urls(self, urls: dict[str, str]) -> None:
        self.static_pods.use_etcd_client_urls(urls)

    # What the CloudStack half, the HTTP layer and the admin API ask.
    def has_node(self, name: str) -> bool:
        return name in self.nodes

    def node_ready_status(self, name: str) -> str:
        return self.nodes[name].ready

    def ready_node_count(self) -> int:
        with self.sim.lock:  # re-entrant: callers under the lock (the CKS scanner) are fine too
            return sum(1 for name in self.nodes if self.nodes[name].ready == "True")

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

    def node_address(self, name: str) -> str:
        return self.nodes[name].ip

    def snapshot(self) -> dict:
        with self.sim.lock:
            return self._snapshot()

    def _snapshot(self) -> dict:
        nodes = []
        for name, state in sorted(self.nodes.items()):
            obj = self.store.node(name)
            nodes.append({
                "name": name,
                "node_type": state.node_type,
                "vm_running": state.vm_running,
                "ready": self.nodes[name].ready,
                "boot_id": obj["status"]["nodeInfo"]["bootID"],
                "unschedulable": bool(obj["spec"].get("unschedulable")),
                "foreign_cordon": state.foreign_cordon,
                "annotations": dict(obj["metadata"].get("annotations") or {}),
                "taints": [f"{t['key']}:{t['effect']}" for t in obj["spec"].get("taints") or []],
                "cpu": obj["status"]["capacity"]["cpu"],
                "memory": obj["status"]["capacity"]["memory"],
            })
        pods = []
        for (ns, name), pod in sorted(self.store.objects["pods"].items()):
            owner = next((o for o in pod["metadata"].get("ownerReferences") or [] if o.get("controller")), None)
            pods.append({
                "namespace": ns, "name": name, "uid": pod["metadata"]["uid"],
                "node": pod["spec"].get("nodeName"), "phase": pod["status"]["phase"],
                "ready": pod_ready(pod), "terminating": "deletionTimestamp" in pod["metadata"],
                "owner": f"{owner['kind']}/{owner['name']}" if owner else None,
            })
        pdbs = []
        for (ns, name), pdb in sorted(self.store.objects["poddisruptionbudgets"].items()):
            status = self.budgets.status(pdb)
            pdbs.append({"namespace": ns, "name": name, **{k: status[k] for k in (
                "currentHealthy", "desiredHealthy", "disruptionsAllowed", "expectedPods")}})
        return {"cluster_id": self.cluster_id, "resource_version": self.store.current_rv(),
                "nodes": nodes, "pods": pods, "pdbs": pdbs}
