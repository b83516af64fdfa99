# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""What the rollout tells ``kubectl describe node``: the Kubernetes Event for each step of a node's
cycle, in the operator's words (pure; written by ``_clients/node_events.py``).

Events go to the ``default`` namespace, where the kubelet and the node controller put a Node's
own (a Node has no namespace), regarding the Node, reported by ``cloudstack.cks/rollout``. A
repeat of the same Event (a PodDisruptionBudget refusing the same pod every few seconds) is one
Event whose ``series`` and count grow, as the API expects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

REPORTING_CONTROLLER = "cloudstack.cks/rollout"
EVENT_NAMESPACE = "default"
NORMAL, WARNING = "Normal", "Warning"
#: The API server refuses a note over 1 kB: longer ones are cut, saying so.
NOTE_LIMIT = 1024

#: Outcomes besides the step records' own (ok | skipped | failed).
STARTED, BLOCKED, PUT_BACK, LEFT_CORDONED = "started", "blocked", "put_back", "left_cordoned"


@dataclass(frozen=True)
class NodeEvent:
    """One Event about a Node: ``related`` is the pod of an eviction (kind, namespace, name, uid)."""

    reason: str
    action: str
    note: str
    type: str = NORMAL
    related: Optional[Mapping[str, str]] = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        """Equal keys are one Event with a series: the same reason, words and related object."""
        related = self.related or {}
        return (self.reason, self.action, self.note, str(related.get("uid") or related.get("name") or ""))


def _run_words(run: Optional[str]) -> str:
    return f"rollout {run}" if run else "the rollout"


def _note(text: str) -> str:
    data = text.strip().encode("utf-8")
    if len(data) <= NOTE_LIMIT:
        return text.strip()
    return data[:NOTE_LIMIT - 20].decode("utf-8", "ignore") + " ... (cut short)"


#: step -> (reason, action, note with {run} and {detail}) for a step that went through.
_DONE = {
    "cordon": ("CordonedForRollout", "Cordon", "Cordoned for {run}"),
    "exclude_from_lb": ("ExcludedFromLoadBalancers", "Label", "Labelled out of the load balancers for {run}"),
    "drain": ("Drained", "Drain", "Drain done for {run}: {detail}"),
    "stop": ("VMStopped", "Stop", "VM stopped for {run} ({detail})"),
    "change_offering": ("ServiceOfferingChanged", "ChangeOffering", "Service offering changed: {detail}"),
    "resize_root_disk": ("RootDiskResized", "ResizeRootDisk", "Root disk resized: {detail}"),
    "update_affinity_groups": ("AffinityGroupsChanged", "UpdateAffinityGroups", "Affinity groups changed: {detail}"),
    "start": ("VMStarted", "Start", "VM started for {run} ({detail})"),
    "verify": ("BackReady", "Verify", "Back: {detail}"),
    "uncordon": ("Uncordoned", "Uncordon", "Uncordoned: {run} is done with this node ({detail})"),
    "unmark": ("LeftCordoned", "Unmark", "Left cordoned, as someone else cordoned it before {run}; "
                                         "the rollout's marks removed"),
}


def step_event(step: str, outcome: str, detail: str = "", run: Optional[str] = None) -> Optional[NodeEvent]:
    """The Event for a step of a node's cycle and how it went; None when it is nothing to tell
    (the annotation, the checks that change nothing, steps skipped because there was nothing to do)."""
    words = _run_words(run)
    detail = detail.strip()
    if outcome == STARTED and step == "drain":
        return NodeEvent("DrainStarted", "Drain", f"Drain started for {words}")
    if outcome == "ok" and step in _DONE:
        reason, action, text = _DONE[step]
        return NodeEvent(reason, action, _note(text.format(run=words, detail=detail)))
    if outcome == "skipped" and step == "uncordon":
        return NodeEvent("LeftCordoned", "Uncordon", _note(f"Left cordoned by {words}: {detail}"))
    if outcome == "failed":
        reason = "DrainFailed" if step == "drain" else "RolloutStepFailed"
        return NodeEvent(reason, _camel(step), _note(f"{step} failed in {words}: {detail}"), WARNING)
    return None


def eviction_blocked(pod: Mapping[str, Any], pdb: str, answer: str = "") -> NodeEvent:
    """A PodDisruptionBudget refused a pod's eviction (the drain retries it): the pod is ``related``."""
    meta = pod.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    budget = pdb if not pdb or "/" in pdb else f"{namespace}/{pdb}"
    why = f"PodDisruptionBudget {budget}" if budget else "a PodDisruptionBudget"
    related = {"kind": "Pod", "namespace": namespace, "name": name, "uid": str(meta.get("uid") or ""), "apiVersion": "v1"}
    note = f"Eviction of pod {namespace}/{name} blocked by {why}; the drain retries until the batch deadline"
    if answer and not budget:
        note += f" ({answer})"
    return NodeEvent("EvictionBlocked", "Evict", _note(note), WARNING, related)


def put_back_event(step: str, refusal: str, put_back_failure: Optional[str], uncordoned: bool,
                   run: Optional[str] = None) -> NodeEvent:
    """After CloudStack refused a change of the stopped VM: put back on what it had, or left as it is."""
    words = _run_words(run)
    if put_back_failure is None:
        where = "uncordoned" if uncordoned else "left cordoned (cordoned by someone else before the rollout)"
        return NodeEvent("PutBack", "PutBack", _note(
            f"Put back on what it had after CloudStack refused {step} in {words}: {refusal}; {where}, "
            "still out of date for the next run"), WARNING)
    return left_cordoned(step, f"CloudStack refused {step} ({refusal}) and putting it back failed: {put_back_failure}",
                         run)


def left_cordoned(step: str, why: str, run: Optional[str] = None) -> NodeEvent:
    """A failure left the node cordoned: the release or the next run returns it once it is back."""
    return NodeEvent("LeftCordoned", _camel(step), _note(
        f"Left cordoned by {_run_words(run)}: {why}; the release or the next run uncordons it once it is back"),
        WARNING)


def released_event(uncordoned: bool, why: str, run: Optional[str] = None) -> NodeEvent:
    """What the rollout's release did with a node it had left cordoned: uncordoned it, or left it so."""
    words = _run_words(run)
    if uncordoned:
        return NodeEvent("Uncordoned", "Uncordon", _note(f"Uncordoned by the release of {words}: {why}"))
    return NodeEvent("LeftCordoned", "Release", _note(f"Left cordoned by the release of {words}: {why}"), WARNING)


def _camel(step: str) -> str:
    return "".join(part.capitalize() for part in step.split("_")) or "Cycle"


#: client-go's EventAggregator: the tenth Event of one reason on one node with a note unlike the nine
#: before it within ten minutes (a budget refusing ten different pods) is written as one combined Event
#: whose count grows, not as a tenth.
AGGREGATE_AFTER = 10
AGGREGATE_WINDOW = 600.0
COMBINED = "(combined from similar events): "


class Correlator:
    """Which Event an occurrence is (pure; the writer keeps one per module run): its own, whose
    series grows when it repeats, or the node's combined one of its reason once it has had too many
    different notes. client-go's spam filter (25 Events an object, then one every five minutes) is
    left out on purpose: a node's cycle tells a bounded story of about ten Events, the combined
    Event bounds the repeats, and the filter would drop its end (Back, Uncordoned) after a long drain.
    """

    def __init__(self) -> None:
        self._similar: dict[tuple[str, str, str], tuple[set[tuple[str, str, str, str]], float]] = {}

    def correlate(self, node: str, event: NodeEvent, at: float) -> tuple[tuple[Any, ...], NodeEvent]:
        """The key the Event is written and counted under, and the Event to write (at Unix time ``at``)."""
        group = (node, event.type, event.reason)
        notes, last = self._similar.get(group, (set(), at))
        if at - last > AGGREGATE_WINDOW:
            notes = set()
        if event.key not in notes and len(notes) >= AGGREGATE_AFTER - 1:
            self._similar[group] = (notes, at)
            return ("combined", *group), NodeEvent(event.reason, event.action, _note(COMBINED + event.note), event.type)
        notes.add(event.key)
        self._similar[group] = (notes, at)
        return (node, *event.key), event
