# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Cluster health as the preflight, the release and the validation between batches judge it."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.order import worker_batch_size
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.quorum import can_lose_a_node
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import (
    CONTROL,
    ETCD,
    NO_BOOT_ID,
    STOP_ANNOTATION,
    WORKER,
    ClusterView,
    Node,
    node_names,
    not_ready_why,
)


def not_ready(node: Node) -> str:
    """A node not Ready, with what makes it so: kubectl may show it Ready while a taint says otherwise."""
    return f"Kubernetes node not Ready ({node.not_ready_why})" if node.not_ready_why else "Kubernetes node not Ready"


def preflight_problems(view: ClusterView, batch: Sequence[str],
                       max_unavailable: Optional[int] = None) -> list[str]:
    """What stops ``batch`` from going down now, from the view alone; empty when it may.

    Every other VM Running and every other Kubernetes node Ready; control and etcd nodes one
    at a time and only in a type that can lose one; with external etcd, another control node
    Running and Ready to serve the API. etcd's own health is checked by the etcd module.
    """
    problems: list[str] = []
    names = {b.lower() for b in batch}
    members: list[Node] = []
    for name in sorted(names):
        node = view.find_node(name)
        if node is None:
            problems.append(f"{name}: not a node of cluster {view.name}")
        else:
            members.append(node)
    types = {n.node_type for n in members}
    if len(types) > 1:
        problems.append(f"batch {', '.join(sorted(names))} mixes node types {', '.join(sorted(types))}")
    for t in (CONTROL, ETCD):
        of_type = [n for n in members if n.node_type == t]
        if len(of_type) > 1:
            problems.append(f"{t} nodes go one at a time, not {node_names(of_type)} together")
    workers = [n for n in members if n.node_type == WORKER]
    if max_unavailable is not None and workers:
        allowed = worker_batch_size(max_unavailable, len(view.nodes_of(WORKER)))
        if len(workers) > allowed:
            problems.append(f"{len(workers)} workers at once ({node_names(workers)}); at most {allowed}")
    for node in members:
        if node.node_type in (CONTROL, ETCD) and node.running:
            ok, why = can_lose_a_node(node.node_type, view)
            if not ok:
                problems.append(f"{node.name}: {why}")

    # A batch whose nodes are all down already takes nothing more down: the health of the others
    # does not decide it (another stopped node must not block bringing this one back).
    bringing_back = bool(members) and not any(n.running for n in members)
    for node in view.nodes:
        if node.name in names or bringing_back:
            continue
        if not node.running:
            problems.append(f"{node.name}: VM is {node.vm_state}")
        elif node.is_kubernetes_node and not node.k8s_present:
            problems.append(f"{node.name}: no Kubernetes node of this name")
        elif node.is_kubernetes_node and not node.ready:
            problems.append(f"{node.name}: {not_ready(node)}")
    for name, ready in sorted(view.unmatched_k8s_nodes.items()):
        if not ready:
            problems.append(f"{name}: Kubernetes node not Ready (no VM of the cluster has this name)")

    if view.external_etcd and any(n.node_type == CONTROL for n in members):
        serving = [n for n in view.nodes_of(CONTROL) if n.name not in names and n.running and n.ready]
        if not serving:
            problems.append(f"no other control node would serve the Kubernetes API while "
                            f"{node_names(n for n in members if n.node_type == CONTROL)} is down")
    return problems


def batch_is_safe(view: ClusterView, batch: Sequence[str],
                  max_unavailable: Optional[int] = None) -> tuple[bool, list[str]]:
    problems = preflight_problems(view, batch, max_unavailable)
    return not problems, problems


def capacity(view: ClusterView) -> tuple[int, int]:
    """CPU cores and memory (MB) of the cluster, counted from the VMs' actual offerings."""
    return sum(n.cpu for n in view.nodes), sum(n.memory_mb for n in view.nodes)


def health_problems(view: ClusterView) -> list[str]:
    """Why the cluster is not healthy (every VM Running, every Kubernetes node Ready)."""
    problems = []
    for node in view.nodes:
        if not node.running:
            problems.append(f"{node.name}: VM is {node.vm_state}")
        elif node.is_kubernetes_node and not node.k8s_present:
            problems.append(f"{node.name}: no Kubernetes node of this name")
        elif node.is_kubernetes_node and not node.ready:
            problems.append(f"{node.name}: {not_ready(node)}")
    return problems


def outcome(view: ClusterView) -> str:
    """The state a rollout ends in: Running when healthy, else Alert."""
    return "Alert" if health_problems(view) else "Running"


def never_went_down(node: Node) -> bool:
    """Annotated, no stop ever sent, and still up with the boot ID it was annotated with.

    Without the stop mark a Ready with the annotated boot ID is not stale: the VM was never
    stopped by a rollout, so this node can simply go back into service. A node that reported no
    boot ID at its cordon (annotated NO_BOOT_ID) and still reports none is the same node, unbooted.
    """
    same_boot = (node.boot_id == node.rollout_boot_id if node.boot_id is not None
                 else node.rollout_boot_id == NO_BOOT_ID)
    return (node.annotated and STOP_ANNOTATION not in node.annotations and node.running and node.ready
            and same_boot)


def release_verdict(node: Node) -> tuple[bool, str]:
    """Whether ``release`` (and a rerun, before its first drain) uncordons an annotated node, and why."""
    if node.back:
        return True, "Ready with a new boot ID"
    if never_went_down(node):
        return True, "never went down (no stop was sent): back into service"
    if not node.running:
        return False, f"VM is {node.vm_state}"
    if not node.ready:
        return False, not_ready(node)
    if node.boot_id == node.rollout_boot_id:
        if STOP_ANNOTATION in node.annotations:
            return False, ("stopped by the rollout but still reports the boot ID from before the stop "
                           "(a stale Ready): not proven back")
        return False, "boot ID unchanged: it has not restarted since it was cordoned"
    return False, "no boot ID reported"


def release_plan(view: ClusterView) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(node, why) to uncordon and (node, why) to leave cordoned, of the nodes carrying the rollout
    annotation; a node someone else cordoned carries none and is never touched. Pure."""
    uncordon: list[tuple[str, str]] = []
    kept: list[tuple[str, str]] = []
    for node in view.nodes:
        if node.annotated:
            back, why = release_verdict(node)
            (uncordon if back else kept).append((node.name, why))
    return uncordon, kept


def node_problems(nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """The Kubernetes nodes that are not Ready, each with what its Ready condition says."""
    problems = []
    for node in sorted(nodes, key=lambda n: str((n.get("metadata") or {}).get("name", ""))):
        why = not_ready_why(node)
        if why:
            problems.append(f"node {(node.get('metadata') or {}).get('name', '?')} not Ready ({why})")
    return problems


def readyz_problems(status: int, text: str) -> list[str]:
    """The API server's /readyz: 200 is ready; otherwise the checks it lists as failed."""
    if status == 200:
        return []
    if status == 0:
        return [f"API server /readyz: {text}"]
    failed = [line.strip() for line in text.splitlines() if line.strip().startswith("[-]")]
    detail = "; ".join(failed) or " ".join(text.split())[:200] or "no answer text"
    return [f"API server /readyz HTTP {status}: {detail}"]


def etcd_problems(verdict: Optional[tuple[bool, str]]) -> list[str]:
    """etcd's verdict with nobody going down: (quorum kept and ready, message); None: not asked."""
    if verdict is None or verdict[0]:
        return []
    return [f"etcd: {verdict[1]}"]


def round_problems(nodes: Sequence[Mapping[str, Any]], readyz: tuple[int, str],
                   etcd: Optional[tuple[bool, str]] = None) -> list[str]:
    """Everything that fails one round; empty when the cluster validates."""
    return node_problems(nodes) + readyz_problems(*readyz) + etcd_problems(etcd)
