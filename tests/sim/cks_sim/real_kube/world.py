"""One CKS cluster's Kubernetes on a real control plane (``cks-sim serve --kube real``).

``RealKubeWorld`` answers the CloudStack half and the admin API as ``kube.KubeWorld`` does (node
power, the count of Ready nodes, a snapshot, the kubeconfig's name and token), but the API objects
live in real kube-apiservers (``plane.ControlPlane``: one per control node, stopping with its VM,
storing in the cluster's own etcd members, ``storage.py``), the real controllers and scheduler run
the workloads, and the actors play the machines: the kubelets are the in-memory world's own
(``kube_nodes.Kubelets`` over ``cluster_api.RestClusterApi``, driven on the actors' thread by
``drive.py``), the pods on them the in-memory world's ``kube_pods.PodLifecycle`` (told of the
pods bound and terminating by ``drive.RealPods``' list each tick) and ``kube_control_plane.StaticPods``
(the control nodes' mirror pods). Its threads run the kubelets' ticks, their pods' timers and lease
renewals (pools of a few threads, each with its own connection) and turn the API
servers' audit logs into the sim's call log (the collection's requests: the kubeconfig's identity,
kubernetes-admin) and its invariant checks.

What it cannot do, and says so: the in-memory API's own faults (``kube_error``, ``pdb_block``) have
no counterpart in a real API server (the timeline records ``kube_fault_not_applied``);
``pods/exec`` needs a kubelet that runs containers, which no actor is, so the etcd checks through
the etcd pods are not run on this backend: the real API server answers an exec with an error, and a
rollout uses the etcd members directly (``rollout_etcd_endpoints``).
"""

from __future__ import annotations

import datetime
import logging
import os
import random
import secrets
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional

import requests

from ..kube_control_plane import StaticPods
from ..kube_hidden import NodeState
from ..kube_node_lifecycle import SILENT_CONTROLLER
from ..kube_nodes import Kubelets, node_state
from ..kube_pods import PodLifecycle
from ..tls import issue_cert
from .actors import settled, workload_objects
from .api import ApiRefusal, KubeApi, RestApi
from .cluster_api import RestClusterApi
from .drive import ActorSim, ActorTimers, EventRecorder, RealPods, ThreadClusterApi
from .plane import ControlPlane, PlaneError
from .storage import plane_layout

LOG = logging.getLogger("cks_sim.real_kube")
#: The faults of cks-sim's own Kubernetes API: a real API server answers and evicts by its own rules.
API_FAULTS = frozenset({"kube_error", "pdb_block"})
#: The collection's identity: the kubeconfig's client certificate (kubeadm's admin.conf user).
COLLECTION_USER = "kubernetes-admin"
#: The actors' identity (system:masters: one process plays every kubelet, past the Node authorizer).
ACTORS_USER = "cks-sim-kubelets"
TICK = 0.2
#: The node lifecycle controller's taints of a node it does not count Ready (the collection's too).
OUT_OF_SERVICE_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})
AUDIT_POLL = 0.05
#: The node lifecycle controller's grace period is never below this: heartbeats from the actors'
#: threads on a loaded machine must not look like a dead node. At 5 s, a clean-clone make test saw
#: a control node marked NotReady mid-rollout at load 30; at 10 s, a worker of small.yml was found not
#: Ready by the rollout's preflight while large.yml's 1,003 nodes were served beside it (load 25-35:
#: its renewals 4 to 8 s apart, the controller manager itself behind). A real cluster's is 50 s.
MIN_GRACE = 20.0
#: ... and grows with the nodes the process plays: seconds per node. Their lease renewals come from a
#: few threads of one process, not from a machine each: on the shared 2-core machine a round of
#: large.yml's 1,003 renewals took about 20 s at load 20, and 60 to 80 s at load 35-40 (another
#: real tier beside it), its longest gap 107 s then (docs/docsite/rst/development.rst). A real
#: cluster's grace is 50 s for any size (kube-controller-manager's default).
GRACE_PER_NODE = 0.15
#: A kubelet posts its NodeStatus unchanged after this many grace periods (the kubelet's
#: nodeStatusReportFrequency, 5 minutes against a 50 s grace: 6): the Node update that has the node
#: lifecycle controller try again a taint change it dropped (kube_nodes.Kubelets.heartbeat).
STATUS_REPORT_GRACES = 2.0
#: The kubelets' lease renewals, registrations and pod starts: threads (a pool of each), each with
#: its own connection.
HEARTBEAT_THREADS = 4
#: The least time a lease renewal may take before it is given up and sent again on the next round.
RENEWAL_TIMEOUT = 2.0
#: The actors' tick lists every Node and Pod: a large cluster's lists are read less often (seconds per node).
TICK_PER_NODE = 0.002
SETTLE_TIMEOUT = 120.0
#: ... and seconds more per node (a thousand nodes' DaemonSet pods are created, bound and started).
SETTLE_PER_NODE = 0.5
#: Each cluster runs a control plane of its own (a kube-apiserver per control node, a controller
#: manager and a scheduler): this many start at once (a start mostly waits on its processes).
REAL_KUBE_STARTS = 4
#: What a cluster's processes hold in memory (resident, MiB), a little over what was measured on the
#: served examples (docs/docsite/rst/development.rst, *The real control plane*): a kube-apiserver
#: per control node (300 with a few nodes, 460-500 with a thousand), and a controller manager, a
#: scheduler, its etcd members and its actors (about 250 together). Resident sizes count the
#: kube-plane binary's pages, shared by every process of it, in each (about 80 MiB): the estimate is
#: generous. Planes that do not fit together in the machine's available memory run by turns
#: (pool.py); a spec of which not even one cluster's plane fits is refused at once, saying so.
APISERVER_MB = 350
CONTROLLERS_MB = 250


class RealKubeWorld:
    """One cluster's Kubernetes on a real control plane; the interface ``kube.KubeWorld`` offers the
    CloudStack half and the admin API."""

    def __init__(self, sim: Any, cluster_id: str, cluster_spec: dict, nodes: list[dict],
                 workloads: list[dict], pdbs: list[dict]) -> None:
        # Judged once for the whole spec, by the first cluster's world, before any process starts.
        why = "" if sim.kube else too_large([
            sum(1 for vm in sim.cloud.cluster_vms(cluster) if vm.node_type == "control" and not vm.is_etcd)
            for cluster in sim.cloud.clusters.values()])
        if why:
            raise PlaneError(f"{why}: serve it with --kube memory (cks-sim's own Kubernetes API)")
        self.sim = sim
        self.cluster_id = cluster_id
        self.cluster_spec = cluster_spec
        self.name = cluster_spec.get("name", cluster_id)
        self.token = secrets.token_hex(16)  # the kubeconfig's bearer token (--token-auth-file)
        self.workloads, self.pdbs = workloads, pdbs
        self.nodes: dict[str, NodeState] = {}
        for index, spec in enumerate(nodes):
            state = node_state(spec, index, lambda: str(uuid.uuid4()))
            self.nodes[state.name] = state
        self.off_since: dict[str, float] = {}  # node -> wall-clock time its VM stopped
        self._timers = ActorTimers()
        self._pod_timers = ActorTimers()  # the pods' starts and kills: each of one pod, run side by side
        self.etcd_servers = ""
        self.stacked_etcd = False
        self.external_etcd: list[str] = []
        self.plane: Optional[ControlPlane] = None
        self.kubelets: Optional[Kubelets] = None
        self.pods: Optional[RealPods] = None
        self.heartbeat = MIN_GRACE / 4
        #: seconds: the longest a posting kubelet went between two lease renewals
        self.worst_gap = 0.0
        self._api: Optional[RestApi] = None
        self.version = ""
        self._stopping = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._beater: Optional[threading.Thread] = None
        self._beats: Optional[ThreadPoolExecutor] = None
        self._pod_work: Optional[ThreadPoolExecutor] = None
        self._local = threading.local()
        self._thread_apis: list[RestApi] = []
        self._api_credentials: tuple[str, str, str] = ("", "", "")
        self.tick_interval = TICK
        self.grace = MIN_GRACE
        self._auditor: Optional[threading.Thread] = None
        self._audit_lock = threading.Lock()
        self._ticking = threading.Lock()  # one tick at a time: the actors' thread, or start() once settled
        self._cache: dict[str, list[dict[str, Any]]] = {"nodes": [], "pods": [], "pdbs": []}
        #: its plane stopped while idle (pool.py: more clusters than the budget runs at once); its
        #: storage, its nodes' flags and the snapshot's last reading kept
        self.dormant = False
        #: ``on_power_change(cluster_id)`` after a VM's power changed while the plane does not run
        #: (pool.py wakes it); called under ``sim.lock``
        self.on_power_change: Optional[Callable[[str], None]] = None

    # -- what server.build tells it ----------------------------------------------------------------

    def use_etcd_client_urls(self, urls: dict[str, str]) -> None:
        """Stacked etcd: the members' client URLs, which the control nodes' kube-apiserver pods name."""
        self.etcd_servers, self.stacked_etcd = ",".join(urls[n] for n in sorted(urls)), True

    def use_external_etcd_servers(self, servers: list[str]) -> None:
        self.etcd_servers, self.external_etcd = ",".join(servers), list(servers)

    # -- starting and stopping -----------------------------------------------------------------------

    def start(self) -> None:
        """The control plane, the nodes as kubeadm left them, the spec's workloads, settled."""
        sim = self.sim
        state_dir = os.path.join(sim.state_dir, f"kube-{self.name}")
        os.makedirs(state_dir, mode=0o700, exist_ok=True)
        tokens = os.path.join(state_dir, "tokens.csv")
        fd = os.open(tokens, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(f'{self.token},{COLLECTION_USER},{COLLECTION_USER},"system:masters"\n')
        # One process plays the kubelets of every cluster of the spec: their number is what the renewals cost.
        grace = node_monitor_grace(sim.delay("notready_grace"), sum(len(w.nodes) for w in sim.kube.values()))
        self.tick_interval = max(TICK, TICK_PER_NODE * len(self.nodes))
        self.grace = grace
        # A cluster stopped in CloudStack was deployed running, then stopped: with no control node's VM
        # running, its plane and kubelets bring it up as it ran, and its VMs stop once it settled.
        stopped = [] if any(n.vm_running for n in self.nodes.values() if n.node_type == "control") \
            else [n.name for n in self.nodes.values() if not n.vm_running]
        for name in stopped:
            self.nodes[name].vm_running = self.nodes[name].kubelet_posting = True
        # The API servers store in the cluster's own etcd members, one on each control node (storage.py).
        controls = [(n.name, n.vm_running) for n in sorted(self.nodes.values(), key=lambda n: n.index)
                    if n.node_type == "control"]
        layout = plane_layout(sim.etcd, controls, self.external_etcd,
                              str(self.cluster_spec.get("api_endpoint") or "load_balancer"),
                              os.path.join(state_dir, "etcd-client"))
        self.plane = ControlPlane(state_dir, sim.tls, node_monitor_grace=grace, token_file=tokens, **layout).start()
        self.version = self.plane.version.get("gitVersion", "")
        sim.timeline.add(cluster=self.cluster_id, event="kube_plane_started", url=self.plane.url,
                         version=self.version, seconds=round(self.plane.startup_seconds, 2))
        cert, key = issue_cert(sim.tls, ACTORS_USER, [], client=True, server=False,
                               out_dir=os.path.join(state_dir, "kube-plane"), organization="system:masters")
        # The kubelets reach the API through the balancer, as kubeadm's kubelet.conf names the endpoint.
        self._api_credentials = (sim.tls["ca_cert"], cert, key)
        api = self._api = RestApi(self.plane.internal_url, *self._api_credentials)
        self.heartbeat = grace / 4
        cluster_api = RestClusterApi(api)
        # The in-memory world's kubelets, over the real API; the real kube-controller-manager is the
        # node lifecycle controller, and the real controllers react to what they write.
        # Their pods' actor too, its requests on the calling thread's connection (a tick's timers fan out).
        pod_api = ThreadClusterApi(self._thread_api)
        lifecycle = PodLifecycle(pod_api, self.nodes, EventRecorder(pod_api), ActorSim(sim, self._pod_timers),
                                 self.cluster_id, random.Random(), None, pods_on=pod_api.pods_on,
                                 after_change=_nothing, removed=_removed)
        self.kubelets = Kubelets(cluster_api, self.nodes, EventRecorder(cluster_api), lifecycle,
                                 ActorSim(sim, self._timers), self.cluster_id, self.cluster_spec,
                                 self.version.lstrip("v"), reconcile=_nothing, after_change=_nothing,
                                 on_endpoint_change=[], heartbeats=SILENT_CONTROLLER,
                                 status_report=STATUS_REPORT_GRACES * grace)
        self.pods = RealPods(lifecycle, self._pod_timers, self.nodes, self._timeline)
        # The kubelets tick and renew their leases from the first registration on: a node registered
        # early must not miss its heartbeats while the others are still being registered.
        self._start_actors()
        # Registered from threads of their own: the renewals of the nodes registered first do not wait
        # behind the registrations of the others.
        with ThreadPoolExecutor(HEARTBEAT_THREADS, thread_name_prefix=f"cks-sim-join-{self.cluster_id[:8]}") as joins:
            list(joins.map(self._register, sorted(self.nodes.values(), key=lambda n: n.index)))
        objects = workload_objects(self.workloads, self.pdbs)
        for path, body in objects:
            api.create(path, body)
        deadline = time.monotonic() + SETTLE_TIMEOUT + SETTLE_PER_NODE * len(self.nodes)
        while (waiting := self._settled(api, objects)) is not None:
            if time.monotonic() > deadline:
                raise PlaneError(f"the spec's workloads did not settle on the real control plane: {waiting}")
            time.sleep(TICK)
        with self._ticking:
            # The snapshot shows the settled cluster from the first answer on, not a tick's older reading.
            self._tick()
            self._refresh_cache()
        self._read_audit(record=False)  # the start's own requests are no calls of the collection
        assert self._auditor is not None
        self._auditor.start()
        if stopped:
            with sim.lock:
                for name in stopped:
                    self.node_powered_off(name)
            self._timeline("kube_cluster_stopped", nodes=stopped)

    def _start_actors(self) -> None:
        """The kubelets' threads (the audit follower's made, started once the start's requests are read)."""
        # Separate pools: the renewals never wait behind a tick's pod starts.
        self._beats = ThreadPoolExecutor(HEARTBEAT_THREADS, thread_name_prefix=f"cks-sim-leases-{self.cluster_id[:8]}")
        self._pod_work = ThreadPoolExecutor(HEARTBEAT_THREADS, thread_name_prefix=f"cks-sim-pods-{self.cluster_id[:8]}")
        self._thread = threading.Thread(target=self._run, name=f"cks-sim-kubelets-{self.cluster_id[:8]}", daemon=True)
        self._thread.start()
        self._beater = threading.Thread(target=self._beat, name=f"cks-sim-heartbeats-{self.cluster_id[:8]}",
                                        daemon=True)
        self._beater.start()
        self._auditor = threading.Thread(target=self._follow_audit, name=f"cks-sim-audit-{self.cluster_id[:8]}",
                                         daemon=True)

    # -- stopped while idle, and back (pool.py) ------------------------------------------------------

    def can_resume(self) -> bool:
        """A control node's VM runs: its API server can start (with none, no API answers anyway)."""
        return any(n.vm_running for n in self.nodes.values() if n.node_type == "control")

    def suspend(self) -> None:
        """The plane and the kubelets' threads stopped, the API's storage kept (the cluster's etcd
        members run on; the plane's own etcd keeps its data directory): what pool.py does to the least
        recently used idle plane. The snapshot keeps the last reading; power changes set flags."""
        self._stop_actors()
        assert self.plane is not None
        self.plane.stop()
        self._read_audit(record=True)  # the calls the audit thread had not read yet
        self.dormant = True

    def resume(self) -> None:
        """The plane started again on its storage, the kubelets' threads with it: each running
        kubelet renews its lease at once (a new node lifecycle controller starts its grace from when it
        first sees the node), a VM started meanwhile boots, one stopped meanwhile stays silent."""
        assert self.plane is not None and self.kubelets is not None
        with self.sim.lock:
            self.plane.stopped = frozenset(n.name for n in self.nodes.values()
                                           if n.node_type == "control" and not n.vm_running)
        self.plane.start()
        self._stopping = threading.Event()
        self._local = threading.local()
        self._thread_apis = []
        api = self._api = RestApi(self.plane.internal_url, *self._api_credentials)
        self.kubelets.api = RestClusterApi(api)
        for node in self.nodes.values():
            node.lease_renewed_at = 0.0  # due now (and the dormant time no gap between renewals)
        self.dormant = False
        with self.sim.lock:  # a VM whose power changed while the plane started: its API server as its VM is
            for name, server in self.plane.apiservers.items():
                if server.wanted != self.nodes[name].vm_running:
                    (self.plane.power_on if self.nodes[name].vm_running else self.plane.power_off)(name)
        self._start_actors()
        try:
            with self._ticking:  # the snapshot's reading from the plane as it runs again
                self._tick()
                self._refresh_cache()
        except (ApiRefusal, requests.RequestException) as exc:
            LOG.warning("kubelets: %s", exc)  # a busy API server: the actors' thread ticks again
        self._read_audit(record=False)  # the kubelets' first requests
        assert self._auditor is not None
        self._auditor.start()

    def _register(self, node: NodeState) -> None:
        """One node as kubeadm init/join left it (on the registering thread's own connection)."""
        assert self.kubelets is not None
        api = RestClusterApi(self._thread_api())
        self.kubelets.register(node.name, api)
        if node.kubelet_posting:
            node.lease_renewed_at = self.sim.clock.now()
        if node.node_type == "control":
            static = StaticPods(api, self.nodes, self.version.lstrip("v"), self.stacked_etcd, place=_bound_already)
            if self.etcd_servers:
                static.etcd_servers = self.etcd_servers  # the members' client URLs (kubeadm's --etcd-servers)
            static.ensure_mirror_pods(node.name)

    def _tick(self) -> None:
        """The kubelets' timers and queued power events due, then the pods' tick."""
        assert self.pods is not None and self._api is not None
        self._timers.run_due()
        self.pods.tick(self._api, self._fan_out)

    def _settled(self, api: RestApi, objects: list[tuple[str, dict[str, Any]]]) -> Optional[str]:
        try:
            return nodes_in_service(api, [n.name for n in self.nodes.values() if n.vm_running]) or \
                settled(api, objects)
        except (ApiRefusal, requests.RequestException) as exc:
            return str(exc)

    def stop(self) -> None:
        self._stop_actors()
        if self.plane is not None:
            self.plane.stop()

    def _stop_actors(self) -> None:
        self._stopping.set()
        for thread in (self._thread, self._beater, self._auditor):
            if thread is not None and thread.is_alive():
                thread.join(timeout=10)
        for pool in (self._beats, self._pod_work):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        for api in [self._api, *self._thread_apis]:
            if api is not None:
                api.close()

    def _run(self) -> None:
        assert self.kubelets is not None
        while not self._stopping.is_set():
            if self._api_down():
                # The power events queued meanwhile still change the kubelets (a stop makes no request).
                with self._ticking:
                    self._timers.run_due()
                self._stopping.wait(self.tick_interval)
                continue
            try:
                with self._ticking:
                    self._tick()
                    self._refresh_cache()
            except (ApiRefusal, requests.RequestException) as exc:
                LOG.warning("kubelets: %s", exc)  # the API server is busy or restarting: the next tick retries
            except Exception:  # pylint: disable=broad-exception-caught
                if self._stopping.is_set():
                    return  # stop() shut the pods' pool down in the middle of a tick
                # A tick broken by the unforeseen must not end the kubelets' thread: every boot and pod
                # start after it would wait for it (a rollout waiting on a node, a budget on a pod).
                LOG.exception("kubelets: the tick failed")
            self._stopping.wait(self.tick_interval)

    def _beat(self) -> None:
        """Each running kubelet's lease renewed when due, on the pool's threads (a real kubelet renews
        its own every 10 s, each from its machine): the lifecycle controller's reading of the node."""
        assert self.kubelets is not None and self._beats is not None
        while not self._stopping.is_set():
            if self._api_down():
                self._stopping.wait(min(self.heartbeat / 4, 1.0))
                continue
            try:
                renewals = [self._beats.submit(self._heartbeat, node) for node in self._due_heartbeats()]
            except RuntimeError:  # stop() shut the pool down meanwhile
                return
            failed = [error for error in (r.exception() for r in renewals) if error is not None]
            if failed:  # the API server is busy or restarting: those are due again on the next round
                LOG.warning("heartbeats: %d failed, the first: %s", len(failed), failed[0])
            self._stopping.wait(min(self.heartbeat / 4, 1.0))

    def _due_heartbeats(self) -> list[NodeState]:
        """The nodes whose kubelet posts and whose Lease is due for renewal."""
        now = self.sim.clock.now()
        return [n for n in list(self.nodes.values())
                if n.kubelet_posting and now - n.lease_renewed_at >= self.heartbeat]

    def _api_down(self) -> bool:
        """Every control node's API server is stopped (their VMs are): no kubelet reaches the API, and
        nothing is tried until one runs again."""
        return self.plane is not None and not any(s.wanted for s in self.plane.apiservers.values())

    def _heartbeat(self, node: NodeState) -> None:
        assert self.kubelets is not None
        # A renewal sent on a connection to an API server that is shutting down (its control node's VM
        # stopping) can hang until that process ends; the round waits for every renewal, so one hung
        # request must give up within the renewal interval, not after the 10 s of any other call, or
        # every node's lease lapses past a short grace (seen at 10 s on the stacked control-plane rollout).
        last = node.lease_renewed_at
        api = self._thread_api(timeout=max(self.heartbeat, RENEWAL_TIMEOUT))
        self.kubelets.heartbeat(node.name, RestClusterApi(api))
        if last and node.kubelet_posting:
            # The longest a running kubelet went between two renewals: what the node lifecycle
            # controller's grace period has to cover (the sim's /state shows it).
            self.worst_gap = max(self.worst_gap, node.lease_renewed_at - last)

    @property
    def api(self) -> RestApi:
        """The actors' connection to the API server (as they read it; a test's too)."""
        assert self._api is not None
        return self._api

    def _fan_out(self, calls: list[Callable[[], None]]) -> None:
        """The pods' timers due this tick (starts, kills confirmed), on the pool's threads, each with
        its connection; the first failure raised once all have run."""
        if len(calls) < 2 or self._pod_work is None:
            for call in calls:
                call()
            return
        done = [self._pod_work.submit(call) for call in calls]
        failed = [error for error in (d.exception() for d in done) if error is not None]
        if failed:
            raise failed[0]

    def _thread_api(self, timeout: Optional[float] = None) -> RestApi:
        """The calling thread's own connection to the API (a kubelet's: through the balancer); its
        requests give up after ``timeout`` seconds (the shared connection's when None)."""
        api = getattr(self._local, "api", None)
        if api is None:
            assert self._api is not None
            api = self._local.api = RestApi(self._api.url, *self._api_credentials,
                                            timeout=self._api.timeout if timeout is None else timeout)
            self._thread_apis.append(api)
        return api

    def _refresh_cache(self) -> None:
        assert self.pods is not None and self._api is not None
        self._cache = {**self.pods.seen, "pdbs": self._api.list("/apis/policy/v1/poddisruptionbudgets")}

    def _follow_audit(self) -> None:
        # Its own thread, polling fast: an accepted eviction is judged against the cluster of that moment.
        while not self._stopping.is_set():
            try:
                self.read_audit()
            except (ApiRefusal, requests.RequestException) as exc:
                LOG.warning("audit: %s", exc)
            self._stopping.wait(AUDIT_POLL)

    def _timeline(self, event: str, **fields: Any) -> None:
        self.sim.timeline.add(cluster=self.cluster_id, event=event, **fields)

    # -- the calls and the invariants, from the audit log ------------------------------------------

    def read_audit(self) -> None:
        """The audit log's new lines into the call log (the audit thread, and /calls before it answers)."""
        if self.plane is not None:
            self._read_audit(record=True)

    def _read_audit(self, record: bool) -> None:
        assert self.plane is not None
        with self._audit_lock:
            events = self.plane.audit_events()
            if record:
                self._record_calls(events)

    def _record_calls(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            if (event.get("user") or {}).get("username") != COLLECTION_USER or event.get("stage") != "ResponseComplete":
                continue
            ref = event.get("objectRef") or {}
            resource = ref.get("resource", "")
            if ref.get("subresource"):
                resource = f"{resource}/{ref['subresource']}"
            code = int((event.get("responseStatus") or {}).get("code") or 0)
            self.sim.calls.add(api="kubernetes", cluster=self.cluster_id, verb=event.get("verb"),
                               path=str(event.get("requestURI", "")).split("?", 1)[0], resource=resource,
                               namespace=ref.get("namespace"), name=ref.get("name"), status=code)
            if resource == "pods/eviction" and code == 201:
                self._check_budgets(ref.get("namespace", ""), ref.get("name", ""),
                                    str(event.get("requestReceivedTimestamp", "")))

    def _check_budgets(self, namespace: str, pod_name: str, evicted_at: str) -> None:
        """After an accepted eviction: did each budget of the pod hold, counting pods on VMs already stopped
        then as down (the API cannot know a VM is off before the node lifecycle controller says so)?

        Read moments after the eviction (the audit thread polls fast): pods created since (replacements)
        are left out, and a VM counts as off only if it was off at the eviction's time.
        """
        api = self._api
        assert api is not None
        when = _epoch(evicted_at)
        # Stamps are whole seconds: a pod created in the eviction's second counts as there before it.
        pods = [p for p in api.list(f"/api/v1/namespaces/{namespace}/pods")
                if _epoch(p["metadata"]["creationTimestamp"]) < when + 1]
        evicted = next((p for p in pods if p["metadata"]["name"] == pod_name), None)
        if evicted is None:
            return  # gone already: its labels, and so its budgets, are unknown
        for pdb in api.list(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"):
            selector = (pdb["spec"].get("selector") or {}).get("matchLabels") or {}
            if not _matches(selector, evicted):
                continue
            desired = int((pdb.get("status") or {}).get("desiredHealthy") or 0)
            healthy = [p for p in pods if _matches(selector, p) and p is not evicted and self._truly_healthy(p, when)]
            if len(healthy) < desired:
                self.sim.invariants.add(kind="pdb_below_budget", cluster=self.cluster_id,
                                        pdb=f"{namespace}/{pdb['metadata']['name']}", pod=pod_name,
                                        healthy=len(healthy), desired=desired)

    def _truly_healthy(self, pod: dict[str, Any], when: float) -> bool:
        node = self.nodes.get((pod.get("spec") or {}).get("nodeName") or "")
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (pod.get("status") or {}).get("conditions") or [])
        off_since = self.off_since.get(node.name) if node is not None else None
        was_on = node is not None and (off_since is None or off_since > when)
        meta = pod["metadata"]
        # A deletion's stamp is the end of its grace: it began that grace earlier. A pod whose deletion
        # began after ``when`` (a later eviction) was still counted then.
        began = _epoch(meta["deletionTimestamp"]) - int(meta.get("deletionGracePeriodSeconds") or 0) \
            if meta.get("deletionTimestamp") else None
        return ready and was_on and (began is None or began >= int(when))

    # -- the CloudStack half's interface (under sim.lock) -------------------------------------------

    def has_node(self, name: str) -> bool:
        return name in self.nodes

    def node_powered_off(self, name: str) -> None:
        if self.plane is not None:
            self.plane.power_off(name)  # a control node's API server stops with its VM
        self.off_since[name] = time.time()
        # The VM is off now (what /state shows), its kubelet silent; the kubelets' own part waits for
        # the actors' thread (no request is made under sim.lock), in order with the rest.
        self.nodes[name].vm_running = self.nodes[name].kubelet_posting = False
        if self.kubelets is not None:
            self._timers.schedule(0.0, self.kubelets.powered_off, name)
        self._power_changed()

    def _power_changed(self) -> None:
        if (self.dormant or self.plane is None) and self.on_power_change is not None:
            self.on_power_change(self.cluster_id)

    def node_powered_on(self, name: str, cpu: int, memory_mb: int) -> None:
        # A control node's kubelet talks to its own node's API server (kubeadm's
        # ControlPlaneKubeletLocalMode, KEP 4471): it boots once that one serves, so the node, and its
        # kube-apiserver mirror pod, are Ready no sooner than its API server really is.
        if self.plane is not None and self.plane.power_on(name, lambda: self._kubelet_on(name, cpu, memory_mb)) \
                and not self.dormant:
            return
        self._kubelet_on(name, cpu, memory_mb)  # a dormant plane's kubelet boots once it runs again
        self._power_changed()

    def _kubelet_on(self, name: str, cpu: int, memory_mb: int) -> None:
        with self.sim.lock:  # held already from node_powered_on; not from the API server's worker
            server = self.plane.apiservers.get(name) if self.plane is not None else None
            if server is not None and not server.wanted:
                return  # its VM stopped again while its API server was starting
            self.off_since.pop(name, None)
            self.nodes[name].vm_running = True
            if self.kubelets is not None:
                self._timers.schedule(0.0, self.kubelets.powered_on, name, cpu, memory_mb)
            else:
                self.nodes[name].kubelet_posting = True

    def ready_node_count(self) -> int:
        return sum(1 for node in self.nodes.values() if node.ready == "True")

    def api_available(self) -> bool:
        return self.plane is not None and not self.dormant and self.plane.api_available()

    def apply_fault(self, fault: dict[str, Any]) -> None:
        """A fault of cks-sim's own API (its answers, its eviction rules) has no counterpart in a real API
        server. The machines' faults (``never_ready``, ``stale_ready``, ``slow_drain``, ...) the shared
        actors read from the sim's list when they act, as in memory; a foreign cordon is an actor's write."""
        kind = fault.get("kind")
        if kind in API_FAULTS:
            self._timeline("kube_fault_not_applied", kind=kind)
        elif kind == "foreign_cordon" and self.kubelets is not None:
            self._timers.schedule(0.0, self.kubelets.apply_fault, dict(fault))

    def snapshot(self) -> dict[str, Any]:
        """What the admin API's /state shows, from the actors' last reading (no request under sim.lock)."""
        cache = self._cache
        nodes = []
        if self.plane is None and not cache["nodes"]:  # not started yet (pool.py): the nodes as the spec has them
            nodes = [{"name": n.name, "node_type": n.node_type, "vm_running": n.vm_running, "ready": n.ready}
                     for n in sorted(self.nodes.values(), key=lambda n: n.name)]
        for raw in sorted(cache["nodes"], key=lambda n: n["metadata"]["name"]):
            name = raw["metadata"]["name"]
            state = self.nodes.get(name)
            status = raw.get("status") or {}
            nodes.append({
                "name": name, "node_type": state.node_type if state else None,
                "vm_running": state.vm_running if state else None,
                "ready": next((c["status"] for c in status.get("conditions") or [] if c["type"] == "Ready"), "Unknown"),
                "boot_id": (status.get("nodeInfo") or {}).get("bootID"),
                "unschedulable": bool(raw["spec"].get("unschedulable")),
                "annotations": dict(raw["metadata"].get("annotations") or {}),
                "taints": [f"{t['key']}:{t['effect']}" for t in raw["spec"].get("taints") or []],
                "cpu": (status.get("capacity") or {}).get("cpu"), "memory": (status.get("capacity") or {}).get("memory"),
            })
        pods = []
        for pod in cache["pods"]:
            meta = pod["metadata"]
            owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
            pods.append({"namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"],
                         "node": pod["spec"].get("nodeName"), "phase": (pod.get("status") or {}).get("phase"),
                         "ready": any(c.get("type") == "Ready" and c.get("status") == "True"
                                      for c in (pod.get("status") or {}).get("conditions") or []),
                         "terminating": "deletionTimestamp" in meta,
                         "owner": f"{owner['kind']}/{owner['name']}" if owner else None})
        pdbs = [{"namespace": p["metadata"]["namespace"], "name": p["metadata"]["name"], **(p.get("status") or {})}
                for p in cache["pdbs"]]
        # The node lifecycle controller's grace, the leases' renewal interval and the longest a running
        # kubelet went between two renewals (what the grace has to cover), in seconds.
        heartbeats = {"grace": self.grace, "interval": self.heartbeat if self.kubelets else None,
                      "worst_gap": round(self.worst_gap, 3) if self.kubelets else None}
        plane = "not started" if self.plane is None else "dormant" if self.dormant else "running"
        return {"real": True, "url": self.plane.url if self.plane else None, "version": self.version, "plane": plane,
                "heartbeats": heartbeats,
                "nodes": nodes, "pods": sorted(pods, key=lambda p: (p["namespace"], p["name"])), "pdbs": pdbs}


def nodes_in_service(api: KubeApi, names: list[str]) -> Optional[str]:
    """None once each of the nodes ``names`` is Ready without the taints of a node out of service; else
    the first that is not. The API server's TaintNodesByCondition admission gives every new Node
    ``node.kubernetes.io/not-ready:NoSchedule``, and only the node lifecycle controller takes it off once
    it has read the Ready condition: a cluster served before then has nodes the collection (and the
    scheduler) rightly count as not Ready (a rollout's preflight refused one, at load 25)."""
    nodes = {n["metadata"]["name"]: n for n in api.list("/api/v1/nodes")}
    for name in names:
        node = nodes.get(name)
        if node is None:
            return f"node {name}: not registered"
        ready = next((c.get("status") for c in (node.get("status") or {}).get("conditions") or []
                      if c.get("type") == "Ready"), None)
        taints = sorted({t["key"] for t in (node.get("spec") or {}).get("taints") or []} & OUT_OF_SERVICE_TAINTS)
        if ready != "True" or taints:
            return f"node {name}: Ready={ready}, taints {taints}"
    return None


def _nothing() -> None:
    """What the in-memory controllers do after a kubelet's change: here the real ones watch."""


def _removed(pod: dict[str, Any]) -> None:  # pylint: disable=unused-argument
    """What the in-memory controllers do as a pod goes: here the real ones watch."""


def _bound_already(pod: dict[str, Any], node: Optional[str]) -> None:  # pylint: disable=unused-argument
    """The in-memory scheduler's binding of a mirror pod: a real API server has it as created, bound."""


def node_monitor_grace(grace: float, nodes: int) -> float:
    """The node lifecycle controller's grace period (seconds) for a cluster of ``nodes`` nodes whose
    timings give ``grace``: never under MIN_GRACE, and growing with the cluster (GRACE_PER_NODE)."""
    return max(grace, MIN_GRACE, GRACE_PER_NODE * nodes)


def plane_memory_mb(control_nodes: list[int]) -> int:
    """What the planes of clusters with these numbers of control nodes hold in memory (MiB, an estimate)."""
    return sum(APISERVER_MB * max(count, 1) + CONTROLLERS_MB for count in control_nodes)


def available_memory_mb() -> int:
    """The memory the kernel says is available for new processes (MemAvailable), in MiB."""
    with open("/proc/meminfo", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    return 0


def too_large(control_nodes: list[int], available_mb: Optional[int] = None) -> str:
    """Why a spec whose clusters have these numbers of control nodes is too large for the real backend
    on this machine ("": it is not): not even its largest cluster's plane fits in the available memory
    (the planes that do not fit together run by turns, pool.py)."""
    largest = max(control_nodes, default=1)
    needed = plane_memory_mb([largest])
    available = available_memory_mb() if available_mb is None else available_mb
    if needed > available:
        return (f"--kube real runs a control plane for each cluster: the largest ({largest} control nodes) needs "
                f"about {needed} MiB, this machine has {available} MiB available")
    return ""


def _epoch(stamp: str) -> float:
    """An API timestamp (RFC 3339 in UTC, with or without microseconds) in seconds since the epoch."""
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _matches(selector: dict[str, str], pod: dict[str, Any]) -> bool:
    labels = pod["metadata"].get("labels") or {}
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())
