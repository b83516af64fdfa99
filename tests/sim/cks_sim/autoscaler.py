"""The cluster autoscaler CKS deploys into kube-system when a cluster has autoscaling on
(kubernetes/autoscaler's cluster-autoscaler with its CloudStack provider), at the spec's time scale.

Every ``scan_interval`` it looks at the cluster as the real one does (core/static_autoscaler.go
RunOnce), through the cluster's own CloudStack API (the provider's scaleKubernetesCluster):

- scale up (core/scaleup/orchestrator): pods the scheduler left Unschedulable for at least
  ``new_pod_scale_up_delay`` make it ask for enough workers to hold them (at most ``maxsize``),
  once no scale-up is under way (the cluster Running), each pod told ``TriggeredScaleUp``
  ("pod triggered scale-up: [{<group> 4->5 (max: 6)}]");
- scale down (core/scaledown/eligibility, planner, actuator): a worker whose pods request less
  than ``scale_down_utilization_threshold`` of its allocatable for ``scale_down_unneeded_time``
  (``scale_down_unready_time`` for one not Ready), no sooner than ``scale_down_delay_after_add``
  after a scale-up and never below ``minsize``, is tainted ``ToBeDeletedByClusterAutoscaler``,
  told ``ScaleDown`` ("marked the node as toBeDeleted/unschedulable"), drained through
  evictions and removed with scaleKubernetesCluster nodeids. A node is kept
  (unremovable) when it carries ``cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"``
  (eligibility.go ScaleDownDisabledKey) or holds a pod it may not move
  (simulator/drainability/rules): one whose PodDisruptionBudget allows no disruption (pdb), a
  kube-system pod without a budget (system), one with local storage (localstorage), one no
  controller would replace (replicated), one marked ``safe-to-evict: "false"`` (notsafetoevict),
  or one no other node has room for (simulator/cluster.go, the removal simulation). Mirror and
  DaemonSet pods never block (mirror, daemonset rules).

Defaults (simulated seconds) are the FAQ's: scan-interval 10, scale-down-unneeded-time 600,
scale-down-unready-time 1200, scale-down-delay-after-add 600, new-pod-scale-up-delay 0,
scale-down-utilization-threshold 0.5; a spec's ``autoscaling`` mapping may set any of them.
"""

from __future__ import annotations

import time
from typing import Any, Optional

from .kube_recorder import pod_ref
from .kube_requests import counted, fits, node_allocatable, node_requested, pod_requests
from .kube_resources import ApiError
from .selectors import object_selects

SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
SAFE_TO_EVICT_LOCAL_VOLUMES = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
TO_BE_DELETED_TAINT = "ToBeDeletedByClusterAutoscaler"
MIRROR = "kubernetes.io/config.mirror"
COMPONENT = "cluster-autoscaler"

DEFAULTS: dict[str, float] = {
    "scan_interval": 10.0,
    "scale_down_unneeded_time": 600.0,
    "scale_down_unready_time": 1200.0,
    "scale_down_delay_after_add": 600.0,
    "new_pod_scale_up_delay": 0.0,
    "scale_down_utilization_threshold": 0.5,
}
FIELDS = ("enabled", "minsize", "maxsize", *DEFAULTS)


def parse_spec(raw: Any, where: str, spec_error: Any) -> Optional[dict[str, Any]]:
    """A cluster's ``autoscaling`` field, refused as scaleKubernetesCluster refuses its values."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise spec_error(f"{where}: must be a mapping like {{enabled: true, minsize: 3, maxsize: 6}}")
    unknown = sorted(set(raw) - set(FIELDS))
    if unknown:
        raise spec_error(f"{where}: unknown field(s) {', '.join(unknown)}; known: {', '.join(FIELDS)}")
    out: dict[str, Any] = {"enabled": bool(raw.get("enabled", True))}
    try:
        out["minsize"], out["maxsize"] = int(raw.get("minsize", 1)), int(raw.get("maxsize", 0))
        out.update({k: float(raw.get(k, v)) for k, v in DEFAULTS.items()})
    except (TypeError, ValueError):
        raise spec_error(f"{where}: minsize, maxsize and the timings must be numbers")
    if out["minsize"] < 1:
        raise spec_error(f"{where}.minsize: Minsize must be at least than 1")
    if out["maxsize"] <= out["minsize"]:
        raise spec_error(f"{where}.maxsize: Maxsize must be greater than minsize")
    return out


def _annotations(obj: dict[str, Any]) -> dict[str, str]:
    return obj["metadata"].get("annotations") or {}


class ClusterAutoscaler:
    """One cluster's autoscaler: its loop, what it remembers between loops, its actions."""

    def __init__(self, sim: Any, cluster_id: str, options: Optional[dict[str, Any]]) -> None:
        self.sim = sim
        self.cluster_id = cluster_id
        self.options = dict(DEFAULTS, **{k: v for k, v in (options or {}).items() if k in DEFAULTS})
        self.unneeded_since: dict[str, float] = {}
        self.pending_since: dict[str, float] = {}
        self.last_scale_up: float = float("-inf")
        self.deleting: Optional[str] = None

    # -- the loop ------------------------------------------------------------------------------

    def _seconds(self, name: str) -> float:
        return self.sim.clock.real(self.options[name])

    def start(self) -> None:
        self.sim.scheduler.schedule(max(self._seconds("scan_interval"), 0.001), self._tick)

    def _tick(self) -> None:
        try:
            self.run_once()
        finally:
            self.start()

    def deployed(self, enabled: bool) -> None:
        """CKS deployed (or deleted) the cluster-autoscaler Deployment in kube-system."""
        world = self.sim.kube.get(self.cluster_id)
        if world is None:
            return
        key = ("Deployment", "kube-system", COMPONENT)
        if enabled and key not in world.workloads:
            # CKS's autoscaler manifest runs it on the control plane (it tolerates its taint).
            world.controllers.add({"kind": "Deployment", "namespace": "kube-system", "name": COMPONENT,
                                   "image": "registry.k8s.io/autoscaling/cluster-autoscaler:v1.30.0",
                                   "tolerations": [{"key": "node-role.kubernetes.io/control-plane",
                                                    "operator": "Exists", "effect": "NoSchedule"}]})
            world.controllers.after_change()
        self.unneeded_since.clear()

    def run_once(self) -> None:
        cloud = self.sim.cloud
        cluster = cloud.clusters.get(self.cluster_id)
        world = self.sim.kube.get(self.cluster_id)
        if cluster is None or world is None or not cluster.autoscaling or not world.api_available():
            return
        now = self.sim.clock.now()
        if self._scale_up(cloud, cluster, world, now):
            return
        if cluster.state == "Running" and self.deleting is None:
            self._scale_down(cloud, cluster, world, now)

    # -- scale up ------------------------------------------------------------------------------

    def _sim_seconds(self, real: float) -> float:
        return real / self.sim.clock.time_scale if self.sim.clock.time_scale else float("inf")

    def _unschedulable(self, world: Any, now: float) -> list[dict[str, Any]]:
        """Pods the scheduler left Unschedulable, each seen so for new_pod_scale_up_delay."""
        out = []
        seen = set()
        for pod in list(world.store.objects["pods"].values()):
            if pod["spec"].get("nodeName") or "deletionTimestamp" in pod["metadata"]:
                continue
            cond = next((c for c in pod["status"].get("conditions") or [] if c["type"] == "PodScheduled"), None)
            if cond is None or cond.get("reason") != "Unschedulable":
                continue
            uid = pod["metadata"]["uid"]
            seen.add(uid)
            since = self.pending_since.setdefault(uid, now)
            if self._sim_seconds(now - since) >= self.options["new_pod_scale_up_delay"]:
                out.append(pod)
        for uid in set(self.pending_since) - seen:
            del self.pending_since[uid]
        return out

    def _scale_up(self, cloud: Any, cluster: Any, world: Any, now: float) -> bool:
        pending = self._unschedulable(world, now)
        if not pending:
            return False
        if cluster.state != "Running":
            return True  # a scale-up (or another CKS operation) is under way: its nodes are upcoming
        offering = cloud.service_offerings[cluster.type_offering_ids.get("worker") or cluster.service_offering_id]
        node_cpu, node_memory = offering.cpu * 1000, offering.memory * 1024 * 1024 - 100 * 1024 * 1024
        # Binpacking (estimator/binpacking_estimator.go): the new nodes the pending pods need.
        bins: list[list[int]] = []
        helped = []
        for pod in pending:
            cpu, memory = pod_requests(pod)
            if cpu > node_cpu or memory > node_memory:
                world.recorder.record(pod["metadata"]["namespace"], pod_ref(pod), "Normal", "NotTriggerScaleUp",
                                      "pod didn't trigger scale-up: 1 Insufficient cpu or memory on a new node", COMPONENT)
                continue
            spot = next((b for b in bins if b[0] + cpu <= node_cpu and b[1] + memory <= node_memory), None)
            if spot is None:
                bins.append([cpu, memory])
            else:
                spot[0], spot[1] = spot[0] + cpu, spot[1] + memory
            helped.append(pod)
        if not helped:
            return False
        before = cluster.workers
        after = min(cluster.maxsize, before + len(bins))
        if after <= before:
            for pod in helped:
                world.recorder.record(pod["metadata"]["namespace"], pod_ref(pod), "Normal", "NotTriggerScaleUp",
                                      "pod didn't trigger scale-up: 1 max node group size reached", COMPONENT)
            return False
        cloud.scale_cluster(cluster, None, {}, after)
        self.last_scale_up = now
        self.sim.timeline.add(cluster=cluster.id, event="autoscaler_scale_up", before=before, after=after,
                              pods=[f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in helped])
        for pod in helped:
            world.recorder.record(pod["metadata"]["namespace"], pod_ref(pod), "Normal", "TriggeredScaleUp",
                                  f"pod triggered scale-up: [{{{cluster.id} {before}->{after} (max: {cluster.maxsize})}}]", COMPONENT)
        return True

    # -- scale down ----------------------------------------------------------------------------

    def unremovable_reason(self, world: Any, name: str, others: list[str]) -> Optional[str]:
        """Why the node may not be removed, in the words of the autoscaler's unremovable reasons; None: removable."""
        node = world.store.node(name)
        if _annotations(node).get(SCALE_DOWN_DISABLED) == "true":
            return "ScaleDownDisabledAnnotation"
        cpu, memory = node_requested(world.pod_index, name)
        cap_cpu, cap_memory = node_allocatable(node)
        utilization = max(cpu / cap_cpu if cap_cpu else 0.0, memory / cap_memory if cap_memory else 0.0)
        if utilization >= self.options["scale_down_utilization_threshold"]:
            return "NotUnderutilized"
        placed: dict[str, tuple[int, int]] = {}
        for pod in world.pods.on_node(name):
            why = self._blocking(world, pod)
            if why == "skip":
                continue
            if why is not None:
                return why
            # The removal simulation: another node must have room for the pod.
            spot = next((o for o in others if world.scheduler.schedulable(pod, o) and fits(world.store, world.pod_index, pod, o, placed.get(o, (0, 0)))), None)
            if spot is None:
                return "NoPlaceToMovePods"
            c, m = pod_requests(pod)
            was = placed.get(spot, (0, 0))
            placed[spot] = (was[0] + c, was[1] + m)
        return None

    def _blocking(self, world: Any, pod: dict[str, Any]) -> Optional[str]:
        """The drainability rules for one pod: "skip" (it stays, no matter), a reason it blocks, or None (moved)."""
        meta = pod["metadata"]
        annotations = _annotations(pod)
        owners = [o for o in meta.get("ownerReferences") or [] if o.get("controller")]
        if MIRROR in annotations or any(o["kind"] == "DaemonSet" for o in owners) or not counted(pod):
            return "skip"  # rules mirror, daemonset, terminal
        if "deletionTimestamp" in meta:
            return "skip"  # rules longterminating: already going
        if annotations.get(SAFE_TO_EVICT) == "true":
            return None  # rules safetoevict
        if annotations.get(SAFE_TO_EVICT) == "false":
            return "NotSafeToEvictAnnotation"
        pdbs = [p for p in world.store.objects["poddisruptionbudgets"].values()
                if p["metadata"]["namespace"] == meta["namespace"]
                and object_selects(p["spec"].get("selector"), meta.get("labels") or {})]
        for pdb in pdbs:
            if world.budgets.status(pdb)["disruptionsAllowed"] < 1:
                return "NotEnoughPdb"
        if not owners:
            return "NotReplicated"
        if meta["namespace"] == "kube-system" and not pdbs:
            return "UnmovableKubeSystemPod"
        volumes = pod["spec"].get("volumes") or []
        if any("emptyDir" in v or "hostPath" in v for v in volumes) and not annotations.get(SAFE_TO_EVICT_LOCAL_VOLUMES):
            return "LocalStorageRequested"
        return None

    def _scale_down(self, cloud: Any, cluster: Any, world: Any, now: float) -> None:
        if self._sim_seconds(now - self.last_scale_up) < self.options["scale_down_delay_after_add"]:
            return
        workers = {vm.name.lower(): vm for vm in cloud.cluster_vms(cluster) if vm.node_type == "worker"}
        names = [n for n in sorted(world.nodes) if n in workers]
        unneeded: list[str] = []
        for name in names:
            if any(t.get("key") == TO_BE_DELETED_TAINT for t in world.store.node(name)["spec"].get("taints") or []):
                continue
            others = [o for o in names if o != name and o not in unneeded]
            if self.unremovable_reason(world, name, others) is None:
                unneeded.append(name)
        for name in list(self.unneeded_since):
            if name not in unneeded:
                del self.unneeded_since[name]
        for name in unneeded:
            self.unneeded_since.setdefault(name, now)
        if cluster.workers <= cluster.minsize:
            return
        for name in unneeded:
            wait = "scale_down_unneeded_time" if world.node_ready_status(name) == "True" else "scale_down_unready_time"
            if self._sim_seconds(now - self.unneeded_since[name]) >= self.options[wait]:
                self._delete(cloud, cluster, world, name, workers[name])
                return

    def _delete(self, cloud: Any, cluster: Any, world: Any, name: str, vm: Any) -> None:
        """The actuator: taint, tell, evict, then the provider deletes the node (scaleKubernetesCluster nodeids)."""
        node = world.store.node(name)
        node["spec"]["taints"] = list(node["spec"].get("taints") or []) + [
            {"key": TO_BE_DELETED_TAINT, "value": str(int(time.time())), "effect": "NoSchedule"}]
        world.kubelets.touch(name)
        world.recorder.record("default", world.recorder.node_ref(name), "Normal", "ScaleDown",
                              "marked the node as toBeDeleted/unschedulable", COMPONENT)
        self.sim.timeline.add(cluster=cluster.id, node=name, event="autoscaler_scale_down")
        self.deleting = name
        for pod in list(world.pods.on_node(name)):
            if self._blocking(world, pod) == "skip":
                continue
            world.recorder.record(pod["metadata"]["namespace"], pod_ref(pod), "Normal", "ScaleDown",
                                  "deleting pod for node scale down", COMPONENT)
            try:
                world.evictions.evict(pod["metadata"]["namespace"], pod["metadata"]["name"], {}, False)
            except ApiError:
                node["spec"]["taints"] = [t for t in node["spec"].get("taints") or [] if t.get("key") != TO_BE_DELETED_TAINT]
                world.kubelets.touch(name)
                world.recorder.record("default", world.recorder.node_ref(name), "Warning", "ScaleDownFailed",
                                      "failed to drain the node, aborting ScaleDown", COMPONENT)
                self.deleting = None
                return
        self._remove_when_drained(cloud, cluster, world, name, vm)

    def _remove_when_drained(self, cloud: Any, cluster: Any, world: Any, name: str, vm: Any) -> None:
        if world.has_node(name) and any(self._blocking(world, p) != "skip" or "deletionTimestamp" in p["metadata"]
                                        for p in world.pods.on_node(name) if MIRROR not in _annotations(p)
                                        and not any(o["kind"] == "DaemonSet" for o in p["metadata"].get("ownerReferences") or [])):
            self.sim.scheduler.schedule(max(self._seconds("scan_interval") / 5, 0.005),
                                        self._remove_when_drained, cloud, cluster, world, name, vm)
            return
        self.deleting = None
        self.unneeded_since.pop(name, None)
        if cluster.state == "Running" and vm.id in cloud.vms:
            cloud.remove_cluster_nodes(cluster, [vm])


def start_autoscalers(sim: Any) -> None:
    """One autoscaler per CloudManaged cluster; those the spec turns on have their Deployment now."""
    for cluster in sim.cloud.clusters.values():
        if cluster.clustertype != "CloudManaged":
            continue
        autoscaler = ClusterAutoscaler(sim, cluster.id, cluster.autoscaler_options)
        sim.autoscalers[cluster.id] = autoscaler
        if cluster.autoscaling:
            with sim.lock:
                autoscaler.deployed(True)
        autoscaler.start()
