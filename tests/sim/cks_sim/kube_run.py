"""Pods created through the API, and the kubelet that runs their containers.

What the API server does with ``POST /api/v1/namespaces/{ns}/pods`` (Kubernetes 1.30):

- ``pkg/apis/core/validation.ValidatePodCreate``: at least one container, each with a name and an
  image, names unique, ``restartPolicy`` one of Always/OnFailure/Never; a 422 Invalid naming the
  fields otherwise. It does NOT check ``nodeName`` (no such node is no error), ``hostNetwork`` or
  tolerations against the node's taints: with ``nodeName`` set the scheduler is bypassed and the
  kubelet of that node admits the pod (or nobody does: it stays Pending).
- Defaults (``pkg/apis/core/v1/defaults.go``): restartPolicy Always, imagePullPolicy Always for a
  ``:latest`` or untagged image else IfNotPresent, terminationGracePeriodSeconds 30, dnsPolicy
  ClusterFirst, schedulerName default-scheduler.

What the kubelet then does (``pkg/kubelet``):

- Admission (``lifecycle/predicate.go``, ``GeneralPredicates`` plus the NoExecute taint check,
  "Kubelet is only interested in the NoExecute taint"): an untolerated NoExecute taint rejects
  the pod, phase Failed, reason Taint, message "Pod was rejected: Predicate Taint failed".
- Images (``images/image_manager.go``, ``EnsureImageExists``): pull policy Never and an image
  the node does not hold is ErrImageNeverPull, "Container image \\"X\\" is not present with pull
  policy of Never"; the container waits and the pod stays Pending. Other policies pull (the sim
  has every image a registry would).
- A container whose command is `sleep` (in any image but the distroless etcd one) runs until its
  pod is deleted. Containers of an etcd image run the REAL ``etcdctl`` (Debian's etcd-client) with the
  container's command and args, against the real members; anything else is the runtime's
  StartError (exit 128), as in the distroless etcd image. Each container ends terminated with its
  exit code; the pod Succeeded when every one exited 0, Failed otherwise (restartPolicy Never).
- Logs (``kubelet_pods.go``, ``validateContainerLogStatus``): a container that has not run is a
  400 "container \\"c\\" in pod \\"p\\" is waiting to start: <reason>"; the API server checks the
  container name first (``pkg/registry/core/pod/strategy.go``, ``validateContainer``) and dials
  the kubelet last: a node that is down gives the dial error.
"""

from __future__ import annotations

import copy
import hashlib
import subprocess
import threading
from typing import Any, Callable, Optional

from .tools import default_binary

# The same binary kube_exec runs (not imported from it: kube.py imports this module first).
ETCDCTL_BINARY = default_binary("etcdctl")
# What the CKS binaries ISO holds (`kubeadm config images list` for the version, saved by
# scripts/util/create-kubernetes-binaries-iso.sh) and setup-kube-system imports on every node.
ETCD_IMAGE = "registry.k8s.io/etcd:3.5.15-0"
RESTART_POLICIES = ("Always", "OnFailure", "Never")
RUN_TIMEOUT = 120.0  # real seconds; etcdctl's own timeouts are far shorter


def node_images(version: str) -> list[dict[str, Any]]:
    """``status.images`` as the kubelet reports them: every name of an image, and its size."""
    images = [f"registry.k8s.io/kube-apiserver:v{version}", f"registry.k8s.io/kube-controller-manager:v{version}",
              f"registry.k8s.io/kube-scheduler:v{version}", f"registry.k8s.io/kube-proxy:v{version}",
              "registry.k8s.io/coredns/coredns:v1.11.1", "registry.k8s.io/pause:3.9", ETCD_IMAGE]
    out = []
    for image in images:
        digest = hashlib.sha256(image.encode()).hexdigest()
        repo = image.rsplit(":", 1)[0]
        out.append({"names": [f"{repo}@sha256:{digest}", image], "sizeBytes": 10_000_000 + int(digest[:6], 16)})
    return out


def is_etcd_image(image: str) -> bool:
    repo = image.split("@", 1)[0].rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image.split("@", 1)[0]
    return repo.rsplit("/", 1)[-1] == "etcd"


# ---------------------------------------------------------------------------------------------
# The API server: validation and defaults


def validation_causes(pod: dict[str, Any]) -> list[tuple[str, str, str]]:
    """ValidatePodCreate's errors, for the fields that matter here: (field, reason, detail)."""
    required = ("FieldValueRequired", "Required value")
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return [("spec.containers", *required)]
    causes: list[tuple[str, str, str]] = []
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        causes.append(("spec.containers", *required))
        containers = []
    seen: set[str] = set()
    for i, container in enumerate(containers):
        container = container if isinstance(container, dict) else {}
        name = container.get("name")
        if not name:
            causes.append((f"spec.containers[{i}].name", *required))
        elif name in seen:
            causes.append((f"spec.containers[{i}].name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
        seen.add(str(name))
        if not container.get("image"):
            causes.append((f"spec.containers[{i}].image", *required))
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in RESTART_POLICIES:
        causes.append(("spec.restartPolicy", "FieldValueNotSupported",
                       f'Unsupported value: "{policy}": supported values: "Always", "OnFailure", "Never"'))
    return causes


def invalid_message(name: str, causes: list[tuple[str, str, str]]) -> str:
    # field.ErrorList.ToAggregate: one error bare, several in brackets, comma separated.
    errors = [f"{f}: {detail}" for f, _reason, detail in causes]
    text = errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"
    return f'Pod "{name}" is invalid: {text}'


def apply_defaults(pod: dict[str, Any]) -> None:
    spec = pod["spec"]
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    for container in spec["containers"]:
        image = str(container["image"])
        tag = image.rsplit("/", 1)[-1]
        latest = "@" not in image and (":" not in tag or tag.endswith(":latest"))
        container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
    pod["status"] = {"phase": "Pending", "qosClass": "BestEffort"}


# ---------------------------------------------------------------------------------------------
# The kubelet: admission, images, the run


def _tolerates(toleration: dict[str, Any], taint: dict[str, Any]) -> bool:
    # v1.Toleration.ToleratesTaint: an empty effect matches all, Exists matches any value.
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("key") and toleration.get("key") != taint.get("key"):
        return False
    if not toleration.get("key") and toleration.get("operator") != "Exists":
        return False
    if toleration.get("operator") == "Exists":
        return True
    return str(toleration.get("value") or "") == str(taint.get("value") or "")


def admission_refusal(pod: dict[str, Any], node: dict[str, Any]) -> Optional[tuple[str, str]]:
    """(reason, message) of the kubelet's rejection, None when it admits the pod."""
    tolerations = pod["spec"].get("tolerations") or []
    for taint in node["spec"].get("taints") or []:
        if taint.get("effect") == "NoExecute" and not any(_tolerates(t, taint) for t in tolerations):
            return "Taint", "Pod was rejected: Predicate Taint failed"
    return None


def image_refusal(container: dict[str, Any], node: dict[str, Any]) -> Optional[tuple[str, str]]:
    """(reason, message) of a container whose image cannot be had, None when it can."""
    if container.get("imagePullPolicy") != "Never":
        return None
    present = {name for image in node["status"].get("images") or [] for name in image.get("names") or []}
    if container["image"] in present:
        return None
    return "ErrImageNeverPull", f'Container image "{container["image"]}" is not present with pull policy of Never'


def _argv(container: dict[str, Any]) -> tuple[Optional[list[str]], str]:
    """The process an etcd image's container runs, or the runtime's StartError text."""
    command = list(container.get("command") or []) + list(container.get("args") or [])
    binary = command[0] if command else "/usr/local/bin/etcd"
    if is_etcd_image(str(container.get("image"))) and binary.rsplit("/", 1)[-1] == "etcdctl":
        return [ETCDCTL_BINARY, *command[1:]], ""
    return None, (f"failed to create containerd task: failed to create shim task: OCI runtime create failed: "
                  f"runc create failed: unable to start container process: exec: \"{binary}\": "
                  f"executable file not found in $PATH: unknown")


def keeps_running(container: dict[str, Any]) -> bool:
    """A ``sleep`` in an image that has one (not the distroless etcd image): the sim lets it run until
    its pod is deleted, whatever the duration it was given."""
    command = list(container.get("command") or []) + list(container.get("args") or [])
    return bool(command) and command[0].rsplit("/", 1)[-1] == "sleep" and not is_etcd_image(str(container.get("image")))


def run_container(container: dict[str, Any]) -> tuple[int, str, str]:
    """(exit code, log, start error); the log is stdout and stderr interleaved as the runtime keeps them."""
    argv, error = _argv(container)
    if argv is None:
        return 128, "", error
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "ETCDCTL_API": "3"}
    for item in container.get("env") or []:
        if isinstance(item, dict) and item.get("name"):
            env[str(item["name"])] = str(item.get("value") or "")
    try:
        done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT, check=False)
    except subprocess.TimeoutExpired as exc:
        return 137, (exc.stdout or b"").decode(errors="replace"), ""
    except OSError as exc:
        return 128, "", f"failed to create containerd task: {exc.strerror}"
    return done.returncode, done.stdout.decode(errors="replace"), ""


def waiting_status(container: dict[str, Any], reason: str, message: Optional[str] = None) -> dict[str, Any]:
    waiting: dict[str, Any] = {"reason": reason}
    if message:
        waiting["message"] = message
    return {"name": container["name"], "image": container["image"], "imageID": "", "ready": False,
            "restartCount": 0, "started": False, "state": {"waiting": waiting}}


def terminated_status(container: dict[str, Any], code: int, started: str, finished: str,
                      error: str) -> dict[str, Any]:
    terminated: dict[str, Any] = {"exitCode": code, "reason": "Completed" if code == 0 else (
        "StartError" if error else "Error"), "startedAt": started, "finishedAt": finished,
        "containerID": f"containerd://{hashlib.sha256((container['name'] + started).encode()).hexdigest()}"}
    if error:
        terminated["message"] = error
    image = str(container["image"])
    return {"name": container["name"], "image": image, "ready": False, "restartCount": 0, "started": False,
            "imageID": image.rsplit(":", 1)[0] + "@sha256:" + hashlib.sha256(image.encode()).hexdigest(),
            "containerID": terminated["containerID"], "state": {"terminated": terminated}}


class PodRuns:
    """The logs of the containers that ran, per pod UID, and the threads that run them.

    The processes run outside the sim's lock (etcdctl takes up to its timeouts); ``finish`` is
    called under it with the results.
    """

    def __init__(self, lock: threading.RLock) -> None:
        self.lock = lock
        self.logs: dict[str, dict[str, str]] = {}

    def start(self, uid: str, containers: list[dict[str, Any]],
              finish: Callable[[list[tuple[int, str]]], None], now: Callable[[], str]) -> None:
        wanted = copy.deepcopy(containers)

        def work() -> None:
            results: list[tuple[int, str]] = []
            logs: dict[str, str] = {}
            for container in wanted:
                started = now()
                code, log, error = run_container(container)
                logs[container["name"]] = log
                results.append((code, error))
                container["_started"], container["_finished"] = started, now()
            with self.lock:
                self.logs[uid] = logs
                finish(list(results))

        threading.Thread(target=work, name=f"kubelet-run-{uid[:8]}", daemon=True).start()

    def forget(self, uid: str) -> None:
        self.logs.pop(uid, None)
