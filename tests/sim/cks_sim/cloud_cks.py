"""CKS operations of cks-sim's CloudStack world and the CKS state scanner: start, stop, scale
(offerings, and a larger size that adds workers as CKS does) and upgrade of a Kubernetes
cluster, each a job over its node VMs, and KubernetesClusterStatusScanner's pass that moves a
cluster to Alert and back. A mixin over ``cloud_state.CloudState``: methods only."""

from __future__ import annotations

from typing import Callable, Optional

from . import spec as specmod
from .cloud_build import CloudBuild
from .cloud_entities import VM, Cluster, Job, PortForwardingRule, ServiceOffering
from .cloud_errors import CS_CLOUD_RUNTIME, CS_PERMISSION_DENIED, CloudError
from .cloud_offerings import CloudOfferings


class CloudCks(CloudOfferings, CloudBuild):
    """KubernetesClusterManagerImpl's cluster actions and the status scanner."""

    def set_cluster_state(self, cluster: Cluster, state: str, reason: str = "") -> None:
        if cluster.state != state:
            previous = cluster.state
            cluster.state = state
            self.sim.timeline.add(cluster=cluster.id, event="cluster_state", state=state, previous=previous, reason=reason)

    def _cluster_job(self, cmd: str, cluster: Cluster, work: Callable[[Job], None]) -> Job:
        job = self.new_job(cmd, "KubernetesCluster", cluster.id)
        try:
            work(job)
        except CloudError as err:
            self.sim.scheduler.schedule(0, self._fail, job, err.code, err.text)
        return job

    def _wait_vms(self, jobs: list[Job], then: Callable[[bool], None]) -> None:
        def check() -> None:
            if all(j.status != 0 for j in jobs):
                then(all(j.status == 1 for j in jobs))
            else:
                self.sim.scheduler.schedule(max(self.sim.delay("stop") / 10, 0.005), check)

        check()

    def start_cluster(self, cluster: Cluster) -> Job:
        def work(job: Job) -> None:
            if cluster.state == "Running":
                self.sim.scheduler.schedule(0, lambda: self._complete(job, {"kubernetescluster": self.cluster_view(cluster)}))
                return
            if cluster.state not in ("Stopped", "Created"):
                raise CloudError(530, f"Kubernetes cluster : {cluster.name} is in state {cluster.state} and can not be started", CS_CLOUD_RUNTIME)
            self.set_cluster_state(cluster, "Starting", "startKubernetesCluster")
            jobs = [self.start_vm(vm, "startKubernetesCluster") for vm in self.cluster_vms(cluster)]

            def then(ok: bool) -> None:
                self.set_cluster_state(cluster, "Running" if ok else "Alert", "startKubernetesCluster")
                if ok:
                    self._complete(job, {"kubernetescluster": self.cluster_view(cluster)})
                else:
                    self._fail(job, 530, f"Failed to start Kubernetes cluster : {cluster.name}")

            self._wait_vms(jobs, then)

        return self._cluster_job("startKubernetesCluster", cluster, work)

    def stop_cluster(self, cluster: Cluster) -> Job:
        def work(job: Job) -> None:
            if cluster.state == "Stopped":
                self.sim.scheduler.schedule(0, lambda: self._complete(job, {"success": True}))
                return
            if cluster.state not in ("Running", "Alert"):
                raise CloudError(530, f"Kubernetes cluster : {cluster.name} is in state {cluster.state} and can not be stopped", CS_CLOUD_RUNTIME)
            self.set_cluster_state(cluster, "Stopping", "stopKubernetesCluster")
            jobs = [self.stop_vm(vm, "stopKubernetesCluster") for vm in self.cluster_vms(cluster)]

            def then(ok: bool) -> None:
                self.set_cluster_state(cluster, "Stopped" if ok else "Alert", "stopKubernetesCluster")
                if ok:
                    self._complete(job, {"success": True})
                else:
                    self._fail(job, 530, f"Failed to stop Kubernetes cluster : {cluster.name}")

            self._wait_vms(jobs, then)

        return self._cluster_job("stopKubernetesCluster", cluster, work)

    def scale_cluster(self, cluster: Cluster, offering: Optional[ServiceOffering],
                      node_offerings: dict[str, ServiceOffering], size: Optional[int]) -> Job:
        def work(job: Job) -> None:
            if cluster.clustertype != "CloudManaged":
                raise CloudError(530, f"Kubernetes cluster {cluster.name} is not CloudManaged and can not be scaled", CS_PERMISSION_DENIED)
            if cluster.state not in ("Created", "Running", "Stopped"):
                raise CloudError(530, f"Kubernetes cluster {cluster.name} is in state {cluster.state} and can not be scaled", CS_PERMISSION_DENIED)
            # The offering each node type scales to; a type with none (no offering, no node
            # offering of its own) keeps its VMs' offerings.
            targets: dict[str, ServiceOffering] = {}
            for t in ("control", "worker", "etcd"):
                target = node_offerings.get(t) or offering
                if target is not None:
                    targets[t] = target
            changes: dict[str, list[VM]] = {}
            for vm in self.cluster_vms(cluster):
                # Every VM of a cluster has its node type (cloud_build gives it one).
                node_type = vm.node_type or "worker"
                target = targets.get(node_type)
                if target is not None and target.id != vm.service_offering_id:
                    changes.setdefault(node_type, []).append(vm)
            if changes and cluster.state == "Running":
                raise CloudError(530, "Scaling the offering of a Running Kubernetes cluster is not supported on KVM", CS_CLOUD_RUNTIME)
            grow = 0
            if size is not None and size != cluster.workers:
                if size < cluster.workers:
                    raise CloudError(530, f"cks-sim: scaling Kubernetes cluster {cluster.name} down (size {size} below its "
                                     f"{cluster.workers} workers) is not simulated: CKS would drain, delete and expunge "
                                     "its last workers", CS_CLOUD_RUNTIME)
                if cluster.state != "Running":
                    raise CloudError(530, f"cks-sim: adding workers to Kubernetes cluster {cluster.name} in state "
                                     f"{cluster.state} is not simulated (only a Running cluster's)", CS_CLOUD_RUNTIME)
                grow = size - cluster.workers

            def finish() -> None:
                for node_type, vms in changes.items():
                    target = targets[node_type]
                    for vm in vms:
                        self._apply_offering(vm, target, {})
                    cluster.type_offering_ids[node_type] = target.id
                if offering is not None:
                    cluster.service_offering_id = offering.id
                cluster.cpunumber = sum(self.vm_cpu_memory(v)[0] for v in self.cluster_vms(cluster))
                cluster.memory = sum(self.vm_cpu_memory(v)[1] for v in self.cluster_vms(cluster))
                self._complete(job, {"kubernetescluster": self.cluster_view(cluster)})

            if grow:
                self.set_cluster_state(cluster, "Scaling", "scaleKubernetesCluster")
                self._scale_up(cluster, job, grow)
                return
            self.sim.scheduler.schedule(self.sim.delay("affinity"), finish)

        return self._cluster_job("scaleKubernetesCluster", cluster, work)

    def _scale_up(self, cluster: Cluster, job: Job, count: int) -> None:
        """KubernetesClusterScaleWorker.scaleUpKubernetesClusterSize: one worker VM after the other
        (KubernetesClusterResourceModifierActionWorker.provisionKubernetesClusterNodeVms: create,
        start, next), then wait until every node is Ready (KubernetesClusterUtil
        .validateKubernetesClusterReadyNodesCount), then the new size and the cluster Running."""
        added: list[VM] = []

        def failed(text: str) -> None:
            # logTransitStateToFailedIfNeededAndThrow: OperationFailed moves Scaling to Alert.
            self.set_cluster_state(cluster, "Alert", "scaleKubernetesCluster")
            self._fail(job, 530, text)

        def next_vm(left: int) -> None:
            if left == 0:
                wait_ready()
                return
            vm = self._new_cks_worker(cluster)
            added.append(vm)
            started = self.start_vm(vm, "scaleKubernetesCluster", considerlasthost=False)
            self._wait_vms([started], lambda ok: next_vm(left - 1) if ok else failed(
                f"Scaling failed for Kubernetes cluster : {cluster.name}, unable to provision node VM in the cluster"))

        def wait_ready() -> None:
            world = self.sim.kube.get(cluster.id)
            nodes = getattr(world, "nodes", {})
            if any(getattr(nodes.get(vm.name.lower()), "ready", "True") != "True" for vm in added):
                self.sim.scheduler.schedule(max(self.sim.delay("stop") / 10, 0.005), wait_ready)
                return
            cluster.workers += len(added)
            cluster.cpunumber = sum(self.vm_cpu_memory(v)[0] for v in self.cluster_vms(cluster))
            cluster.memory = sum(self.vm_cpu_memory(v)[1] for v in self.cluster_vms(cluster))
            self.set_cluster_state(cluster, "Running", "scaleKubernetesCluster")
            self._complete(job, {"kubernetescluster": self.cluster_view(cluster)})

        next_vm(count)

    def _new_cks_worker(self, cluster: Cluster) -> VM:
        """createKubernetesNode as CKS runs it for a scale-up: ``<prefix>-node-<hex ms>``, the
        offering CKS stores for WORKER (getServiceOfferingForNodeTypeOnCluster, else the cluster's),
        the cluster's one node root disk size (rootdisksize), and the affinity groups
        getMergedAffinityGroupIds(WORKER, ...) gives: the account's ExplicitDedication group alone
        (4.22 keeps no per-type groups). Nothing an outside tool applied to the other nodes."""
        name = specmod.worker_vm_name(specmod.node_name_prefix(cluster.name, cluster.id), self._tick_ms())
        offering = self.service_offerings[cluster.type_offering_ids.get("worker") or cluster.service_offering_id]
        groups = [cluster.dedication_group_id] if cluster.dedication_group_id else []
        vm = self._new_vm(name, offering, groups, self.networks[cluster.network_id], cluster, "worker", False,
                          cluster.root_disk_size, cluster.root_disk_offering, pool_id=cluster.storage_pool_id)
        vm.in_service = False
        # provisionSshPortForwardingRules: the next free public port from 2222 to the VM's port 22.
        used = {r.publicport for r in self.pf_rules.values() if r.ip_id == cluster.ip_id}
        port = next(p for p in range(2222, 65536) if p not in used)
        rule = PortForwardingRule(self.ids.uuid(), cluster.ip_id, port, 22, vm.id, cluster.network_id)
        self.pf_rules[rule.id] = rule
        cpu, memory = self.vm_cpu_memory(vm)
        self.sim.node_vm_created(cluster.id, vm.name, "worker", cpu, memory)
        return vm

    def upgrade_cluster(self, cluster: Cluster, version_id: str) -> Job:
        def work(job: Job) -> None:
            version = self.versions.get(version_id)
            if version is None:
                raise self.invalid_uuid("kubernetesversionid", version_id)
            if cluster.state != "Running":
                raise CloudError(530, f"Kubernetes cluster {cluster.name} is not in Running state", CS_CLOUD_RUNTIME)
            self.set_cluster_state(cluster, "Upgrading", "upgradeKubernetesCluster")

            def finish() -> None:
                cluster.version_id, cluster.version_name, cluster.semver = version["id"], version["name"], version["semanticversion"]
                self.set_cluster_state(cluster, "Running", "upgradeKubernetesCluster")
                self._complete(job, {"kubernetescluster": self.cluster_view(cluster)})

            self.sim.scheduler.schedule(self.sim.delay("start"), finish)

        return self._cluster_job("upgradeKubernetesCluster", cluster, work)

    # -- CKS state scanner -------------------------------------------------------------------

    def start_scanner(self) -> None:
        self.sim.scheduler.schedule(self.sim.delay("scanner_period"), self._scan)

    def _scan(self) -> None:
        try:
            self.scan_once()
        finally:
            self.sim.scheduler.schedule(max(self.sim.delay("scanner_period"), 0.001), self._scan)

    def expected_ready(self, cluster: Cluster) -> int:
        count = cluster.control_nodes + cluster.workers
        if self.cloud_opts["scanner_counts_etcd"]:
            count += cluster.etcd_nodes
        return count

    def scan_once(self) -> None:
        """KubernetesClusterStatusScanner: one pass over the CloudManaged clusters."""
        for cluster in self.clusters.values():
            if cluster.clustertype != "CloudManaged":
                continue
            states = [vm.state for vm in self.cluster_vms(cluster)]
            if cluster.state == "Running" and any(s != "Running" for s in states):
                self.set_cluster_state(cluster, "Alert", "a node VM is not Running")
            elif cluster.state == "Stopped" and any(s != "Stopped" for s in states):
                self.set_cluster_state(cluster, "Alert", "a node VM is not Stopped")
            elif cluster.state == "Alert":
                if states and all(s == "Running" for s in states):
                    world = self.sim.kube.get(cluster.id)
                    # CKS also needs the API server's /version to answer before it trusts the count.
                    api_up = world is not None and getattr(world, "api_available", lambda: True)()
                    ready = world.ready_node_count() if world is not None and api_up else -1
                    if api_up and self.cloud_opts["scanner_adds_etcd"]:
                        # KubernetesClusterStartWorker.reconcileAlertCluster (4.21+): etcd nodes
                        # are no Kubernetes nodes, so their count is added to kubectl's.
                        ready += cluster.etcd_nodes
                    if ready == self.expected_ready(cluster):
                        self.set_cluster_state(cluster, "Running", "all nodes Ready")
                elif states and all(s == "Stopped" for s in states):
                    self.set_cluster_state(cluster, "Stopped", "all node VMs Stopped")
