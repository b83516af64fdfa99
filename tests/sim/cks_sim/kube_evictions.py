"""The eviction subresource, as the API server's eviction REST handler decides it against the
pod's budget, and the check that an accepted eviction kept every budget.

``Evictions`` is handed the store, the budgets, the sim (timeline and invariants) and
``terminate(pod, grace)``: the graceful deletion an accepted eviction starts, and the controllers'
reaction to it.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from .kube_helpers import pod_ready
from .kube_pdbs import Budgets
from .kube_resources import (
    RESOURCES,
    ApiError,
    conflict,
    not_found,
    success_status,
)
from .kube_store import ObjectStore
from .selectors import object_selects as selector_matches


class Evictions:
    """policy/v1 Eviction."""

    def __init__(self, store: ObjectStore, budgets: Budgets, sim: Any, cluster_id: str,
                 terminate: Callable[[dict[str, Any], Optional[int]], None]) -> None:
        self.store = store
        self.budgets = budgets
        self.sim = sim
        self.cluster_id = cluster_id
        self.terminate = terminate

    def evict(self, namespace: str, name: str, body: dict[str, Any], dry_run: bool) -> dict[str, Any]:
        """policy/v1 Eviction, following the API server's eviction REST handler."""
        pod = self.store.read("pods", namespace, name)
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
                self.terminate(pod, options.get("gracePeriodSeconds"))
                if check_budget:
                    self._check_budgets(pod, pod_name)
            return success_status(201)

        if "deletionTimestamp" in pod["metadata"] or pod["status"]["phase"] in ("Succeeded", "Failed", "Pending"):
            return accept(False)
        pdbs = [p for p in self.store.objects["poddisruptionbudgets"].values()
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
        status = self.budgets.status(pdb)
        if not pod_ready(pod):
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
        for pdb in self.store.objects["poddisruptionbudgets"].values():
            if pdb["metadata"]["namespace"] != ns or not selector_matches(
                    pdb["spec"].get("selector"), pod["metadata"].get("labels") or {}):
                continue
            status = self.budgets.status(pdb, true_health=True)
            if status["currentHealthy"] < status["desiredHealthy"]:
                self.sim.invariants.add(
                    kind="pdb_below_budget", cluster=self.cluster_id, pdb=f"{ns}/{pdb['metadata']['name']}",
                    pod=pod_name, healthy=status["currentHealthy"], desired=status["desiredHealthy"])
