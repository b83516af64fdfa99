# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""A rolling restart under way (``rollout_restart: selected | all``) and how a rerun resumes it. Pure.

A restart changes no setting, so the nodes themselves do not show which ones a killed or failed run
already restarted: every node is "up to date" before and after. What does show it is the node's
boot ID (``status.nodeInfo.bootID``, new at every boot, kept by a kubelet restart): the rollout
record (the ConfigMap next to the lock) keeps, when a restart begins, its scope and each node's boot
ID then - the restart round. A later run of the same scope finds the round unfinished and resumes it:
a node whose boot ID differs from the one recorded has booted since the round began (by this
restart, or by anything else: either way it runs a fresh boot, which is what was asked) and is not
restarted again; the others are. Nothing is read from local files, so a rerun from another
controller (an AWX job on another node) resumes all the same.

The round ends when a rollout of its scope finishes every batch (the release clears it); a failed,
cancelled or killed run leaves it for the rerun. A restart run after that is a new round: every
node again. A run of another scope (``selected`` naming other nodes, or ``all`` after ``selected``)
starts a new round in place of the old one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._common.option_defaults import (
    RESTART_ALL,
    RESTART_SELECTED,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import Node


def restart_scope(restart: str, selected: Optional[Iterable[str]]) -> Optional[str]:
    """What a restart run restarts, as the round records it: ``all``, or ``selected:`` and the names
    (sorted, lower case); None for ``outdated`` (no round: the nodes' settings show the work left)."""
    if restart == RESTART_ALL:
        return RESTART_ALL
    if restart == RESTART_SELECTED and selected is not None:
        return f"{RESTART_SELECTED}:" + ",".join(sorted({s.lower() for s in selected}))
    return None


@dataclass(frozen=True)
class RestartRound:
    """A restart that began: its scope, each node's boot ID when it began, when and by which run."""

    scope: str
    boot_ids: Mapping[str, str] = field(default_factory=dict)
    started: Optional[str] = None
    run_id: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        return {"scope": self.scope, "boot_ids": dict(sorted(self.boot_ids.items())), "started": self.started,
                "run_id": self.run_id}

    @classmethod
    def from_dict(cls, data: Any) -> Optional[RestartRound]:
        """The round as the record holds it; None for nothing, or for anything not shaped as one (a
        round that cannot be read resumes nothing: the restart then restarts every node of its scope)."""
        if not isinstance(data, Mapping) or not isinstance(data.get("scope"), str) or not data["scope"]:
            return None
        boot_ids = data.get("boot_ids")
        if not isinstance(boot_ids, Mapping):
            return None
        return cls(scope=data["scope"], boot_ids={str(k): str(v or "") for k, v in boot_ids.items()},
                   started=data.get("started") or None, run_id=data.get("run_id") or None)


def new_round(scope: str, nodes: Iterable[Node], started: Optional[str], run_id: Optional[str]) -> RestartRound:
    """The round a restart of ``scope`` begins with: every Kubernetes node's boot ID now ("" when it
    reports none: its first boot ID after that counts as a fresh boot)."""
    return RestartRound(scope=scope, boot_ids={n.name: n.boot_id or "" for n in nodes if n.is_kubernetes_node},
                        started=started, run_id=run_id)


def resumed_round(stored: Optional[Mapping[str, Any]], scope: Optional[str]) -> Optional[RestartRound]:
    """The round a run of ``scope`` resumes: the recorded one when it has the same scope; else None
    (a new round begins)."""
    if scope is None:
        return None
    found = RestartRound.from_dict(stored)
    return found if found is not None and found.scope == scope else None


def already_restarted(found: Optional[RestartRound], nodes: Iterable[Node]) -> tuple[str, ...]:
    """The nodes the round ``found`` needs to restart no more: recorded when it began, and reporting a
    boot ID now that differs from the one recorded (a fresh boot since). A node not recorded (added
    since), or reporting no boot ID now (its VM down, its kubelet not posting), is still to restart."""
    if found is None:
        return ()
    done = []
    for node in nodes:
        then = found.boot_ids.get(node.name)
        if then is not None and node.boot_id and node.boot_id != then:
            done.append(node.name)
    return tuple(sorted(done))


def round_to_store(planned: Optional[Mapping[str, Any]], nodes: Iterable[Node], started: Optional[str],
                   run_id: Optional[str]) -> Optional[RestartRound]:
    """What the rollout writes into the record once it holds the lock, from the plan's
    ``restart_round`` (``outdated_report``): the new round of a restart that resumes none; None when
    nothing is to be written (a resumed round stays as it began; ``outdated`` has no round)."""
    if not planned or planned.get("resumed") or not planned.get("scope"):
        return None
    return new_round(str(planned["scope"]), nodes, started, run_id)


def round_ends(stored: Optional[Mapping[str, Any]], scope: Optional[str], result: Optional[str]) -> bool:
    """Whether the release clears the recorded round: a rollout of its scope that ran every batch
    (``result`` ``done``). A failed, cancelled or killed run keeps it for the rerun, and a rollout of
    another scope (``outdated`` among them) leaves it alone."""
    found = RestartRound.from_dict(stored)
    return found is not None and scope is not None and found.scope == scope and result == "done"


def round_words(scope: Optional[str], resumed: Optional[RestartRound], restarted: Iterable[str]) -> Optional[str]:
    """One line for the plan: the round begun, or the one resumed and the nodes it restarts no more."""
    if scope is None:
        return None
    if resumed is None:
        return f"restart {scope}: a new round (every node of it restarted)"
    names = list(restarted)
    since = f" begun {resumed.started}" if resumed.started else ""
    by = f" by {resumed.run_id}" if resumed.run_id else ""
    return (f"restart {scope}: resumes the round{since}{by}; restarted since it began, not again: "
            f"{', '.join(names) or '-'}")
