"""Real etcd members for the simulated clusters.

Every stacked control node and every external etcd node of a simulated cluster runs one REAL
etcd process (Debian's ``/usr/bin/etcd``, 3.4.23) on loopback, so that the collection's quorum
checks meet the real member list, the real ``/health`` and a real loss of quorum:

- ``stacked``: kubeadm-like. A CA per cluster (kubeadm keeps etcd's CA apart from the API
  server's, so a client that mixes them up fails here as on a cloud), server and peer
  certificates per member (issued with ``tls.issue_cert``), ``--client-cert-auth`` on the client and
  peer URLs, a ``healthcheck-client`` certificate for probes, and a plain-HTTP metrics listener
  that serves ``/health`` (what kubeadm's probes use).
- ``external``: plain HTTP on the client and peer URLs, as CKS sets up its external etcd nodes.

A member stops (SIGTERM) when its VM reaches Stopped and starts again, with its data dir intact,
when the VM reaches Running. ``stop_all`` (the sim's stop) removes the data dirs once every member
has exited; the logs stay. Those calls come from the CloudStack world with ``sim.lock`` held,
so the process work happens on one worker thread per member, in order, never under the lock.
"""

from __future__ import annotations

import atexit
import base64
import datetime
import ipaddress
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Optional

import requests

from .tls import issue_cert
from .tools import default_binary

ETCD_BINARY = default_binary("etcd")

# Real milliseconds. Shorter than etcd's defaults (100/1000) so that a new leader is elected
# quickly after a stop, long enough that two busy CPUs do not make leaders flap.
HEARTBEAT_MS = 50
ELECTION_MS = 600

START_TIMEOUT = 30.0  # real seconds for a new cluster to answer a quorum read
STOP_TIMEOUT = 10.0  # real seconds between SIGTERM and SIGKILL
READY_TIMEOUT = 1.5  # real seconds for the quorum read of cluster_ready()
RESTART_ATTEMPTS = 5  # starts of a member before it is left down (see its log)
RESTART_PROBATION = 0.5  # real seconds a restarted member must stay up to count as started

MODES = ("stacked", "external")


# --- certificates --------------------------------------------------------------------------

def _make_ca(out_dir: str, common_name: str) -> dict[str, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    os.makedirs(out_dir, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, content_commitment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    paths = {"ca_cert": os.path.join(out_dir, "ca.crt"), "ca_key": os.path.join(out_dir, "ca.key")}
    with open(paths["ca_cert"], "wb") as fh:
        fh.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(paths["ca_key"], "wb") as fh:
        fh.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()))
    os.chmod(paths["ca_key"], 0o600)
    return paths


# --- ports ---------------------------------------------------------------------------------

def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as fh:
            low, high = (int(x) for x in fh.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def _reserve_ports(count: int) -> list[socket.socket]:
    """Sockets bound to free ports below the kernel's ephemeral range, held for the members' life.

    A member keeps its ports across a stop and start (its peer URL is in the membership), where a
    real member keeps them because its VM has an address of its own. Ports from the ephemeral range
    could meanwhile be taken by any outgoing connection on this host, or by a server binding port 0;
    below it, another sim picking at random could take one while the member is down. So each port
    is bound without SO_REUSEADDR (taken by no one else now) and then kept bound with it: another
    sim's plain bind is refused for as long as this one lives, while etcd, which listens with
    SO_REUSEADDR as every Go server does, can bind it beside the unlistening reservation.
    """
    low, _high = _ephemeral_range()
    first, last = (20000, low - 1) if low > 21000 else (low, 65535)
    socks: list[socket.socket] = []
    try:
        while len(socks) < count:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind(("127.0.0.1", random.randint(first, last)))
            except OSError:
                sock.close()
                continue
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            socks.append(sock)
    except BaseException:
        _release(socks)
        raise
    return socks


def _release(reserved: list[socket.socket]) -> None:
    for sock in reserved:
        sock.close()
    reserved.clear()


def _listen_host(address: Optional[str]) -> str:
    try:
        return address if address and ipaddress.ip_address(address).is_loopback else "127.0.0.1"
    except ValueError:
        return "127.0.0.1"


# --- the members ---------------------------------------------------------------------------

@dataclass
class _Member:
    cluster_id: str
    name: str  # the VM name lowercased, as kubeadm names stacked members after their node
    vm_name: str
    data_dir: str
    log_path: str
    client_url: str
    peer_url: str
    metrics_url: Optional[str] = None
    cert_file: Optional[str] = None
    key_file: Optional[str] = None
    peer_cert_file: Optional[str] = None
    peer_key_file: Optional[str] = None
    proc: Optional[subprocess.Popen] = None
    # What the world says: the VM is on and the member was not killed. Set at once (under our
    # lock) so that quorum invariants do not wait for a process to actually exit.
    up: bool = True
    killed: bool = False
    starts: int = 0
    executor: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(max_workers=1))

    def process_alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class _Cluster:
    cluster_id: str
    mode: str
    members: list[_Member]
    token: str
    pki: dict[str, str] = field(default_factory=dict)  # ca_cert, client_cert, client_key (stacked)
    quorum_lost: bool = False
    reserved: list[socket.socket] = field(default_factory=list)  # its members' ports (_reserve_ports)

    @property
    def quorum(self) -> int:
        return len(self.members) // 2 + 1

    def initial_cluster(self) -> str:
        return ",".join(f"{m.name}={m.peer_url}" for m in self.members)


class EtcdManager:
    """Runs the etcd members of every simulated cluster (see the module docstring)."""

    def __init__(self, sim: Any, state_dir: str, tls: dict) -> None:
        self.sim = sim
        self.state_dir = os.path.join(state_dir, "etcd")
        # The sim's PKI (the API server's). etcd does not share it: see the module docstring.
        self.tls = tls or {}
        self._lock = threading.RLock()  # our own: never sim.lock while a process starts or stops
        self._clusters: dict[str, _Cluster] = {}
        self._by_name: dict[str, _Member] = {}
        self._stopped = False
        os.makedirs(self.state_dir, exist_ok=True)
        if hasattr(sim, "faults") and sim.faults is not None:
            sim.faults.on_added.append(self._on_fault)
        atexit.register(self.stop_all)

    # --- building a cluster ---

    def add_cluster(self, cluster_id: str, members: list[str], mode: str,
                    member_names: Optional[dict[str, str]] = None, addresses: Optional[dict[str, str]] = None) -> None:
        """``members``: VM names; ``member_names``: a member's --name where it is not its VM's;
        ``addresses``: each VM's IP address (a loopback one is where an external member listens)."""
        if mode not in MODES:
            raise ValueError(f"etcd mode {mode!r}: expected one of {', '.join(MODES)}")
        if not members:
            raise ValueError(f"cluster {cluster_id}: an etcd cluster needs at least one member")
        names = [vm.lower() for vm in members]
        with self._lock:
            if cluster_id in self._clusters:
                raise ValueError(f"cluster {cluster_id} already has etcd members")
            clash = [n for n in names if n in self._by_name]
            if clash or len(set(names)) != len(names):
                raise ValueError(f"etcd member names must be unique: {', '.join(clash or names)}")
        last_error = ""
        # A member that exits at once (a port busy where the reservation cannot keep others out,
        # such as a connection's) fails the start: start over with new ports rather than fail the sim.
        for _attempt in range(3):
            cluster = self._build_cluster(cluster_id, members, mode, member_names or {}, addresses or {})
            for member in cluster.members:
                self._spawn(cluster, member)
            error = self._wait_healthy(cluster, START_TIMEOUT)
            if error is None:
                with self._lock:
                    self._clusters[cluster_id] = cluster
                    for member in cluster.members:
                        self._by_name[member.vm_name.lower()] = member
                return
            last_error = error
            for member in cluster.members:
                self._terminate(member)
                member.executor.shutdown(wait=False)
            _release(cluster.reserved)
            shutil.rmtree(os.path.join(self.state_dir, cluster_id), ignore_errors=True)
        raise RuntimeError(f"etcd of cluster {cluster_id} did not become healthy: {last_error}")

    def _build_cluster(self, cluster_id: str, vm_names: list[str], mode: str,
                       member_names: dict[str, str], addresses: dict[str, str]) -> _Cluster:
        base = os.path.join(self.state_dir, cluster_id)
        shutil.rmtree(base, ignore_errors=True)
        os.makedirs(base)
        per_member = 3 if mode == "stacked" else 2
        reserved = _reserve_ports(per_member * len(vm_names))
        ports = [sock.getsockname()[1] for sock in reserved]
        scheme = "https" if mode == "stacked" else "http"
        cluster = _Cluster(cluster_id=cluster_id, mode=mode, members=[], token=f"cks-sim-{cluster_id}",
                           reserved=reserved)
        if mode == "stacked":
            ca = _make_ca(os.path.join(base, "pki"), f"etcd-ca-{cluster_id}")
            client_cert, client_key = issue_cert(ca, "healthcheck-client", [], client=True, server=False,
                                                 out_dir=os.path.join(base, "pki"))
            cluster.pki = {"ca_cert": ca["ca_cert"], "ca_key": ca["ca_key"],
                           "client_cert": client_cert, "client_key": client_key}
        for i, vm_name in enumerate(vm_names):
            # kubeadm names a stacked member after its node (lowercase); CKS names an external etcd
            # node's member after its hostname, getEtcdNodeNameForCluster() + "-<i>-<hex>", which keeps
            # the cluster name's case (KubernetesClusterActionWorker.getEtcdNodeNameForCluster does not
            # lowercase, unlike getKubernetesClusterNodeNamePrefix).
            name = member_names.get(vm_name) or (vm_name if mode == "external" else vm_name.lower())
            client_port, peer_port = ports[per_member * i], ports[per_member * i + 1]
            # CKS gives an external member http://<guest IP>:2380 and :2379
            # (KubernetesClusterStartWorker.getInitialEtcdClusterDetails, getEtcdEndpointList); the
            # sim can only listen on its own addresses, so a VM on a loopback network gets its IP.
            host = _listen_host(addresses.get(vm_name)) if mode == "external" else "127.0.0.1"
            member = _Member(
                cluster_id=cluster_id, name=name, vm_name=vm_name,
                data_dir=os.path.join(base, name, "data"),
                log_path=os.path.join(base, name, "etcd.log"),
                client_url=f"{scheme}://{host}:{client_port}",
                peer_url=f"{scheme}://{host}:{peer_port}",
            )
            os.makedirs(os.path.dirname(member.data_dir), exist_ok=True)
            if mode == "stacked":
                member.metrics_url = f"http://127.0.0.1:{ports[per_member * i + 2]}"
                pki_dir = os.path.join(base, name, "pki")
                sans = ["127.0.0.1", "localhost", name]
                member.cert_file, member.key_file = issue_cert(ca, "server", sans, True, True, pki_dir)
                member.peer_cert_file, member.peer_key_file = issue_cert(ca, "peer", sans, True, True, pki_dir)
            cluster.members.append(member)
        return cluster

    def _command(self, cluster: _Cluster, member: _Member) -> list[str]:
        cmd = [
            ETCD_BINARY,
            f"--name={member.name}",
            f"--data-dir={member.data_dir}",
            f"--listen-client-urls={member.client_url}",
            f"--advertise-client-urls={member.client_url}",
            f"--listen-peer-urls={member.peer_url}",
            f"--initial-advertise-peer-urls={member.peer_url}",
            f"--initial-cluster={cluster.initial_cluster()}",
            "--initial-cluster-state=new",  # ignored once the data dir exists (a restart)
            f"--initial-cluster-token={cluster.token}",
            f"--heartbeat-interval={HEARTBEAT_MS}",
            f"--election-timeout={ELECTION_MS}",
            "--snapshot-count=10000",
            "--logger=zap",
            "--log-outputs=stderr",
        ]
        if cluster.mode == "stacked":
            cmd += [
                f"--listen-metrics-urls={member.metrics_url}",
                f"--cert-file={member.cert_file}",
                f"--key-file={member.key_file}",
                f"--trusted-ca-file={cluster.pki['ca_cert']}",
                "--client-cert-auth=true",
                f"--peer-cert-file={member.peer_cert_file}",
                f"--peer-key-file={member.peer_key_file}",
                f"--peer-trusted-ca-file={cluster.pki['ca_cert']}",
                "--peer-client-cert-auth=true",
            ]
        return cmd

    def _spawn(self, cluster: _Cluster, member: _Member) -> None:
        # A clean environment: stray ETCD_* variables would override the flags.
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD")}
        with open(member.log_path, "ab") as log:
            log.write(f"--- cks-sim start {member.starts + 1} at {time.time():.3f}\n".encode())
            log.flush()
            member.proc = subprocess.Popen(
                self._command(cluster, member), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                env=env, start_new_session=True,  # a Ctrl-C to the test run is not etcd's to see
            )
        member.starts += 1

    def _wait_healthy(self, cluster: _Cluster, timeout: float) -> Optional[str]:
        """None once a quorum read answers and every member says healthy, else why not."""
        deadline = time.monotonic() + timeout
        why = "not started"
        while time.monotonic() < deadline:
            dead = [m.name for m in cluster.members if not m.process_alive()]
            if dead:
                return f"member(s) {', '.join(dead)} exited; see {cluster.members[0].log_path} and the others"
            if self._quorum_read(cluster, cluster.members):
                unhealthy = [m.name for m in cluster.members if not self._member_healthy(cluster, m)]
                if not unhealthy:
                    return None
                why = f"member(s) {', '.join(unhealthy)} not healthy yet"
            else:
                why = "no quorum read yet"
            time.sleep(0.1)
        return why

    # --- HTTP to the members (for the sim's own checks) ---

    def _request_kwargs(self, cluster: _Cluster, timeout: float) -> dict[str, Any]:
        if cluster.mode == "stacked":
            return {"verify": cluster.pki["ca_cert"],
                    "cert": (cluster.pki["client_cert"], cluster.pki["client_key"]), "timeout": timeout}
        return {"timeout": timeout}

    def _quorum_read(self, cluster: _Cluster, members: list[_Member], timeout: float = READY_TIMEOUT) -> bool:
        """A linearizable range through the v3 gateway: only a member with a leader and a quorum answers."""
        body: dict[str, Any] = {"key": base64.b64encode(b"health").decode(), "limit": 1}
        for member in members:
            if not member.process_alive():
                continue
            try:
                resp = requests.post(f"{member.client_url}/v3/kv/range", json=body,
                                     **self._request_kwargs(cluster, timeout))
            except requests.RequestException:
                continue
            if resp.status_code == 200 and "header" in resp.json():
                return True
        return False

    def _member_healthy(self, cluster: _Cluster, member: _Member, timeout: float = READY_TIMEOUT) -> bool:
        try:
            resp = requests.get(f"{member.client_url}/health", **self._request_kwargs(cluster, timeout))
            return resp.status_code == 200 and resp.json().get("health") in ("true", True)
        except (requests.RequestException, ValueError):
            return False

    # --- power and faults ---

    def _member(self, vm_name: str) -> Optional[_Member]:
        with self._lock:
            return self._by_name.get(vm_name.lower())

    def vm_powered_off(self, vm_name: str) -> None:
        member = self._member(vm_name)
        if member is None:
            return
        with self._lock:
            member.up = False
            self._check_quorum(member.cluster_id, member.name, cause=f"{member.name} powered off")
        self._submit(member, self._terminate, member)

    def vm_powered_on(self, vm_name: str) -> None:
        member = self._member(vm_name)
        if member is None:
            return
        with self._lock:
            member.up = True
            member.killed = False
            self._check_quorum(member.cluster_id, member.name, cause=f"{member.name} powered on")
        self._submit(member, self._ensure_running, member)

    def kill(self, vm_name: str) -> None:
        member = self._member(vm_name)
        if member is None:
            raise KeyError(f"no etcd member for VM {vm_name!r}")
        with self._lock:
            member.killed = True
            self._check_quorum(member.cluster_id, member.name, cause=f"{member.name} killed")
            proc = member.proc
        # SIGKILL now (no waiting here); the member's worker reaps it.
        if proc is not None and proc.poll() is None:
            try:
                proc.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._submit(member, self._reap, member)

    def _on_fault(self, fault: dict[str, Any]) -> None:
        if fault.get("kind") == "etcd_kill":
            try:
                self.kill(str(fault.get("vm")))
            except KeyError as exc:
                # Faults.add lets this through, so the admin API can refuse the fault.
                raise ValueError(f"etcd_kill: {exc.args[0]}") from None

    def _submit(self, member: _Member, fn: Any, *args: Any) -> Optional[Future]:
        if self._stopped:
            return None
        try:
            return member.executor.submit(fn, *args)
        except RuntimeError:  # executor shut down by stop_all meanwhile
            return None

    def _ensure_running(self, member: _Member) -> None:
        with self._lock:
            wanted = member.up and not member.killed and not self._stopped
            cluster = self._clusters.get(member.cluster_id)
        if not wanted or cluster is None or member.process_alive():
            return
        # Its ports may be busy for a moment (a probe's connection in the way): try again rather
        # than leave the member down for good.
        for _attempt in range(RESTART_ATTEMPTS):
            self._spawn(cluster, member)
            proc = member.proc
            try:
                if proc is not None:
                    proc.wait(timeout=RESTART_PROBATION)
            except subprocess.TimeoutExpired:
                return  # still running: started
            time.sleep(RESTART_PROBATION)
            with self._lock:
                if not (member.up and not member.killed and not self._stopped):
                    return

    def _terminate(self, member: _Member) -> None:
        proc = member.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    @staticmethod
    def _reap(member: _Member) -> None:
        if member.proc is not None:
            try:
                member.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass

    def _check_quorum(self, cluster_id: str, node: str, cause: str) -> None:
        """Record the moment a cluster has fewer voting members alive than its quorum (held: _lock)."""
        cluster = self._clusters.get(cluster_id)
        if cluster is None:
            return
        alive = [m.name for m in cluster.members if m.up and not m.killed]
        lost = len(alive) < cluster.quorum
        if lost and not cluster.quorum_lost:
            self.sim.invariants.add(
                kind="etcd_quorum_lost", cluster=cluster_id, cause=cause, voters=len(cluster.members),
                quorum=cluster.quorum, running=len(alive),
                down=[m.name for m in cluster.members if m.name not in alive],
            )
        if lost != cluster.quorum_lost:
            self.sim.timeline.add(node=node, event="etcd_quorum_lost" if lost else "etcd_quorum_restored",
                                  cluster=cluster_id, cause=cause)
        cluster.quorum_lost = lost

    # --- views ---

    def cluster_ready(self, cluster_id: str) -> bool:
        with self._lock:
            cluster = self._clusters.get(cluster_id)
            members = list(cluster.members) if cluster else []
        if cluster is None:
            return False
        return self._quorum_read(cluster, members)

    def wait_settled(self, vm_name: Optional[str] = None, timeout: float = STOP_TIMEOUT + 5) -> None:
        """Wait until the queued stops and starts (of one member, or all) have been carried out."""
        with self._lock:
            members = [self._by_name[vm_name.lower()]] if vm_name else list(self._by_name.values())
        for member in members:
            future = self._submit(member, lambda: None)
            if future is not None:
                future.result(timeout=timeout)

    def endpoints(self, cluster_id: str) -> dict:
        with self._lock:
            cluster = self._clusters[cluster_id]
            result: dict[str, Any] = {
                "mode": cluster.mode,
                "members": [
                    {"name": m.name, "client_url": m.client_url, "peer_url": m.peer_url,
                     "metrics_url": m.metrics_url, "running": m.process_alive()}
                    for m in cluster.members
                ],
                "ca_cert": cluster.pki.get("ca_cert"),
                "client_cert": cluster.pki.get("client_cert"),
                "client_key": cluster.pki.get("client_key"),
            }
        return result

    def member_files(self, vm_name: str) -> Optional[dict[str, Any]]:
        """What a stacked member's etcd pod mounts (kubeadm's file names -> the sim's files),
        its client and metrics URLs, and whether its process is up; None for no such member."""
        member = self._member(vm_name)
        if member is None:
            return None
        with self._lock:
            cluster = self._clusters[member.cluster_id]
            files: dict[str, str] = {}
            if cluster.mode == "stacked":
                files = {
                    "ca.crt": cluster.pki["ca_cert"], "ca.key": cluster.pki["ca_key"],
                    "healthcheck-client.crt": cluster.pki["client_cert"],
                    "healthcheck-client.key": cluster.pki["client_key"],
                    "server.crt": member.cert_file or "", "server.key": member.key_file or "",
                    "peer.crt": member.peer_cert_file or "", "peer.key": member.peer_key_file or "",
                }
            return {"name": member.name, "mode": cluster.mode, "client_url": member.client_url,
                    "metrics_url": member.metrics_url, "files": files,
                    "running": member.up and not member.killed and member.process_alive()}

    def snapshot(self) -> dict:
        with self._lock:
            return {
                cid: {
                    "mode": c.mode,
                    "quorum": c.quorum,
                    "quorum_lost": c.quorum_lost,
                    "members": [
                        {"name": m.name, "client_url": m.client_url, "up": m.up, "killed": m.killed,
                         "running": m.process_alive(), "pid": m.proc.pid if m.proc is not None and m.process_alive() else None,
                         "starts": m.starts, "log": m.log_path}
                        for m in c.members
                    ],
                }
                for cid, c in self._clusters.items()
            }

    def stop_all(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            members = list(self._by_name.values())
        for member in members:
            member.executor.shutdown(wait=True, cancel_futures=True)
        # SIGKILL: a graceful stop of every member at once waits for leadership transfers that
        # cannot happen (seconds each), and nothing reuses these data dirs.
        procs = [m.proc for m in members if m.proc is not None and m.proc.poll() is None]
        for proc in procs:
            try:
                proc.kill()
            except ProcessLookupError:
                pass
        for proc in procs:
            proc.wait()
        with self._lock:
            clusters = list(self._clusters.values())
        for cluster in clusters:
            _release(cluster.reserved)
        self._remove_data(members)

    @staticmethod
    def _remove_data(members: list[_Member]) -> None:
        """Each member's data dir, once its process has exited (etcd holds its WAL files locked while
        it runs): a member preallocates 64 MiB WAL files, which a test run's sims pile up by the
        gigabyte under a basetemp pytest never cleans (pytest-xdist's workers). Its log and
        certificates stay for whoever reads why a test failed."""
        for member in members:
            if member.proc is not None and member.proc.poll() is None:
                continue  # still running (a kill that did not take): its WAL lock is held
            shutil.rmtree(member.data_dir, ignore_errors=True)
