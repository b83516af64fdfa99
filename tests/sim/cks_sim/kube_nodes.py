"""Nodes: their Node and Lease objects, the kubelet's status posts and boots, VM power as
CloudStack drives it, and foreign cordons.

``Kubelets`` is an actor written against the small ``kube_cluster_api.ClusterApi``: every node's
kubelet (registration, status posts, boots and boot IDs, its Lease) and the VM power CloudStack
drives; nothing of the controllers. It is handed the nodes' hidden state, the recorder, the pods'
lifecycle on the nodes (``PodLifecycle``), the sim (timers, faults, timeline, invariants), the
cluster's spec and version, what the controllers do: ``reconcile()`` (a new node's DaemonSet pods)
and ``after_change()``, and whom it tells that a kubelet stopped or resumed posting
(``heartbeats``: the in-memory API's ``kube_node_lifecycle.NodeLifecycle``, which marks a silent
node Unknown after the grace period; a real kube-controller-manager sees the heartbeats itself).

Written once for both backends: ``--kube real`` plays its kubelets with this class over
``real_kube.cluster_api.RestClusterApi`` (``real_kube/world.py`` drives it on its actors' threads).
So it writes back the Node it read and changed (``_post``), never one read again: over HTTP a
second read is a second object.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol

from . import kube_run
from .kube_cluster_api import ClusterApi
from .kube_helpers import _condition, _set_condition, node_ready, now_micro, now_time
from .kube_hidden import NodeState
from .kube_node_lifecycle import NodeHeartbeats
from .kube_recorder import kubelet_node_ref
from .kube_resources import (
    CONTROL_PLANE_TAINT,
    NODE_LEASE_NS,
    NODE_LEASE_RENEW,
)


class NodeEvents(Protocol):
    """Where the kubelets' Events go (``kube_recorder.Recorder`` in memory)."""

    def record(self, namespace: str, involved: dict[str, Any], etype: str, reason: str, message: str,
               component: str, host: Optional[str] = None, action: Optional[str] = None) -> None:
        """Record one Event."""


class NodePods(Protocol):
    """What a kubelet does to its node's pods at a boot or a restart (``kube_pods.PodLifecycle``)."""

    on_node: Callable[[str], list[dict[str, Any]]]

    def confirm_kill(self, key: tuple[str, str], uid: str) -> None:
        """A terminating pod's containers stopped: it goes."""

    def restart(self, pod: dict[str, Any], ready_node: bool) -> None:
        """The pod's containers recreated on the node's new boot."""

    def awaits_kubelet(self, key: tuple[str, str]) -> bool:
        """Whether the pod's termination waits for its node's kubelet."""


@dataclass
class Boot:
    """A node's boot under way: the boot ID its kubelet reports (chosen as it first posts), the one it
    replaces, and the steps done. On the real backend a boot whose request failed (the API server busy
    or restarting) runs again: it goes on from the step that failed, with the same boot ID, and does
    not record its Events or restart its pods twice."""

    boot_id: Optional[str] = None
    old_boot_id: str = ""
    done: set[str] = field(default_factory=set)

    def step(self, name: str, action: Callable[[], Any]) -> None:
        if name not in self.done:
            action()
            self.done.add(name)


class Kubelets:
    """A node's life as its kubelet and its VM show it."""

    def __init__(self, api: ClusterApi, nodes: dict[str, NodeState], recorder: NodeEvents, pods: NodePods,
                 sim: Any, cluster_id: str, cluster_spec: dict[str, Any], version: str, *,
                 reconcile: Callable[[], None], after_change: Callable[[], None],
                 on_endpoint_change: list[Callable[[], None]], heartbeats: NodeHeartbeats,
                 status_report: Optional[float] = None) -> None:
        self.api = api
        self.nodes = nodes
        self.recorder = recorder
        self.pods = pods
        self.sim = sim
        self.cluster_id = cluster_id
        self.cluster_spec = cluster_spec
        self.version = version
        self.reconcile = reconcile
        self.after_change = after_change
        # Called (sim.lock held) when a VM's power may change whether the endpoint listens.
        self.on_endpoint_change = on_endpoint_change
        # The node-lifecycle controller, told when a kubelet stops posting and posts again.
        self.heartbeats = heartbeats
        #: seconds between two posts of an unchanged NodeStatus (the kubelet's nodeStatusReportFrequency);
        #: None: posted on a change only (the in-memory node lifecycle controller needs no more)
        self.status_report = status_report
        #: node -> its Lease as this kubelet last stored it (what its next heartbeat writes back)
        self._leases: dict[str, dict[str, Any]] = {}
        #: node -> its boot under way (from the VM's start until the new kubelet posted)
        self._boots: dict[str, Boot] = {}

    def _node(self, name: str) -> dict[str, Any]:
        """The Node of one of ``nodes``: each has one from its registration on."""
        node = self.api.read("nodes", "", name)
        if node is None:
            raise KeyError(name)
        return node

    def add(self, spec: dict, index: int) -> None:
        state = node_state(spec, index, self.api.new_uid)
        self.nodes[state.name] = state
        self.register(state.name)

    def register(self, name: str, api: Optional[ClusterApi] = None) -> None:
        """The node as kubeadm init/join left it: its Node and its Lease (on ``api``, the registering
        thread's own connection when given)."""
        api = api or self.api
        state = self.nodes[name]
        running = state.vm_running
        labels = {
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
        }
        taints: list[dict[str, Any]] = []
        if state.node_type == "control":
            labels["node-role.kubernetes.io/control-plane"] = ""
            labels["node.kubernetes.io/exclude-from-external-load-balancers"] = ""
            taints.append({"key": CONTROL_PLANE_TAINT, "effect": "NoSchedule"})
        created = now_time()
        node: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": api.new_meta(
                name,
                labels=labels,
                annotations={
                    "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
                    "node.alpha.kubernetes.io/ttl": "0",
                    "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                },
            ),
            "spec": {
                "podCIDR": f"{state.pod_cidr_prefix}.0/24",
                "podCIDRs": [f"{state.pod_cidr_prefix}.0/24"],
                "providerID": f"cloudstack:///{name}",
                "taints": taints,
            },
            "status": {
                "addresses": [
                    {"type": "InternalIP", "address": state.ip},
                    {"type": "Hostname", "address": name},
                ],
                "capacity": {},
                "allocatable": {},
                "conditions": [],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "images": kube_run.node_images(self.version),
                "nodeInfo": {
                    "architecture": "amd64",
                    "bootID": state.boot_id,
                    "containerRuntimeVersion": "containerd://1.7.22",
                    "kernelVersion": "5.15.0-119-generic",
                    "kubeProxyVersion": f"v{self.version}",
                    "kubeletVersion": f"v{self.version}",
                    "machineID": state.machine_id,
                    "operatingSystem": "linux",
                    "osImage": "Ubuntu 22.04.4 LTS",
                    "systemUUID": state.system_uuid,
                },
            },
        }
        self._set_capacity(node, state.cpu, state.memory_mb)
        conds = node["status"]["conditions"]
        if running:
            self._kubelet_conditions(conds, ready=True, when=created)
        else:
            self.heartbeats.starts_silent(node)
        self._post(node, api)
        self._leases[name] = api.put("leases", {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": api.new_meta(name, NODE_LEASE_NS, ownerReferences=[{
                "apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}]),
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now_micro()},
        })
        state.lease_renewed_at = self.sim.clock.now()

    def join(self, name: str, node_type: str, cpu: int, memory_mb: int) -> None:
        """A node VM CKS added (a scale-up), not yet booted: kubeadm join registers its Node at the
        first boot, NotReady until then; its DaemonSet pods follow (the DaemonSet controller)."""
        self.add({"name": name, "node_type": node_type, "cpu": cpu, "memory_mb": memory_mb,
                  "vm_running": False}, max((n.index for n in self.nodes.values()), default=-1) + 1)
        self.reconcile()

    def _set_capacity(self, node: dict[str, Any], cpu: int, memory_mb: int) -> None:
        disk_gb = int(self.cluster_spec.get("root_disk_size", 20) or 20)
        mem_ki = memory_mb * 1024
        storage_ki = disk_gb * 1024 * 1024
        node["status"]["capacity"] = {
            "cpu": str(cpu), "ephemeral-storage": f"{storage_ki}Ki", "hugepages-1Gi": "0",
            "hugepages-2Mi": "0", "memory": f"{mem_ki}Ki", "pods": "110",
        }
        # kubelet's default hard eviction threshold (memory.available<100Mi, nodefs 10%).
        node["status"]["allocatable"] = {
            "cpu": str(cpu), "ephemeral-storage": str(int(storage_ki * 1024 * 0.9)),
            "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": f"{max(0, mem_ki - 102400)}Ki",
            "pods": "110",
        }

    @staticmethod
    def _kubelet_conditions(conds: list[dict[str, Any]], ready: bool, when: Optional[str] = None) -> None:
        stamp = when or now_time()
        for ctype, reason, message in (
            ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ):
            _set_condition(conds, dict(_condition(ctype, "False", reason, message, stamp), lastHeartbeatTime=stamp))
        if ready:
            ready_cond = _condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", stamp)
        else:
            ready_cond = _condition(
                "Ready", "False", "KubeletNotReady",
                "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
                "message:Network plugin returns error: cni plugin not initialized", stamp)
        _set_condition(conds, dict(ready_cond, lastHeartbeatTime=stamp))
        for cond in conds:
            cond.pop("lastProbeTime", None)

    def set_boot_id(self, name: str, boot_id: str) -> None:
        """The boot ID the kubelet reports until the node's next boot (then a new one, as always)."""
        self.nodes[name].boot_id = boot_id
        node = self._node(name)
        node["status"]["nodeInfo"]["bootID"] = boot_id
        self._post(node)

    def touch(self, name: str) -> dict[str, Any]:
        """The node's Node written again as it is (what the controllers make of it follows)."""
        return self._post(self._node(name))

    def _post(self, node: dict[str, Any], api: Optional[ClusterApi] = None) -> dict[str, Any]:
        """``node`` as read and changed written back (on ``api`` when given): what the controller makes
        of its conditions, the Ready the scheduler reads."""
        self.heartbeats.status_posted(node)
        state = self.nodes[node["metadata"]["name"]]
        state.ready = node_ready(node)
        (api or self.api).put("nodes", node)
        state.status_posted_at = self.sim.clock.now()
        return node

    def _endpoint_changed(self) -> None:
        for listener in list(self.on_endpoint_change):
            listener()

    def powered_off(self, name: str) -> None:
        state = self.nodes[name]
        state.vm_running = False
        self._endpoint_changed()
        state.kubelet_posting = False
        self.sim.scheduler.cancel(state.boot_timer)
        state.boot_timer = None
        self._boots.pop(name, None)
        self.heartbeats.stopped_posting(name)

    def powered_on(self, name: str, cpu: int, memory_mb: int) -> None:
        state = self.nodes[name]
        state.vm_running = True
        self._endpoint_changed()
        state.cpu, state.memory_mb = int(cpu), int(memory_mb)
        self.sim.scheduler.cancel(state.boot_timer)
        stale = self.sim.faults.take("stale_ready", node=name, cluster=self.cluster_id)
        if stale is not None:
            # The old kubelet's Ready (and boot ID) is what the API shows until the new one posts.
            node = self._node(name)
            self._kubelet_conditions(node["status"]["conditions"], ready=True)
            self._post(node)
            self.heartbeats.posting(name)
            delay = self.sim.clock.real(float(stale.get("seconds", self.sim.timings["boot_to_ready"])))
        else:
            delay = self.sim.delay("boot_to_ready")
        boot = self._boots[name] = Boot()
        state.boot_timer = self.sim.scheduler.schedule(delay, self._booted, name, boot)

    def _booted(self, name: str, boot: Boot) -> None:
        state = self.nodes[name]
        if self._boots.get(name) is not boot or not state.vm_running:
            return  # its VM stopped (and maybe started again) since: this boot is over
        state.boot_timer = None
        never_ready = self.sim.faults.peek("never_ready", node=name, cluster=self.cluster_id) is not None
        boot.step("posted", functools.partial(self._post_boot, name, boot, never_ready))
        boot.step("lease", functools.partial(self._renew_node_lease, name))
        ref = kubelet_node_ref(name)
        boot.step("starting", functools.partial(
            self.recorder.record, "default", ref, "Normal", "Starting", "Starting kubelet.", "kubelet", name))
        if boot.old_boot_id:
            boot.step("rebooted", functools.partial(
                self.recorder.record, "default", ref, "Warning", "Rebooted",
                f"Node {name} has been rebooted, boot id: {state.boot_id}", "kubelet", name))
        boot.step("timeline", functools.partial(
            self.sim.timeline.add, cluster=self.cluster_id, node=name, event="boot", boot_id=state.boot_id))
        # Terminations the dead kubelet could not confirm complete now; the rest restart.
        for pod in list(self.pods.on_node(name)):
            key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
            if "deletionTimestamp" in pod["metadata"]:
                action = functools.partial(self.pods.confirm_kill, key, pod["metadata"]["uid"])
            else:
                action = functools.partial(self.pods.restart, pod, ready_node=not never_ready)
            boot.step(f"pod {pod['metadata']['uid']}", action)
        if not never_ready:
            # kubelet_node_status.go recordNodeStatusEvent, once the new kubelet posts Ready.
            boot.step("ready", functools.partial(self._recorded_ready, name))
        self._boots.pop(name, None)
        self.after_change()

    def _post_boot(self, name: str, boot: Boot, never_ready: bool) -> None:
        """The new kubelet's first status: its boot ID (a new one), the VM's capacity, its conditions."""
        state = self.nodes[name]
        self.heartbeats.posting(name)
        node = self._node(name)
        if boot.boot_id is None:
            boot.old_boot_id = node["status"]["nodeInfo"]["bootID"]
            boot.boot_id = self.api.new_uid()
        state.boot_id = boot.boot_id
        state.kubelet_posting = True
        state.lease_renewed_at = self.sim.clock.now()
        node["status"]["nodeInfo"]["bootID"] = state.boot_id
        self._set_capacity(node, state.cpu, state.memory_mb)
        self._kubelet_conditions(node["status"]["conditions"], ready=not never_ready)
        self._post(node)

    def _recorded_ready(self, name: str) -> None:
        self.recorder.record("default", kubelet_node_ref(name), "Normal", "NodeReady", f"Node {name} status is now: NodeReady",
                             "kubelet", name)
        self.sim.timeline.add(cluster=self.cluster_id, node=name, event="ready")

    def scaled_live(self, name: str, cpu: int, memory_mb: int) -> None:
        """vCPUs and memory hot-added to the running VM. The guest onlines them itself (udev rules)
        unless the cluster's spec says it does not; the Node keeps what its kubelet saw at its start."""
        state = self.nodes[name]
        if self.cluster_spec.get("guest_onlines_hotplug", True):
            state.cpu, state.memory_mb = max(state.cpu, int(cpu)), max(state.memory_mb, int(memory_mb))
        self.sim.timeline.add(cluster=self.cluster_id, node=name, event="guest_resources",
                              cpu=state.cpu, memory=state.memory_mb)

    def restart(self, name: str) -> None:
        """`systemctl restart kubelet` on the node: the kubelet stops posting, and the new one reads
        the machine again (cAdvisor) and posts it; same boot, every pod keeps running."""
        state = self.nodes[name]
        if not state.vm_running:
            return
        state.kubelet_posting = False
        self.sim.scheduler.cancel(state.kubelet_restart_timer)
        state.kubelet_restart_timer = self.sim.scheduler.schedule(
            self.sim.delay("kubelet_restart"), self._kubelet_restarted, name)
        self.sim.timeline.add(cluster=self.cluster_id, node=name, event="kubelet_stopped")

    def _kubelet_restarted(self, name: str) -> None:
        state = self.nodes[name]
        state.kubelet_restart_timer = None
        if not state.vm_running or name in self._boots:
            return  # the VM went down meanwhile: its next boot starts the kubelet
        state.kubelet_posting = True
        node = self._node(name)
        stale = self.sim.faults.peek("kubelet_stale_capacity", node=name, cluster=self.cluster_id) is not None
        if not stale:
            self._set_capacity(node, state.cpu, state.memory_mb)
        self._kubelet_conditions(node["status"]["conditions"], ready=True)
        self._post(node)
        self._renew_node_lease(name)
        self.recorder.record("default", kubelet_node_ref(name), "Normal", "Starting", "Starting kubelet.", "kubelet", name)
        # The new kubelet syncs the pods: the kills deleted pods waited for while it was down complete.
        for pod in list(self.pods.on_node(name)):
            key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
            if "deletionTimestamp" in pod["metadata"] and self.pods.awaits_kubelet(key):
                self.pods.confirm_kill(key, pod["metadata"]["uid"])
        self.sim.timeline.add(cluster=self.cluster_id, node=name, event="kubelet_restarted",
                              cpu=node["status"]["capacity"]["cpu"], memory=node["status"]["capacity"]["memory"])
        self.after_change()

    def _renew_node_lease(self, name: str, api: Optional[ClusterApi] = None,
                          latest: Optional[dict[str, Any]] = None) -> None:
        """The node's Lease renewed: ``latest`` (the one this kubelet last stored) written back with a
        new renewTime, else the Lease read first. A renewal that fails forgets the one it held, so the
        next one reads it again (as the kubelet's lease controller does after a conflict)."""
        api = api or self.api
        lease = latest if latest is not None else api.read("leases", NODE_LEASE_NS, name)
        if lease is not None:
            lease["spec"]["renewTime"] = now_micro()
            stored: Optional[dict[str, Any]] = None
            try:
                stored = api.put("leases", lease)
            finally:
                if stored is None:
                    self._leases.pop(name, None)
                else:
                    self._leases[name] = stored
        self.nodes[name].lease_renewed_at = self.sim.clock.now()

    def heartbeat(self, name: str, api: Optional[ClusterApi] = None) -> None:
        """One heartbeat of a posting kubelet (on ``api``, the renewing thread's connection): its Lease
        renewed, and its status posted again when the API no longer shows it Ready (the controller
        marked it Unknown while its Lease lapsed) or ``status_report`` seconds after its last post.

        That report is what a node update the node lifecycle controller dropped waits for: its taint
        pass is not retried when it fails (node_lifecycle_controller.go doNodeProcessingPassWorker,
        "TODO: Add nodeName back to the queue"), and only a change of the Node queues it again. A new
        Node's ``not-ready`` taint (TaintNodesByCondition admission) stayed on a Ready node for
        minutes at load 50 until one came."""
        state = self.nodes[name]
        if not state.kubelet_posting:
            return  # its VM stopped since it was found due
        # One request, not a read and a write: a round renews every node's Lease, and on the real
        # backend a few threads of one process send them all (kubelet's nodelease controller keeps
        # its latest Lease the same way).
        self._renew_node_lease(name, api, latest=self._leases.get(name))
        report_due = self.status_report is not None and \
            self.sim.clock.now() - state.status_posted_at >= self.status_report
        if state.ready != "True" or report_due:
            node = (api or self.api).read("nodes", "", name)
            if node is not None:
                self._kubelet_conditions(node["status"]["conditions"], ready=True)
                self._post(node, api)

    def renew_leases(self) -> None:
        """Renew node leases lazily, as often as a kubelet would have by now."""
        period = self.sim.clock.real(NODE_LEASE_RENEW)
        now = self.sim.clock.now()
        for name, state in self.nodes.items():
            if state.kubelet_posting and now - state.lease_renewed_at >= period:
                self._renew_node_lease(name)

    def cordon_out_of_band(self, name: str) -> None:
        """Someone other than an API client of ours (another operator, a tool) cordons the node."""
        node = self._node(name)
        self.nodes[name].foreign_cordon = True
        if not node["spec"].get("unschedulable"):
            node["spec"]["unschedulable"] = True
            self._post(node)
            self.sim.timeline.add(cluster=self.cluster_id, node=name, event="cordoned", by="foreign")

    def apply_fault(self, fault: dict) -> None:
        if fault.get("kind") == "foreign_cordon":
            if fault.get("cluster") not in (None, self.cluster_id):
                return
            name = str(fault.get("node", "")).lower()
            if name in self.nodes:
                self.cordon_out_of_band(name)


def node_state(spec: dict[str, Any], index: int, new_uid: Callable[[], str]) -> NodeState:
    """What the API cannot see of the spec's node ``index``: its VM's power, its kubelet's boot."""
    running = bool(spec.get("vm_running", True))
    return NodeState(
        name=spec["name"].lower(), node_type=spec.get("node_type", "worker"), index=index,
        cpu=int(spec.get("cpu", 2)), memory_mb=int(spec.get("memory_mb", 4096)),
        vm_running=running, kubelet_posting=running, boot_id=new_uid(),
        machine_id=new_uid().replace("-", ""), system_uuid=new_uid(),
    )
