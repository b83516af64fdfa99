# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""``release``: how every rollout ends, whatever stopped it. Idempotent: run it twice, same end.

1. Uncordon the annotated nodes that are back (Ready with a boot ID other than the annotated
   one) and remove their annotation; also those that never went down (annotated and cordoned,
   but no stop was ever sent: a drain that failed). Every other annotated node stays cordoned,
   with the reason. A node without our annotation is never uncordoned: someone else cordoned it.
   The rollout's marks (``_decisions.marks``) come off too: the pending taint from every node that
   carries it, whatever this run's options (a killed run's leftovers); our load-balancer
   exclusion from the nodes uncordoned and any other node in service, in the same write.
2. Recount the cluster's CPU cores and memory from the VMs' actual offerings (CloudStack's own
   numbers go stale: nothing outside the management server can update them).
3. The outcome: Running when every VM runs, every node is Ready and no node was left cordoned;
   Alert otherwise. It goes into the record with the last error (or the error is cleared).
4. Give the lock back, if this run still holds it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import CloudStackApi, KubernetesApi, RolloutLock
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.health import capacity, health_problems, outcome, release_plan
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.marks import Marks, release_marks
from ansible_collections.cloudstack.cks.plugins.module_utils._model.loader import ClusterLoader
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.marks import put_back
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import RecordStore


@dataclass
class ReleaseResult:
    uncordoned: list[dict[str, str]] = field(default_factory=list)
    left_cordoned: list[dict[str, str]] = field(default_factory=list)
    cordoned_by_others: list[str] = field(default_factory=list)
    pending_taint_removed: list[str] = field(default_factory=list)
    lb_exclusion_removed: list[str] = field(default_factory=list)
    lb_exclusion_kept: list[dict[str, str]] = field(default_factory=list)
    cores: int = 0
    memory_mb: int = 0
    cloudstack_cores: Optional[int] = None
    cloudstack_memory_mb: Optional[int] = None
    outcome: str = "Running"
    problems: list[str] = field(default_factory=list)
    last_error: Optional[str] = None
    lock_released: bool = False
    #: Another rollout holds the lock (it took it over after ours expired): nothing was done.
    lock_held_by: Optional[dict[str, Any]] = None
    changed: bool = False
    started: float = 0.0
    ended: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "uncordoned": [dict(u) for u in self.uncordoned],
            "left_cordoned": [dict(x) for x in self.left_cordoned],
            "cordoned_by_others": list(self.cordoned_by_others),
            "pending_taint_removed": list(self.pending_taint_removed),
            "lb_exclusion_removed": list(self.lb_exclusion_removed),
            "lb_exclusion_kept": [dict(k) for k in self.lb_exclusion_kept],
            "capacity": {"cores": self.cores, "memory_mb": self.memory_mb,
                         "cloudstack_cores": self.cloudstack_cores,
                         "cloudstack_memory_mb": self.cloudstack_memory_mb},
            "outcome": self.outcome,
            "problems": list(self.problems),
            "last_error": self.last_error,
            "lock_released": self.lock_released,
            "lock_held_by": dict(self.lock_held_by) if self.lock_held_by else None,
            "started": self.started,
            "ended": self.ended,
        }


def compose_last_error(last_error: Optional[str], skipped: Optional[Sequence[str] | str],
                       left: Sequence[tuple[str, str]]) -> Optional[str]:
    """Why the rollout stopped, which types or nodes were skipped, which nodes were left cordoned."""
    parts: list[str] = []
    if last_error:
        parts.append(str(last_error))
    if skipped:
        parts.extend([skipped] if isinstance(skipped, str) else [str(s) for s in skipped if s])
    if left and parts:
        # Only with an error: a clean rollout leaves no node cordoned, and a leftover from an
        # earlier run is already in the report; the error says why they stay.
        parts.append("left cordoned: " + ", ".join(f"{name} ({why})" for name, why in left))
    return "; ".join(parts) or None


class Release:
    """``Release(cloud, kube, loader, cluster, record_store, lock).run(last_error, skipped)``."""

    def __init__(self, cloud: CloudStackApi, kube: KubernetesApi, loader: ClusterLoader, cluster: str,
                 record_store: Optional[RecordStore] = None, lock: Optional[RolloutLock] = None,
                 project_id: Optional[str] = None, check_mode: bool = False) -> None:
        self.cloud = cloud
        self.kube = kube
        self.loader = loader
        self.cluster = cluster
        self.record_store = record_store
        self.lock = lock
        self.project_id = project_id
        self.check_mode = check_mode

    def run(self, last_error: Optional[str] = None,
            skipped: Optional[Sequence[str] | str] = None) -> ReleaseResult:
        result = ReleaseResult(started=time.time())
        view = self.loader.load(self.cluster, self.project_id)
        uncordon, leave = release_plan(view)
        marks, kept = release_marks(view, [name for name, _why in uncordon])
        for name, why in uncordon:
            self._put_back(name, marks.pop(name, Marks()), True, result)
            result.uncordoned.append({"node": name, "why": why})
            result.changed = True
        for name, taken in sorted(marks.items()):
            self._put_back(name, taken, False, result)
            result.changed = True
        result.lb_exclusion_kept = [{"node": name, "why": why} for name, why in kept]
        result.left_cordoned = [{"node": name, "why": why} for name, why in leave]
        result.cordoned_by_others = [n.name for n in view.nodes if n.cordoned_by_others]

        result.cores, result.memory_mb = capacity(view)
        result.cloudstack_cores, result.cloudstack_memory_mb = view.recorded_cores, view.recorded_memory_mb
        result.problems = health_problems(view) + [
            f"{name}: left cordoned ({why})" for name, why in leave]
        result.outcome = "Alert" if result.problems else outcome(view)
        result.last_error = compose_last_error(last_error, skipped, leave)

        if not self.check_mode:
            if self.record_store is not None:
                result.changed |= bool(self._record(result))
            if self.lock is not None:
                # Giving the lock back is reported (lock_released), not counted as a change.
                result.lock_released = bool(self._release_lock())
        result.ended = time.time()
        return result

    def _put_back(self, name: str, marks: Marks, uncordon: bool, result: ReleaseResult) -> None:
        """One write per node: uncordon (if ``uncordon``) and take ``marks`` off."""
        if not self.check_mode:
            put_back(self.kube, name, marks, uncordon)
        if marks.pending_taint:
            result.pending_taint_removed.append(name)
        if marks.lb_exclusion:
            result.lb_exclusion_removed.append(name)

    def _record(self, result: ReleaseResult) -> bool:
        """Store the outcome and the last error (cleared when None). True if the record changed."""
        store = self.record_store
        if store is None:
            return False
        current = store.read()
        if current is not None and current.outcome == result.outcome and current.last_error == result.last_error \
                and not current.previous_holder_stopped:
            return False

        def change(record: Any) -> None:
            record.outcome = result.outcome
            record.last_error = result.last_error
            # The rollout that stopped without release is released now: status stops naming it.
            record.previous_holder_stopped = None

        store.update(change)
        return True

    def _release_lock(self) -> bool:
        """Give the lock back if we hold it; False when it was not ours or already free."""
        return self.lock is not None and bool(self.lock.release())
