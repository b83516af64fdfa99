# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Would etcd keep its quorum without these members? Asked of the real etcd, over HTTP(S).

Three steps, each small enough to be tested on its own:

1. ``EtcdClient.member_list`` asks the first endpoint that answers for the membership
   (``POST /v3/cluster/member/list`` on the v3 JSON gateway) and ``parse_members`` reads it:
   uint64 IDs come as strings, false fields are left out (``isLearner`` absent = a voter), and a
   member added but never started has neither a name nor client URLs.
2. ``EtcdClient.probe`` asks each member on its own client URL whether it is healthy:
   ``GET /readyz`` where the member has it (etcd 3.4.29+/3.5.11+), else ``GET /health``
   (Debian's 3.4.23 answers 404 to /readyz). Both fail once the member has no leader or cannot
   do a quorum read, so a member in a minority reports unhealthy.
3. ``quorum_verdict`` (pure) decides, from those answers, with the arithmetic of ``plan``.

The rule (with n voting members and quorum q = n // 2 + 1 from ``_decisions.quorum.quorum_size``):
the members going down are counted as down whatever their state now; every other voting member
counts only if it is healthy now. The step is safe when those healthy others number at least q.
So members already down elsewhere use up the tolerance (n - q) before the ones going down do:
with n = 3 that means every member healthy before one goes down and never two at once; with
n = 5 and one member already down, one more may go down (3 of 5 remain), a second may not.
Learners are listed and probed but never counted: they do not vote. When ``require_ready`` is
set, etcd must also answer a linearizable read now (what ``etcdctl endpoint health`` does).
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Mapping, Optional, Protocol, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.retry import RetryPolicy, Transient
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.tls_failures import handshake_cut
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import EtcdError, InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.quorum import (
    Member,
    QuorumVerdict,
    judge_health,
    parse_members,
    quorum_verdict,
    shorten,
)

DEFAULT_TIMEOUT = 5.0


# etcd answers a read of this key like etcdctl's `endpoint health` does; the key need not exist.
_HEALTH_KEY = base64.b64encode(b"health").decode("ascii")


# gRPC code PermissionDenied: with auth enabled the read was refused, but only after a quorum
# had answered (etcdctl counts it as healthy too).
_GRPC_PERMISSION_DENIED = 7


class QuorumClient(Protocol):
    """What the rollout asks of every way to reach etcd (the given endpoints, etcdctl in the etcd
    pods, the check pod): one verdict on whether the members in ``going_down`` may go down."""

    def check(self, going_down: Sequence[str] = (), require_ready: bool = True,
              addresses: Optional[Mapping[str, Optional[str]]] = None) -> QuorumVerdict:
        """The quorum verdict; ``addresses`` (node name to IP) match members by their peer URLs."""


class _Answer:
    """An HTTP answer, whatever its status (urllib raises for >= 400; we want to read those)."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body

    def json(self) -> Any:
        try:
            return json.loads(self.body.decode("utf-8", "replace"))
        except ValueError:
            return None


class _NoAnswer(Transient):
    """No HTTP answer (the connection was refused, reset or timed out): ``error`` says which."""

    def __init__(self, error: EtcdError, timed_out: bool = False) -> None:
        # maybe_done: a question changes nothing, and a member that refuses is not waited for.
        super().__init__(error.msg, maybe_done=True)
        self.error = error
        self.timed_out = timed_out


class EtcdClient:
    """The quorum client: endpoints to ask for the member list, TLS settings, a timeout per probe.

    ``endpoints`` are URLs like ``https://127.0.0.1:2379`` (stacked, kubeadm) or
    ``http://10.1.1.5:2379`` (external CKS etcd nodes). Every member is then probed on the
    client URLs the member list advertises, with the same TLS settings.
    """

    def __init__(self, endpoints: Sequence[str], ca_cert: Optional[str] = None, client_cert: Optional[str] = None,
                 client_key: Optional[str] = None, validate_certs: bool = True,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        self.endpoints = [e.rstrip("/") for e in endpoints]
        if not self.endpoints:
            raise InvalidInput("endpoints", list(endpoints), "give at least one etcd client URL")
        for endpoint in self.endpoints:
            if not endpoint.startswith(("http://", "https://")):
                raise InvalidInput("endpoints", endpoint, "an etcd client URL starts with http:// or https://")
        if (client_cert is None) != (client_key is None):
            raise InvalidInput("client_key" if client_key is None else "client_cert", None,
                               "client_cert and client_key go together")
        if timeout <= 0:
            raise InvalidInput("timeout", timeout, "must be more than 0 seconds")
        self.timeout = float(timeout)
        # A dropped connection is asked again twice, quickly: a member that is down answers no
        # better later, and a probe's verdict is wanted now.
        self.policy = RetryPolicy(attempts=3, base_delay=0.1, max_delay=0.4, budget=2.0)
        self._sleep: Callable[[float], None] = time.sleep
        self._context = self._ssl_context(ca_cert, client_cert, client_key, validate_certs)
        # No proxies: etcd is on the cluster network, and an HTTP(S)_PROXY from the environment
        # would send the probes (and the client certificate's handshake) elsewhere.
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=self._context))

    @staticmethod
    def _ssl_context(ca_cert: Optional[str], client_cert: Optional[str], client_key: Optional[str],
                     validate_certs: bool) -> ssl.SSLContext:
        try:
            if validate_certs:
                context = ssl.create_default_context(cafile=ca_cert)
            else:
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
        except (OSError, ssl.SSLError) as exc:
            raise InvalidInput("ca_cert", ca_cert, f"cannot be loaded as a CA bundle: {exc}") from None
        if client_cert:
            try:
                context.load_cert_chain(client_cert, client_key)
            except (OSError, ssl.SSLError) as exc:
                raise InvalidInput("client_cert", client_cert,
                                   f"cannot be loaded with client_key {client_key!r}: {exc}") from None
        return context

    # --- HTTP ---

    def _request(self, method: str, url: str, body: Optional[Mapping[str, Any]] = None) -> _Answer:
        """One question (each is a read: ``request_kinds`` names them ``etcd <call>``), asked again
        when a connection broke without an answer; raises EtcdError when none came.

        A timeout is not asked again (``timeout`` is the operator's bound on one probe), nor is an
        HTTP answer: etcd's own 503 says a member is not ready."""

        def send() -> _Answer:
            try:
                return self._send(method, url, body)
            except _NoAnswer as fault:
                if fault.timed_out:
                    raise fault.error from None
                raise

        try:
            return self.policy.run(send, sleep=self._sleep)
        except _NoAnswer as fault:
            raise fault.error from None

    def _send(self, method: str, url: str, body: Optional[Mapping[str, Any]] = None) -> _Answer:
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                return _Answer(resp.status, resp.read())
        except urllib.error.HTTPError as exc:
            try:
                return _Answer(exc.code, exc.read())
            finally:
                exc.close()
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, (socket.timeout, TimeoutError)):
                raise _NoAnswer(EtcdError(f"{url}: no answer within {self.timeout:g} s"), timed_out=True) from None
            if isinstance(reason, ssl.SSLError) and not handshake_cut(reason):
                raise EtcdError(f"{url}: {reason}") from None
            raise _NoAnswer(EtcdError(f"{url}: {reason}")) from None
        except TimeoutError:
            raise _NoAnswer(EtcdError(f"{url}: no answer within {self.timeout:g} s"), timed_out=True) from None
        except ssl.SSLError as exc:
            if handshake_cut(exc):
                raise _NoAnswer(EtcdError(f"{url}: the TLS handshake was cut off ({exc})")) from None
            raise EtcdError(f"{url}: {exc}") from None
        except OSError as exc:
            raise _NoAnswer(EtcdError(f"{url}: {exc}")) from None

    # --- the three questions ---

    def member_list(self) -> list[Member]:
        """The membership, from the first endpoint that gives it (learners refuse to)."""
        errors = []
        for endpoint in self.endpoints:
            try:
                answer = self._request("POST", f"{endpoint}/v3/cluster/member/list", {})
            except EtcdError as exc:
                errors.append(exc.msg)
                continue
            data = answer.json()
            if answer.status == 200 and isinstance(data, dict) and "members" in data:
                return parse_members(data)
            errors.append(f"{endpoint}: member list HTTP {answer.status}: {shorten(data or answer.body.decode('utf-8', 'replace'))}")
        raise EtcdError("no etcd endpoint gave the member list: " + "; ".join(errors),
                        endpoints=self.endpoints)

    def probe(self, member: Member) -> Member:
        """The member with its health filled in, as its own client URL reports it."""
        if not member.client_urls:
            return member.with_health(False, "never started (no client URL)" if not member.started
                                      else "advertises no client URL")
        reason = ""
        for url in member.client_urls:
            url = url.rstrip("/")
            try:
                answer = self._request("GET", f"{url}/readyz")
                path = "/readyz"
                if answer.status == 404:  # etcd before 3.4.29 / 3.5.11
                    answer = self._request("GET", f"{url}/health")
                    path = "/health"
            except EtcdError as exc:
                reason = exc.msg
                continue  # another advertised URL may be reachable from here
            healthy, reason = judge_health(path, answer.status, answer.body)
            return member.with_health(healthy, reason)
        return member.with_health(False, reason)

    def quorum_read(self, members: Sequence[Member]) -> tuple[bool, str]:
        """A linearizable read on the first voting member that answers: etcd is ready."""
        errors = []
        for member in members:
            if member.learner or not member.healthy:
                continue  # learners refuse linearizable reads; unhealthy ones cannot do them
            for url in member.client_urls:
                target = f"{url.rstrip('/')}/v3/kv/range"
                try:
                    answer = self._request("POST", target, {"key": _HEALTH_KEY, "limit": 1})
                except EtcdError as exc:
                    errors.append(exc.msg)
                    continue
                data = answer.json()
                if answer.status == 200 and isinstance(data, dict) and "header" in data:
                    return True, ""
                if isinstance(data, dict) and data.get("code") == _GRPC_PERMISSION_DENIED:
                    return True, ""
                errors.append(f"{member.label}: read HTTP {answer.status}: {shorten(data or '')}")
        return False, "; ".join(errors) or "no healthy voting member to read from"

    def check(self, going_down: Sequence[str] = (), require_ready: bool = True,
              addresses: Optional[Mapping[str, Optional[str]]] = None) -> QuorumVerdict:
        members = self.member_list()
        # One probe per member at once: the wall time is one timeout, not one per member.
        with ThreadPoolExecutor(max_workers=min(8, len(members))) as pool:
            probed = list(pool.map(self.probe, members))
        ready: Optional[bool] = None
        ready_reason = ""
        if require_ready:
            ready, ready_reason = self.quorum_read(probed)
        return quorum_verdict(probed, going_down, ready=ready, ready_reason=ready_reason,
                              require_ready=require_ready, addresses=addresses)


def client_from_options(params: Mapping[str, Any]) -> Optional[EtcdClient]:
    """The client for the ``etcd_*`` options of cks_node_cycle and cks_node_outdated; None
    without ``etcd_endpoints``."""
    endpoints = params.get("etcd_endpoints") or []
    if not endpoints:
        return None
    return EtcdClient(endpoints, ca_cert=params.get("etcd_ca_cert"), client_cert=params.get("etcd_client_cert"),
                      client_key=params.get("etcd_client_key"),
                      validate_certs=params.get("etcd_validate_certs", True) is not False,
                      timeout=float(params.get("etcd_timeout") or DEFAULT_TIMEOUT))
