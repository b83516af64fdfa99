"""Compose cks-sim from a spec and serve it: CloudStack API, Kubernetes API, admin API.

``SimServer(spec, state_dir).start()`` builds the Sim (CloudStack world, one KubeWorld per
cluster, real etcd members), starts one HTTP server per API on free ports, writes the
kubeconfigs and ``env.json``, and starts the CKS state scanner. ``stop()`` undoes all of it,
etcd processes included. The Kubernetes side (``kube``, ``kube_api``, ``tls``) and ``etcd`` are
imported lazily: without them the CloudStack side still runs, with a minimal node model.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import yaml
from werkzeug.serving import BaseWSGIServer, make_server

from . import autoscaler
from .admin_api import AdminApp
from .cloud import CloudWorld
from .cloudstack_api import API_PATH, CloudStackApp
from .core import Sim
from .status_lines import StatusLines, go_status_line, jetty_status_line

KUBE_BACKENDS = ("memory", "real")
KUBE_FAULTS = {"kube_error", "pdb_block", "slow_drain", "never_ready", "stale_ready", "foreign_cordon"}


def _optional(module: str) -> Optional[Any]:
    try:
        return importlib.import_module(f"{__package__}.{module}")
    except ImportError as exc:
        # Only a missing module of our own means "not there yet"; a broken import must show.
        if exc.name and exc.name.endswith(module):
            return None
        raise


class MinimalKubeWorld:
    """Stand-in for ``kube.KubeWorld`` when that module is absent: nodes turn Ready
    ``boot_to_ready`` after their VM starts and NotReady when it stops; nothing else."""

    def __init__(self, sim: Sim, cluster_id: str, cluster_spec: dict, nodes: list[dict],
                 workloads: list[dict], pdbs: list[dict]) -> None:
        self.sim = sim
        self.cluster_id = cluster_id
        self.name = cluster_spec.get("name", cluster_id)
        self.ready = {n["name"]: bool(n["vm_running"]) for n in nodes}
        self.capacity = {n["name"]: (n["cpu"], n["memory_mb"]) for n in nodes}
        self.boots = {n["name"]: 0 for n in nodes}

    def has_node(self, name: str) -> bool:
        return name in self.ready

    def node_powered_off(self, name: str) -> None:
        self.ready[name] = False
        self.boots[name] += 1

    def node_powered_on(self, name: str, cpu: int, memory_mb: int) -> None:
        self.capacity[name] = (cpu, memory_mb)
        boot = self.boots[name] = self.boots[name] + 1

        def booted() -> None:
            if self.boots[name] == boot:
                self.ready[name] = True

        self.sim.scheduler.schedule(self.sim.delay("boot_to_ready"), booted)

    def ready_node_count(self) -> int:
        return sum(1 for ready in self.ready.values() if ready)

    def api_available(self) -> bool:
        return True

    def snapshot(self) -> dict:
        return {"minimal": True, "nodes": [{"name": n, "ready": r, "cpu": self.capacity[n][0],
                                            "memory_mb": self.capacity[n][1]} for n, r in sorted(self.ready.items())]}

    def apply_fault(self, fault: dict) -> None:
        pass


class _ServerThread:
    def __init__(self, name: str, server: BaseWSGIServer) -> None:
        self.server = server
        # A short poll interval: shutdown() waits for the serving loop to notice.
        self.thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                       name=f"cks-sim-{name}", daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_port)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@dataclass(eq=False)
class KubeEndpoint:
    """One cluster's API server address (its own port, the root path).

    With a load balancer in front (the default) it always listens. When it is the first
    control node's own address (``api_endpoint: first_control_node``), the listening socket is
    closed while that VM is down, so clients get "connection refused", and opened again on the
    same port when it runs. Power changes arrive under ``sim.lock``; the socket work happens on
    this endpoint's own thread, which converges to what the world says at that moment.
    """

    owner: "SimServer"
    cluster_id: str
    #: 0 the first time (a free port is taken), then the port it listened on, kept across restarts.
    port: int
    app: Any
    ssl_context: Any
    thread: Optional[_ServerThread] = None
    _changes: threading.Condition = field(default_factory=threading.Condition)
    _pending: bool = False
    _closed: bool = False
    _worker: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        return f"https://{self.owner.host}:{self.port}"

    def _listen(self) -> None:
        server = make_server(self.owner.host, self.port, self.app, threaded=True, ssl_context=self.ssl_context)
        self.port = int(server.server_port)  # a free port the first time, the same one after
        self.thread = _ServerThread(f"kube-{self.cluster_id[:8]}", server)
        self.thread.start()

    def _unlisten(self) -> None:
        if self.thread is not None:
            self.thread.stop()
            self.thread = None

    def start(self) -> None:
        self._listen()
        world = self.owner.sim.kube[self.cluster_id]
        if hasattr(world, "on_endpoint_change"):
            world.on_endpoint_change.append(self.changed)
            self._worker = threading.Thread(target=self._follow, name=f"cks-sim-endpoint-{self.cluster_id[:8]}",
                                            daemon=True)
            self._worker.start()
            self.changed()

    def changed(self) -> None:
        with self._changes:
            self._pending = True
            self._changes.notify()

    def _follow(self) -> None:
        world = self.owner.sim.kube[self.cluster_id]
        while True:
            with self._changes:
                while not self._pending and not self._closed:
                    self._changes.wait()
                if self._closed:
                    return
                self._pending = False
            with self.owner.sim.lock:
                listens = world.api_listens()
            try:
                if listens and self.thread is None:
                    self._listen()
                    self.owner.sim.timeline.add(cluster=self.cluster_id, event="api_endpoint_listening")
                elif not listens and self.thread is not None:
                    self._unlisten()
                    self.owner.sim.timeline.add(cluster=self.cluster_id, event="api_endpoint_refusing")
            except OSError:
                self.changed()  # the port is busy for a moment: try again
                time.sleep(0.05)

    def stop(self) -> None:
        with self._changes:
            self._closed = True
            self._changes.notify()
        if self._worker is not None:
            self._worker.join(timeout=5)
        self._unlisten()


class SimServer:
    """The whole simulator: build, serve, describe (env.json), stop."""

    def __init__(self, spec: dict[str, Any], state_dir: str, host: str = "127.0.0.1", cloudstack_port: int = 0,
                 kube_port: int = 0, admin_port: int = 0, with_etcd: bool = True, kube: str = "memory",
                 kube_planes: int = 0) -> None:
        if kube not in KUBE_BACKENDS:
            raise ValueError(f"kube must be one of {', '.join(KUBE_BACKENDS)}, not {kube!r}")
        self.spec = spec
        #: "memory": cks-sim's own Kubernetes API; "real": a real control plane (real_kube) driven by actors.
        self.kube = kube
        self.state_dir = os.path.abspath(state_dir)
        self.host = host
        self.ports = {"cloudstack": cloudstack_port, "kube": kube_port, "admin": admin_port}
        self.with_etcd = with_etcd
        self.sim = Sim(spec, self.state_dir)
        self.servers: dict[str, _ServerThread] = {}
        self.env: dict[str, Any] = {}
        self.kubeconfigs: dict[str, str] = {}
        self.stopped = threading.Event()
        self._stop_lock = threading.Lock()
        self._kube_url = ""
        self.kube_endpoints: dict[str, KubeEndpoint] = {}
        #: --kube real: the etcd members of VMs stopped in the spec, stopped once the planes started
        self._members_to_stop: list[str] = []
        #: --kube real: how many clusters' planes run at once (0: what the machine's cores and memory hold)
        self.kube_planes = kube_planes
        self.plane_pool: Any = None  # real_kube.pool.PlanePool

    # -- building ----------------------------------------------------------------------------

    def build(self) -> None:
        os.makedirs(self.state_dir, exist_ok=True)
        try:
            os.remove(os.path.join(self.state_dir, "env.json"))  # a stale one must not look ready
        except FileNotFoundError:
            pass
        sim = self.sim
        tls_mod, kube_mod, etcd_mod = _optional("tls"), _optional("kube"), _optional("etcd")
        self.tls = tls_mod.make_tls(self.state_dir) if tls_mod else None
        sim.tls = self.tls
        sim.cloud = CloudWorld(sim, self.spec)
        world_class = kube_mod.KubeWorld if kube_mod else MinimalKubeWorld
        if self.kube == "real":
            from .real_kube.world import RealKubeWorld

            world_class = RealKubeWorld
        for index, cluster in enumerate(sim.cloud.clusters.values()):
            cluster_spec = dict(self.spec["clusters"][index], id=cluster.id)
            workloads = cluster_spec.get("workloads") or self.spec["workloads"]
            pdbs = cluster_spec.get("pdbs") or self.spec["pdbs"]
            with sim.lock:
                sim.kube[cluster.id] = world_class(sim, cluster.id, cluster_spec, sim.cloud.vms_of_cluster_spec(cluster),
                                                   workloads, pdbs)
        sim.faults.on_added.append(self._apply_added_fault)
        if etcd_mod and self.tls and self.with_etcd:
            sim.etcd = etcd_mod.EtcdManager(sim, self.state_dir, self.tls)
            for cluster in sim.cloud.clusters.values():
                members, mode = sim.cloud.etcd_members(cluster)
                vms = [sim.cloud.vm_by_name[name] for name in members]
                sim.etcd.add_cluster(cluster.id, members, mode,
                                     member_names={vm.name: vm.etcd_member_name for vm in vms if vm.etcd_member_name},
                                     addresses={vm.name: vm.ipaddress for vm in vms})
                if mode == "stacked" and hasattr(sim.kube[cluster.id], "use_etcd_client_urls"):
                    urls = {m["name"]: m["client_url"] for m in sim.etcd.endpoints(cluster.id)["members"]}
                    with sim.lock:
                        sim.kube[cluster.id].use_etcd_client_urls(urls)
                if mode == "external" and hasattr(sim.kube[cluster.id], "use_external_etcd_servers"):
                    servers = [m["client_url"] for m in sim.etcd.endpoints(cluster.id)["members"]]
                    with sim.lock:
                        sim.kube[cluster.id].use_external_etcd_servers(servers)
                for name in members:
                    if sim.cloud.vm_by_name[name].state != "Running":
                        if self.kube == "real":
                            # After the real plane started: a stopped cluster's bring-up stores in them.
                            self._members_to_stop.append(name)
                        else:
                            sim.etcd.vm_powered_off(name)

    def _apply_added_fault(self, fault: dict[str, Any]) -> None:
        if fault.get("kind") in KUBE_FAULTS:
            with self.sim.lock:
                for world in self.sim.kube.values():
                    world.apply_fault(fault)

    # -- serving -----------------------------------------------------------------------------

    def _serve(self, name: str, app: Any, ssl_context: Any = None) -> _ServerThread:
        server = make_server(self.host, self.ports[name], app, threaded=True, ssl_context=ssl_context)
        thread = _ServerThread(name, server)
        self.servers[name] = thread
        return thread

    def start(self) -> "SimServer":
        if not os.environ.get("CKS_SIM_ACCESS_LOG"):
            # One line per request drowns the useful output; the call log has them all.
            logging.getLogger("werkzeug").setLevel(logging.WARNING)
        try:
            self.build()
            self._serve("cloudstack", StatusLines(CloudStackApp(self.sim), jetty_status_line))
            self._serve("admin", AdminApp(self))
            kube_api, tls_mod = _optional("kube_api"), _optional("tls")
            if self.kube == "real":
                self._start_real_kube()
            elif kube_api is not None and tls_mod is not None and self.tls is not None:
                for index, cluster_id in enumerate(self.sim.kube):
                    port = self.ports["kube"] + index if self.ports["kube"] else 0
                    endpoint = KubeEndpoint(self, cluster_id, port,
                                            StatusLines(kube_api.make_app(self.sim, cluster_id), go_status_line),
                                            tls_mod.server_ssl_context(self.tls))
                    self.kube_endpoints[cluster_id] = endpoint
                    endpoint.start()
                self._kube_url = next(iter(self.kube_endpoints.values())).url if self.kube_endpoints else ""
                self._write_kubeconfigs()
            else:
                self.sim.kubeconfig_provider = None
            for thread in self.servers.values():
                thread.start()
            with self.sim.lock:
                # The first listing of 1,000 VMs should not pay for serialising each of them.
                for vm in self.sim.cloud.vms.values():
                    self.sim.cloud.vm_json(vm)
            self.sim.cloud.start_scanner()
            autoscaler.start_autoscalers(self.sim)
            self.env = self._env()
            self._write_env()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_real_kube(self) -> None:
        """--kube real: each cluster's control plane started, its nodes registered and its workloads settled,
        a few clusters at once (REAL_KUBE_STARTS): a plane's start mostly waits on its processes, and
        a fleet's twelve one after the other took minutes. More clusters than the machine runs at once
        (real_kube/pool.py): those that fit start now, the others when their API is first asked for."""
        from .real_kube.pool import PlanePool, default_budget
        from .real_kube.world import REAL_KUBE_STARTS, available_memory_mb, plane_memory_mb

        worlds = self.sim.kube
        needs = {cid: plane_memory_mb([sum(1 for n in w.nodes.values() if n.node_type == "control")])
                 for cid, w in worlds.items()}
        # A cluster with a VM stopped in the spec is brought up running, then stopped: at serve time,
        # while its etcd members run (they stop below).
        first = [cid for cid in worlds if any(self.sim.cloud.vm_by_name[name].cluster_id == cid
                                              for name in self._members_to_stop)]
        self.plane_pool = PlanePool(self.sim, dict(worlds), default_budget(available_memory_mb(), planes=self.kube_planes),
                                    needs, first=first, starts=REAL_KUBE_STARTS).start()
        for name in self._members_to_stop:
            self.sim.etcd.vm_powered_off(name)
        self._kube_url = self.plane_pool.url(next(iter(worlds)))
        self._write_kubeconfigs()

    def _write_kubeconfigs(self) -> None:
        self.sim.kubeconfig_provider = self._kubeconfig_asked
        for cluster in self.sim.cloud.clusters.values():
            path = os.path.join(self.state_dir, f"kubeconfig-{cluster.name}.yaml")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(self.kubeconfig_text(cluster.id))
            self.kubeconfigs[cluster.id] = path

    def _kubeconfig_asked(self, cluster_id: str) -> str:
        """getKubernetesClusterConfig's answer. A cluster whose plane was stopped to make room has it
        started now: whoever fetches a kubeconfig uses it next, and kubectl gives up a TLS handshake
        after 10 s, which a plane's start can take on a loaded machine."""
        if self.plane_pool is not None:
            self.plane_pool.request_wake(cluster_id)
        return self.kubeconfig_text(cluster_id)

    def _kube_url_of(self, cluster_id: str) -> Optional[str]:
        if self.kube == "real":
            return self.plane_pool.url(cluster_id) if self.plane_pool is not None else None
        endpoint = self.kube_endpoints.get(cluster_id)
        return endpoint.url if endpoint else None

    def cloudstack_outage(self, seconds: float) -> None:
        """A management server restart: the CloudStack port refuses connections for ``seconds``."""
        old = self.servers["cloudstack"]
        port, app = old.port, old.server.app
        old.stop()

        def back() -> None:
            time.sleep(seconds)
            with self._stop_lock:
                if self.stopped.is_set():
                    return
                thread = _ServerThread("cloudstack", make_server(self.host, port, app, threaded=True))
                self.servers["cloudstack"] = thread
                thread.start()

        threading.Thread(target=back, name="cks-sim-ms-restart", daemon=True).start()

    def kubeconfig_text(self, cluster_id: str) -> str:
        kube_api = _optional("kube_api")
        assert kube_api is not None, "start() serves kubeconfigs only with kube_api"
        url = self._kube_url_of(cluster_id)
        assert url is not None, "kubeconfigs are served once the cluster's API server listens"
        return yaml.safe_dump(kube_api.kubeconfig(self.sim, cluster_id, url), sort_keys=False)

    def _env(self) -> dict[str, Any]:
        cloud = self.sim.cloud
        clusters = []
        for cluster in cloud.clusters.values():
            etcd = self.sim.etcd.endpoints(cluster.id) if self.sim.etcd is not None else None
            clusters.append({"id": cluster.id, "name": cluster.name, "kubeconfig": self.kubeconfigs.get(cluster.id),
                             "kube_url": self._kube_url_of(cluster.id), "etcd": etcd})
        first = clusters[0]
        return {
            "cloudstack_endpoint": f"http://{self.host}:{self.servers['cloudstack'].port}{API_PATH}",
            "cloudstack_key": cloud.account["apikey"],
            "cloudstack_secret": cloud.account["secretkey"],
            "cluster_id": first["id"],
            "cluster_name": first["name"],
            "kubeconfig": first["kubeconfig"],
            "admin_url": f"http://{self.host}:{self.servers['admin'].port}",
            "kube_url": self._kube_url or None,
            "kube_ca": self.tls["ca_cert"] if self.tls else None,
            "kube_backend": self.kube,
            "kube_version": next((w.version for w in self.sim.kube.values()), None) if self.kube == "real" else None,
            "etcd": first["etcd"],
            "clusters": clusters,
            "keys": cloud.directory.key_listing(),
            "state_dir": self.state_dir,
            "pid": os.getpid(),
        }

    def _write_env(self) -> None:
        # Written last and atomically: its presence means "everything listens".
        path = os.path.join(self.state_dir, "env.json")
        tmp = path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(self.env, handle, indent=2)
        os.replace(tmp, path)

    # -- stopping ----------------------------------------------------------------------------

    def stop(self) -> None:
        with self._stop_lock:
            if self.stopped.is_set():
                return
            for endpoint in list(self.kube_endpoints.values()):
                try:
                    endpoint.stop()
                except OSError:
                    pass
            for thread in list(self.servers.values()):
                try:
                    if thread.thread.is_alive():
                        thread.stop()
                    else:
                        thread.server.server_close()
                except OSError:
                    pass
            if self.plane_pool is not None:
                self.plane_pool.stop()  # no plane woken from here on
            for world in self.sim.kube.values():
                if hasattr(world, "stop"):
                    world.stop()  # a real control plane and its actors
            self.sim.stop()
            try:
                os.remove(os.path.join(self.state_dir, "env.json"))
            except FileNotFoundError:
                pass
            self.stopped.set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        return self.stopped.wait(timeout)

    def request_stop(self) -> None:
        """Stop from inside a request handler (POST /shutdown) without deadlocking its server."""
        def stop_soon() -> None:
            time.sleep(0.05)
            self.stop()

        threading.Thread(target=stop_soon, name="cks-sim-shutdown", daemon=True).start()
