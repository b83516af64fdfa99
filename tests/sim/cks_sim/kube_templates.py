"""The pod spec a workload's controller writes from the spec's workload (and kubeadm, for a static
pod, before its own changes): a pure function, shared by the controllers and the static pods.
"""

from __future__ import annotations

from typing import Any

from .kube_hidden import Workload
from .kube_resources import NOT_READY_TAINT, UNREACHABLE_TAINT, UNSCHEDULABLE_TAINT


def pod_spec(wl: Workload, version: str) -> dict[str, Any]:
    """The pod spec a workload's controller (or kubeadm, for a static pod) writes."""
    image = wl.extra.get("image") or (
        f"registry.k8s.io/{wl.name}:v{version}" if wl.namespace == "kube-system"
        else f"registry.example.com/{wl.name}:1.0")
    container: dict[str, Any] = {
        "name": wl.name, "image": image, "imagePullPolicy": "IfNotPresent", "resources": {},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
    }
    spec: dict[str, Any] = {
        "containers": [container], "dnsPolicy": "ClusterFirst", "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority", "priority": 0, "restartPolicy": "Always",
        "schedulerName": "default-scheduler", "securityContext": {},
        "serviceAccount": "default", "serviceAccountName": "default",
        "terminationGracePeriodSeconds": wl.grace_seconds,
    }
    if wl.extra.get("requests"):
        container["resources"] = {"requests": {k: str(v) for k, v in dict(wl.extra["requests"]).items()}}
    if wl.empty_dir:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        container["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    if wl.kind == "DaemonSet":
        # What the DaemonSet controller adds, plus the blanket toleration node agents carry.
        spec["tolerations"] = [{"operator": "Exists"}] + [
            {"key": key, "operator": "Exists", "effect": effect} for key, effect in (
                (NOT_READY_TAINT, "NoExecute"), (UNREACHABLE_TAINT, "NoExecute"),
                ("node.kubernetes.io/disk-pressure", "NoSchedule"),
                ("node.kubernetes.io/memory-pressure", "NoSchedule"),
                ("node.kubernetes.io/pid-pressure", "NoSchedule"),
                (UNSCHEDULABLE_TAINT, "NoSchedule"))]
    else:
        spec["tolerations"] = list(wl.extra.get("tolerations") or []) + [
            {"key": NOT_READY_TAINT, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": UNREACHABLE_TAINT, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ]
    return spec
