"""PodDisruptionBudgets and the status the controllers derive: the disruption controller's
healthy, desired and allowed counts, and the workloads' replica status.

``Budgets`` is handed the store, the pod index, and the spec's workloads and nodes (whose VMs'
power the sim's own budget check counts), and the sim's faults (``pdb_block``).
"""

from __future__ import annotations

from typing import Any

from .kube_helpers import _int_or_percent, now_time, pod_ready
from .kube_hidden import NodeState, Workload
from .kube_store import ObjectStore, PodIndex
from .selectors import object_selects as selector_matches


class Budgets:
    """Budgets and the controllers' status writes."""

    def __init__(self, store: ObjectStore, pod_index: PodIndex, workloads: dict[tuple[str, str, str], Workload],
                 nodes: dict[str, NodeState], faults: Any, cluster_id: str) -> None:
        self.store = store
        self.pod_index = pod_index
        self.workloads = workloads
        self.nodes = nodes
        self.faults = faults
        self.cluster_id = cluster_id

    def add(self, spec: dict) -> None:
        ns = spec.get("namespace", "default")
        self.store.ensure_namespace(ns)
        selector = spec.get("selector") or {}
        if not ({"matchLabels", "matchExpressions"} & set(selector)):
            selector = {"matchLabels": dict(selector)}
        body: dict[str, Any] = {"selector": selector}
        for key in ("minAvailable", "maxUnavailable", "unhealthyPodEvictionPolicy"):
            if spec.get(key) is not None:
                body[key] = spec[key]
        self.store.put("poddisruptionbudgets", {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": self.store.new_meta(spec["name"], ns, generation=1),
            "spec": body, "status": {},
        })

    def _pdb_pods(self, pdb: dict[str, Any]) -> list[dict[str, Any]]:
        ns = pdb["metadata"]["namespace"]
        return [p for (pns, _pod_name), p in self.store.objects["pods"].items()
                if pns == ns and selector_matches(pdb["spec"].get("selector"), p["metadata"].get("labels") or {})]

    def _expected_pods(self, pdb: dict[str, Any], pods: list[dict[str, Any]]) -> int:
        spec = pdb["spec"]
        if spec.get("maxUnavailable") is None and not str(spec.get("minAvailable", "")).endswith("%"):
            return len(pods)
        # Percentages and maxUnavailable scale with the controllers' desired replicas.
        owners = {self.pod_index.owner(p) for p in pods} - {None}
        return sum(self.workloads[o].replicas for o in owners if o in self.workloads
                   and self.workloads[o].kind in ("Deployment", "StatefulSet"))

    def status(self, pdb: dict[str, Any], true_health: bool = False) -> dict[str, Any]:
        pods = self._pdb_pods(pdb)
        expected = self._expected_pods(pdb, pods)
        healthy = 0
        for pod in pods:
            if "deletionTimestamp" in pod["metadata"] or not pod_ready(pod):
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
        if self.faults.peek("pdb_block", namespace=ns, name=name, cluster=self.cluster_id) is not None:
            allowed = 0
        return {"currentHealthy": healthy, "desiredHealthy": desired, "disruptionsAllowed": allowed,
                "expectedPods": expected, "observedGeneration": pdb["metadata"].get("generation", 1)}

    def refresh(self) -> None:
        """Controllers' status writes: PDB and workload status, stored only when they change."""
        for pdb in self.store.objects["poddisruptionbudgets"].values():
            status = self.status(pdb)
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
                self.store.put("poddisruptionbudgets", pdb)
        for wl in self.workloads.values():
            if wl.kind in ("Pod", "Mirror"):
                continue
            pods = [p for p in self.pod_index.pods_of(wl.key) if "deletionTimestamp" not in p["metadata"]]
            ready = sum(1 for p in pods if pod_ready(p))
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
        obj = self.store.read(plural, ns, name)
        if obj is not None and obj.get("status") != status:
            obj["status"] = status
            self.store.put(plural, obj)
