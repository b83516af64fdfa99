"""CKS operations on a cluster's node count that came with the cluster autoscaler: turning
autoscaling on or off and removing given worker nodes (``scaleKubernetesCluster`` with
``autoscalingenabled``/``minsize``/``maxsize``, or with ``nodeids``). A mixin over ``cloud_cks.CloudCks``.

KubernetesClusterManagerImpl.validateKubernetesClusterScaleParameters holds the refusals, in its
order and words; KubernetesClusterScaleWorker.autoscaleCluster and .removeNodesFromCluster the work.
"""

from __future__ import annotations

from typing import Any, Optional

from .cloud_cks import CloudCks
from .cloud_entities import VM, Cluster, Job
from .cloud_errors import CS_CLOUD_RUNTIME, CS_PERMISSION_DENIED, CloudError

#: KubernetesClusterService's cloud.kubernetes.cluster.max.size default.
MAX_CLUSTER_SIZE = 10
INVALID = 431


class CloudCksNodes(CloudCks):
    """Autoscaling on a cluster, and the removal of its nodes by id."""

    def validate_autoscaling(self, cluster: Cluster, enabled: Optional[bool], minsize: Optional[int],
                             maxsize: Optional[int], size: Optional[int], node_ids: Optional[list[str]]) -> None:
        """validateKubernetesClusterScaleParameters: the autoscaling checks, then the nodeids ones."""
        if enabled:
            if size is not None or node_ids:
                raise CloudError(INVALID, "Autoscaling can not be passed along with nodeids or clustersize")
            if minsize is None or maxsize is None:
                raise CloudError(INVALID, "Autoscaling requires minsize and maxsize to be passed")
            if minsize < 1:
                raise CloudError(INVALID, "Minsize must be at least than 1")
            if maxsize <= minsize:
                raise CloudError(INVALID, "Maxsize must be greater than minsize")
            if maxsize + cluster.control_nodes > MAX_CLUSTER_SIZE:
                raise CloudError(INVALID, f"Maximum cluster size can not exceed {MAX_CLUSTER_SIZE}. "
                                          "Please contact your administrator")
        if node_ids:
            vms = [self.vms.get(i) for i in node_ids]
            if any(vm is None or vm.cluster_id != cluster.id for vm in vms):
                raise CloudError(INVALID, "Invalid node ids")
            if sum(1 for vm in vms if vm is not None and vm.node_type == "control") >= cluster.control_nodes:
                raise CloudError(INVALID, "Can not remove all control nodes from a cluster")
            if sum(1 for vm in vms if vm is not None and vm.node_type != "control") >= cluster.workers:
                raise CloudError(INVALID, "Can not remove all nodes from a cluster")

    def autoscale_cluster(self, cluster: Cluster, enabled: bool, minsize: Optional[int], maxsize: Optional[int]) -> Job:
        """KubernetesClusterScaleWorker.autoscaleCluster: the cluster goes Scaling while CKS deploys
        (or deletes) the cluster-autoscaler Deployment in kube-system, then Running."""
        def work(job: Job) -> None:
            self._check_scalable(cluster)
            self.set_cluster_state(cluster, "Scaling", "scaleKubernetesCluster")

            def finish() -> None:
                cluster.autoscaling = enabled
                if enabled:
                    cluster.minsize, cluster.maxsize = int(minsize or 0), int(maxsize or 0)
                autoscaler = getattr(self.sim, "autoscalers", {}).get(cluster.id)
                if autoscaler is not None:
                    autoscaler.deployed(enabled)
                self.set_cluster_state(cluster, "Running", "scaleKubernetesCluster")
                self._complete(job, {"kubernetescluster": self.cluster_view(cluster)})

            self.sim.scheduler.schedule(self.sim.delay("affinity"), finish)

        return self._cluster_job("scaleKubernetesCluster", cluster, work)

    def _check_scalable(self, cluster: Cluster) -> None:
        if cluster.state not in ("Created", "Running", "Stopped"):
            raise CloudError(530, f"Kubernetes cluster {cluster.name} is in {cluster.state} state and can not be scaled",
                             CS_PERMISSION_DENIED)

    def remove_cluster_nodes(self, cluster: Cluster, vms: list[VM]) -> Job:
        """KubernetesClusterScaleWorker.removeNodesFromCluster: per VM, the node drained and deleted
        through kubectl on a control node, the VM destroyed and expunged, its SSH port forward
        removed; then the smaller size and the cluster Running (Scaling meanwhile)."""
        def work(job: Job) -> None:
            self._check_scalable(cluster)
            if cluster.state != "Running":
                raise CloudError(530, f"cks-sim: removing nodes of Kubernetes cluster {cluster.name} in state "
                                      f"{cluster.state} is not simulated (only a Running cluster's)", CS_CLOUD_RUNTIME)
            self.set_cluster_state(cluster, "Scaling", "scaleKubernetesCluster")

            def next_vm(left: list[VM]) -> None:
                if not left:
                    cluster.cpunumber = sum(self.vm_cpu_memory(v)[0] for v in self.cluster_vms(cluster))
                    cluster.memory = sum(self.vm_cpu_memory(v)[1] for v in self.cluster_vms(cluster))
                    self.set_cluster_state(cluster, "Running", "scaleKubernetesCluster")
                    self._complete(job, {"kubernetescluster": self.cluster_view(cluster)})
                    return
                vm = left[0]
                self.sim.node_vm_removed(cluster.id, vm.name)

                def gone() -> None:
                    self._expunge(cluster, vm)
                    next_vm(left[1:])

                self.sim.scheduler.schedule(self.sim.delay("stop"), gone)

            next_vm(list(vms))

        return self._cluster_job("scaleKubernetesCluster", cluster, work)

    def _expunge(self, cluster: Cluster, vm: VM) -> None:
        """destroyVm(expunge) of a node VM: gone from every listing, its disk and port forward too."""
        vm.in_service = False
        if vm.state == "Running":
            self._power_off(vm)
        self._set_state(vm, "Expunging")
        self.vms.pop(vm.id, None)
        self.vm_by_name.pop(vm.name, None)
        if vm.id in cluster.vm_ids:
            cluster.vm_ids.remove(vm.id)
        if vm.node_type != "control":
            cluster.workers -= 1
        volume = self.root_volume.pop(vm.id, None)
        if volume is not None:
            self.volumes.pop(volume.id, None)
        for rule_id in [r.id for r in self.pf_rules.values() if r.vm_id == vm.id]:
            del self.pf_rules[rule_id]
        self.tags.pop(vm.id, None)
        self._vm_json_cache.pop(vm.id, None)
        self.sim.timeline.add(cluster=cluster.id, node=vm.name.lower(), event="vm_expunged")


def autoscaling_params(call: Any) -> tuple[Optional[bool], Optional[int], Optional[int]]:
    enabled = call.get("autoscalingenabled")
    minsize, maxsize = call.get("minsize"), call.get("maxsize")
    return (None if enabled is None else bool(enabled),
            None if minsize is None else int(minsize), None if maxsize is None else int(maxsize))
