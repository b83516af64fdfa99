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

Each step is tried again on transient faults until it is done or ``DEFAULT_RELEASE_SECONDS``
(for all steps together) are up; the lock goes back last, so that no other rollout starts on a
cluster this one is still putting back. If an API stays down that long, ``ReleaseUnfinished``
says exactly what is left: the lock held until its lease expires, the nodes still cordoned.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable, Optional, Sequence, TypeVar

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.autoscaler import release_holds
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.retry import RetryPolicy, retry_report
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, CloudStackError, KubernetesError
from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import CloudStackApi, KubernetesApi, RolloutLock
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.autoscaler import HOLD_ANNOTATION
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.health import capacity, health_problems, outcome, release_plan
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.marks import Marks, release_marks
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node_events import released_event
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.restart_round import round_ends
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ClusterView
from ansible_collections.cloudstack.cks.plugins.module_utils._model.loader import ClusterLoader
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.marks import return_to_service
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.options import NodeEventSink
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import RecordStore, format_microtime, parse_microtime

T = TypeVar("T")

# How long a release keeps trying while an API fails: long enough for a kube-apiserver restart
# or a management server failover, short enough that an operator is told what is left.
DEFAULT_RELEASE_SECONDS = 120.0


def is_transient(error: CksError) -> bool:
    """An API failure another try may cure (no answer, 429, 5xx that is not CloudStack's own)."""
    if isinstance(error, KubernetesError):
        return error.status is None or error.status == 429 or error.status >= 500
    if isinstance(error, CloudStackError):
        code = error.errorcode
        return code is None or code == 429 or (500 <= code < 600 and not 530 <= code <= 537)
    return False


class ReleaseUnfinished(CksError):
    """The release could not finish while an API kept failing; the message says what is left."""


class Persistent:
    """Runs the release's steps, each again after a transient fault, all within one deadline.

    Once the deadline is past, a step still gets its one try (the lock must at least be tried).
    """

    def __init__(self, seconds: float = DEFAULT_RELEASE_SECONDS, policy: Optional[RetryPolicy] = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.deadline = Deadline(seconds)
        self.policy = policy or RetryPolicy(attempts=10 ** 6, max_delay=10.0)
        self._sleep = sleep
        self.unfinished: list[dict[str, str]] = []

    def run(self, step: str, fn: Callable[[], T]) -> Optional[T]:
        """``fn()``'s value, or None when it kept failing (the step is listed in ``unfinished``)."""
        retry = 0
        while True:
            try:
                return fn()
            except CksError as exc:
                if not is_transient(exc):
                    raise
                retry += 1
                wait = self.policy.delay(retry)
                if self.deadline.remaining() <= wait:
                    self.unfinished.append({"step": step, "error": exc.msg})
                    return None
                self._sleep(wait)


@dataclass
class ReleaseResult:
    uncordoned: list[dict[str, str]] = field(default_factory=list)
    left_cordoned: list[dict[str, str]] = field(default_factory=list)
    cordoned_by_others: list[str] = field(default_factory=list)
    pending_taint_removed: list[str] = field(default_factory=list)
    lb_exclusion_removed: list[str] = field(default_factory=list)
    lb_exclusion_kept: list[dict[str, str]] = field(default_factory=list)
    #: Nodes whose scale-down-disabled mark the rollout had put on came off (their own value back).
    scale_down_restored: list[str] = field(default_factory=list)
    cores: int = 0
    memory_mb: int = 0
    cloudstack_cores: Optional[int] = None
    cloudstack_memory_mb: Optional[int] = None
    outcome: str = "Running"
    #: How the rollout ended, as its caller says ("done", "failed at batch 2 of 5", "cancelled before ...").
    result: Optional[str] = None
    problems: list[str] = field(default_factory=list)
    last_error: Optional[str] = None
    lock_released: bool = False
    #: Another rollout holds the lock (it took it over after ours expired): nothing was done.
    lock_held_by: Optional[dict[str, Any]] = None
    changed: bool = False
    started: float = 0.0
    ended: float = 0.0
    retries: dict[str, Any] = field(default_factory=dict)
    unfinished: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "uncordoned": [dict(u) for u in self.uncordoned],
            "left_cordoned": [dict(x) for x in self.left_cordoned],
            "cordoned_by_others": list(self.cordoned_by_others),
            "pending_taint_removed": list(self.pending_taint_removed),
            "lb_exclusion_removed": list(self.lb_exclusion_removed),
            "lb_exclusion_kept": [dict(k) for k in self.lb_exclusion_kept],
            "scale_down_restored": list(self.scale_down_restored),
            "capacity": {"cores": self.cores, "memory_mb": self.memory_mb,
                         "cloudstack_cores": self.cloudstack_cores,
                         "cloudstack_memory_mb": self.cloudstack_memory_mb},
            "outcome": self.outcome,
            "result": self.result,
            "problems": list(self.problems),
            "last_error": self.last_error,
            "lock_released": self.lock_released,
            "lock_held_by": dict(self.lock_held_by) if self.lock_held_by else None,
            "started": self.started,
            "ended": self.ended,
            "retries": dict(self.retries),
            "unfinished": [dict(u) for u in self.unfinished],
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
                 project_id: Optional[str] = None, check_mode: bool = False,
                 seconds: float = DEFAULT_RELEASE_SECONDS, sleep: Callable[[float], None] = time.sleep,
                 node_events: Optional[NodeEventSink] = None, restart_scope: Optional[str] = None) -> None:
        self.seconds = float(seconds)
        self._sleep = sleep
        self.cloud = cloud
        self.kube = kube
        self.loader = loader
        self.cluster = cluster
        self.record_store = record_store
        self.lock = lock
        self.project_id = project_id
        self.check_mode = check_mode
        #: The cluster as the release read it (None until it could be read): the node settings are
        #: not changed by a release, so the caller judges what is still out of date from it.
        self.view: Optional[ClusterView] = None
        #: The record as the release read it before recording the outcome (its stored settings).
        self.record: Optional[Any] = None
        #: Where the release's Events about the nodes go (``_clients/node_events.NodeEvents``); None: none.
        self.node_events = node_events
        #: The scope of the restart round this rollout began or resumed (None: no restart round):
        #: a rollout that ran every batch ends it (``_decisions.restart_round.round_ends``).
        self.restart_scope = restart_scope

    def run(self, last_error: Optional[str] = None, skipped: Optional[Sequence[str] | str] = None,
            rollout_result: Optional[str] = None) -> ReleaseResult:
        # A caller that does not say how the rollout ended: an error means it failed.
        result = ReleaseResult(started=time.time(), result=rollout_result or ("failed" if last_error else "done"))
        steps = Persistent(self.seconds, sleep=self._sleep)
        view = steps.run("read the cluster", lambda: self.loader.load(self.cluster, self.project_id))
        self.view = view
        if view is not None:
            self._return_nodes(view, result, steps, last_error, skipped)
        if not self.check_mode and self.lock is not None:
            # Giving the lock back is reported (lock_released), not counted as a change.
            result.lock_released = bool(steps.run("give the lock back", self._release_lock))
        result.ended = time.time()
        result.retries = retry_report(("cloudstack", self.cloud.retry_log), ("kubernetes", self.kube.retry_log))
        if steps.unfinished:
            result.unfinished = steps.unfinished
            raise ReleaseUnfinished(self._left_message(result, view, steps), release=result.to_dict())
        return result

    def _return_nodes(self, view: ClusterView, result: ReleaseResult, steps: Persistent,
                      last_error: Optional[str], skipped: Optional[Sequence[str] | str]) -> None:
        uncordon, leave = release_plan(view)
        marks, kept = release_marks(view, [name for name, _why in uncordon])
        for name, why in uncordon:
            taken = marks.pop(name, Marks())
            if steps.run(f"uncordon {name}", functools.partial(self._return_to_service, name, taken, True, result)):
                result.uncordoned.append({"node": name, "why": why})
                result.changed = True
            else:
                leave.append((name, "back, but the uncordon kept failing"))
        for name, taken in sorted(marks.items()):
            if steps.run(f"take the rollout's marks off {name}", functools.partial(self._return_to_service, name, taken, False, result)):
                result.changed = True
        result.lb_exclusion_kept = [{"node": name, "why": why} for name, why in kept]
        # The cluster autoscaler's scale-down-disabled mark comes off every node the rollout put it
        # on, however it ended (its own value back); a node that had "true" kept it all along.
        held = [{"metadata": {"name": n.name, "annotations": dict(n.annotations)}} for n in view.nodes
                if n.is_kubernetes_node and HOLD_ANNOTATION in n.annotations]
        if held:
            restored = steps.run("take the scale-down-disabled marks off",
                                 lambda: release_holds(self.kube, held, self.check_mode))
            result.scale_down_restored = list(restored or [])
            result.changed = result.changed or bool(restored)
        result.left_cordoned = [{"node": name, "why": why} for name, why in leave]
        self._tell(view, result)
        result.cordoned_by_others = [n.name for n in view.nodes if n.cordoned_by_others]

        result.cores, result.memory_mb = capacity(view)
        result.cloudstack_cores, result.cloudstack_memory_mb = view.recorded_cores, view.recorded_memory_mb
        result.problems = health_problems(view) + [
            f"{name}: left cordoned ({why})" for name, why in leave]
        result.outcome = "Alert" if result.problems else outcome(view)
        result.last_error = compose_last_error(last_error, skipped, leave)

        if not self.check_mode and self.record_store is not None:
            result.changed |= bool(steps.run("record the outcome", lambda: self._record(result)))

    def _tell(self, view: ClusterView, result: ReleaseResult) -> None:
        """The nodes' Events: each one uncordoned, each one left cordoned, and why."""
        events = self.node_events
        if events is None or self.check_mode:
            return
        run = events.run
        told = [(u["node"], True, u["why"]) for u in result.uncordoned] + [
            (u["node"], False, u["why"]) for u in result.left_cordoned]
        for name, uncordoned, why in told:
            known = view.k8s_objects.get(name) or {}
            if known:
                events.record(name, (known.get("metadata") or {}).get("uid"), released_event(uncordoned, why, run))

    def _left_message(self, result: ReleaseResult, view: Optional[ClusterView], steps: Persistent) -> str:
        failed = "; ".join(f"{u['step']}: {u['error']}" for u in steps.unfinished)
        parts = [f"release did not finish within {self.seconds:g}s while the APIs kept failing ({failed})"]
        if self.lock is not None and not result.lock_released:
            parts.append(self._lock_left(self.lock))
        if view is None:
            parts.append("the cluster could not be read, so which nodes are still cordoned is not known: "
                         "run the status playbook once the APIs answer")
        elif result.left_cordoned:
            parts.append("left cordoned: " + ", ".join(f"{x['node']} ({x['why']})" for x in result.left_cordoned))
        parts.append("run the release (or the rollout) again once the APIs answer; nothing else needs undoing")
        return "; ".join(parts)

    @staticmethod
    def _lock_left(lock: RolloutLock) -> str:
        seen = lock.last_seen
        name = f"{lock.namespace}/{lock.name}"
        holder = lock.holder_identity
        if seen is not None and seen.renew_time:
            try:
                until = format_microtime(parse_microtime(seen.renew_time) + timedelta(seconds=seen.duration_seconds))
                return (f"the lock {name} stays held by {holder} until {until} (its lease then expires and the "
                        f"next rollout takes over)")
            except ValueError:
                pass
        return (f"the lock {name} stays held by {holder} until its lease expires (leaseDurationSeconds after its "
                f"last renewal; the status playbook shows when)")

    def _return_to_service(self, name: str, marks: Marks, uncordon: bool, result: ReleaseResult) -> bool:
        """One write per node: uncordon (if ``uncordon``) and take ``marks`` off. True when done."""
        if not self.check_mode:
            return_to_service(self.kube, name, marks, uncordon)
        if marks.pending_taint:
            result.pending_taint_removed.append(name)
        if marks.lb_exclusion:
            result.lb_exclusion_removed.append(name)
        return True

    def _record(self, result: ReleaseResult) -> bool:
        """Store the outcome and the last error (cleared when None). True if the record changed."""
        store = self.record_store
        if store is None:
            return False
        current = store.read()
        self.record = current
        scope = self.restart_scope
        ends = current is not None and round_ends(current.restart_round, scope, result.result)
        if current is not None and current.outcome == result.outcome and current.last_error == result.last_error \
                and current.result == result.result and not current.previous_holder_stopped and not ends:
            return False

        def change(record: Any) -> None:
            record.outcome = result.outcome
            record.last_error = result.last_error
            record.result = result.result
            # The rollout that stopped without release is released now: status stops naming it.
            record.previous_holder_stopped = None
            if round_ends(record.restart_round, scope, result.result):
                # Every batch ran: the restart is over, and the next one restarts every node again.
                record.restart_round = None

        store.update(change)
        return True

    def _release_lock(self) -> bool:
        """Give the lock back if we hold it; False when it was not ours or already free."""
        return self.lock is not None and bool(self.lock.release())
