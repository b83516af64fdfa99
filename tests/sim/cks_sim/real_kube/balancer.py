"""The CKS cluster's API endpoint on the real backend: a TCP load balancer in front of the control
nodes' kube-apiservers, as CloudStack's virtual router balances port 6443 over them.

    balancer = Balancer(ca_cert).start()
    balancer.add("node-1", "127.0.0.2", 40001)     # a control node's API server
    balancer.enable("node-1", False)               # its VM stopped: no new connection goes there
    balancer.url, balancer.healthy()
    balancer.stop()

TLS passes through untouched (the client verifies the API server's certificate and presents its
own, as through the router's TCP rule). A backend takes connections while it is enabled (its VM
runs) and its ``/readyz`` check answered 200, until three checks in a row fail: the check a load
balancer in front of kubeadm's API servers is configured with, so a starting API server (its RBAC
caches not yet synced) is not handed requests it would refuse, nor one without a store. A connection goes to the next healthy backend in turn; with none,
it is accepted and closed at once (what the router does with no server behind a rule). A backend
that stops takes its open connections with it (the client sees them reset, and reconnects).
"""

from __future__ import annotations

import itertools
import socket
import threading
from dataclasses import dataclass
from typing import Optional

import requests

#: How often each backend's /readyz is checked (real seconds), and how long one check may take.
CHECK_INTERVAL = 0.25
CHECK_TIMEOUT = 2.0
#: Failed checks in a row that take a healthy backend out (haproxy's ``fall``, 3 by default): one slow
#: answer from a busy API server on a loaded machine is no outage. A refused connection or a stopped
#: VM takes it out at once.
FALL = 3
CONNECT_TIMEOUT = 2.0
BUFFER = 65536


@dataclass
class _Backend:
    name: str
    host: str
    port: int
    enabled: bool = True
    healthy: bool = False
    failures: int = 0  # checks failed in a row


class Balancer:
    """A TCP load balancer on loopback with /readyz health checks (see the module docstring)."""

    def __init__(self, ca_cert: str, host: str = "127.0.0.1") -> None:
        self.ca_cert = ca_cert
        self.host = host
        self.port = 0
        self._backends: dict[str, _Backend] = {}
        self._lock = threading.Lock()
        self._turn = itertools.count()
        self._stopping = threading.Event()
        self._listener: Optional[socket.socket] = None
        self._threads: list[threading.Thread] = []
        self._open: set[socket.socket] = set()

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    def add(self, name: str, host: str, port: int, enabled: bool = True) -> None:
        with self._lock:
            self._backends[name] = _Backend(name, host, port, enabled)

    def enable(self, name: str, enabled: bool) -> None:
        """A control node's VM started (True) or stopped (False): it is checked again, or left out at once."""
        with self._lock:
            backend = self._backends[name]
            backend.enabled = enabled
            if not enabled:
                backend.healthy = False

    def healthy(self, names: Optional[list[str]] = None) -> list[str]:
        """The backends (of ``names``, or all) that take connections now."""
        with self._lock:
            return [b.name for b in self._backends.values()
                    if b.enabled and b.healthy and (names is None or b.name in names)]

    def check_now(self, session: Optional[requests.Session] = None) -> None:
        """Check every enabled backend once, now (the plane's start does, before it relies on them)."""
        own = session is None
        session = session or self._session()
        try:
            with self._lock:
                backends = [b for b in self._backends.values() if b.enabled]
            for backend in backends:
                try:
                    ok = session.get(f"https://{backend.host}:{backend.port}/readyz",
                                     timeout=CHECK_TIMEOUT).status_code == 200
                except requests.RequestException:
                    ok = False
                with self._lock:
                    backend.failures = 0 if ok else backend.failures + 1
                    backend.healthy = backend.enabled and (ok or (backend.healthy and backend.failures < FALL))
        finally:
            if own:
                session.close()

    def _session(self) -> requests.Session:
        session = requests.Session()
        session.trust_env = False  # REQUESTS_CA_BUNDLE would replace the API servers' CA
        session.verify = self.ca_cert  # anonymous: /readyz is public (system:public-info-viewer)
        return session

    # -- running ------------------------------------------------------------------------------------

    def start(self) -> Balancer:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind((self.host, self.port))
        listener.listen(128)
        listener.settimeout(0.2)  # stop() is noticed between accepts
        self._listener = listener
        self.port = int(listener.getsockname()[1])
        for target, name in ((self._accept, "accept"), (self._check, "check")):
            thread = threading.Thread(target=target, name=f"cks-sim-balancer-{name}-{self.port}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=5)
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            for sock in list(self._open):
                _close(sock)
            self._open.clear()

    def _check(self) -> None:
        # One session for the thread's life: its connections kept alive, not a TLS handshake a check.
        session = self._session()
        try:
            while not self._stopping.is_set():
                self.check_now(session)
                self._stopping.wait(CHECK_INTERVAL)
        finally:
            session.close()

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                client, _address = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), name=f"cks-sim-balancer-{self.port}",
                             daemon=True).start()

    def _candidates(self) -> list[_Backend]:
        with self._lock:
            up = [b for b in self._backends.values() if b.enabled and b.healthy]
        if not up:
            return []
        first = next(self._turn) % len(up)
        return up[first:] + up[:first]

    def _serve(self, client: socket.socket) -> None:
        upstream = None
        for backend in self._candidates():
            try:
                upstream = socket.create_connection((backend.host, backend.port), timeout=CONNECT_TIMEOUT)
                break
            except OSError:
                with self._lock:
                    backend.healthy = False  # refused: down until its next check answers
        if upstream is None:
            _close(client)
            return
        upstream.settimeout(None)
        client.settimeout(None)
        with self._lock:
            if self._stopping.is_set():
                _close(client)
                _close(upstream)
                return
            self._open.update((client, upstream))
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True,
                                name=f"cks-sim-balancer-{self.port}-back")
        back.start()
        _pump(client, upstream)
        back.join()
        with self._lock:
            self._open.discard(client)
            self._open.discard(upstream)
        _close(client)
        _close(upstream)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy ``source`` into ``sink`` until it ends; then end ``sink``'s sending side (or both, on a reset)."""
    try:
        while True:
            data = source.recv(BUFFER)
            if not data:
                break
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        # A reset on either side (the API server's VM stopped): the other side is reset too.
        _close(source)
        _close(sink)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
