# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""What a rollout marks on a node besides its cordon and boot-ID annotation, and how it takes
the marks off again.

- The pending taint ``cloudstack.apache.org/rollout-pending:PreferNoSchedule`` on the nodes still
  waiting their turn, so that the scheduler prefers other nodes for the pods evicted meanwhile
  (kOps's ``scheduled-for-update``). It goes when the node's cycle uncordons it, and ``release``
  takes it off every node that carries it, whoever asked for it (a killed run's leftovers).
- The load-balancer exclusion: the label ``node.kubernetes.io/exclude-from-external-load-balancers``
  before the drain (kOps, EKS), so the service controller takes the node out of the cloud load
  balancers before it stops. The annotation ``LB_EXCLUSION_ANNOTATION`` says the label is ours:
  a label the node carried before (kubeadm puts it on control nodes) is never removed.

``Node.spec.taints`` has no patch merge key: a patch replaces the whole list. So a taint is added
or removed by rewriting the list as read, other owners' taints untouched, with the read's
resourceVersion as a precondition (``KubeClient.patch_node_checked``).

Pure decisions first, then the service behind ``cks_node_cycle`` ``mode=taint_pending``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._common.stamps import utc_stamp
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.health import not_ready
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ROLLOUT_ANNOTATION, STOP_ANNOTATION, ClusterView, Node

PENDING_TAINT_KEY = "cloudstack.apache.org/rollout-pending"


PENDING_TAINT_EFFECT = "PreferNoSchedule"


LB_EXCLUSION_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"


#: Set (value: the time) together with the label when the rollout put the label on.
LB_EXCLUSION_ANNOTATION = "cloudstack.apache.org/rollout-lb-excluded"


#: The value of our label: only its presence counts for the service controller.
LB_EXCLUSION_VALUE = "true"


def taints_of(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(t) for t in (node.get("spec") or {}).get("taints") or []]


def _is_pending(taint: Mapping[str, Any]) -> bool:
    return taint.get("key") == PENDING_TAINT_KEY and taint.get("effect") == PENDING_TAINT_EFFECT


def has_pending_taint(node: Mapping[str, Any]) -> bool:
    return any(_is_pending(t) for t in taints_of(node))


def _labels(node: Mapping[str, Any]) -> dict[str, str]:
    return dict((node.get("metadata") or {}).get("labels") or {})


def _annotations(node: Mapping[str, Any]) -> dict[str, str]:
    return dict((node.get("metadata") or {}).get("annotations") or {})


@dataclass(frozen=True)
class Marks:
    """The rollout's own marks a node carries (or that are to be taken off it)."""

    pending_taint: bool = False
    lb_exclusion: bool = False  # the exclusion label, put on by the rollout

    @property
    def any(self) -> bool:
        return self.pending_taint or self.lb_exclusion

    def words(self) -> str:
        parts = []
        if self.pending_taint:
            parts.append("pending taint")
        if self.lb_exclusion:
            parts.append("load-balancer exclusion")
        return " and ".join(parts)


def marks_of(node: Mapping[str, Any]) -> Marks:
    """Our marks on a Node as read from the API."""
    return Marks(pending_taint=has_pending_taint(node), lb_exclusion=LB_EXCLUSION_ANNOTATION in _annotations(node))


def marks_of_view_node(node: Node) -> Marks:
    """Our marks on a node of a ClusterView."""
    return Marks(pending_taint=PENDING_TAINT_KEY in node.taint_keys,
                 lb_exclusion=LB_EXCLUSION_ANNOTATION in node.annotations)


def with_pending_taint(taints: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The taint list with ours added (unchanged if it is there); every other taint as it was."""
    kept = [dict(t) for t in taints]
    if any(_is_pending(t) for t in kept):
        return kept
    return kept + [{"key": PENDING_TAINT_KEY, "effect": PENDING_TAINT_EFFECT}]


def without_pending_taint(taints: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The taint list without ours; every other taint (the control-plane taint, the lifecycle
    controller's, anyone else's) exactly as read."""
    return [dict(t) for t in taints if not _is_pending(t)]


def pending_taint_patch(node: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """The patch that adds the pending taint to this Node as read; None when it has it already."""
    if has_pending_taint(node):
        return None
    return {"spec": {"taints": with_pending_taint(taints_of(node))}}


@dataclass(frozen=True)
class ExclusionDecision:
    """Whether the cycle puts the exclusion label on, and whether the label is ours to remove."""

    label: bool  # write the label (and our annotation)
    ours: bool  # the rollout put (or puts) the label on: it waits, and removes it after verify
    why: str


def exclusion_decision(node: Mapping[str, Any]) -> ExclusionDecision:
    labels, annotations = _labels(node), _annotations(node)
    if LB_EXCLUSION_ANNOTATION in annotations:
        # A rollout that stopped labelled it: still ours (put the label back if someone took it off).
        return ExclusionDecision(LB_EXCLUSION_LABEL not in labels, True,
                                 "excluded by a rollout that stopped: resumed")
    if LB_EXCLUSION_LABEL in labels:
        return ExclusionDecision(False, False, "already excluded from load balancers by someone else: "
                                               "the label stays")
    return ExclusionDecision(True, True, "labelled")


def exclusion_patch(now: Optional[float] = None) -> dict[str, Any]:
    """Label the node out of external load balancers, and mark the label as ours."""
    stamp = utc_stamp(now)
    return {"metadata": {"labels": {LB_EXCLUSION_LABEL: LB_EXCLUSION_VALUE},
                         "annotations": {LB_EXCLUSION_ANNOTATION: stamp}}}


def return_patch(marks: Marks, uncordon: bool, taints: Sequence[Mapping[str, Any]] = ()) -> Optional[dict[str, Any]]:
    """The one write that puts a node back: uncordon it (and drop the rollout's annotations) when
    ``uncordon``, take off the ``marks``. ``taints``: the node's taints as read, needed to take the
    pending taint off (the list is written whole, so send it with a resourceVersion precondition).
    None when there is nothing to write.
    """
    if not uncordon and not marks.any:
        return None
    patch: dict[str, Any] = {}
    annotations: dict[str, Any] = {}
    if uncordon:
        patch["spec"] = {"unschedulable": None}
        annotations.update({ROLLOUT_ANNOTATION: None, STOP_ANNOTATION: None})
    if marks.lb_exclusion:
        annotations[LB_EXCLUSION_ANNOTATION] = None
        patch.setdefault("metadata", {})["labels"] = {LB_EXCLUSION_LABEL: None}
    if annotations:
        patch.setdefault("metadata", {})["annotations"] = annotations
    if marks.pending_taint:
        patch.setdefault("spec", {})["taints"] = without_pending_taint(taints)
    return patch


def release_marks(view: ClusterView, uncordoned: Sequence[str]) -> tuple[dict[str, Marks], list[tuple[str, str]]]:
    """(node -> marks to take off, (node, why) load-balancer exclusions kept). Pure.

    The pending taint comes off every node that carries it. Our load-balancer exclusion comes off
    the nodes release uncordons and any other node that is in service (VM Running, Ready, not left
    cordoned by the rollout); it stays on a node still down or left cordoned, so that no load
    balancer sends it traffic before a rerun brings it back.
    """
    back = set(uncordoned)
    remove: dict[str, Marks] = {}
    kept: list[tuple[str, str]] = []
    for node in view.nodes:
        if not node.is_kubernetes_node:
            continue
        marks = marks_of_view_node(node)
        if not marks.any:
            continue
        lb = marks.lb_exclusion
        if lb and node.name not in back:
            if node.annotated:
                lb, why = False, "left cordoned by the rollout: out of load balancers until it is back"
            elif not node.running:
                lb, why = False, f"VM is {node.vm_state}"
            elif not node.ready:
                lb, why = False, not_ready(node)
            else:
                why = ""
            if not lb:
                kept.append((node.name, why))
        taken = Marks(pending_taint=marks.pending_taint, lb_exclusion=lb)
        if taken.any:
            remove[node.name] = taken
    return remove, kept
