"""A real Kubernetes control plane on this machine: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler (one ``kube-plane`` binary, tests/kube-plane, built by ``make kube-plane``).

    plane = ControlPlane(state_dir, tls, node_monitor_grace=4.0).start()   # ready when it returns
    plane.url, plane.admin_kubeconfig, plane.audit_log, plane.version
    plane.stop()

``tls`` is cks-sim's PKI (``tls.make_tls``): the API server trusts its CA for client certificates, so
the sim's admin certificate (kubernetes-admin in system:masters, as kubeadm's admin.conf) works
against the real API server as against cks-sim's own. Certificates of the components and the
service-account key are made at start, in ``<state_dir>/kube-plane``.

Everything runs on loopback on free ports, etcd's data in the state directory. Authorization is
Node,RBAC as kubeadm sets it up, so access reviews and RBAC answer as on a real cluster. The audit log
(JSON lines, Metadata level: verb, resource, subresource, user, code) is where cks-sim reads the
Kubernetes calls a rollout made. The node lifecycle controller's grace periods come from the sim's
timings (by flag: nothing it owns is patched).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import requests
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from ..tls import _write_private, issue_cert

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
#: Where ``make kube-plane`` puts the binary; the CKS_KUBE_PLANE environment variable overrides it.
DEFAULT_BINARY = os.path.join(ROOT, "tests", "kube-plane", "bin", "kube-plane")
SERVICE_RANGE = "10.96.0.0/12"
#: The readiness waits are bounds on a hang, no speed assertions: a loaded 2-core machine starts the
#: whole plane in seconds.
START_TIMEOUT = 120.0
STOP_TIMEOUT = 10.0

# Metadata level for every request: who did what to which object, with the answer's code (no bodies:
# secrets stay out of the log). RequestReceived is left out: one line per request, at its end.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata"}],
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
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
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

    def log_tail(self, chars: int = 3000) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as handle:
                return handle.read()[-chars:]
        except OSError as exc:
            return f"(no log: {exc})"


@dataclass
class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler, started and stopped together."""

    state_dir: str
    tls: dict[str, str]
    #: node lifecycle: how long a node may go without a heartbeat before it is NotReady (Unknown).
    node_monitor_grace: float = 40.0
    #: etcd client URLs to store in; None: an etcd of its own (Debian's etcd-server) on loopback.
    etcd_servers: Optional[list[str]] = None
    #: client TLS for ``etcd_servers`` (ca, cert, key), when they speak TLS.
    etcd_tls: Optional[tuple[str, str, str]] = None
    #: a static token file (token,user,uid,"groups"): the kubeconfig's bearer token, as cks-sim hands it out.
    token_file: Optional[str] = None
    dir: str = ""
    port: int = 0
    processes: list[_Process] = field(default_factory=list)
    startup_seconds: float = 0.0
    version: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def audit_log(self) -> str:
        return os.path.join(self.dir, "audit.log")

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
            servers = self.etcd_servers or [self._start_etcd()]
            self.port = free_port()
            self._write_files()
            apiserver = self._spawn("kube-apiserver", [binary, "apiserver", *self._apiserver_flags(servers)])
            self._wait(lambda: self._get("/readyz").status_code == 200, began + timeout, apiserver, "/readyz")
            kcm_port, sched_port = free_port(), free_port()
            kcm = self._spawn("kube-controller-manager", [binary, "controller-manager", *self._kcm_flags(kcm_port)])
            sched = self._spawn("kube-scheduler", [binary, "scheduler", *self._scheduler_flags(sched_port)])
            for proc, port in ((kcm, kcm_port), (sched, sched_port)):
                self._wait(lambda p=port: self._healthy(p), began + timeout, proc, "/healthz")
            # The serviceaccount controller makes each namespace's "default" account, without which
            # the ServiceAccount admission plugin refuses every pod.
            self._wait(lambda: self._get("/api/v1/namespaces/default/serviceaccounts/default").status_code == 200,
                       began + timeout, kcm, "the default ServiceAccount")
            self.version = self._get("/version").json()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

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
        self.serving = issue_cert(self.tls, "kube-apiserver-real", ["127.0.0.1", "localhost", "10.96.0.1",
                                                                    "kubernetes", "kubernetes.default",
                                                                    "kubernetes.default.svc"],
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
        self._kubeconfig(self.admin_kubeconfig, "kubernetes-admin", (self.tls["client_cert"], self.tls["client_key"]))
        for name, pair in self.components.items():
            self._kubeconfig(os.path.join(d, f"{name}.kubeconfig"), name, pair)

    def _kubeconfig(self, path: str, user: str, pair: tuple[str, str]) -> None:
        cert, key = pair
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": user,
            "clusters": [{"name": "kube-plane", "cluster": {
                "server": self.url, "certificate-authority": self.tls["ca_cert"]}}],
            "users": [{"name": user, "user": {"client-certificate": cert, "client-key": key}}],
            "contexts": [{"name": user, "context": {"cluster": "kube-plane", "user": user}}],
        }
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yaml.safe_dump(config, handle, sort_keys=False)

    def _apiserver_flags(self, etcd_servers: list[str]) -> list[str]:
        cert, key = self.serving
        flags = [
            f"--etcd-servers={','.join(etcd_servers)}",
            f"--secure-port={self.port}", "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--tls-cert-file={cert}", f"--tls-private-key-file={key}",
            f"--client-ca-file={self.tls['ca_cert']}",
            f"--service-cluster-ip-range={SERVICE_RANGE}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={self.sa_key}", f"--service-account-signing-key-file={self.sa_key}",
            "--authorization-mode=Node,RBAC", "--allow-privileged=true",
            "--enable-admission-plugins=NodeRestriction",
            f"--audit-policy-file={os.path.join(self.dir, 'audit-policy.yaml')}",
            f"--audit-log-path={self.audit_log}", "--audit-log-format=json", "--audit-log-maxsize=0",
            f"--cert-dir={os.path.join(self.dir, 'apiserver-certs')}",
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
                f"--tls-cert-file={self.component_serving[0]}", f"--tls-private-key-file={self.component_serving[1]}"]

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

    # -- talking to it ----------------------------------------------------------------------------

    def session(self) -> requests.Session:
        """An HTTPS session as kubernetes-admin, the CA verified."""
        session = requests.Session()
        session.trust_env = False  # REQUESTS_CA_BUNDLE would replace our CA: the API server is ours, on loopback
        session.verify = self.tls["ca_cert"]
        session.cert = (self.tls["client_cert"], self.tls["client_key"])
        return session

    def _get(self, path: str) -> requests.Response:
        try:
            return self.session().get(self.url + path, timeout=5)
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

    def audit_events(self, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        """The audit log's events from byte ``offset`` on, and the offset after the last whole line."""
        try:
            with open(self.audit_log, "rb") as handle:
                handle.seek(offset)
                data = handle.read()
        except FileNotFoundError:
            return [], offset
        end = data.rfind(b"\n") + 1
        events = [json.loads(line) for line in data[:end].splitlines() if line.strip()]
        return events, offset + end

    # -- stopping ---------------------------------------------------------------------------------

    def stop(self) -> None:
        """Scheduler and controllers first, then the API server, its etcd last."""
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()


def _etcd_healthy(url: str) -> bool:
    try:
        return requests.get(f"{url}/health", timeout=2).status_code == 200
    except requests.RequestException:
        return False
