# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""How etcd will be checked for each node type, decided before the lock is taken.

Stacked control nodes (kubeadm) are the etcd members: their checks run ``etcdctl`` in the etcd
pods through ``pods/exec`` on the Kubernetes API unless ``etcd_endpoints`` are given. External
etcd nodes (CKS 4.22) are plain systemd units on their own VMs, outside Kubernetes: no pod runs
there to exec into, so their checks run ``etcdctl`` in a short-lived pod on a control node
(``_clients/etcd_pod.py``), which needs pods create/delete and pods/log get in kube-system, unless
``etcd_endpoints`` are given. Workers, and control nodes beside external etcd, need none. A
rollout whose planned nodes need a check that cannot be made is refused with what to give.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import CONTROL, ETCD, NODE_TYPES

EXEC = "exec through the Kubernetes API"
POD = "a short-lived pod on {node} through the Kubernetes API"
ENDPOINTS = "the given etcd_endpoints"
NOT_NEEDED = "not needed"
CANNOT = "cannot be checked"


@dataclass(frozen=True)
class ExecAccess:
    """What the API server answered when asked (SelfSubjectAccessReview) about ``pods/exec``."""

    allowed: bool
    denied_pods: tuple[str, ...] = ()
    reason: str = ""


@dataclass(frozen=True)
class PodAccess:
    """What the API server answered about running the check pod (external etcd), and where it would run."""

    allowed: bool
    denied: tuple[str, ...] = ()  # "create pods", "delete pods", "get pods/log"
    reason: str = ""
    node: str = ""


def needs_etcd(node_type: str, external_etcd: bool) -> bool:
    # Without external etcd there are no etcd nodes at all: their type needs nothing.
    return (node_type == ETCD and external_etcd) or (node_type == CONTROL and not external_etcd)


def etcd_check_paths(external_etcd: bool, endpoints_given: bool, exec_access: Optional[ExecAccess],
                     pod_access: Optional[PodAccess] = None) -> dict[str, str]:
    """Per node type, how its etcd check would be made (``EXEC``, ``POD`` with its node, ``ENDPOINTS``,
    ``NOT_NEEDED``, ``CANNOT``).

    ``exec_access`` / ``pod_access`` None: not asked (nothing planned needs it); counted as possible.
    """
    paths = {}
    for node_type in NODE_TYPES:
        if not needs_etcd(node_type, external_etcd):
            paths[node_type] = NOT_NEEDED
        elif endpoints_given:
            paths[node_type] = ENDPOINTS
        elif node_type == CONTROL and (exec_access is None or exec_access.allowed):
            paths[node_type] = EXEC
        elif node_type == ETCD and (pod_access is None or pod_access.allowed):
            paths[node_type] = POD.format(node=pod_access.node if pod_access is not None and pod_access.node
                                          else "a control node")
        else:
            paths[node_type] = CANNOT
    return paths


def etcd_check_refusal(paths: dict[str, str], planned_types: Sequence[str], external_etcd: bool,
                       exec_access: Optional[ExecAccess], pod_access: Optional[PodAccess] = None) -> Optional[str]:
    """Why the planned rollout cannot be made safely, with what to give; None when it can."""
    blocked = [t for t in NODE_TYPES if t in planned_types and paths.get(t) == CANNOT]
    if not blocked:
        return None
    if ETCD in blocked:
        if pod_access is not None and pod_access.denied:
            why = (f"this Kubernetes identity may not {', '.join(pod_access.denied)} in kube-system "
                   "(SelfSubjectAccessReview); grant pods create and delete and pods/log get in kube-system "
                   "(docs/rbac.yml)")
        else:
            why = f"no control node can run it: {pod_access.reason}" if pod_access is not None and pod_access.reason \
                else "it cannot be run"
        return ("etcd nodes are out of date and their etcd members must be checked by etcdctl in a short-lived pod "
                f"on a control node, but {why}; or give etcd_endpoints (rollout_etcd_endpoints), "
                "http://<etcd node address>:2379 for each etcd node, from a controller that reaches them")
    denied = ", ".join(exec_access.denied_pods) if exec_access is not None and exec_access.denied_pods else "the etcd pods"
    return (f"control nodes are out of date and their etcd members must be checked, but this Kubernetes identity "
            f"may not exec into {denied} (SelfSubjectAccessReview: get and create on pods/exec in kube-system "
            f"not allowed{': ' + exec_access.reason if exec_access is not None and exec_access.reason else ''}); "
            "grant pods/exec on the etcd pods (docs/rbac.yml), or give etcd_endpoints with their certificates")
