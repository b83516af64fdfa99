# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The rollout object: everything one rollout carries from its start through each batch to its release.

The rollout role keeps it in one fact and passes it to each ``cks_node_cycle`` run as the one
option ``rollout``; each run returns it updated. So the batch record, the merge of a hooked batch's
phases, the lock's version and the jobs' timings passed from batch to batch, how the rollout ended
and the report are all built here, typed and unit-tested, and the role only sequences the runs.

Versioned: ``to_dict`` writes ``version``; ``from_dict`` reads a dict of this version or without one
(a partial dict an operator writes, say ``{last_error: ...}`` for a release), and refuses a newer
version, naming the option, rather than misreading it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.phases import merge_phases
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.progress import batch_progress
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.rollout_report import rollout_report

VERSION = 1

#: What the report and the progress line read of the plan (cks_node_settings' plan), and no more:
#: every node's record stays out of the fact the role passes to each run.
PLAN_KEYS = ("cluster", "plan", "hosts", "node_types", "unrollable", "max_unavailable", "worker_batch_size",
             "canary", "selected", "not_selected", "autoscaler", "restart_round")

DONE, FAILED, CANCELLED = "done", "failed", "cancelled"

PHASE_ALL = "all"


def plan_summary(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The plan's keys the report reads, and the names of its planned work (the progress line counts
    the work on node types not rolled from them)."""
    summary = {key: plan[key] for key in PLAN_KEYS if key in plan}
    summary["work"] = [{"name": work.get("name")} for work in plan.get("work") or [] if isinstance(work, Mapping)]
    return summary


@dataclass
class BatchRecord:
    """One batch that ran, as the report lists it."""

    batch: int
    node_type: Optional[str]
    nodes: list[str]
    outcome: str = DONE
    error: Optional[str] = None
    uncordoned: list[Any] = field(default_factory=list)
    validation: Optional[dict[str, Any]] = None
    retries: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"batch": self.batch, "node_type": self.node_type, "nodes": list(self.nodes), "outcome": self.outcome,
                "error": self.error, "uncordoned": list(self.uncordoned), "validation": self.validation,
                "retries": dict(self.retries)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BatchRecord:
        return cls(batch=int(data.get("batch") or 0), node_type=data.get("node_type"),
                   nodes=[str(n) for n in data.get("nodes") or []], outcome=str(data.get("outcome") or DONE),
                   error=data.get("error"), uncordoned=list(data.get("uncordoned") or []),
                   validation=data.get("validation"), retries=dict(data.get("retries") or {}))


@dataclass
class BatchInProgress:
    """The batch being run: its number in the plan, its nodes, and the result of each run so far
    (one with phase ``all``; up to three with per-node hooks, one per phase)."""

    batch: int
    node_type: Optional[str]
    nodes: list[str]
    runs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def started(self) -> Optional[float]:
        """When the batch's first run started: the batch timeout of its later phases counts from it."""
        first = self.runs[0].get("started") if self.runs else None
        return None if first is None else float(first)

    def to_dict(self) -> dict[str, Any]:
        return {"batch": self.batch, "node_type": self.node_type, "nodes": list(self.nodes),
                "runs": [dict(run) for run in self.runs]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BatchInProgress:
        return cls(batch=int(data.get("batch") or 0), node_type=data.get("node_type"),
                   nodes=[str(n) for n in data.get("nodes") or []], runs=[dict(r) for r in data.get("runs") or []])


@dataclass
class Rollout:
    """The rollout's state between module runs (see the module docstring)."""

    run_id: str = ""  # the lock holder
    started: Optional[str] = None  # RFC 3339 UTC
    lock_version: str = ""  # the lease's resourceVersion as the last renewal left it
    job_seconds: dict[str, Any] = field(default_factory=dict)  # per CloudStack command, [after, by]
    plan: dict[str, Any] = field(default_factory=dict)  # plan_summary() of the plan
    stored: dict[str, Any] = field(default_factory=dict)  # settings, previous_settings, lock as taken
    hooks: dict[str, str] = field(default_factory=dict)
    pause_seconds: int = 0
    batches: list[BatchRecord] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)  # every node result, in the order they ran
    skipped: list[str] = field(default_factory=list)  # node types not rolled and why
    last_error: Optional[str] = None  # set by the role when the rollout stopped before any batch
    ended: Optional[str] = None  # how it ended, set by a run that releases the rollout on its own
    current: Optional[BatchInProgress] = None
    progress: str = ""  # the last batch's progress line, for the role to show

    # -- the dict the role keeps -------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {"version": VERSION, "run_id": self.run_id, "started": self.started, "lock_version": self.lock_version,
                "job_seconds": dict(self.job_seconds), "plan": dict(self.plan), "stored": dict(self.stored),
                "hooks": dict(self.hooks), "pause_seconds": self.pause_seconds,
                "batches": [b.to_dict() for b in self.batches], "results": [dict(r) for r in self.results],
                "skipped": list(self.skipped), "last_error": self.last_error, "ended": self.ended,
                "current": self.current.to_dict() if self.current is not None else None,
                "progress": self.progress}

    @classmethod
    def from_dict(cls, data: Optional[Mapping[str, Any]]) -> Rollout:
        data = data or {}
        if not isinstance(data, Mapping):
            raise InvalidInput("rollout", data, "must be the rollout object a cks_node_cycle run returned (a dict)")
        version = data.get("version", VERSION)
        if not isinstance(version, int) or isinstance(version, bool) or version > VERSION:
            raise InvalidInput("rollout", {"version": version},
                               f"version {version!r} is not one this collection reads (up to {VERSION}); "
                               "pass the object a run of this collection returned")
        try:
            return cls(run_id=str(data.get("run_id") or ""), started=data.get("started"),
                       lock_version=str(data.get("lock_version") or ""),
                       job_seconds=dict(data.get("job_seconds") or {}), plan=dict(data.get("plan") or {}),
                       stored=dict(data.get("stored") or {}), hooks=dict(data.get("hooks") or {}),
                       pause_seconds=int(data.get("pause_seconds") or 0),
                       batches=[BatchRecord.from_dict(b) for b in data.get("batches") or []],
                       results=[dict(r) for r in data.get("results") or []],
                       skipped=[str(s) for s in data.get("skipped") or []], last_error=data.get("last_error") or None,
                       ended=data.get("ended") or None,
                       current=BatchInProgress.from_dict(data["current"]) if data.get("current") else None,
                       progress=str(data.get("progress") or ""))
        except (TypeError, ValueError, AttributeError) as exc:
            raise InvalidInput("rollout", "...", f"not a rollout object a cks_node_cycle run returned ({exc})")

    # -- the start ---------------------------------------------------------------------------

    @classmethod
    def start(cls, plan: Mapping[str, Any], run_id: str, started: Optional[str] = None,
              hooks: Optional[Mapping[str, str]] = None, pause_seconds: int = 0) -> Rollout:
        """The rollout as cks_node_settings planned it and took its lock (its result ``plan``)."""
        return cls(run_id=str(run_id), started=started, lock_version=str(plan.get("lock_version") or ""),
                   plan=plan_summary(plan),
                   stored={"settings": plan.get("settings") or {}, "previous_settings": plan.get("previous_settings") or {},
                           "lock": plan.get("lock")},
                   hooks={str(k): str(v) for k, v in (hooks or {}).items()}, pause_seconds=int(pause_seconds or 0),
                   skipped=[str(reason) for reason in (plan.get("unrollable") or {}).values()])

    def add_batches(self, batches: Sequence[Mapping[str, Any]]) -> None:
        """Later batches for the nodes the cluster autoscaler added during the rollout: counted and
        numbered after the planned ones, and known to the autoscaler summary from now on."""
        added = [dict(b) for b in batches]
        if not added:
            return
        self.plan["plan"] = list(self.plan.get("plan") or []) + added
        names = [str(n) for b in added for n in b.get("nodes") or []]
        self.plan["hosts"] = list(self.plan.get("hosts") or []) + names
        autoscaler = dict(self.plan.get("autoscaler") or {})
        autoscaler["rolled_added"] = list(autoscaler.get("rolled_added") or []) + names
        self.plan["autoscaler"] = autoscaler

    # -- each batch --------------------------------------------------------------------------

    @property
    def batch_count(self) -> int:
        return len(self.plan.get("plan") or [])

    def batch_in_plan(self, nodes: Sequence[str]) -> Optional[tuple[int, Optional[str]]]:
        """The batch's number (from 1) and node type in the plan; None when these nodes are no batch of it."""
        wanted = [n.lower() for n in nodes]
        for index, planned in enumerate(self.plan.get("plan") or []):
            if [str(n).lower() for n in planned.get("nodes") or []] == wanted:
                return index + 1, planned.get("node_type")
        return None

    def planned_batch(self, nodes: Sequence[str]) -> tuple[int, Optional[str]]:
        """The batch's number (from 1) and node type in the plan; past the plan's batches when it is not one."""
        return self.batch_in_plan(nodes) or (len(self.batches) + 1, None)

    def batch_started(self, nodes: Sequence[str], phase: str) -> Optional[float]:
        """When the batch of these nodes started, for a phase after its first (None: it starts now)."""
        if phase == PHASE_ALL or self.current is None or not self._is_current(nodes):
            return None
        return self.current.started

    def _last_is(self, nodes: Sequence[str]) -> bool:
        return bool(self.batches) and [n.lower() for n in self.batches[-1].nodes] == [n.lower() for n in nodes]

    def _is_current(self, nodes: Sequence[str]) -> bool:
        return self.current is not None and [n.lower() for n in self.current.nodes] == [n.lower() for n in nodes]

    def record_run(self, nodes: Sequence[str], phase: str, run: Mapping[str, Any],
                   lock_version: Optional[str] = None) -> None:
        """One cks_node_cycle run of a batch (its whole result, ``msg`` and ``cancelled`` when it failed).

        A run of phase ``all`` is the whole batch, which ends with it; a phase run is kept until
        ``end_batch`` puts the phases and the hooks between them together.
        """
        if lock_version:
            self.lock_version = lock_version  # the next run renews from it in one write
        learned = (run.get("jobs") or {}).get("job_seconds") if isinstance(run.get("jobs"), Mapping) else None
        if learned:
            self.job_seconds = dict(self.job_seconds, **learned)
        if phase == PHASE_ALL:
            self.current = None
        batch = self._open(nodes)
        batch.runs.append(dict(run))
        if phase == PHASE_ALL:
            self._end(batch, dict(run), retries=run.get("retries") or {})

    def end_batch(self, nodes: Sequence[str], hook_steps: Sequence[Mapping[str, Any]] = ()) -> None:
        """The batch of these nodes, run in phases, ends: its runs and its nodes' hook steps as one batch result.
        A batch that ended already (a run failed before it recorded anything) stays as it ended."""
        if not self._is_current(nodes) and self._last_is(nodes):
            return
        batch = self._open(nodes)
        self._end(batch, merge_phases(batch.runs, hook_steps), retries={})

    def _open(self, nodes: Sequence[str]) -> BatchInProgress:
        """The batch in progress of these nodes, begun now if it is not the one in progress."""
        if self.current is None or not self._is_current(nodes):
            number, node_type = self.planned_batch(nodes)
            self.current = BatchInProgress(batch=number, node_type=node_type, nodes=[str(n) for n in nodes])
        return self.current

    def batch_failed(self, nodes: Sequence[str], error: str) -> None:
        """The batch of these nodes failed outside its runs (a task of the role failed): recorded with
        what its runs returned so far, and this error."""
        if not self._is_current(nodes) and self._last_is(nodes):
            last = self.batches[-1]
            last.outcome, last.error = FAILED, error  # ended already: only its outcome changes
            return
        batch = self._open(nodes)
        # Only phase runs are left open (a run of phase ``all`` ends its batch).
        merged = merge_phases(batch.runs) if batch.runs else {}
        self._end(batch, dict(merged, msg=error), retries={}, cancelled=False)

    def _end(self, batch: BatchInProgress, result: dict[str, Any], retries: Mapping[str, Any],
             cancelled: Optional[bool] = None) -> None:
        stopped_by_cancel = bool(result.get("cancelled")) if cancelled is None else cancelled
        failed = result.get("msg") is not None
        outcome = CANCELLED if failed and stopped_by_cancel else FAILED if failed else DONE
        node_type = batch.node_type or next(
            (node.get("node_type") for node in result.get("nodes") or [] if node.get("node_type")), None)
        record = BatchRecord(
            batch=batch.batch, node_type=node_type, nodes=list(batch.nodes),
            outcome=outcome, error=str(result["msg"]) if outcome == FAILED else None,
            uncordoned=list(result.get("uncordoned") or []), validation=result.get("validation"),
            retries=dict(retries))
        self.batches.append(record)
        self.results.extend(dict(node) for node in result.get("nodes") or [])
        dropped = {str(n) for n in (result.get("preflight") or {}).get("dropped") or []}
        if dropped:
            # Gone from the cluster (a CKS operation removed them): no longer work of this rollout.
            self.plan["hosts"] = [h for h in self.plan.get("hosts") or [] if str(h) not in dropped]
            self.plan["work"] = [w for w in self.plan.get("work") or [] if str(w.get("name")) not in dropped]
        self.progress = batch_progress(result, plan=self.plan, batch_number=record.batch,
                                       batch_count=max(self.batch_count, record.batch),
                                       node_type=str(record.node_type or ""), batch_nodes=record.nodes,
                                       results=self.results, cancelled=outcome == CANCELLED, error=record.error)
        self.current = None

    # -- the end -----------------------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        return bool(self.batches) and self.batches[-1].outcome == CANCELLED

    def ending(self) -> tuple[Optional[str], Optional[str]]:
        """How the rollout ended (``result``) and why it stopped (``last_error``), for the release: by the
        last batch when it failed or found the rollout cancelled; else the error the role set, if any."""
        last = self.batches[-1] if self.batches else None
        if last is not None and last.outcome == CANCELLED:
            return (f"cancelled before batch {last.batch} of {self.batch_count}",
                    f"cancelled by the operator (cancel_rollout) before batch {last.batch}; "
                    "run the rollout again to resume")
        if last is not None and last.outcome == FAILED:
            return f"failed at batch {last.batch} of {self.batch_count}", last.error or f"batch {last.batch} failed"
        return self.ended, self.last_error

    def report(self, release: Mapping[str, Any], after: Mapping[str, Any], ended: str) -> Optional[dict[str, Any]]:
        """The rollout report, once the release said how it ended; None for a rollout that never planned."""
        if not self.plan:
            return None
        stored = {"settings": self.stored.get("settings") or {},
                  "previous_settings": self.stored.get("previous_settings") or {}, "lock": self.stored.get("lock")}
        return rollout_report(self.plan, release=release, after=after, run_id=self.run_id, ended=ended,
                              started=self.started, results=self.results, batches=[b.to_dict() for b in self.batches],
                              stored=stored, hooks=self.hooks, cancelled=self.cancelled,
                              pause_seconds=self.pause_seconds)
