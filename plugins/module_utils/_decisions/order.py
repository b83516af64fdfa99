# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The rollout plan: which nodes, in which order, in which batches."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._common.option_defaults import (
    RESTART_ALL,
    RESTART_OUTDATED,
    RESTART_SELECTED,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.quorum import can_lose_a_node
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.reasons import OUT_OF_DATE_KEYS, Reason, outdated_reasons
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import PARAM_MAX_UNAVAILABLE, Settings
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import NODE_TYPES, WORKER, ClusterView


def worker_batch_size(max_unavailable: int, workers: int) -> int:
    """The seed's clamp: min(max_unavailable, workers - 1), always at least 1."""
    return max(1, min(max_unavailable, workers - 1))


@dataclass(frozen=True)
class PlannedNode:
    """A node with work left: out of date, down, or left cordoned by a rollout that stopped."""

    name: str
    node_type: str
    vm_state: str
    reasons: tuple[Reason, ...]
    annotated: bool  # carries the annotation of a rollout that stopped
    back: bool = False  # ... and is Ready with a new boot ID
    etcd_down: bool = False  # its etcd member is not healthy although its VM runs
    #: Restarted because ``restart`` asks for it (rollout_restart: selected or all), with nothing else to do.
    restart: bool = False

    @property
    def out_of_date(self) -> bool:
        return bool(self.reasons)

    @property
    def first(self) -> bool:
        """Stopped nodes and nodes still carrying the annotation go first; so does a node whose
        etcd member is down: etcd has lost that member already, and while it is down the quorum
        preflight refuses every other member's node, so restarting it first is the way forward."""
        return self.vm_state != "Running" or self.annotated or self.etcd_down

    @property
    def why(self) -> str:
        parts = [r.message for r in self.reasons]
        if self.vm_state != "Running":
            parts.append(f"VM is {self.vm_state}")
        if self.annotated and not self.back:
            parts.append("still cordoned by a rollout that stopped")
        if self.etcd_down:
            parts.append("its etcd member is not healthy")
        if self.restart and not parts:
            parts.append("restart asked, no change")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "node_type": self.node_type, "vm_state": self.vm_state,
                "annotated": self.annotated, "back": self.back, "etcd_down": self.etcd_down, "restart": self.restart,
                "out_of_date": self.out_of_date, "reasons": [r.to_dict() for r in self.reasons], "why": self.why}


@dataclass(frozen=True)
class Batch:
    node_type: str
    nodes: tuple[str, ...]
    #: The first worker batch of a canary plan: one worker alone, so that a bad offering or group
    #: fails on one node before the workers go ``worker_batch_size`` at a time.
    canary: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"node_type": self.node_type, "nodes": list(self.nodes), "canary": self.canary}


@dataclass(frozen=True)
class Plan:
    batches: tuple[Batch, ...]
    nodes: tuple[PlannedNode, ...]  # every node with work left (skipped ones too), in order
    out_of_date: Mapping[str, int]  # node type -> nodes that differ from its settings
    skipped: Mapping[str, str]  # node type -> why its nodes are not restarted
    to_release: tuple[str, ...]  # annotated, back and up to date: uncordon, no restart
    worker_batch_size: int
    #: Nodes with work left that ``selected`` leaves out (they stay out of date); not the held ones.
    not_selected: tuple[str, ...] = ()
    #: Nodes the restart under way restarted already (``restarted``): not restarted again.
    restarted: tuple[str, ...] = ()

    @property
    def hosts(self) -> tuple[str, ...]:
        """The batches' nodes in order, for add_host."""
        return tuple(name for batch in self.batches for name in batch.nodes)

    @property
    def last_error(self) -> Optional[str]:
        """The skipped types, ready for the record's last error; None when nothing is skipped."""
        if not self.skipped:
            return None
        return "; ".join(self.skipped[t] for t in NODE_TYPES if t in self.skipped)

    def to_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "batches": [b.to_dict() for b in self.batches],
            "serial": serial_list(self),
            "hosts": list(self.hosts),
            "nodes": [n.to_dict() for n in self.nodes],
            "skipped": dict(self.skipped),
            "to_release": list(self.to_release),
            "worker_batch_size": self.worker_batch_size,
            "last_error": self.last_error,
            "not_selected": list(self.not_selected),
            "restarted": list(self.restarted),
        }
        for t in NODE_TYPES:
            result[OUT_OF_DATE_KEYS[t]] = self.out_of_date.get(t, 0)
        return result


def _order_key(planned: PlannedNode) -> tuple[int, str]:
    return (0 if planned.first else 1, planned.name)


def plan(view: ClusterView, settings: Settings, max_unavailable: int = 1,
         selected: Optional[Iterable[str]] = None, canary: bool = False,
         etcd_down: Iterable[str] = (), restart: str = RESTART_OUTDATED,
         restarted: Iterable[str] = ()) -> Plan:
    """The nodes to restart, in batches: external etcd nodes one at a time, then control nodes
    one at a time, then workers ``worker_batch_size`` at a time (with ``canary``, the first
    worker alone first, then the others ``worker_batch_size`` at a time).

    The work left is derived from the nodes alone: nodes that differ from their type's
    settings, whose VM is not Running, or that still carry the annotation of a rollout that
    stopped before it verified them. Nodes whose VM is not Running go first of all, each in a
    batch of its own, whatever their type; within a type, the annotated ones go first, then by
    name. A type that cannot lose a node keeps its running nodes out of the batches and is
    reported in ``skipped``; its stopped nodes are still taken (they are down already, nothing
    more is lost). ``selected`` restricts the batches (not the counts) to these nodes.
    ``etcd_down``: the nodes whose etcd member etcd reports unhealthy; those with work left go
    first within their type (they add no work of their own).
    ``restart``: ``selected`` also restarts the nodes ``selected`` names, ``all`` every node, when they
    have nothing to change (the same cycle, the same order and rules).
    ``restarted``: the nodes the restart under way restarted already (``_decisions.restart_round``, a
    rerun of a restart that stopped): ``restart`` asks nothing more of them; work of their own (a
    change, a VM down, left cordoned) still plans them.
    """
    if max_unavailable < 1:
        raise InvalidInput(PARAM_MAX_UNAVAILABLE, max_unavailable, "must be at least 1")
    if restart not in (RESTART_OUTDATED, RESTART_SELECTED, RESTART_ALL):
        raise InvalidInput("restart", restart, f"must be {RESTART_OUTDATED}, {RESTART_SELECTED} or {RESTART_ALL}")
    if restart == RESTART_SELECTED and selected is None:
        raise InvalidInput("restart", restart, "restarts the nodes select names: give select too "
                           "(rollout_select), or restart all")
    chosen: Optional[set[str]] = None
    if selected is not None:
        chosen = {s.lower() for s in selected}
        unknown = sorted(chosen - {n.name for n in view.nodes})
        if unknown:
            raise InvalidInput("nodes", unknown, f"not nodes of cluster {view.name}; its nodes are "
                               f"{', '.join(n.name for n in view.nodes) or 'none'}")

    planned_all: list[PlannedNode] = []
    # Nodes whose VM is down go first of all, whatever their type, each alone: the preflight of
    # every other batch needs every other VM Running, so a stopped worker left for after an
    # out-of-date control type would refuse every control batch, and no rerun would converge.
    # Bringing back a node that is down costs nothing, and one alone keeps the one-at-a-time
    # rule of control and etcd nodes.
    down_batches: list[Batch] = []
    batches: list[Batch] = []
    out_of_date: dict[str, int] = {}
    skipped: dict[str, str] = {}
    to_release: list[str] = []
    not_selected: list[str] = []
    workers = len(view.nodes_of(WORKER))
    size = worker_batch_size(max_unavailable, workers)
    members_down = {name.lower() for name in etcd_down}
    done = {name.lower() for name in restarted}

    for t in NODE_TYPES:
        planned: list[PlannedNode] = []
        for node in view.nodes_of(t):
            reasons = tuple(outdated_reasons(node, settings[t], view))
            stuck = node.annotated and not node.back
            asked = node.name not in done and (
                restart == RESTART_ALL or (restart == RESTART_SELECTED and chosen is not None and node.name in chosen))
            if reasons or not node.running or stuck or asked:
                planned.append(PlannedNode(node.name, t, node.vm_state, reasons, node.annotated, node.back,
                                           etcd_down=node.running and node.name in members_down, restart=asked))
            elif node.annotated:
                to_release.append(node.name)
        planned.sort(key=_order_key)
        planned_all.extend(planned)
        out_of_date[t] = sum(1 for p in planned if p.out_of_date)

        rollable, why = can_lose_a_node(t, view)
        held = [p for p in planned if p.vm_state == "Running"] if not rollable else []
        if held:
            skipped[t] = f"{t} nodes not restarted: {', '.join(f'{p.name} ({p.why})' for p in held)}: {why}"
        held_names = {p.name for p in held}
        names = [p.name for p in planned if p.name not in held_names
                 and (chosen is None or p.name in chosen)]
        # A set: tested once per planned node, a list would make planning quadratic in the cluster.
        rolled = set(names)
        not_selected += [p.name for p in planned if p.name not in held_names and p.name not in rolled]
        down = {p.name for p in planned if p.vm_state != "Running"}
        for name in names:
            if name in down:
                # A stopped worker alone is a canary too: the first worker to get the new settings.
                down_batches.append(Batch(t, (name,), canary=canary and t == WORKER
                                          and not any(b.canary for b in down_batches)))
        names = [n for n in names if n not in down]
        step = size if t == WORKER else 1
        first = 0
        canary_taken = any(b.canary for b in down_batches)
        if canary and t == WORKER and names and not canary_taken:
            # The canary is simply the first worker in plan order: the order (stopped and
            # annotated first, then by name) and the hosts stay what they are without it.
            batches.append(Batch(t, (names[0],), canary=True))
            first = 1
        for start in range(first, len(names), step):
            batches.append(Batch(t, tuple(names[start:start + step])))

    return Plan(batches=tuple(down_batches + batches), nodes=tuple(planned_all), out_of_date=out_of_date,
                skipped=skipped, to_release=tuple(to_release), worker_batch_size=size,
                not_selected=tuple(not_selected),
                restarted=tuple(sorted(n.name for n in view.nodes if n.name in done)))


def serial_list(rollout_plan: Plan) -> list[int]:
    """Ansible ``serial`` for the plan's hosts: one entry per batch.

    Ansible uses each entry once, in order, and repeats the last; one entry per batch makes
    every batch exactly one play pass. An empty plan gives [] (the play has no hosts).
    """
    return [len(b.nodes) for b in rollout_plan.batches]
