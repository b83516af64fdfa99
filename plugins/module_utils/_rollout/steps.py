# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The steps of a node's cycle, in order, as one table: the real run, check mode and the three phases
of a batch with per-node hooks all read it, so the sequence is written once.

With hooks a batch runs in three module runs, so that the operator's tasks run on each node between
them: ``cordon`` (annotate, cordon, label out of the load balancers), ``restart`` (drain ... verify)
and ``uncordon`` (re-check the node is still back, uncordon). ``all`` runs every step in one run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Protocol

PHASE_ALL, PHASE_CORDON, PHASE_RESTART, PHASE_UNCORDON = "all", "cordon", "restart", "uncordon"
PHASES = (PHASE_ALL, PHASE_CORDON, PHASE_RESTART, PHASE_UNCORDON)
#: A node's outcome when its phase went through: only the last phase (or ``all``) makes it done.
PHASE_OUTCOMES = {PHASE_ALL: "done", PHASE_CORDON: "cordoned", PHASE_RESTART: "restarted", PHASE_UNCORDON: "done"}


class StepSwitches(Protocol):
    """The batch options that turn steps on (a CycleOptions satisfies it)."""

    exclude_from_load_balancers: bool


def _excluding_from_load_balancers(options: StepSwitches) -> bool:
    return options.exclude_from_load_balancers


@dataclass(frozen=True)
class Step:
    """One step of a node's cycle.

    ``phase``: the phase of a hooked batch that runs it. ``kubernetes``: only for a node that is a
    Kubernetes node (an external etcd node is a VM only). ``option``: reads the CycleOptions flag
    that turns it on (``None``: always on). ``again_in``: a later phase that does it again where a
    hook undid it; there it is recorded only when it has something to do. ``in_all``: part of a batch
    run in one go (``recheck`` only re-reads what an earlier run of the same batch left).
    ``read_only``: it changes nothing, so it does not make the node "changed".
    """

    name: str
    phase: str
    kubernetes: bool = False
    option: Optional[Callable[[StepSwitches], bool]] = None
    again_in: Optional[str] = None
    in_all: bool = True
    read_only: bool = False


STEPS: tuple[Step, ...] = (
    Step("annotate", PHASE_CORDON, kubernetes=True, again_in=PHASE_RESTART),
    Step("cordon", PHASE_CORDON, kubernetes=True, again_in=PHASE_RESTART),
    Step("exclude_from_lb", PHASE_CORDON, kubernetes=True, option=_excluding_from_load_balancers,
         again_in=PHASE_RESTART),
    Step("drain", PHASE_RESTART, kubernetes=True),
    Step("lb_wait", PHASE_RESTART, kubernetes=True, option=_excluding_from_load_balancers),
    Step("stop", PHASE_RESTART),
    Step("change_offering", PHASE_RESTART),
    Step("resize_root_disk", PHASE_RESTART),
    Step("update_affinity_groups", PHASE_RESTART),
    Step("start", PHASE_RESTART),
    Step("verify", PHASE_RESTART, read_only=True),
    Step("recheck", PHASE_UNCORDON, in_all=False, read_only=True),
    Step("uncordon", PHASE_UNCORDON, kubernetes=True),
    Step("unmark", PHASE_UNCORDON, kubernetes=True),
)

#: The steps each phase of a hooked batch runs first time round.
PHASE_STEPS: dict[str, frozenset[str]] = {
    phase: frozenset(s.name for s in STEPS if s.phase == phase) for phase in (PHASE_CORDON, PHASE_RESTART, PHASE_UNCORDON)
}
READ_ONLY_STEPS = frozenset(s.name for s in STEPS if s.read_only)


def steps_for(phase: str, kubernetes_node: bool, options: StepSwitches, again: bool = True) -> Iterator[tuple[Step, bool]]:
    """The steps a phase runs for a node, in order, each with whether it is a step done again.

    ``options``: the batch's CycleOptions (for the steps' ``option`` switches). ``again``: include the steps a
    later phase does again (check mode leaves them out: they only run where a hook undid them).
    """
    for step in STEPS:
        if step.kubernetes and not kubernetes_node:
            continue
        if step.option is not None and not step.option(options):
            continue
        if phase == PHASE_ALL:
            if step.in_all:
                yield step, False
        elif step.phase == phase:
            yield step, False
        elif again and step.again_in == phase:
            yield step, True
