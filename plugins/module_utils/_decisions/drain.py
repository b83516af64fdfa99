# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Which pods a drain evicts, skips or refuses, and which PodDisruptionBudgets block it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


FINISHED_PHASES = ("Succeeded", "Failed")


# Blocking reasons, worded for this collection's options rather than kubectl's flags.
REASON_DAEMONSET = "DaemonSet-managed pods (DaemonSet pods are never evicted)"


REASON_ORPHANED_DAEMONSET = "pods of a DaemonSet that no longer exists (use force=true to delete them)"


REASON_LOCAL_STORAGE = "pods with local storage (use delete_emptydir_data=true to override)"


REASON_UNMANAGED = "pods that declare no controller (use force=true to override)"


@dataclass
class DrainOptions:
    """What the drain may evict and how it paces itself."""

    delete_emptydir_data: bool = False
    force: bool = False
    # None: each pod's own terminationGracePeriodSeconds.
    grace_period: Optional[int] = None
    # Always true here: DaemonSet pods are skipped (kubectl's --ignore-daemonsets), never evicted.
    ignore_daemonsets: bool = True
    # kubectl's EvictErrorRetryDelay.
    eviction_retry_interval: float = 5.0
    # How often an evicted pod is re-read to see whether it is gone.
    poll_interval: float = 0.5
    # kubectl's --skip-wait-for-delete-timeout: 0 never skips terminating pods.
    skip_wait_for_delete_timeout: int = 0


@dataclass
class PodVerdict:
    """What the filter chain decided for one pod."""

    action: str  # "evict" | "skip" | "block"
    reason: str = ""
    warning: str = ""


@dataclass
class DrainReport:
    node: str
    evicted: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    started: float = 0.0
    ended: float = 0.0
    #: Pods whose eviction a PodDisruptionBudget held back: pod, pdb, after (s into the drain), seconds.
    budget_waits: list[dict[str, Any]] = field(default_factory=list)


def field_of(obj: Optional[dict[str, Any]], *names: str) -> Any:
    """A field of a Kubernetes object dict, by its JSON (camelCase) or Python (snake) name."""
    if not obj:
        return None
    for name in names:
        if name in obj and obj[name] is not None:
            return obj[name]
    return None


def pod_key(pod: dict[str, Any]) -> str:
    meta = field_of(pod, "metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def pod_uid(pod: Optional[dict[str, Any]]) -> Optional[str]:
    return (field_of(pod, "metadata") or {}).get("uid")


def still_terminating(uid: Optional[str], key: str, pods: Mapping[str, dict[str, Any]], node_down: bool) -> bool:
    """Whether the pod evicted under ``uid`` is still on its node, from the node's pods by key.

    kubectl's rule: gone once absent or back under another UID (a StatefulSet's pod keeps its
    name). On a stopped VM no kubelet finishes the deletion, so marked for deletion is gone too:
    its controller has already replaced it (as Cluster API treats such nodes).
    """
    current = pods.get(key)
    if current is None or pod_uid(current) != uid:
        return False
    deleting = field_of(field_of(current, "metadata"), "deletionTimestamp", "deletion_timestamp")
    return not (node_down and bool(deleting))


def controller_of(pod: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The ownerReference with controller=true; an owner without it does not count (as kubectl)."""
    meta = field_of(pod, "metadata") or {}
    for ref in field_of(meta, "ownerReferences", "owner_references") or []:
        if ref.get("controller") is True:
            return ref
    return None


def is_finished(pod: dict[str, Any]) -> bool:
    return (field_of(pod, "status") or {}).get("phase") in FINISHED_PHASES


def has_local_storage(pod: dict[str, Any]) -> bool:
    # Only emptyDir counts: hostPath and PVCs survive the pod's move.
    for volume in (field_of(pod, "spec") or {}).get("volumes") or []:
        if field_of(volume, "emptyDir", "empty_dir") is not None:
            return True
    return False


def _deleted_long_ago(pod: dict[str, Any], timeout: int, now: float) -> bool:
    if timeout <= 0:
        return False
    stamp = field_of(field_of(pod, "metadata"), "deletionTimestamp", "deletion_timestamp")
    if not stamp:
        return False
    return now - _parse_time(stamp) > timeout


def _parse_time(stamp: Any) -> float:
    from datetime import datetime, timezone

    if isinstance(stamp, datetime):
        value = stamp
    else:
        text = str(stamp).replace("Z", "+00:00")
        value = datetime.fromisoformat(text)
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.timestamp()


def classify_pod(
    pod: dict[str, Any],
    options: DrainOptions,
    daemonset_exists: Callable[[str, str], bool],
    now: Optional[float] = None,
) -> PodVerdict:
    """kubectl's filter chain for one pod; stops at the first filter that says "do not delete"."""
    now = time.time() if now is None else now
    meta = field_of(pod, "metadata") or {}
    warnings: list[str] = []

    if _deleted_long_ago(pod, options.skip_wait_for_delete_timeout, now):
        return PodVerdict("skip", "deleted more than skip_wait_for_delete_timeout seconds ago")

    controller = controller_of(pod)
    if controller is not None and controller.get("kind") == "DaemonSet" and not is_finished(pod):
        if not daemonset_exists(meta.get("namespace", ""), controller.get("name", "")):
            if not options.force:
                return PodVerdict("block", REASON_ORPHANED_DAEMONSET)
            warnings.append(f"{pod_key(pod)}: deleting pod of missing DaemonSet {controller.get('name')}")
        elif not options.ignore_daemonsets:
            return PodVerdict("block", REASON_DAEMONSET)
        else:
            return PodVerdict("skip", "DaemonSet-managed")

    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return PodVerdict("skip", "mirror (static) pod")

    if has_local_storage(pod) and not is_finished(pod):
        if not options.delete_emptydir_data:
            return PodVerdict("block", REASON_LOCAL_STORAGE)
        warnings.append(f"{pod_key(pod)}: deleting pod with local storage (emptyDir data is lost)")

    if controller is None and not is_finished(pod):
        if not options.force:
            return PodVerdict("block", REASON_UNMANAGED)
        warnings.append(f"{pod_key(pod)}: deleting pod that declares no controller (it will not come back)")

    return PodVerdict("evict", warning="; ".join(warnings))


def selector_matches(selector: Optional[dict[str, Any]], labels: dict[str, str]) -> bool:
    """A LabelSelector against a pod's labels. An empty selector matches every pod (policy/v1)."""
    if selector is None:
        return False
    for key, value in (field_of(selector, "matchLabels", "match_labels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in field_of(selector, "matchExpressions", "match_expressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def pdbs_for_pod(pod: dict[str, Any], pdbs: list[dict[str, Any]]) -> list[str]:
    """Names (namespace/name) of the PDBs that select this pod."""
    meta = field_of(pod, "metadata") or {}
    labels = meta.get("labels") or {}
    found = []
    for pdb in pdbs:
        pmeta = field_of(pdb, "metadata") or {}
        if pmeta.get("namespace") != meta.get("namespace"):
            continue
        if selector_matches((field_of(pdb, "spec") or {}).get("selector"), labels):
            found.append(f"{pmeta.get('namespace')}/{pmeta.get('name')}")
    return found


# The Eviction API deletes these without looking at any PodDisruptionBudget.
_BUDGET_FREE_PHASES = ("Pending", "Succeeded", "Failed")


def is_ready(pod: dict[str, Any]) -> bool:
    for condition in (field_of(pod, "status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def _budget_checked(pod: dict[str, Any]) -> bool:
    """Whether an eviction of this pod is judged by its PodDisruptionBudget at all."""
    if (field_of(pod, "status") or {}).get("phase") in _BUDGET_FREE_PHASES:
        return False
    return not field_of(field_of(pod, "metadata"), "deletionTimestamp", "deletion_timestamp")


def _status_int(status: dict[str, Any], *names: str) -> Optional[int]:
    value = field_of(status, *names)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def budget_refuses(pdb: dict[str, Any], pod: dict[str, Any]) -> bool:
    """Whether the API server would answer an eviction of ``pod`` (which ``pdb`` alone selects)
    with 429 now, from the PDB's status as last written by the disruption controller.

    A running pod that is not Ready is let go while the budget is met (``IfHealthyBudget``, the
    default) or always (``AlwaysAllow``); any other pod needs ``disruptionsAllowed`` of 1 or more.
    """
    status = field_of(pdb, "status") or {}
    allowed = _status_int(status, "disruptionsAllowed", "disruptions_allowed") or 0
    if not is_ready(pod):
        policy = field_of(field_of(pdb, "spec"), "unhealthyPodEvictionPolicy", "unhealthy_pod_eviction_policy")
        if policy == "AlwaysAllow":
            return False
        current = _status_int(status, "currentHealthy", "current_healthy")
        desired = _status_int(status, "desiredHealthy", "desired_healthy")
        if current is not None and desired is not None and current >= desired:
            return False
    return allowed < 1


@dataclass(frozen=True)
class BudgetBlock:
    """A PodDisruptionBudget that allows no disruption now, and the node's pods it covers."""

    pdb: str  # namespace/name
    disruptions_allowed: int
    current_healthy: Optional[int]
    desired_healthy: Optional[int]
    pods: tuple[str, ...]

    @property
    def message(self) -> str:
        health = ""
        if self.current_healthy is not None and self.desired_healthy is not None:
            health = f" ({self.current_healthy} healthy, {self.desired_healthy} needed)"
        return (f"PodDisruptionBudget {self.pdb} allows {self.disruptions_allowed} disruptions{health}: "
                f"pods {', '.join(self.pods)} cannot be evicted until it allows one")

    def to_dict(self) -> dict[str, Any]:
        return {"pdb": self.pdb, "disruptions_allowed": self.disruptions_allowed,
                "current_healthy": self.current_healthy, "desired_healthy": self.desired_healthy,
                "pods": list(self.pods), "message": self.message}


@dataclass(frozen=True)
class NodeDrainBlockers:
    """What would hold up or stop the drain of one node, as far as one read of the cluster tells.

    ``budgets``: PDBs that allow no disruption now (the drain retries their 429s until the
    batch's deadline). ``multiple_budgets``: pods that several PDBs select (the Eviction API
    answers 500, the drain fails). ``stopping``: pods the filter chain refuses, per reason
    (the drain stops before it evicts anything, as ``kubectl drain`` does).
    """

    node: str
    budgets: tuple[BudgetBlock, ...] = ()
    multiple_budgets: tuple[tuple[str, tuple[str, ...]], ...] = ()
    stopping: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.budgets or self.multiple_budgets or self.stopping)

    @property
    def messages(self) -> list[str]:
        # The worst first: a stop before any eviction, a failing eviction, then the waits.
        lines = [f"stops before any eviction: {reason}: {', '.join(pods)}" for reason, pods in self.stopping]
        lines += [f"pod {pod} is selected by {len(pdbs)} PodDisruptionBudgets ({', '.join(pdbs)}): the Eviction "
                  "API refuses its eviction (500) and the drain fails" for pod, pdbs in self.multiple_budgets]
        lines += [b.message for b in self.budgets]
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "pdbs": [b.to_dict() for b in self.budgets],
            "multiple_pdbs": [{"pod": pod, "pdbs": list(pdbs)} for pod, pdbs in self.multiple_budgets],
            "pods": [{"reason": reason, "pods": list(pods)} for reason, pods in self.stopping],
            "messages": self.messages,
        }


def drain_blockers(
    node: str,
    pods: list[dict[str, Any]],
    pdbs: list[dict[str, Any]],
    options: DrainOptions,
    daemonset_exists: Callable[[str, str], bool],
    now: Optional[float] = None,
) -> NodeDrainBlockers:
    """What would block draining ``node`` (whose pods are ``pods``) now. No I/O of its own.

    The same filter chain as the drain itself (``classify_pod``); of the pods it would evict,
    the ones the Eviction API would refuse: covered by more than one PDB, or by one that allows
    no disruption now (``budget_refuses``).
    """
    stopping: dict[str, list[str]] = {}
    refused: dict[str, list[str]] = {}
    several: list[tuple[str, tuple[str, ...]]] = []
    by_key = {f"{(field_of(p, 'metadata') or {}).get('namespace')}/{(field_of(p, 'metadata') or {}).get('name')}": p
              for p in pdbs}
    for pod in sorted(pods, key=pod_key):
        verdict = classify_pod(pod, options, daemonset_exists, now=now)
        if verdict.action == "block":
            stopping.setdefault(verdict.reason, []).append(pod_key(pod))
            continue
        if verdict.action != "evict" or not _budget_checked(pod):
            continue
        covering = pdbs_for_pod(pod, pdbs)
        if len(covering) > 1:
            several.append((pod_key(pod), tuple(sorted(covering))))
        elif covering and budget_refuses(by_key[covering[0]], pod):
            refused.setdefault(covering[0], []).append(pod_key(pod))
    budgets = []
    for key in sorted(refused):
        status = field_of(by_key[key], "status") or {}
        budgets.append(BudgetBlock(
            pdb=key, disruptions_allowed=_status_int(status, "disruptionsAllowed", "disruptions_allowed") or 0,
            current_healthy=_status_int(status, "currentHealthy", "current_healthy"),
            desired_healthy=_status_int(status, "desiredHealthy", "desired_healthy"), pods=tuple(refused[key])))
    return NodeDrainBlockers(node=node, budgets=tuple(budgets), multiple_budgets=tuple(several),
                             stopping=tuple((reason, tuple(keys)) for reason, keys in stopping.items()))
