"""Workloads and their controllers: the Deployments, ReplicaSets, StatefulSets, DaemonSets and bare
pods of the spec, the pods each controller creates from its template, and the controllers' loop
that replaces the missing ones.

``Controllers`` is part of the in-memory API (a real cluster's kube-controller-manager does this):
it is handed the store, the pod index, the spec's workloads and nodes, the recorder, the budgets
(their status follows each change), the sim (invariants), the cluster's version, the scheduler's
``place(pod, node)`` and the kubelets' ``ensure_mirror_pods(node)``.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any, Callable, Optional

from .kube_helpers import template_hash
from .kube_hidden import NodeState, Workload
from .kube_pdbs import Budgets
from .kube_recorder import Recorder
from .kube_store import ObjectStore, PodIndex
from .kube_templates import pod_spec


class Controllers:
    """The workload controllers: templates, pods created, the reconcile loop."""

    def __init__(self, store: ObjectStore, pod_index: PodIndex, workloads: dict[tuple[str, str, str], Workload],
                 nodes: dict[str, NodeState], recorder: Recorder, budgets: Budgets, sim: Any, cluster_id: str,
                 version: str, *, place: Callable[[dict[str, Any], Optional[str]], None],
                 ensure_mirror_pods: Callable[[str], None]) -> None:
        self.store = store
        self.pod_index = pod_index
        self.workloads = workloads
        self.nodes = nodes
        self.recorder = recorder
        self.budgets = budgets
        self.sim = sim
        self.cluster_id = cluster_id
        self.version = version
        self.place = place
        self.ensure_mirror_pods = ensure_mirror_pods

    def add(self, spec: dict) -> None:
        kind = spec["kind"]
        ns = spec.get("namespace", "default")
        name = spec["name"]
        self.store.ensure_namespace(ns)
        labels = {"app": name, **(spec.get("labels") or {})}
        wl = Workload(
            kind=kind, namespace=ns, name=name, replicas=int(spec.get("replicas", 1)), labels=labels,
            empty_dir=bool(spec.get("emptyDir", False)), uid=self.store.new_uid(), node=spec.get("node"),
            grace_seconds=int(spec.get("terminationGracePeriodSeconds", 30)), extra=dict(spec),
        )
        self.workloads[wl.key] = wl
        if kind == "Pod":
            return
        template = self._pod_template(wl)
        meta = self.store.new_meta(name, ns, labels=dict(labels), generation=1,
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
        self.store.put(plural, {"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": spec_body,
                                "status": {}})
        if kind == "Deployment":
            wl.template_hash = template_hash(template)
            wl.rs_name = f"{name}-{wl.template_hash}"
            wl.rs_uid = self.store.new_uid()
            rs_labels = {**labels, "pod-template-hash": wl.template_hash}
            rs_template = copy.deepcopy(template)
            rs_template["metadata"]["labels"] = dict(rs_labels)
            rs_meta = self.store.new_meta(
                wl.rs_name, ns, labels=rs_labels, generation=1,
                annotations={"deployment.kubernetes.io/desired-replicas": str(wl.replicas),
                             "deployment.kubernetes.io/max-replicas": str(wl.replicas + 1),
                             "deployment.kubernetes.io/revision": "1"},
                ownerReferences=[{"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                                  "uid": wl.uid, "controller": True, "blockOwnerDeletion": True}],
            )
            rs_meta["uid"] = wl.rs_uid
            self.store.put("replicasets", {
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": rs_meta,
                "spec": {"replicas": wl.replicas, "selector": {"matchLabels": dict(rs_labels)},
                         "template": rs_template},
                "status": {"replicas": 0},
            })
        if kind == "StatefulSet":
            wl.template_hash = f"{name}-" + hashlib.sha256(f"{ns}/{name}".encode()).hexdigest()[:10]

    def _pod_template(self, wl: Workload) -> dict[str, Any]:
        return {"metadata": {"labels": dict(wl.labels)}, "spec": pod_spec(wl, self.version)}

    def pods_of(self, wl: Workload) -> list[dict[str, Any]]:
        return self.pod_index.pods_of(wl.key)

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
        spec = pod_spec(wl, self.version)
        if wl.kind == "StatefulSet":
            spec["hostname"] = name
            spec["subdomain"] = wl.name
        pod = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": self.store.new_meta(name, wl.namespace, labels=labels, ownerReferences=owners or None,
                                            **extra_meta),
            "spec": spec,
            "status": {"phase": "Pending", "qosClass": "Burstable" if wl.extra.get("requests") else "BestEffort"},
        }
        self.store.put("pods", pod)
        self._created_by_controller(wl, pod)
        self.place(pod, node)
        return pod

    def _created_by_controller(self, wl: Workload, pod: dict[str, Any]) -> None:
        """The owning controller's SuccessfulCreate (replica_set.go / daemon_controller.go "Created pod:
        %v"; stateful_pod_control.go "create Pod %s in StatefulSet %s successful")."""
        name = pod["metadata"]["name"]
        if wl.kind == "Deployment":
            ref = {"kind": "ReplicaSet", "namespace": wl.namespace, "name": wl.rs_name, "uid": wl.rs_uid,
                   "apiVersion": "apps/v1"}
            self.recorder.record(wl.namespace, ref, "Normal", "SuccessfulCreate", f"Created pod: {name}", "replicaset-controller")
        elif wl.kind in ("DaemonSet", "StatefulSet"):
            ref = {"kind": wl.kind, "namespace": wl.namespace, "name": wl.name, "uid": wl.uid, "apiVersion": "apps/v1"}
            if wl.kind == "DaemonSet":
                self.recorder.record(wl.namespace, ref, "Normal", "SuccessfulCreate", f"Created pod: {name}", "daemonset-controller")
            else:
                self.recorder.record(wl.namespace, ref, "Normal", "SuccessfulCreate",
                                     f"create Pod {name} in StatefulSet {wl.name} successful", "statefulset-controller")

    def reconcile_all(self) -> None:
        """The controllers' loop: every workload has its pods (replacements created now)."""
        for wl in list(self.workloads.values()):
            pods = self.pods_of(wl)
            if wl.kind == "Deployment":
                active = [p for p in pods if "deletionTimestamp" not in p["metadata"]]
                for _replica in range(wl.replicas - len(active)):
                    self._new_pod(wl, f"{wl.rs_name}-{self.store.suffix()}", None)
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
                        self._new_pod(wl, f"{wl.name}-{self.store.suffix()}", node)
            elif wl.kind == "Pod" and not wl.extra.get("_created"):
                wl.extra["_created"] = True
                self._new_pod(wl, wl.name, wl.node)
        for state in self.nodes.values():
            if state.node_type == "control" and state.kubelet_posting:
                self.ensure_mirror_pods(state.name)

    def _retry_pending(self) -> None:
        for pod in list(self.store.objects["pods"].values()):
            if pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName") \
                    and "deletionTimestamp" not in pod["metadata"]:
                self.place(pod, None)

    def after_change(self) -> None:
        self.reconcile_all()
        self._retry_pending()
        self.budgets.refresh()

    def pod_removed(self, pod: dict[str, Any]) -> None:
        """A pod is gone: its controller replaces it, and a workload short of its replicas is the
        sim's invariant ``pod_lost``."""
        owner = self.pod_index.owner(pod)
        self.reconcile_all()
        wl = self.workloads.get(owner) if owner else None
        if wl is not None and wl.kind in ("Deployment", "StatefulSet"):
            if len(self.pods_of(wl)) < wl.replicas:
                meta = pod["metadata"]
                self.sim.invariants.add(kind="pod_lost", cluster=self.cluster_id,
                                        pod=f"{meta['namespace']}/{meta['name']}", owner=f"{wl.kind}/{wl.name}")
