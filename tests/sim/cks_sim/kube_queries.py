"""What the rest of cks-sim asks a cluster's Kubernetes: its nodes' readiness, whether its API
endpoint answers or listens, a node's address, and the admin API's snapshot.

A mixin of ``KubeWorld`` (kube.py): methods only; the state is ``kube_state.KubeState``.
"""

from __future__ import annotations

from .kube_contract import KubeConcern
from .kube_helpers import pod_ready


class KubeQueries(KubeConcern):
    """The queries the CloudStack side, the HTTP layer and the admin API make."""

    def has_node(self, name: str) -> bool:
        return name in self.nodes

    def node_ready_status(self, name: str) -> str:
        return self.nodes[name].ready

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
