# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""External etcd asked through the Kubernetes API: a short-lived pod of ``etcdctl`` on a control node.

CKS 4.22 runs external etcd as a systemd unit on its own VMs, on plain HTTP
(``http://<etcd node>:2379``, no client certificates), reachable only on the cluster's network;
no pod runs there to exec into. A control node reaches the members as its API server does, and
holds the etcd image already (CKS imports every image of the binaries ISO on each node; the
node's ``status.images`` names it). So the check creates, in kube-system, a pod pinned to a
control node that stays up (``nodeName``: no scheduler, so the control-plane taint needs only the
toleration the kubelet does not even check), on the host network, with that image and
``imagePullPolicy: Never`` (no registry is needed, and a missing image fails at once instead of
pulling), ``restartPolicy: Never``, and one container per question, each a single ``etcdctl``
command (the etcd image is distroless): ``member list``, ``endpoint health --cluster`` and
``endpoint status --cluster``, ``-w json``, with dial and command timeouts. The answers are each
container's log and exit code; the pod is deleted whatever happened. The endpoints are the
``--etcd-servers`` of the node's ``kube-apiserver`` static pod, the URLs the API server itself uses.

The answers become the same ``Member`` records as ``EtcdClient`` and ``EtcdExecClient`` make, judged
by ``_decisions.quorum.quorum_verdict``. Nothing is cached: each check runs a new pod.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd import QuorumClient, client_from_options
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd_exec import judge_member, statuses_by_endpoint
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd_exec import quorum_client as stacked_quorum_client
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, EtcdError, InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.etcd_paths import PodAccess
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.quorum import (
    Member,
    QuorumVerdict,
    parse_members,
    quorum_verdict,
    shorten,
)

DEFAULT_TIMEOUT = 5.0
NAMESPACE = "kube-system"
POD_PREFIX = "cks-etcd-check-"
CONTROL_LABEL = "node-role.kubernetes.io/control-plane"
LABELS = {"app.kubernetes.io/managed-by": "cloudstack.cks", "app.kubernetes.io/component": "etcd-check"}
QUESTIONS = (("member-list", ("member", "list")), ("endpoint-health", ("endpoint", "health", "--cluster")),
             ("endpoint-status", ("endpoint", "status", "--cluster")))
# Waiting reasons after which a container never runs: no point waiting for the deadline.
STUCK = frozenset({"ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName",
                   "CreateContainerConfigError", "CreateContainerError"})
# etcdctl's exit code when `endpoint health` found a member unhealthy (its JSON is still printed).
_UNHEALTHY_CLUSTER = 1


def _ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def etcd_image(node: dict[str, Any]) -> Optional[str]:
    """The tagged name of the etcd image the node holds (``status.images``), None without one."""
    for image in (node.get("status") or {}).get("images") or []:
        for name in image.get("names") or []:
            repo, _sep, tag = str(name).rpartition(":")
            if "@" not in name and repo.rsplit("/", 1)[-1] == "etcd" and tag:
                return str(name)
    return None


def etcd_servers(apiserver_pod: Optional[dict[str, Any]]) -> list[str]:
    """The ``--etcd-servers`` URLs of a kube-apiserver pod (command or args), [] without the flag."""
    for container in ((apiserver_pod or {}).get("spec") or {}).get("containers") or []:
        for arg in list(container.get("command") or []) + list(container.get("args") or []):
            if str(arg).startswith("--etcd-servers="):
                return [u for u in str(arg).split("=", 1)[1].split(",") if u]
    return []


def answer_in_log(question: str, log: str) -> Any:
    """etcdctl's JSON answer in a container log, None without one.

    A container's log is its stdout and stderr together, so etcdctl's own warnings (zap's JSON
    lines, "Error: unhealthy cluster") sit beside the answer: the answer is the line of the shape
    the question gives, a list for ``endpoint health``/``status``, an object with a header for
    ``member list``.
    """
    for line in reversed(log.splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if question == "member-list" and isinstance(data, dict) and "header" in data:
            return data
        if question != "member-list" and isinstance(data, list):
            return data
    return None


@dataclass(frozen=True)
class CheckPod:
    """What a check pod needs: the node it runs on, the image there, and the endpoints."""

    node: str
    image: str
    endpoints: tuple[str, ...]

    def body(self, timeout: float) -> dict[str, Any]:
        seconds = f"{timeout:g}s"
        containers = [{
            "name": name, "image": self.image, "imagePullPolicy": "Never", "command": ["etcdctl"],
            "args": [f"--endpoints={','.join(self.endpoints)}", f"--dial-timeout={seconds}",
                     f"--command-timeout={seconds}", *args, "-w", "json"],
        } for name, args in QUESTIONS]
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": POD_PREFIX, "namespace": NAMESPACE, "labels": dict(LABELS)},
            "spec": {"nodeName": self.node, "hostNetwork": True, "restartPolicy": "Never",
                     "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 0,
                     "activeDeadlineSeconds": int(4 * timeout + 30),
                     "tolerations": [{"key": CONTROL_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": containers},
        }


def _container_states(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(cs.get("name")): cs.get("state") or {} for cs in (pod.get("status") or {}).get("containerStatuses") or []}


def _outcome(pod: Optional[dict[str, Any]]) -> Optional[str]:
    """"ended", or why the pod never will ("gone", a stuck container's reason); None while it runs."""
    if pod is None:
        return "gone"
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return "ended" if _container_states(pod) or not status.get("reason") else f"{status['reason']}: {status.get('message', '')}"
    for name, state in _container_states(pod).items():
        reason = str((state.get("waiting") or {}).get("reason") or "")
        if reason in STUCK:
            return f"container {name} {reason}: {(state.get('waiting') or {}).get('message', '')}".rstrip(": ")
    return None


class EtcdPodClient:
    """The quorum client for external etcd nodes: the same ``check`` as ``EtcdClient``.

    ``kube``: a KubeClient; ``timeout``: etcdctl's dial and command timeout, in seconds.
    """

    def __init__(self, kube: Any, timeout: float = DEFAULT_TIMEOUT, interval: float = 0.5) -> None:
        if timeout <= 0:
            raise InvalidInput("etcd_timeout", timeout, "must be more than 0 seconds")
        self.kube = kube
        self.timeout = float(timeout)
        self.interval = interval
        #: The pods this client created and could not delete (none, unless a delete failed).
        self.left_behind: list[str] = []

    # --- where the pod runs ---

    def control_nodes(self, avoid: Sequence[str] = ()) -> list[dict[str, Any]]:
        """Control nodes that may run the check, Ready ones first; not those going down."""
        going = {name.lower() for name in avoid}
        nodes = [n for n in self.kube.list_nodes()
                 if CONTROL_LABEL in ((n.get("metadata") or {}).get("labels") or {})
                 and str((n.get("metadata") or {}).get("name")).lower() not in going]
        return sorted(nodes, key=lambda n: (not _ready(n), str((n.get("metadata") or {}).get("name"))))

    def plan(self, node: dict[str, Any]) -> CheckPod:
        name = str((node.get("metadata") or {}).get("name"))
        image = etcd_image(node)
        if image is None:
            raise EtcdError(f"{name}: no etcd image in the node's status.images to run etcdctl with")
        apiserver = self.kube.read_pod(NAMESPACE, f"kube-apiserver-{name}")
        endpoints = etcd_servers(apiserver)
        if not endpoints:
            raise EtcdError(f"{name}: kube-apiserver-{name} in {NAMESPACE} "
                            f"{'is missing' if apiserver is None else 'has no --etcd-servers'}: nowhere to find etcd")
        return CheckPod(node=name, image=image, endpoints=tuple(endpoints))

    def where(self, avoid: Sequence[str] = ()) -> str:
        """The control node the next check would run on (for the plan); raises EtcdError without one."""
        reasons = []
        for node in self.control_nodes(avoid):
            try:
                return self.plan(node).node
            except EtcdError as exc:
                reasons.append(exc.msg)
        raise EtcdError("no control node can run the etcd check pod" + (f": {'; '.join(reasons)}" if reasons else ""))

    # --- one pod ---

    def run(self, check: CheckPod) -> dict[str, tuple[int, str]]:
        """Each question's (exit code, log); the pod is deleted whatever happens."""
        created = self.kube.create_pod(NAMESPACE, check.body(self.timeout))
        name = str((created.get("metadata") or {}).get("name"))
        try:
            deadline = Deadline(4 * self.timeout + 30)
            outcome = self.kube.await_pod(NAMESPACE, name, _outcome, deadline, self.interval,
                                          f"the etcd check pod {name} on {check.node} to end")
            if outcome != "ended":
                raise EtcdError(f"{name} on {check.node} did not run: {outcome}")
            pod = self.kube.read_pod(NAMESPACE, name) or {}
            states = _container_states(pod)
            answers = {}
            for container, _args in QUESTIONS:
                terminated = (states.get(container) or {}).get("terminated")
                if not terminated:
                    raise EtcdError(f"{name} on {check.node}: container {container} did not run")
                answers[container] = (int(terminated.get("exitCode", -1)),
                                      self.kube.read_pod_log(NAMESPACE, name, container))
            return answers
        finally:
            self._delete(name)

    def _delete(self, name: str) -> None:
        try:
            self.kube.delete_pod(NAMESPACE, name)
        except CksError:
            # The check's own answer (or error) matters more; the pod is named for the operator.
            self.left_behind.append(name)

    # --- the answers ---

    @staticmethod
    def _json(question: str, answer: tuple[int, str], where: str) -> Any:
        code, log = answer
        accepted = (0, _UNHEALTHY_CLUSTER) if question == "endpoint-health" else (0,)
        data = answer_in_log(question, log)
        if code not in accepted or data is None:
            raise EtcdError(f"{where}: etcdctl {question.replace('-', ' ')} exited {code}: {shorten(log.strip() or 'no output')}")
        return data

    def _ask(self, check: CheckPod) -> list[Member]:
        answers = self.run(check)
        where = f"etcdctl on {check.node}"
        listing = self._json("member-list", answers["member-list"], where)
        if not isinstance(listing, dict):
            raise EtcdError(f"{where}: etcdctl member list answered no JSON object: {shorten(listing)}")
        health = self._json("endpoint-health", answers["endpoint-health"], where)
        try:
            status = statuses_by_endpoint(self._json("endpoint-status", answers["endpoint-status"], where))
        except EtcdError:
            status = {}  # endpoint status exits non-zero when one member is down: health tells which
        return [judge_member(m, health, status) for m in parse_members(listing)]

    def members(self, avoid: Sequence[str] = ()) -> tuple[list[Member], str]:
        """The probed members and the control node whose pod answered; raises EtcdError when none did."""
        nodes = self.control_nodes(avoid)
        if not nodes:
            raise EtcdError(f"no control node ({CONTROL_LABEL}) to run the etcd check pod on")
        reasons = []
        for node in nodes:
            try:
                check = self.plan(node)
                return self._ask(check), check.node
            except CksError as exc:
                reasons.append(exc.msg)
        raise EtcdError("no etcd check pod could ask etcd through the Kubernetes API: " + "; ".join(reasons))

    def check(self, going_down: Sequence[str] = (), require_ready: bool = True,
              addresses: Optional[Mapping[str, Optional[str]]] = None) -> QuorumVerdict:
        # Etcd nodes going down are no control nodes; a control node named there is passed over.
        members, node = self.members(avoid=going_down)
        voters = [m for m in members if not m.learner]
        ready: Optional[bool] = any(m.healthy for m in voters) if require_ready else None
        reason = "" if ready else "no voting member answered a quorum read"
        verdict = quorum_verdict(members, going_down, ready=ready, ready_reason=reason, require_ready=require_ready,
                                 addresses=addresses)
        left = f"; pod(s) not deleted: {', '.join(self.left_behind)}" if self.left_behind else ""
        return replace(verdict, message=f"{verdict.message} (etcdctl in a pod on {node}{left})")


def pod_access(kube: Any) -> PodAccess:
    """May this identity run the check pod? Asked of the API server (SelfSubjectAccessReview):
    pods create and delete, and pods/log get, in kube-system (the pod's name is generated)."""
    denied = []
    for verb, subresource in (("create", ""), ("delete", ""), ("get", "log")):
        attributes = {"namespace": NAMESPACE, "verb": verb, "group": "", "resource": "pods"}
        if subresource:
            attributes["subresource"] = subresource
        answer = kube.review_access(attributes)
        if not (answer.get("status") or {}).get("allowed"):
            denied.append(f"{verb} pods/{subresource}" if subresource else f"{verb} pods")
    node = ""
    if not denied:
        try:
            node = EtcdPodClient(kube).where()
        except EtcdError as exc:
            return PodAccess(False, (), exc.msg)
    return PodAccess(not denied, tuple(denied), node=node)


def quorum_client(params: Any, kube: Any = None, external_etcd: bool = False) -> Optional[QuorumClient]:
    """The quorum client the options and the cluster choose: the explicit ``etcd_endpoints`` (with
    their certificates) when given; else, through ``kube``, the check pod for external etcd or
    etcdctl in the etcd pods for stacked etcd; None without either."""
    if external_etcd and kube is not None and client_from_options(params) is None:
        return EtcdPodClient(kube, timeout=float(params.get("etcd_timeout") or DEFAULT_TIMEOUT))
    return stacked_quorum_client(params, kube)
