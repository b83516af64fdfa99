"""Resource requests in cks-sim's Kubernetes: what a pod asks for, what a node has left, and the
scheduler's NodeResourcesFit filter over them; and the removal of a node whose VM CKS deleted.

A workload of the spec asks for resources with ``requests: {cpu: "500m", memory: "512Mi"}``; a
pod without requests fits anywhere (BestEffort), as before. Functions over a ``KubeWorld`` (its
lock held), used by the scheduler (kube_pods) and the cluster autoscaler (autoscaler.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .kube_resources import NODE_LEASE_NS

if TYPE_CHECKING:  # core imports this module, and kube_store (through kube_watch) imports core
    from .kube_store import ObjectStore, PodIndex

_SUFFIXES = {"Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3, "Ti": 1024 ** 4,
             "k": 1000, "M": 1000 ** 2, "G": 1000 ** 3, "T": 1000 ** 4}


def cpu_millis(value: Any) -> int:
    """A CPU quantity ("2", "500m", 0.5) in millicores."""
    text = str(value).strip()
    if text.endswith("m"):
        return int(float(text[:-1]))
    return int(round(float(text) * 1000))


def memory_bytes(value: Any) -> int:
    """A memory quantity ("512Mi", "1G", "4194304Ki", 1024) in bytes."""
    text = str(value).strip()
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if text.endswith(suffix):
            return int(float(text[:-len(suffix)]) * _SUFFIXES[suffix])
    return int(float(text))


def pod_requests(pod: dict[str, Any]) -> tuple[int, int]:
    """(millicores, bytes) the pod's containers request (what the scheduler counts)."""
    cpu = memory = 0
    for container in pod["spec"].get("containers") or []:
        requests = (container.get("resources") or {}).get("requests") or {}
        if "cpu" in requests:
            cpu += cpu_millis(requests["cpu"])
        if "memory" in requests:
            memory += memory_bytes(requests["memory"])
    return cpu, memory


def node_allocatable(node: dict[str, Any]) -> tuple[int, int]:
    allocatable = node["status"].get("allocatable") or {}
    return cpu_millis(allocatable.get("cpu", "0")), memory_bytes(allocatable.get("memory", "0"))


def counted(pod: dict[str, Any]) -> bool:
    """A pod whose requests hold the node's resources: bound, not finished."""
    return pod["status"].get("phase") not in ("Succeeded", "Failed")


def node_requested(pod_index: PodIndex, node: str, without: Any = ()) -> tuple[int, int]:
    """(millicores, bytes) requested on ``node`` by its pods (a terminating pod still holds them,
    as the scheduler's cache keeps it until it is gone), ``without`` the pods of those uids."""
    cpu = memory = 0
    for pod in pod_index.pods_on(node):
        if counted(pod) and pod["metadata"]["uid"] not in without:
            c, m = pod_requests(pod)
            cpu, memory = cpu + c, memory + m
    return cpu, memory


def fits(store: ObjectStore, pod_index: PodIndex, pod: dict[str, Any], node: str, extra: tuple[int, int] = (0, 0)) -> bool:
    """NodeResourcesFit: the pod's requests within what the node's allocatable leaves, ``extra``
    counted as already placed there."""
    want_cpu, want_memory = pod_requests(pod)
    if not want_cpu and not want_memory:
        return True
    cap_cpu, cap_memory = node_allocatable(store.node(node))
    used_cpu, used_memory = node_requested(pod_index, node)
    return (used_cpu + extra[0] + want_cpu <= cap_cpu) and (used_memory + extra[1] + want_memory <= cap_memory)


def insufficient(store: ObjectStore, pod_index: PodIndex, pod: dict[str, Any], nodes: list[str]) -> str:
    """The scheduler's words for nodes that passed every filter but the resources: "Insufficient cpu"."""
    want_cpu, want_memory = pod_requests(pod)
    short = set()
    for node in nodes:
        cap_cpu, cap_memory = node_allocatable(store.node(node))
        used_cpu, used_memory = node_requested(pod_index, node)
        if used_cpu + want_cpu > cap_cpu:
            short.add("cpu")
        if used_memory + want_memory > cap_memory:
            short.add("memory")
    return ", ".join(f"{len(nodes)} Insufficient {what}" for what in sorted(short))


def remove_node(world: Any, name: str) -> None:
    """``kubectl delete node`` as CKS runs it for a removed VM: the Node and its Lease go, and the
    pod garbage collector force-deletes the pods still bound to it (their controllers replace them)."""
    for pod in list(world.pods.on_node(name)):
        world.pods.remove((pod["metadata"]["namespace"], pod["metadata"]["name"]), pod["metadata"]["uid"])
    world.store.remove("nodes", ("", name))
    world.store.remove("leases", (NODE_LEASE_NS, name))
    world.nodes.pop(name, None)
    world.sim.timeline.add(cluster=world.cluster_id, node=name, event="node_deleted")
    world.controllers.after_change()
