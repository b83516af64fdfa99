# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The starts of a batch's nodes that share a strict host (anti-)affinity group, one after another.

Each node's cycle runs on its own thread; a start holds the gate of each strict group it shares
with another node of the batch (``_decisions.placement.start_one_by_one``) until its job has ended,
that is until the VM is Running (or the start failed): the next node of the group is planned only
then, with the one before already on its host. Gates are taken in one order (by group id), so two
nodes sharing two groups never wait on each other.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Iterator, Mapping, Sequence


class StartGates:
    """One lock per shared strict group; ``held(node)`` around the node's start."""

    def __init__(self, groups: Mapping[str, Sequence[str]] | None = None) -> None:
        self._groups = {name: tuple(sorted(ids)) for name, ids in (groups or {}).items()}
        self._locks = {gid: threading.Lock() for ids in self._groups.values() for gid in ids}
        #: Seconds each node's start waited for the nodes of its groups before it (the planner's turn).
        self.waited: dict[str, float] = {}

    def groups_of(self, node: str) -> tuple[str, ...]:
        return self._groups.get(node, ())

    @contextlib.contextmanager
    def held(self, node: str) -> Iterator[tuple[str, ...]]:
        ids = self.groups_of(node)
        asked = time.monotonic()
        with contextlib.ExitStack() as stack:
            for gid in ids:
                stack.enter_context(self._locks[gid])
            self.waited[node] = round(time.monotonic() - asked, 3)
            yield ids
