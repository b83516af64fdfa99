# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Validation between batches: is the cluster still healthy after a batch, before the next one
takes more capacity away? (kOps's ``--validate-count`` / ``--validation-timeout``.)

One round reads three things and judges them (``round_problems``, pure):

- every Kubernetes node Ready (kubelet Ready, no ``unreachable`` / ``not-ready`` taint);
- the API server's ``/readyz`` answering 200 (its own checks, etcd behind it included);
- with etcd endpoints configured, etcd keeping a quorum of healthy voting members and answering
  a quorum read. A single member down does not fail the round: the quorum preflight of the next
  etcd or control batch decides whether that batch may go, and restarting that member's node is
  what brings it back. The unhealthy members are still named in the round's notes.

``validate`` repeats rounds, pausing ``interval`` seconds after each (kOps sleeps between
validations too), until ``count`` consecutive rounds pass (a failed round starts the count again),
or fails once the next round could not start within ``timeout``. The first round always runs,
whatever the timeout.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError
from ansible_collections.cloudstack.cks.plugins.module_utils._common.option_defaults import default_of
from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import KubernetesApi
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.health import round_problems

DEFAULT_COUNT: int = default_of("validate_count")
DEFAULT_INTERVAL: float = default_of("validate_interval")
DEFAULT_TIMEOUT: float = default_of("validate_timeout")


@dataclass(frozen=True)
class ValidationOptions:
    count: int = DEFAULT_COUNT  # consecutive passing rounds needed; 0: no validation
    interval: float = DEFAULT_INTERVAL  # seconds from the end of one round to the start of the next
    timeout: float = DEFAULT_TIMEOUT  # no round starts later than this after the first

    @property
    def enabled(self) -> bool:
        return self.count > 0


@dataclass
class Round:
    started: float
    ended: float
    problems: list[str]
    notes: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"started": self.started, "ended": self.ended, "ok": self.ok, "problems": list(self.problems),
                "notes": self.notes}


@dataclass
class ValidationResult:
    options: ValidationOptions
    rounds: list[Round] = field(default_factory=list)
    passes: int = 0  # consecutive passing rounds at the end
    started: float = 0.0
    ended: float = 0.0

    @property
    def ok(self) -> bool:
        return self.passes >= self.options.count

    @property
    def last_problems(self) -> list[str]:
        """The problems of the latest round that failed (the last rounds may have passed since)."""
        failed = [r for r in self.rounds if not r.ok]
        return failed[-1].problems if failed else []

    def message(self) -> str:
        """Why the cluster did not validate, naming the nodes and components at fault."""
        problems = "; ".join(self.last_problems) or "no failed round recorded"
        return (f"the cluster did not validate within {self.options.timeout:g}s after the batch "
                f"({self.passes} of {self.options.count} consecutive passes in {len(self.rounds)} rounds "
                f"{self.options.interval:g}s apart): {problems}")

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.options.count, "interval": self.options.interval, "timeout": self.options.timeout,
                "ok": self.ok, "passes": self.passes, "rounds": [r.to_dict() for r in self.rounds],
                "started": self.started, "ended": self.ended}


#: One round: ``() -> (problems, notes)``; reads that fail are problems, not exceptions.
RoundReader = Callable[[], "tuple[list[str], str]"]


def validate(read_round: RoundReader, options: ValidationOptions, clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep, wall: Callable[[], float] = time.time) -> ValidationResult:
    """Rounds with ``options.interval`` seconds between them until ``options.count`` consecutive
    ones pass.

    The pause counts from a round's end, so every read of a round comes at least ``interval``
    after every read of the round before (a flapping cluster is caught between them). A round
    starts only if it can start within ``options.timeout`` of the first one.
    """
    result = ValidationResult(options, started=wall())
    if not options.enabled:
        result.ended = result.started
        return result
    first = clock()
    while True:
        started = wall()
        problems, notes = read_round()
        result.rounds.append(Round(started, wall(), list(problems), notes))
        result.passes = 0 if problems else result.passes + 1
        if result.ok or clock() + options.interval - first > options.timeout:
            break
        sleep(options.interval)
    result.ended = wall()
    return result


class ClusterReader:
    """One round's reads: the nodes, the API server's /readyz, and etcd if an etcd check is given.

    ``kube``: KubeClient; ``etcd_check``: cycle.EtcdCheck (called with nobody going down).
    ``watched``: the nodes as the batch's watch shows them once it has caught up with the batch's
    last writes (``NodeWatch.nodes_after``), or None: then the round lists them. Either way the
    round judges a state from after the batch, not one from before its last change.
    """

    def __init__(self, kube: KubernetesApi, etcd_check: Optional[Callable[..., tuple[bool, str]]] = None,
                 watched: Optional[Callable[[], Optional[list[dict[str, Any]]]]] = None) -> None:
        self.kube = kube
        self.etcd_check = etcd_check
        self.watched = watched

    def __call__(self) -> tuple[list[str], str]:
        problems: list[str] = []
        try:
            seen = self.watched() if self.watched is not None else None
            nodes = seen if seen is not None else self.kube.list_nodes()
        except CksError as exc:
            problems.append(f"cannot list the nodes: {exc.msg}")
            nodes = []
        try:
            readyz = self.kube.raw_get("/readyz")
        except CksError as exc:
            readyz = (0, exc.msg)
        etcd: Optional[tuple[bool, str]] = None
        if self.etcd_check is not None:
            etcd = self.etcd_check(without=[])
        problems += round_problems(nodes, readyz, etcd)
        # With the quorum kept, unhealthy members are worth a note, not a failure (see above).
        notes = f"etcd: {etcd[1]}" if etcd is not None and etcd[0] and "unhealthy" in etcd[1] else ""
        return problems, notes
