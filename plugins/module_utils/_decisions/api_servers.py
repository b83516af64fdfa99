# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The seed's "with external etcd, another control node must be serving the API".

A control node that is Running and Ready may still have an API server that does not serve (a
crash loop, a bad flag): the node's Ready says only that its kubelet posts. What says its API
server serves is its kubeadm mirror pod ``kube-system/kube-apiserver-<node>``: kubeadm's manifest
probes ``/readyz`` on the node's own API server (readinessProbe), and the kubelet keeps the pod
Ready only while that probe passes. Each API server answers ``/readyz`` only for itself, and from
outside the cluster network the nodes' own addresses are not reachable: the pod is the one view of
every control node's API server that the kubeconfig gives.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import CONTROL, ClusterView, node_names

API_SERVER_NAMESPACE = "kube-system"
#: kubeadm's labels of the kube-apiserver static pod (cmd/kubeadm/app/util/staticpod, ComponentPod).
API_SERVER_SELECTOR = "component=kube-apiserver"


def _pod_serving(pod: Mapping[str, Any]) -> tuple[bool, str]:
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False, f"is {status.get('phase') or 'not reported'}"
    ready: Mapping[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    if ready.get("status") == "True":
        return True, "Ready"
    detail = ": ".join(str(ready[k]) for k in ("reason", "message") if ready.get(k))
    return False, f"not Ready ({detail or 'Ready=' + str(ready.get('status', 'missing'))}: its /readyz probe fails)"


def api_server_problems(view: ClusterView, batch: Sequence[str],
                        pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why taking the batch's control nodes down would leave no API server serving; empty when one would.

    Only with external etcd and a control node in the batch (stacked control nodes are judged by
    etcd's quorum). The other control nodes that are not Running and Ready are reported by the
    preflight already; here they are only the ones whose API server must serve.
    """
    names = {b.lower() for b in batch}
    going = [n for n in view.nodes_of(CONTROL) if n.name in names]
    if not view.external_etcd or not going:
        return []
    others = [n for n in view.nodes_of(CONTROL) if n.name not in names and n.running and n.ready]
    if not others:
        return []
    by_node: dict[str, Mapping[str, Any]] = {}
    for pod in pods:
        node: Optional[str] = (pod.get("spec") or {}).get("nodeName")
        if node:
            by_node[str(node).lower()] = pod
    why_not: list[str] = []
    for other in others:
        found = by_node.get(other.name)
        if found is None:
            why_not.append(f"{other.name}: no kube-apiserver pod in {API_SERVER_NAMESPACE}")
            continue
        ok, why = _pod_serving(found)
        if ok:
            return []
        pod_name = (found.get("metadata") or {}).get("name", f"kube-apiserver-{other.name}")
        why_not.append(f"{other.name}: {API_SERVER_NAMESPACE}/{pod_name} {why}")
    return [f"no other control node would serve the Kubernetes API while {node_names(going)} is down "
            f"({'; '.join(why_not)}): bring that API server back (its /readyz must answer 200), then run the "
            "rollout again"]
