# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""What a batch reports: each node's steps with their outcome and timing, the preflight, the validation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, StepFailed
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.steps import PHASE_ALL, READ_ONLY_STEPS
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.validation import ValidationResult


@dataclass
class StepRecord:
    name: str
    started: float
    ended: Optional[float] = None
    outcome: str = "running"  # ok | skipped | failed | would_run | would_skip
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "started": self.started, "ended": self.ended, "outcome": self.outcome,
                "detail": self.detail}


@dataclass
class NodeResult:
    name: str
    node_type: str
    steps: list[StepRecord] = field(default_factory=list)
    changes: dict[str, Any] = field(default_factory=dict)
    outcome: str = "pending"  # done | failed | would_cycle; cordoned | restarted after those phases
    cordoned_by_others: bool = False
    error: Optional[dict[str, Any]] = None
    started: float = 0.0
    ended: Optional[float] = None

    @property
    def changed(self) -> bool:
        return any(s.outcome == "ok" and s.name not in READ_ONLY_STEPS for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "node_type": self.node_type, "outcome": self.outcome,
                "steps": [s.to_dict() for s in self.steps], "changes": dict(self.changes),
                "cordoned_by_others": self.cordoned_by_others, "error": self.error,
                "started": self.started, "ended": self.ended}


@dataclass
class BatchResult:
    nodes: list[str]
    preflight: dict[str, Any] = field(default_factory=dict)
    results: list[NodeResult] = field(default_factory=list)
    uncordoned: list[dict[str, str]] = field(default_factory=list)  # back from a stopped rollout
    error: Optional[StepFailed] = None
    check_mode: bool = False
    started: float = 0.0
    ended: Optional[float] = None
    validation: Optional[ValidationResult] = None
    phase: str = PHASE_ALL
    retries: dict[str, Any] = field(default_factory=dict)  # what the clients sent again (retry.py)
    jobs: dict[str, Any] = field(default_factory=dict)  # the async jobs' polls and seconds (job_waits.py)

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def changed(self) -> bool:
        return bool(self.uncordoned and not self.check_mode) or any(r.changed for r in self.results)

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch": list(self.nodes),
            "phase": self.phase,
            "preflight": dict(self.preflight),
            "nodes": [r.to_dict() for r in self.results],
            "failed_nodes": [r.name for r in self.results if r.outcome == "failed"],
            "uncordoned": [dict(u) for u in self.uncordoned],
            "started": self.started,
            "ended": self.ended,
            "check_mode": self.check_mode,
            "validation": self.validation.to_dict() if self.validation is not None else None,
            "retries": dict(self.retries),
            "jobs": dict(self.jobs),
        }

    def raise_for_failure(self) -> None:
        """Raise the batch's StepFailed with the whole result as details (for ``fail_json``)."""
        if self.error is not None:
            details = {k: v for k, v in self.error.details.items() if k not in ("node", "step")}
            details.update(self.to_dict())
            details["changed"] = self.changed
            raise StepFailed(self.error.node, self.error.step, step_failure_cause(self.error), **details)


def step_failure_cause(error: StepFailed) -> str:
    """The failure's message without the node and step it starts with."""
    prefix = f"node {error.node}: {error.step} failed: "
    return error.msg[len(prefix):] if error.msg.startswith(prefix) else error.msg


def error_answer(exc: CksError) -> dict[str, Any]:
    """What CloudStack or Kubernetes answered, for a step's failure (no secrets are in these fields)."""
    keep = ("command", "errorcode", "errortext", "target", "action", "status", "reason", "what", "jobid")
    return {k: v for k, v in exc.details.items() if k in keep}
