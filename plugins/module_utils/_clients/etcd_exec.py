# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""etcd asked through the Kubernetes API: the real ``etcdctl`` inside kubeadm's etcd pods.

On a real CKS cluster stacked etcd listens only on the cluster network and its certificates live on
the control nodes, so the controller cannot ask it over HTTP. kubeadm runs each member as the
static pod ``etcd-<node>`` in kube-system (labels ``component=etcd,tier=control-plane``) with
``etcdctl`` in the image and the certificates mounted at ``/etc/kubernetes/pki/etcd``. This client
runs, through ``pods/exec`` (the kubernetes client's websocket stream), in the etcd pod of a control
node that stays up:

- ``etcdctl member list -w json``: the membership, the same answer the HTTP gateway gives;
- ``etcdctl endpoint health --cluster -w json``: a linearizable read on every member's client URL
  (so a member in a minority, or one that cannot reach a quorum, is unhealthy), which is also the
  "etcd answers a quorum read" readiness the HTTP client asks separately;
- ``etcdctl endpoint status --cluster -w json``: a member whose status carries errors (an alarm
  such as NOSPACE) or that knows no leader is not healthy either.

The certificate is kubeadm's ``healthcheck-client`` (issued for exactly this: a client of the
local member that may only check health). The answers become the same ``Member`` records as
``EtcdClient`` makes, so ``_decisions.quorum.quorum_verdict`` judges them unchanged. A pod that
cannot be asked (exec refused, pod missing, its node down, the member killed) is passed over for
the next control node's pod; when none answers, the check fails with each pod's reason. Nothing is
cached: every check runs etcdctl again, and an exec that has not ended in time is no answer.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd import QuorumClient, client_from_options
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.pod_exec import PodExec
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, EtcdError, InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.etcd_paths import ExecAccess
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.quorum import (
    Member,
    QuorumVerdict,
    parse_members,
    quorum_verdict,
    shorten,
)

DEFAULT_TIMEOUT = 5.0

ETCD_NAMESPACE = "kube-system"
ETCD_POD_LABELS = "component=etcd,tier=control-plane"
ETCD_CONTAINER = "etcd"
PKI = "/etc/kubernetes/pki/etcd"
CERT_OPTIONS = (f"--cacert={PKI}/ca.crt", f"--cert={PKI}/healthcheck-client.crt",
                f"--key={PKI}/healthcheck-client.key")

# etcdctl's exit code when `endpoint health` found a member unhealthy (its JSON is still printed).
_UNHEALTHY_CLUSTER = 1


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return (pod.get("status") or {}).get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class EtcdExecClient:
    """The quorum client over ``pods/exec``: the same ``check`` as ``EtcdClient``.

    ``kube``: a KubeClient (its ``list_labelled_pods`` and ApiClient); ``timeout``: etcdctl's
    dial and command timeout, in seconds; the exec waits for twice that and a little more.
    """

    def __init__(self, kube: Any, timeout: float = DEFAULT_TIMEOUT) -> None:
        if timeout <= 0:
            raise InvalidInput("etcd_timeout", timeout, "must be more than 0 seconds")
        self.kube = kube
        self.pod_exec = PodExec(kube)
        self.timeout = float(timeout)

    # --- which pod answers ---

    def pods(self, avoid: Sequence[str] = ()) -> list[dict[str, Any]]:
        """The etcd pods to ask, in order: not on a node going down, Ready ones first."""
        # Without case, as members are matched: an operator may name the node as its VM is spelt.
        going = {name.lower() for name in avoid}
        pods = [p for p in self.kube.list_labelled_pods(ETCD_NAMESPACE, ETCD_POD_LABELS)
                if str((p.get("spec") or {}).get("nodeName") or "").lower() not in going]
        return sorted(pods, key=lambda p: (not _ready(p), str((p.get("metadata") or {}).get("name"))))

    def _etcdctl(self, pod: str, *args: str) -> Any:
        """``etcdctl <args> -w json`` in ``pod``: its JSON. Raises CksError with etcdctl's own words."""
        seconds = f"{self.timeout:g}s"
        command = ["etcdctl", *CERT_OPTIONS, f"--dial-timeout={seconds}", f"--command-timeout={seconds}",
                   *args, "-w", "json"]
        result = self.pod_exec.run(ETCD_NAMESPACE, pod, command, container=ETCD_CONTAINER,
                                   timeout=2 * self.timeout + 10)
        what = f"{pod}: etcdctl {' '.join(args)}"
        if result.exit_code is None:
            raise EtcdError(f"{what} could not run: {result.status_message or 'no exit status'}")
        accepted = (0, _UNHEALTHY_CLUSTER) if args[:2] == ("endpoint", "health") else (0,)
        data: Any = None
        try:
            data = json.loads(result.stdout) if result.stdout.strip() else None
        except ValueError:
            data = None
        if result.exit_code not in accepted or data is None:
            raise EtcdError(f"{what} exited {result.exit_code}: "
                            f"{shorten(result.stderr.strip() or result.stdout.strip() or 'no output')}")
        return data

    # --- the questions, asked of one pod ---

    def _ask(self, pod: str) -> tuple[list[Member], str]:
        answer = self._etcdctl(pod, "member", "list")
        if not isinstance(answer, dict):
            raise EtcdError(f"{pod}: etcdctl member list answered no JSON object: {shorten(answer)}")
        members = parse_members(answer)
        health = self._etcdctl(pod, "endpoint", "health", "--cluster")
        status = self._statuses(pod)
        return [self._judge(m, health, status) for m in members], pod

    def _statuses(self, pod: str) -> dict[str, dict[str, Any]]:
        """Each endpoint's status; an endpoint etcdctl could not ask is simply absent (its health says why)."""
        try:
            answer = self._etcdctl(pod, "endpoint", "status", "--cluster")
        except EtcdError:
            return {}  # endpoint status exits non-zero when one member is down: health tells which
        return statuses_by_endpoint(answer)

    @staticmethod
    def _judge(member: Member, health: Any, status: dict[str, dict[str, Any]]) -> Member:
        return judge_member(member, health, status)

    # --- the check ---

    def members(self, avoid: Sequence[str] = ()) -> tuple[list[Member], str]:
        """The probed members and the pod that answered; raises EtcdError when no pod could answer."""
        pods = self.pods(avoid)
        if not pods:
            where = f" on a control node other than {', '.join(avoid)}" if avoid else ""
            raise EtcdError(f"no etcd pod ({ETCD_POD_LABELS}) in {ETCD_NAMESPACE}{where} to run etcdctl in; "
                            "with external etcd nodes give etcd_endpoints (http://<etcd node address>:2379)")
        reasons = []
        for pod in pods:
            name = str((pod.get("metadata") or {}).get("name"))
            try:
                return self._ask(name)
            except CksError as exc:
                reasons.append(exc.msg if exc.msg.startswith(name) else f"{name}: {exc.msg}")
        raise EtcdError("no etcd pod could be asked through the Kubernetes API: " + "; ".join(reasons))

    def check(self, going_down: Sequence[str] = (), require_ready: bool = True,
              addresses: Optional[Mapping[str, Optional[str]]] = None) -> QuorumVerdict:
        members, pod = self.members(avoid=going_down)
        voters = [m for m in members if not m.learner]
        # endpoint health is a linearizable read per member: any healthy voter proves a quorum read.
        ready: Optional[bool] = any(m.healthy for m in voters) if require_ready else None
        reason = "" if ready else "no voting member answered a quorum read"
        verdict = quorum_verdict(members, going_down, ready=ready, ready_reason=reason, require_ready=require_ready,
                                 addresses=addresses)
        return replace(verdict, message=f"{verdict.message} (etcdctl in {pod})")


def statuses_by_endpoint(answer: Any) -> dict[str, dict[str, Any]]:
    """``etcdctl endpoint status -w json`` by endpoint URL (without a trailing slash)."""
    return {str(s.get("Endpoint", "")).rstrip("/"): s.get("Status") or {}
            for s in answer if isinstance(s, dict)} if isinstance(answer, list) else {}


def judge_member(member: Member, health: Any, status: dict[str, dict[str, Any]]) -> Member:
    """A member with the health etcdctl's answers give it: ``endpoint health`` for one of its client
    URLs healthy, and no errors (an alarm) nor a missing leader in its ``endpoint status``."""
    if not member.client_urls:
        return member.with_health(False, "never started (no client URL)" if not member.started
                                  else "advertises no client URL")
    urls = {u.rstrip("/") for u in member.client_urls}
    answers = [h for h in (health if isinstance(health, list) else [])
               if isinstance(h, dict) and str(h.get("endpoint", "")).rstrip("/") in urls]
    if not answers:
        return member.with_health(False, "etcdctl endpoint health gave no answer for its client URLs")
    if not any(h.get("health") is True for h in answers):
        errors = [str(h.get("error") or "unhealthy") for h in answers]
        return member.with_health(False, f"etcdctl endpoint health: {shorten('; '.join(errors))}")
    for url in urls:
        state = status.get(url)
        if state is None:
            continue
        if state.get("errors"):
            return member.with_health(False, f"etcdctl endpoint status: {shorten('; '.join(map(str, state['errors'])))}")
        if not state.get("leader"):
            return member.with_health(False, "etcdctl endpoint status: no leader")
    return member.with_health(True, "")


def quorum_client(params: Any, kube: Any = None) -> Optional[QuorumClient]:
    """The quorum client the module's options choose: the explicit ``etcd_endpoints`` (with their
    certificates) when given, else etcdctl in the etcd pods through ``kube``; None without either."""
    client = client_from_options(params)
    if client is not None or kube is None:
        return client
    return EtcdExecClient(kube, timeout=float(params.get("etcd_timeout") or DEFAULT_TIMEOUT))


def exec_access(kube: Any) -> ExecAccess:
    """May this identity exec into every etcd pod? Asked of the API server (SelfSubjectAccessReview)
    for ``get`` (a websocket exec is a GET) and ``create`` (what a GET needs too from Kubernetes
    1.35, AuthorizePodWebsocketUpgradeCreatePermission), per pod, since RBAC may name the pods."""
    pods = [str((p.get("metadata") or {}).get("name")) for p in kube.list_labelled_pods(ETCD_NAMESPACE, ETCD_POD_LABELS)]
    if not pods:
        return ExecAccess(False, (), f"no etcd pod ({ETCD_POD_LABELS}) in {ETCD_NAMESPACE}")
    denied = []
    for pod in sorted(pods):
        for verb in ("get", "create"):
            answer = kube.review_access({"namespace": ETCD_NAMESPACE, "verb": verb, "group": "", "resource": "pods",
                                         "subresource": "exec", "name": pod})
            if not (answer.get("status") or {}).get("allowed"):
                denied.append(pod)
                break
    return ExecAccess(not denied, tuple(denied))
