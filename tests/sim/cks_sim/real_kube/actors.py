"""What the real backend's actors add to the shared ones (``world.py`` drives them): the spec's
workloads as an operator created them, and when they settled.

The kubelets (registration, VM power, boots and boot IDs, Leases, the kubelet's Events) are
``kube_nodes.Kubelets``, the pods on the nodes ``kube_pods.PodLifecycle`` and the control nodes'
mirror pods ``kube_control_plane.StaticPods``: the in-memory world's actors, over
``cluster_api.RestClusterApi`` (``drive.py``).
"""

from __future__ import annotations

from typing import Any, Optional

from .api import KubeApi


def workload_objects(workloads: list[dict[str, Any]], pdbs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(collection path, object) for each namespace, workload and budget of the spec, in creation order."""
    named = {w.get("namespace", "default") for w in workloads} | {p.get("namespace", "default") for p in pdbs}
    namespaces = sorted(named - {"default", "kube-system", "kube-public"})
    objects: list[tuple[str, dict[str, Any]]] = [
        ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}) for ns in namespaces]
    for spec in workloads:
        ns, name, kind = spec.get("namespace", "default"), spec["name"], spec["kind"]
        labels = {"app": name, **(spec.get("labels") or {})}
        template = {"metadata": {"labels": dict(labels)}, "spec": _pod_spec(spec, kind)}
        if kind == "Pod":
            body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels},
                    "spec": dict(template["spec"], **({"nodeName": spec["node"]} if spec.get("node") else {}))}
            objects.append((f"/api/v1/namespaces/{ns}/pods", body))
            continue
        body_spec: dict[str, Any] = {"selector": {"matchLabels": dict(labels)}, "template": template}
        if kind in ("Deployment", "StatefulSet"):
            body_spec["replicas"] = int(spec.get("replicas", 1))
        if kind == "StatefulSet":
            body_spec["serviceName"] = name
        plural = {"Deployment": "deployments", "StatefulSet": "statefulsets", "DaemonSet": "daemonsets"}[kind]
        objects.append((f"/apis/apps/v1/namespaces/{ns}/{plural}", {
            "apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": body_spec}))
    for spec in pdbs:
        ns = spec.get("namespace", "default")
        body_spec = {"selector": {"matchLabels": dict(spec.get("selector") or {})}}
        for key in ("minAvailable", "maxUnavailable", "unhealthyPodEvictionPolicy"):
            if spec.get(key) is not None:
                body_spec[key] = spec[key]
        objects.append((f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": spec["name"], "namespace": ns}, "spec": body_spec}))
    return objects


def _pod_spec(spec: dict[str, Any], kind: str) -> dict[str, Any]:
    name, ns = spec["name"], spec.get("namespace", "default")
    image = spec.get("image") or (f"registry.k8s.io/{name}:v1" if ns == "kube-system" else f"registry.example.com/{name}:1.0")
    container: dict[str, Any] = {"name": name, "image": image}
    pod: dict[str, Any] = {"containers": [container],
                           "terminationGracePeriodSeconds": int(spec.get("terminationGracePeriodSeconds", 30))}
    if spec.get("emptyDir"):
        pod["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        container["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    if kind == "DaemonSet":
        pod["tolerations"] = [{"operator": "Exists"}]  # node agents run on every node, control nodes too
    elif spec.get("tolerations"):
        pod["tolerations"] = list(spec["tolerations"])
    return pod


def settled(api: KubeApi, objects: list[tuple[str, dict[str, Any]]]) -> Optional[str]:
    """None once every workload is available and every budget has a status its controller wrote; else what
    is not yet."""
    for path, body in objects:
        kind, name = body["kind"], body["metadata"]["name"]
        if kind == "Namespace":
            continue
        current = api.get(f"{path}/{name}")
        status = current.get("status") or {}
        if kind in ("Deployment", "StatefulSet"):
            if int(status.get("readyReplicas") or 0) < int(current["spec"].get("replicas", 1)):
                return f"{kind} {name}: {status.get('readyReplicas', 0)} of {current['spec'].get('replicas')} ready"
        elif kind == "DaemonSet":
            wanted = status.get("desiredNumberScheduled")
            if not wanted or int(status.get("numberReady") or 0) < int(wanted):
                return f"DaemonSet {name}: {status.get('numberReady', 0)} of {wanted} ready"
        elif kind == "PodDisruptionBudget":
            if status.get("observedGeneration") != current["metadata"].get("generation"):
                return f"PodDisruptionBudget {name}: not yet processed by the disruption controller"
        elif kind == "Pod" and (status.get("phase") != "Running"):
            return f"Pod {name}: {status.get('phase')}"
    return None
