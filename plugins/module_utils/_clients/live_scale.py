# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The I/O of the live path: what CloudStack shows of a node's VM and offerings, and a short-lived
privileged pod on the node that runs commands in the node's own namespaces.

The pod: in ``kube-system``, pinned to the node (``nodeName``: no scheduler, so a cordon does not
keep it off), ``hostPID`` and a privileged container that only sleeps; each command is an exec of
``nsenter --target 1 --mount --uts --ipc --net --pid -- ...``, so it runs as the node's own init
would. It tolerates every taint (a node being scaled may carry any) and is deleted however the path
ends. What it needs (RBAC page): create, get and delete pods in kube-system, and create pods/exec;
a cluster that enforces the ``restricted`` or ``baseline`` Pod Security level in kube-system refuses
the pod, and the node takes the restart path.
"""

from __future__ import annotations

import secrets
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.pod_exec import PodExec
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, CloudStackError, KubernetesError
from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import CloudStackApi
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.scale_path import (
    GuestView,
    LiveFacts,
    OfferingFacts,
    cpu_count,
    memtotal_kib,
)

NAMESPACE = "kube-system"
POD_PREFIX = "cks-live-scale-"
LABELS = {"app.kubernetes.io/managed-by": "cloudstack.cks", "app.kubernetes.io/component": "live-scale"}
GONE_WAIT = 60.0  # seconds for the pod to be gone after its delete
NSENTER = ("nsenter", "--target", "1", "--mount", "--uts", "--ipc", "--net", "--pid", "--")
#: A transient timer restarts the kubelet after the exec returned: restarting it from inside the
#: exec would stop the kubelet that carries the exec's own stream before its exit status arrives.
#: The unit is named after the pod, so a second run on the node never meets a unit of the first.
RESTART_KUBELET = ("systemd-run", "--on-active=1", "--unit={pod}", "systemctl", "restart", "kubelet")


def _offering(raw: dict[str, Any], vm: Optional[dict[str, Any]] = None) -> OfferingFacts:
    custom = bool(raw.get("iscustomized"))
    source = vm if custom and vm is not None else raw
    return OfferingFacts(name=str(raw.get("name", raw.get("id"))), cpu=int(source.get("cpunumber") or 0),
                         memory_mb=int(source.get("memory") or 0), speed_mhz=int(source.get("cpuspeed") or 0),
                         custom=custom, dynamic_scaling=bool(raw.get("dynamicscalingenabled")))


def read_facts(cloud: CloudStackApi, vm_id: str, target_offering_id: str, scope: dict[str, Any],
               capabilities: Optional[dict[str, Any]] = None) -> Optional[LiveFacts]:
    """What decides the path, read from CloudStack; None when the VM or an offering cannot be read.

    ``capabilities``: listCapabilities' answer when the caller read it already (once per batch).
    """
    try:
        found = cloud.list("listVirtualMachines", id=vm_id, listall=True, **scope)
        if not found:
            return None
        vm = found[0]
        offerings = {}
        for offering_id in sorted({str(vm.get("serviceofferingid")), target_offering_id}):
            listed = cloud.list("listServiceOfferings", id=offering_id, listall=True)
            if not listed:
                return None
            offerings[offering_id] = listed[0]
        caps = capabilities if capabilities is not None else read_capabilities(cloud)
    except CksError:
        return None
    return LiveFacts(
        version=caps.get("cloudstackversion") if caps else None,
        zone_dynamic_scale=caps.get("dynamicscalingenabled") if caps and "dynamicscalingenabled" in caps else None,
        vm_dynamically_scalable=vm.get("isdynamicallyscalable") if "isdynamicallyscalable" in vm else None,
        hypervisor=vm.get("hypervisor"), vm_state=str(vm.get("state")),
        current=_offering(offerings[str(vm.get("serviceofferingid"))], vm),
        target=_offering(offerings[target_offering_id]))


def read_capabilities(cloud: CloudStackApi) -> dict[str, Any]:
    answer = cloud.call("listCapabilities") or {}
    caps = answer.get("capability") if isinstance(answer, dict) else None
    return dict(caps) if isinstance(caps, dict) else {}


def scale(cloud: CloudStackApi, vm_id: str, offering_id: str, deadline: Deadline, target: str) -> dict[str, Any]:
    """scaleVirtualMachine of the running VM; its job's answer (the VM). CloudStackError on a refusal."""
    answer = cloud.run_job("scaleVirtualMachine", deadline, target=target, id=vm_id, serviceofferingid=offering_id)
    vm = answer.get("virtualmachine", answer) if isinstance(answer, dict) else None
    if not isinstance(vm, dict) or not vm.get("id"):
        raise CloudStackError("scaleVirtualMachine", "the job answered no VM", target=target)
    return vm


class NodeShell:
    """The privileged pod on one node; a context manager that deletes it however the block ends."""

    def __init__(self, kube: Any, node: str, image: str, deadline: Deadline, interval: float) -> None:
        self.kube = kube
        self.node = node
        self.image = image
        self.deadline = deadline
        self.interval = interval
        self.name = f"{POD_PREFIX}{secrets.token_hex(4)}"
        self.left_behind: Optional[str] = None
        self._exec = PodExec(kube)

    def body(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": self.name, "namespace": NAMESPACE,
                         "labels": dict(LABELS, **{"cloudstack.apache.org/node": self.node[:63]})},
            "spec": {
                "nodeName": self.node, "hostPID": True, "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 0, "automountServiceAccountToken": False,
                "tolerations": [{"operator": "Exists"}],
                "containers": [{
                    "name": "shell", "image": self.image, "imagePullPolicy": "IfNotPresent",
                    # Ends by itself should the delete below never arrive.
                    "command": ["sleep", "600"],
                    "securityContext": {"privileged": True},
                }],
            },
        }

    def __enter__(self) -> NodeShell:
        self.kube.create_pod(NAMESPACE, self.body())
        try:
            self.kube.await_pod(NAMESPACE, self.name, _running, self.deadline, self.interval,
                                f"the live-scale pod {self.name} on {self.node} to run")
        except BaseException:
            self._delete()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self._delete()

    def _delete(self) -> None:
        """Delete the pod and see it gone: a pod left on the node would stop the restart path's drain
        (it declares no controller). Its kubelet may be restarting: then the kill waits for the new one."""
        try:
            self.kube.delete_pod(NAMESPACE, self.name)
            self.kube.await_pod(NAMESPACE, self.name, _gone, Deadline(min(GONE_WAIT, max(1.0, self.deadline.remaining()))),
                                self.interval, f"the live-scale pod {self.name} to be gone")
        except CksError:
            self.left_behind = self.name

    def run(self, *command: str) -> str:
        """stdout of ``command`` in the node's namespaces; CksError unless it exits 0."""
        result = self._exec.run(NAMESPACE, self.name, [*NSENTER, *command], container="shell",
                                timeout=max(1.0, min(30.0, self.deadline.remaining())))
        if result.exit_code != 0:
            raise KubernetesError(f"exec in {self.name}", f"`{' '.join(command)}` on {self.node} exited "
                                  f"{result.exit_code}: {(result.stderr or result.status_message).strip()[:200]}")
        return result.stdout

    def guest(self) -> GuestView:
        return GuestView(cpus=cpu_count(self.run("cat", "/sys/devices/system/cpu/online")),
                         possible_cpus=cpu_count(self.run("cat", "/sys/devices/system/cpu/possible")),
                         memory_kib=memtotal_kib(self.run("grep", "MemTotal", "/proc/meminfo")))

    def restart_kubelet(self) -> str:
        return self.run(*(part.format(pod=self.name) for part in RESTART_KUBELET)).strip()


#: Nodes probed at once before the lock: each probe is a pod to start; more at once only loads the API server.
PROBE_WORKERS = 8


def probe_guests(kube: Any, nodes: Iterable[str], image: str, seconds: float,
                 interval: float) -> dict[str, tuple[Optional[GuestView], Optional[str], Optional[str]]]:
    """Each node's guest as the pod on it reads it (read only: the vCPUs online and possible,
    MemTotal), the pod deleted however it ends: node -> (what it read, or None; why not; the pod
    left behind when it could not be seen deleted - it ends by itself after its sleep)."""
    names = list(dict.fromkeys(nodes))

    def probe(node: str) -> tuple[Optional[GuestView], Optional[str], Optional[str]]:
        shell = NodeShell(kube, node, image, Deadline(seconds), interval)
        try:
            with shell:
                guest = shell.guest()
            return guest, None, shell.left_behind
        except CksError as exc:
            return None, f"the pod on the node failed: {exc.msg}", shell.left_behind

    if not names:
        return {}
    with ThreadPoolExecutor(max_workers=min(PROBE_WORKERS, len(names))) as pool:
        return dict(zip(names, pool.map(probe, names), strict=True))


def _gone(pod: Optional[dict[str, Any]]) -> Optional[str]:
    return "gone" if pod is None else None


def _running(pod: Optional[dict[str, Any]]) -> Optional[str]:
    if pod is None:
        raise KubernetesError("live-scale pod", "the pod is gone")
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Failed", "Succeeded"):
        raise KubernetesError("live-scale pod", f"the pod ended ({phase}) before it ran")
    return "running" if phase == "Running" else None
