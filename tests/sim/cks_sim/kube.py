"""One CKS cluster's Kubernetes, as its API server, kubelets and controllers would show it.

The world keeps API objects as the JSON dicts the API serves (so what a client reads is exactly
what is stored) plus a little hidden state the API cannot see: whether a node's VM is really
running, which kubelet boot is current, pending timers. Controllers act synchronously where the
real ones would within milliseconds (ReplicaSet replacements, taint mirroring) and through the
Sim scheduler where real time matters (kubelet boot, node-monitor grace, pod start and stop).

Every public method expects ``sim.lock`` to be held (the HTTP layer and the scheduler take it).

``KubeWorld`` is composed of mixins, one concern each, which hold methods only; the state they
share is declared once, in ``kube_state.KubeState``:

- kube_store: identifiers, the object store, the pod indexes;
- kube_queries: what the CloudStack side, the HTTP layer and the admin API ask;
- kube_recorder: the Events the components record;
- kube_nodes: nodes, the kubelet's boots and leases, the node-lifecycle controller;
- kube_workloads: the workload controllers and their reconcile loop;
- kube_pods: a pod's scheduling, start, readiness and termination;
- kube_api_pods: pods created through the API, run by the kubelet;
- kube_control_plane: kubeadm's static pods;
- kube_pdbs: budgets and the controllers' derived status;
- kube_evictions: the eviction subresource;
- kube_verbs: the API's verbs (get, list, create, update, delete).

``kube_contract`` declares, for the type checker, what one concern calls on another.
"""

from __future__ import annotations

from typing import Any, Optional

from .kube_api_pods import ClientPods
from .kube_control_plane import StaticPods
from .kube_evictions import Evictions
from .kube_helpers import SAFE_ALPHABET
from .kube_nodes import KubeNodes
from .kube_pods import KubePods
from .kube_queries import KubeQueries
from .kube_resources import NODE_LEASE_NS, RESOURCES, ApiError, Resource, _details
from .kube_state import KubeState
from .kube_verbs import Verbs
from .kube_workloads import KubeWorkloads

# Imported from here by kube_api's neighbours (rbac, kube_exec, kube_events) and the tests.
__all__ = ["RESOURCES", "SAFE_ALPHABET", "ApiError", "KubeWorld", "Resource", "_details"]


class KubeWorld(KubePods, KubeWorkloads, KubeNodes, KubeQueries,
                KubeState):
    """One cluster's Kubernetes: its state and every concern, built from the spec's nodes,
    workloads and budgets into a settled starting state."""

    def __init__(self, sim: Any, cluster_id: str, cluster_spec: dict, nodes: list[dict],
                 workloads: list[dict], pdbs: list[dict]) -> None:
        super().__init__(sim, cluster_id, cluster_spec)
        self.evictions = Evictions(self.store, self.budgets, sim, cluster_id, self._terminate)
        self.static_pods = StaticPods(self.store, self.nodes, self.version, self.stacked_etcd,
                                      place=self._place, set_pod_ready=self._set_pod_ready)
        self.client_pods = ClientPods(self.store, self.nodes, sim.lock, place=self._place,
                                      schedule_start=self._schedule_start)
        self.verbs = Verbs(self.store, sim, cluster_id, self.nodes, self.recorder, self.budgets, self.leader_leases,
                           renew_node_leases=self.refresh_node_leases, create_pod=self.client_pods.create,
                           terminate=self._terminate, after_change=self._after_change)
        # Timers scheduled while building fire on the scheduler thread under sim.lock: hold it
        # (re-entrant) until the world is complete.
        with sim.lock:
            self._build(nodes, workloads, pdbs)
            self._built = self.recorder.recording = True

    # What the CloudStack half's etcd tells either backend (real_kube's world has the same two).
    def use_external_etcd_servers(self, urls: list[str]) -> None:
        self.static_pods.use_external_etcd_servers(urls)

    def use_etcd_client_urls(self, urls: dict[str, str]) -> None:
        self.static_pods.use_etcd_client_urls(urls)

    def _terminate(self, pod: dict[str, Any], grace: Optional[int]) -> None:
        """A pod's graceful deletion begins (an eviction, a DELETE), and the controllers react."""
        self._begin_termination(pod, grace)
        self._after_change()

    def _build(self, nodes: list[dict], workloads: list[dict], pdbs: list[dict]) -> None:
        for ns in ("default", "kube-system", "kube-public", NODE_LEASE_NS):
            self.store.ensure_namespace(ns)
        for i, spec in enumerate(nodes):
            self._add_node(spec, i)
        for spec in workloads:
            self._add_workload(spec)
        for spec in pdbs:
            self.budgets.add(spec)
        for state in self.nodes.values():
            if state.node_type == "control":
                self.static_pods.ensure_mirror_pods(state.name)
        self._reconcile_all()
        self.leader_leases.refresh()
        for key in list(self.store.objects["pods"]):
            # The cluster starts settled: pods already placed on running nodes are Running.
            pod = self.store.objects["pods"][key]
            node = pod["spec"].get("nodeName")
            if node and self.nodes[node].kubelet_posting:
                self.sim.scheduler.cancel(self._pod_timers.pop(key, None))
                self._mark_pod_running(pod)
        self.budgets.refresh()
