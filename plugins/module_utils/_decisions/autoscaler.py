# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The cluster autoscaler during a rollout: what the rollout marks so that it removes no node the
rollout is restarting, how the mark comes off again, and how the autoscaler is named. Pure.

CKS deploys kubernetes/autoscaler's cluster-autoscaler into kube-system when a cluster has
autoscaling on; it calls scaleKubernetesCluster itself. A drained node is underused, so it could
pick one the rollout is about to stop: its annotation ``cluster-autoscaler.kubernetes.io/
scale-down-disabled: "true"`` (eligibility.go ScaleDownDisabledKey) makes a node unremovable. The
rollout puts it on every node of its plan, and ``HOLD_ANNOTATION`` says it did and what the node
had before (a value another owner set is put back; a "true" already there is never touched).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"

#: Set with the autoscaler's annotation when the rollout put it on: ``none`` (the node had none)
#: or ``was:<value>`` (the value the node had, put back at the release).
HOLD_ANNOTATION = "cloudstack.apache.org/rollout-scale-down-disabled"

_NONE = "none"
_WAS = "was:"

#: CKS operations that hold a cluster for a while and then give it back (the autoscaler's scale-ups
#: and removals among them): a batch waits them out instead of failing.
PASSING_OPERATIONS = frozenset({"Scaling", "RemovingNodes"})


def _annotations(node: Mapping[str, Any]) -> Mapping[str, Any]:
    return (node.get("metadata") or {}).get("annotations") or {}


def hold_patch(annotations: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """The patch that keeps the autoscaler off a node with these annotations; None when it is
    kept off already (by someone's "true", or by this rollout's earlier run)."""
    if HOLD_ANNOTATION in annotations or annotations.get(SCALE_DOWN_DISABLED) == "true":
        return None
    before = annotations.get(SCALE_DOWN_DISABLED)
    was = _NONE if before is None else _WAS + str(before)
    return {"metadata": {"annotations": {SCALE_DOWN_DISABLED: "true", HOLD_ANNOTATION: was}}}


def restore_patch(annotations: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """The patch that takes off what the rollout put on (and only that); None when it put nothing."""
    was = annotations.get(HOLD_ANNOTATION)
    if was is None:
        return None
    before = str(was)[len(_WAS):] if str(was).startswith(_WAS) else None
    return {"metadata": {"annotations": {SCALE_DOWN_DISABLED: before, HOLD_ANNOTATION: None}}}


def autoscaler_of(entry: Mapping[str, Any], deployed: bool) -> dict[str, Any]:
    """The autoscaler as listKubernetesClusters and kube-system show it (``on``: either says so)."""
    enabled = bool(entry.get("autoscalingenabled"))
    return {"on": enabled or deployed, "autoscalingenabled": enabled, "deployment": deployed,
            "minsize": int(entry.get("minsize") or 0), "maxsize": int(entry.get("maxsize") or 0)}


def autoscaler_words(autoscaler: Optional[Mapping[str, Any]], added: Sequence[str] = ()) -> str:
    """One line for the dry run, the plan and status: on with min/max and the nodes it added, or off."""
    if not autoscaler or not autoscaler.get("on"):
        return "cluster autoscaler: off"
    if autoscaler.get("autoscalingenabled"):
        words = f"cluster autoscaler: on (min {autoscaler.get('minsize')}, max {autoscaler.get('maxsize')} workers)"
    else:
        words = "cluster autoscaler: on (a cluster-autoscaler Deployment runs in kube-system)"
    words += "; the rollout marks its nodes scale-down-disabled until the release"
    if added:
        words += f"; nodes it added during the rollout: {', '.join(added)}"
    return words


def added_nodes(planned: Sequence[str], now: Sequence[str]) -> list[str]:
    """Workers there now that the plan did not know (the autoscaler's scale-ups)."""
    known = {n.lower() for n in planned}
    return sorted(n for n in now if n.lower() not in known)


def added_batches(batches: Sequence[Mapping[str, Any]], known: Sequence[str]) -> list[dict[str, Any]]:
    """The batches of a plan made after the planned ones ran, keeping only the nodes the first plan
    did not know (the autoscaler added them), in that plan's order and batch sizes. A node of the
    first plan still out of date is not taken again: its own batch ran (or the rollout stopped)."""
    seen = {str(n).lower() for n in known}
    out = []
    for batch in batches:
        nodes = [str(n) for n in batch.get("nodes") or [] if str(n).lower() not in seen]
        if nodes:
            out.append({"node_type": batch.get("node_type"), "nodes": nodes, "canary": False})
    return out


def cks_wait_line(state: str, waited: float, limit: float) -> str:
    return (f"cluster is {state} (a CKS operation, such as the cluster autoscaler's scale): "
            f"waited {waited:.1f}s of at most {limit:g}s before the batch starts")
