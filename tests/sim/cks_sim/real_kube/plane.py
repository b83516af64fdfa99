"""A real Kubernetes control plane on this machine: kube-apiserver, kube-controller-manager and
kube-scheduler (one ``kube-plane`` binary, tests/kube-plane, built by ``make kube-plane``), storing in
the CKS cluster's own etcd members or, without them, in an etcd of its own.

    plane = ControlPlane(state_dir, tls, node_monitor_grace=4.0,
                         control_nodes={"c-1": ["https://127.0.0.1:23791"], ...},   # each node's etcd
                         etcd_tls=(ca, cert, key)).start()                            # ready when it returns
    plane.url, plane.admin_kubeconfig, plane.audit_events(), plane.version
    plane.power_off("c-1"); plane.power_on("c-1")      # the control node's VM
    plane.stop()

Each control node runs its own kube-apiserver on an address of its own (127.0.0.2, .3, ...: its IP,
one port on all of them), behind ``balancer.Balancer``: the endpoint the kubeconfig names, as the
CKS cluster's load balancer is (or, ``endpoint="first_control_node"``, the first node's own address).
A node's API server stops when its VM stops and starts when it starts; requests go through the
others meanwhile. One kube-controller-manager and one kube-scheduler run for the whole plane,
through the balancer, and do not stop with a VM (why: docs/docsite/rst/development.rst, *The real
control plane*).

``tls`` is cks-sim's PKI (``tls.make_tls``): the API servers trust its CA for client certificates, so
the sim's admin certificate (kubernetes-admin in system:masters, as kubeadm's admin.conf) works
against the real API server as against cks-sim's own. Certificates of the components and the
service-account key are made at start, in ``<state_dir>/kube-plane`` (one serving certificate and
one service-account key for every API server, as kubeadm copies the PKI to each control node).

Authorization is Node,RBAC as kubeadm sets it up, so access reviews and RBAC answer as on a real
cluster. Each API server's audit log (JSON lines, Metadata level: verb, resource, subresource, user,
code) is where cks-sim reads the Kubernetes calls a rollout made; ``audit_events`` merges them. The
node lifecycle controller's grace periods come from the sim's timings (by flag: nothing it owns is
patched).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import requests
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from ..tls import _write_private, issue_cert
from .balancer import Balancer

LOG = logging.getLogger("cks_sim.real_kube")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
#: Where ``make kube-plane`` puts the binary; the CKS_KUBE_PLANE environment variable overrides it.
DEFAULT_BINARY = os.path.join(ROOT, "tests", "kube-plane", "bin", "kube-plane")
SERVICE_RANGE = "10.96.0.0/12"
#: The readiness waits are bounds on a hang, no speed assertions: a loaded 2-core machine starts the
#: whole plane in seconds.
START_TIMEOUT = 120.0
STOP_TIMEOUT = 10.0
#: The Go runtime of every component: its heap grows to 1.5 times what is live, not twice (GOGC=100).
#: Measured on one plane of inventory-200.yml (one control node, 2 nodes, --no-etcd; PSS, which counts
#: the binary's shared pages once): kube-apiserver 205 -> 161 MiB (RSS 286 -> 248), the controller
#: manager and scheduler unchanged (about 30 and 25 MiB: their heaps are small); no CPU difference at
#: idle. GOGC=25 gave 140 MiB but makes a busy API server collect twice as often.
GO_ENV = {"GOGC": "50"}

# Metadata level for every request: who did what to which object, with the answer's code (no bodies:
# secrets stay out of the log). RequestReceived is left out: one line per request, at its end.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    # The balancer's health checks (anonymous /readyz, four a second) are no one's call.
    "rules": [{"level": "None", "users": ["system:anonymous"], "nonResourceURLs": ["/readyz", "/readyz/*"]},
              {"level": "Metadata"}],
}

# What the collection's drains, budgets and node cycles meet on a real cluster; the rest (service
# load balancers, routes, CSR signing, ...) needs a cloud or certificates the tests do without.
CONTROLLERS = (
    "deployment-controller", "replicaset-controller", "daemonset-controller", "statefulset-controller",
    "disruption-controller", "garbage-collector-controller", "serviceaccount-token-controller",
    "serviceaccount-controller", "namespace-controller", "node-lifecycle-controller",
    "taint-eviction-controller", "pod-garbage-collector-controller", "endpointslice-controller",
    "root-ca-certificate-publisher-controller",
)


class PlaneError(RuntimeError):
    """The control plane could not start (the binary is missing, or a component did not get ready)."""


def binary_path() -> str:
    path = os.environ.get("CKS_KUBE_PLANE") or DEFAULT_BINARY
    if not os.access(path, os.X_OK):
        raise PlaneError(f"no kube-plane binary at {path}: run `make kube-plane` (needs Go), or set CKS_KUBE_PLANE "
                         "to a kube-plane binary")
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _seconds(value: float) -> str:
    return f"{max(value, 0.001):.3f}s"


@dataclass
class _Process:
    name: str
    cmd: list[str]
    log_path: str
    proc: Optional[subprocess.Popen] = None

    def start(self) -> None:
        env = dict(os.environ, **GO_ENV) if self.cmd[0] != "etcd" else None
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                         start_new_session=True)  # a Ctrl-C to the test run is not its to see

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(STOP_TIMEOUT)

    def kill(self) -> None:
        """At once (SIGKILL), and reaped."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(STOP_TIMEOUT)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as handle:
                return handle.read()[-chars:]
        except OSError as exc:
            return f"(no log: {exc})"


@dataclass
class ApiServer:
    """One control node's kube-apiserver: its own address (the node's), the etcd it stores in, its audit log."""

    name: str
    host: str
    port: int
    etcd_servers: list[str]
    audit_log: str
    process: Optional[_Process] = None
    #: what the world says: its VM runs (set at once; the process follows on its worker)
    wanted: bool = True
    #: stops and starts in the order the VM's power changed, never under ``sim.lock``
    worker: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(max_workers=1))

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()


@dataclass
class ControlPlane:
    """kube-apiserver (one per control node) behind a load balancer, kube-controller-manager and
    kube-scheduler; started and stopped together, an API server also alone with its node's VM."""

    state_dir: str
    tls: dict[str, str]
    #: node lifecycle: how long a node may go without a heartbeat before it is NotReady (Unknown).
    node_monitor_grace: float = 40.0
    #: etcd client URLs to store in; None: an etcd of its own (Debian's etcd-server) on loopback.
    etcd_servers: Optional[list[str]] = None
    #: client TLS for the etcd servers (ca, cert, key), when they speak TLS.
    etcd_tls: Optional[tuple[str, str, str]] = None
    #: a static token file (token,user,uid,"groups"): the kubeconfig's bearer token, as cks-sim hands it out.
    token_file: Optional[str] = None
    #: the control nodes, in order, each running its own kube-apiserver: name -> the etcd client URLs
    #: it names (kubeadm's stacked member: its own node's; external: all). None: one, "control-plane".
    control_nodes: Optional[dict[str, Optional[list[str]]]] = None
    #: the control nodes whose VM is stopped at start (their API servers start with the VM).
    stopped: frozenset[str] = frozenset()
    #: "load_balancer": ``url`` is the balancer in front of every API server; "first_control_node":
    #: the first control node's own address, refused while its VM is stopped.
    endpoint: str = "load_balancer"
    dir: str = ""
    apiservers: dict[str, ApiServer] = field(default_factory=dict)
    balancer: Optional[Balancer] = None
    processes: list[_Process] = field(default_factory=list)  # etcd of its own, controller manager, scheduler
    startup_seconds: float = 0.0
    version: dict[str, Any] = field(default_factory=dict)
    _reserved: list[socket.socket] = field(default_factory=list)
    _audit_offsets: dict[str, int] = field(default_factory=dict)
    _audit_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        """The endpoint the kubeconfig names."""
        if self.endpoint == "first_control_node":
            return next(iter(self.apiservers.values())).url
        assert self.balancer is not None
        return self.balancer.url

    @property
    def internal_url(self) -> str:
        """The balancer: what the controllers, the scheduler and the kubelets use (kubeadm's controlPlaneEndpoint)."""
        assert self.balancer is not None
        return self.balancer.url

    @property
    def admin_kubeconfig(self) -> str:
        return os.path.join(self.dir, "admin.kubeconfig")

    # -- starting ---------------------------------------------------------------------------------

    def start(self, timeout: float = START_TIMEOUT) -> ControlPlane:
        began = time.monotonic()
        binary = binary_path()
        self.dir = os.path.join(os.path.abspath(self.state_dir), "kube-plane")
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        try:
            own = None if self.etcd_servers or (self.control_nodes and all(self.control_nodes.values())) \
                else [self._start_etcd()]
            self._place_apiservers(own)
            self._write_files()
            self.balancer = Balancer(self.tls["ca_cert"]).start()
            self._write_kubeconfigs()
            for server in self.apiservers.values():
                server.wanted = server.name not in self.stopped
                self.balancer.add(server.name, server.host, server.port, enabled=server.wanted)
                if server.wanted:
                    self._start_apiserver(server, binary)
            running = [s for s in self.apiservers.values() if s.wanted]
            if not running:
                raise PlaneError("no control node's VM runs: a real control plane needs one to start")
            for server in running:
                assert server.process is not None
                self._wait(lambda s=server: self._get(s.url, "/readyz").status_code == 200, began + timeout,
                           server.process, "/readyz")
            self.balancer.check_now()
            kcm_port, sched_port = free_port(), free_port()
            kcm = self._spawn("kube-controller-manager", [binary, "controller-manager", *self._kcm_flags(kcm_port)])
            sched = self._spawn("kube-scheduler", [binary, "scheduler", *self._scheduler_flags(sched_port)])
            for proc, port in ((kcm, kcm_port), (sched, sched_port)):
                self._wait(lambda p=port: self._healthy(p), began + timeout, proc, "/healthz")
            # The serviceaccount controller makes each namespace's "default" account, without which
            # the ServiceAccount admission plugin refuses every pod.
            self._wait(lambda: self._get(self.internal_url, "/api/v1/namespaces/default/serviceaccounts/default")
                       .status_code == 200, began + timeout, kcm, "the default ServiceAccount")
            self.version = self._get(self.internal_url, "/version").json()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _place_apiservers(self, own_etcd: Optional[list[str]]) -> None:
        """Each control node's API server on an address of its own (127.0.0.2, .3, ...: the nodes' IPs),
        all on one port (6443 on each node), reserved for the plane's life so a restart finds it free."""
        nodes = self.control_nodes or {"control-plane": None}
        hosts = [f"127.0.0.{2 + i}" for i in range(len(nodes))]
        self._reserved = _reserve_port(hosts)
        port = int(self._reserved[0].getsockname()[1])
        for (name, etcd), host in zip(nodes.items(), hosts, strict=True):
            servers = etcd or self.etcd_servers or own_etcd or []
            self.apiservers[name] = ApiServer(name, host, port, list(servers),
                                              os.path.join(self.dir, f"audit-{name}.log"))

    def _start_apiserver(self, server: ApiServer, binary: str) -> None:
        server.process = _Process(f"kube-apiserver-{server.name}", [binary, "apiserver", *self._apiserver_flags(server)],
                                  os.path.join(self.dir, f"kube-apiserver-{server.name}.log"))
        server.process.start()

    def _spawn(self, name: str, cmd: list[str]) -> _Process:
        process = _Process(name, cmd, os.path.join(self.dir, f"{name}.log"))
        process.start()
        self.processes.append(process)
        return process

    def _start_etcd(self) -> str:
        client, peer = free_port(), free_port()
        url = f"http://127.0.0.1:{client}"
        proc = self._spawn("etcd", [
            "etcd", "--name=kube-plane", f"--data-dir={os.path.join(self.dir, 'etcd')}",
            f"--listen-client-urls={url}", f"--advertise-client-urls={url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}", f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=kube-plane=http://127.0.0.1:{peer}", "--logger=zap", "--log-outputs=stderr",
        ])
        self._wait(lambda: _etcd_healthy(url), time.monotonic() + START_TIMEOUT, proc, "/health")
        return url

    def _write_files(self) -> None:
        d = self.dir
        # The controller manager's and scheduler's own health endpoints, verified like the API server's.
        self.component_serving = issue_cert(self.tls, "kube-plane-components", ["127.0.0.1", "localhost"],
                                            client=False, server=True, out_dir=d)
        # One serving certificate for every control node (kubeadm copies the PKI to each): their
        # addresses, the balancer's and the Service's.
        self.serving = issue_cert(self.tls, "kube-apiserver-real",
                                  ["127.0.0.1", "localhost", *(s.host for s in self.apiservers.values()), "10.96.0.1",
                                   "kubernetes", "kubernetes.default", "kubernetes.default.svc"],
                                  client=False, server=True, out_dir=d)
        self.components = {
            "kube-controller-manager": issue_cert(self.tls, "system:kube-controller-manager", [], client=True,
                                                  server=False, out_dir=d),
            "kube-scheduler": issue_cert(self.tls, "system:kube-scheduler", [], client=True, server=False, out_dir=d),
        }
        self.sa_key = os.path.join(d, "sa.key")
        if not os.path.exists(self.sa_key):
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            _write_private(self.sa_key, key.private_bytes(serialization.Encoding.PEM,
                                                          serialization.PrivateFormat.TraditionalOpenSSL,
                                                          serialization.NoEncryption()))
        with open(os.path.join(d, "audit-policy.yaml"), "w", encoding="utf-8") as handle:
            yaml.safe_dump(AUDIT_POLICY, handle)

    def _write_kubeconfigs(self) -> None:
        # Written once the balancer listens: they name its address.
        self._kubeconfig(self.admin_kubeconfig, "kubernetes-admin", (self.tls["client_cert"], self.tls["client_key"]))
        for name, pair in self.components.items():
            self._kubeconfig(os.path.join(self.dir, f"{name}.kubeconfig"), name, pair)

    def _kubeconfig(self, path: str, user: str, pair: tuple[str, str]) -> None:
        cert, key = pair
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": user,
            "clusters": [{"name": "kube-plane", "cluster": {
                "server": self.url if user == "kubernetes-admin" else self.internal_url,
                "certificate-authority": self.tls["ca_cert"]}}],
            "users": [{"name": user, "user": {"client-certificate": cert, "client-key": key}}],
            "contexts": [{"name": user, "context": {"cluster": "kube-plane", "user": user}}],
        }
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yaml.safe_dump(config, handle, sort_keys=False)

    def _apiserver_flags(self, server: ApiServer) -> list[str]:
        cert, key = self.serving
        flags = [
            f"--etcd-servers={','.join(server.etcd_servers)}",
            f"--secure-port={server.port}", f"--bind-address={server.host}", f"--advertise-address={server.host}",
            f"--tls-cert-file={cert}", f"--tls-private-key-file={key}",
            f"--client-ca-file={self.tls['ca_cert']}",
            f"--service-cluster-ip-range={SERVICE_RANGE}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={self.sa_key}", f"--service-account-signing-key-file={self.sa_key}",
            "--authorization-mode=Node,RBAC", "--allow-privileged=true",
            "--enable-admission-plugins=NodeRestriction",
            f"--audit-policy-file={os.path.join(self.dir, 'audit-policy.yaml')}",
            f"--audit-log-path={server.audit_log}", "--audit-log-format=json", "--audit-log-maxsize=0",
            f"--cert-dir={os.path.join(self.dir, 'apiserver-certs')}",
            # The kubernetes Service's Endpoints may not hold loopback addresses (the API refuses them),
            # and the control nodes' addresses here are on loopback: nothing would be written but errors.
            "--endpoint-reconciler-type=none",
            # No /debug/pprof handlers (nothing here profiles it).
            "--profiling=false",
        ]
        if self.token_file:
            flags.append(f"--token-auth-file={self.token_file}")
        if self.etcd_tls:
            ca, ecert, ekey = self.etcd_tls
            flags += [f"--etcd-cafile={ca}", f"--etcd-certfile={ecert}", f"--etcd-keyfile={ekey}"]
        return flags

    def _component_flags(self, name: str, port: int) -> list[str]:
        kubeconfig = os.path.join(self.dir, f"{name}.kubeconfig")
        return [f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}", "--leader-elect=false",
                f"--secure-port={port}", "--bind-address=127.0.0.1",
                f"--tls-cert-file={self.component_serving[0]}", f"--tls-private-key-file={self.component_serving[1]}",
                "--profiling=false"]

    def _kcm_flags(self, port: int) -> list[str]:
        grace = self.node_monitor_grace
        return [
            *self._component_flags("kube-controller-manager", port),
            f"--controllers={','.join(CONTROLLERS)}",
            f"--service-account-private-key-file={self.sa_key}", f"--root-ca-file={self.tls['ca_cert']}",
            # Each controller as its own service account, with its bootstrap RBAC role (as kubeadm runs it).
            "--use-service-account-credentials=true",
            f"--node-monitor-grace-period={_seconds(grace)}",
            f"--node-monitor-period={_seconds(min(grace / 4, 5.0))}",
            f"--node-startup-grace-period={_seconds(grace)}",
            # The controllers answer within a fraction of the sim's pace (a test's few dozen objects).
            "--concurrent-gc-syncs=5", "--kube-api-qps=200", "--kube-api-burst=400",
        ]

    def _scheduler_flags(self, port: int) -> list[str]:
        return [*self._component_flags("kube-scheduler", port), "--kube-api-qps=200", "--kube-api-burst=400"]

    # -- a control node's VM ----------------------------------------------------------------------

    def power_off(self, name: str) -> None:
        """The control node's VM stopped: the balancer leaves its API server out at once, the process
        is stopped on that server's worker (callers hold ``sim.lock``: nothing waits here)."""
        server = self.apiservers.get(name)
        if server is None:
            return
        server.wanted = False
        if self.balancer is not None:
            self.balancer.enable(name, False)
        self._submit(server, self._converge, server, None)

    def power_on(self, name: str, serving: Optional[Callable[[], None]] = None) -> bool:
        """The control node's VM runs again: its API server starts (the balancer sends it requests once
        its /readyz answers), and ``serving`` is called, on that server's worker, once it does (not if
        the VM stopped again meanwhile). False: no API server runs on ``name``."""
        server = self.apiservers.get(name)
        if server is None:
            return False
        server.wanted = True
        if self.balancer is not None:
            self.balancer.enable(name, True)
        self._submit(server, self._converge, server, serving)
        return True

    def _submit(self, server: ApiServer, fn: Any, *args: Any) -> None:
        try:
            server.worker.submit(fn, *args)
        except RuntimeError:  # stop() shut the worker down meanwhile
            pass

    def _converge(self, server: ApiServer, serving: Optional[Callable[[], None]]) -> None:
        """The process as the VM is, whatever the order of stops and starts queued before."""
        if server.wanted and not server.alive():
            self._start_apiserver(server, binary_path())
        elif not server.wanted and server.process is not None:
            # The VM is Stopped when this runs: nothing of it runs on (a graceful kube-apiserver
            # shutdown would keep serving its open connections for seconds more).
            server.process.kill()
        if serving is None:
            return
        deadline = time.monotonic() + START_TIMEOUT
        while server.wanted and server.alive() and time.monotonic() < deadline:
            if self._get(server.url, "/readyz").status_code == 200:
                if server.wanted:
                    serving()
                return
            time.sleep(0.1)
        if server.wanted and server.process is not None:
            LOG.warning("kube-apiserver of %s did not get ready; its log ends:\n%s", server.name,
                        server.process.log_tail())

    def api_available(self) -> bool:
        """An API server the endpoint reaches answers /readyz (the balancer's last check), and the
        controllers run."""
        if self.balancer is None or not all(p.alive() for p in self.processes):
            return False
        names = list(self.apiservers)[:1] if self.endpoint == "first_control_node" else None
        return bool(self.balancer.healthy(names))

    # -- talking to it ----------------------------------------------------------------------------

    def session(self) -> requests.Session:
        """An HTTPS session as kubernetes-admin, the CA verified."""
        session = requests.Session()
        session.trust_env = False  # REQUESTS_CA_BUNDLE would replace our CA: the API server is ours, on loopback
        session.verify = self.tls["ca_cert"]
        session.cert = (self.tls["client_cert"], self.tls["client_key"])
        return session

    def _get(self, base: str, path: str) -> requests.Response:
        try:
            return self.session().get(base + path, timeout=5)
        except requests.RequestException:
            response = requests.Response()
            response.status_code = 0
            return response

    def _healthy(self, port: int) -> bool:
        try:
            return self.session().get(f"https://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    def _wait(self, ready: Any, deadline: float, process: _Process, what: str) -> None:
        while True:
            if not process.alive():
                raise PlaneError(f"{process.name} exited before {what} answered; its log ends:\n{process.log_tail()}")
            if ready():
                return
            if time.monotonic() > deadline:
                raise PlaneError(f"{process.name}: {what} did not answer in time; its log ends:\n{process.log_tail()}")
            time.sleep(0.1)

    def audit_events(self) -> list[dict[str, Any]]:
        """Every API server's audit events written since the last call, merged in the order they were received."""
        events: list[dict[str, Any]] = []
        with self._audit_lock:
            for server in self.apiservers.values():
                offset = self._audit_offsets.get(server.name, 0)
                try:
                    with open(server.audit_log, "rb") as handle:
                        handle.seek(offset)
                        data = handle.read()
                except FileNotFoundError:
                    continue
                end = data.rfind(b"\n") + 1
                events += [json.loads(line) for line in data[:end].splitlines() if line.strip()]
                self._audit_offsets[server.name] = offset + end
        # RFC 3339 with microseconds, all in UTC: the strings sort as the times do.
        return sorted(events, key=lambda e: str(e.get("requestReceivedTimestamp", "")))

    # -- stopping ---------------------------------------------------------------------------------

    def stop(self) -> None:
        """Scheduler and controllers first, then the API servers, the balancer, an etcd of its own last."""
        for server in self.apiservers.values():
            server.wanted = False
            server.worker.shutdown(wait=True, cancel_futures=True)
        own_etcd = [p for p in self.processes if p.name == "etcd"]
        for process in reversed(self.processes):
            if process.name != "etcd":
                process.stop()
        for server in self.apiservers.values():
            server.wanted = False
            if server.process is not None:
                server.process.kill()  # its store outlives it (the etcd members): nothing to flush
        if self.balancer is not None:
            self.balancer.stop()
        for process in own_etcd:
            process.stop()
        self.processes.clear()
        for sock in self._reserved:
            sock.close()
        self._reserved.clear()


def _reserve_port(hosts: list[str]) -> list[socket.socket]:
    """One port free on every address of ``hosts``, held bound (not listening) by sockets kept for the
    plane's life: a control node's API server finds its address free again after its VM restarts.
    Bound without SO_REUSEADDR (no one else has it now), then kept with it: kube-apiserver, which
    listens with SO_REUSEADDR as Go servers do, binds beside the reservation; another plain bind is
    refused (the same way etcd.py keeps its members' ports)."""
    for _attempt in range(200):
        port = free_port()
        socks: list[socket.socket] = []
        try:
            for host in hosts:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(sock)
                sock.bind((host, port))
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            return socks
        except OSError:
            for sock in socks:
                sock.close()
    raise PlaneError(f"no port free on all of {', '.join(hosts)}")


def _etcd_healthy(url: str) -> bool:
    try:
        return requests.get(f"{url}/health", timeout=2).status_code == 200
    except requests.RequestException:
        return False
