# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""How one cluster of a fleet ended, read from its own rollout run, and the fleet report.

Pure: the rollout's exit code, its failed tasks as the rollout_failures callback wrote them and its
report in; the cluster's outcome out. A cluster's outcome is one of:

- ``rolled``: the rollout ended well and restarted nodes;
- ``up_to_date``: the rollout ended well after its plan found nothing out of date (a rerun);
- ``cancelled``: an operator cancelled it (cancel.yml); run the fleet again to resume;
- ``failed``: the rollout failed (its lock was released, its last error recorded);
- ``locked``: another rollout (another slice, another job) held the cluster's lock, nothing was
  changed: skipped;
- ``not_started``: the fleet had already seen ``fleet_max_failed`` failed clusters;
- ``would_roll``: a dry run (``--check``) whose plan has batches; ``up_to_date`` when it has none.

A fleet whose job is cancelled (SIGTERM or SIGINT, as AWX and Ctrl-C send them) asks each running
rollout to stop as cancel.yml does; a rollout that stopped for it, or had to be stopped, is
``cancelled``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Optional, Sequence

OUTCOMES = ("rolled", "up_to_date", "would_roll", "cancelled", "failed", "locked", "not_started")
#: Outcomes of a rollout that ended by itself before a cancel could stop it: kept as they are.
ENDED_WELL = ("rolled", "up_to_date", "would_roll", "locked")
#: Node outcomes of a rollout report that mean the node was restarted (as batch_progress counts them).
RESTARTED_NODE_OUTCOMES = ("done", "restarted")


@dataclass
class ClusterOutcome:
    """One line of the fleet report."""

    cluster: str
    outcome: str
    nodes_restarted: list[str] = field(default_factory=list)
    last_error: Optional[str] = None
    locked_by: Optional[str] = None
    cluster_state: Optional[str] = None
    still_out_of_date: Optional[int] = None
    #: A dry run's plan: per node type how many nodes are out of date, and the batches.
    plan: Optional[dict[str, Any]] = None

    @property
    def failed(self) -> bool:
        return self.outcome == "failed"

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "outcome": self.outcome, "nodes_restarted": list(self.nodes_restarted),
                "last_error": self.last_error, "locked_by": self.locked_by, "cluster_state": self.cluster_state,
                "still_out_of_date": self.still_out_of_date, "plan": self.plan}


def start_refusal(failed_clusters: Sequence[str], max_failed: int) -> Optional[str]:
    """Why the next cluster must not start (None: it may). ``max_failed`` 0 means no limit."""
    if max_failed > 0 and len(failed_clusters) >= max_failed:
        return (f"not started: {len(failed_clusters)} cluster(s) of this fleet run failed already "
                f"({', '.join(sorted(failed_clusters))}), fleet_max_failed={max_failed}; fix them and run the fleet again")
    return None


def failed_results(failures: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The failed tasks of a rollout run, in the order they happened (as rollout_failures wrote them).

    A task in a block that its rescue handled still counts: the rollout's rescues end with a task
    that fails again with the reason, so the last one is the reason the run stopped.
    """
    for result in failures.get("failures") or []:
        if isinstance(result, Mapping) and result.get("failed"):
            yield result


def cluster_outcome(cluster: str, rc: int, failures: Mapping[str, Any],
                    report: Optional[Mapping[str, Any]], dry_run: bool = False) -> ClusterOutcome:
    """The outcome of one cluster's rollout run (``report`` None: it wrote no report).

    A dry run writes no report: it ended well when its plan was kept (``failures['plan']``).
    """
    failed = list(failed_results(failures))
    plan = failures.get("plan") if isinstance(failures.get("plan"), Mapping) else None
    if dry_run and rc == 0 and plan is not None:
        counts: dict[str, int] = {str(name): int(count) for name, count in (plan.get("out_of_date") or {}).items()}
        batches = list(plan.get("batches") or [])
        return ClusterOutcome(cluster, "would_roll" if batches else "up_to_date", [], None, None, None, sum(counts.values()),
                              {"out_of_date": counts, "batches": batches})
    restarted: list[str] = []
    state = None
    still: Optional[int] = None
    if report:
        restarted = [str(node.get("name")) for node in report.get("nodes") or []
                     if node.get("outcome") in RESTARTED_NODE_OUTCOMES]
        state = report.get("outcome")
        still = report.get("still_out_of_date")
    if rc == 0 and report is not None:
        if report.get("cancelled"):
            return ClusterOutcome(cluster, "cancelled", restarted, report.get("last_error"), None, state, still)
        return ClusterOutcome(cluster, "rolled" if restarted else "up_to_date", restarted, None, None, state, still)
    # The lock was never ours when it was refused before a batch: no report, and the refusal names its holder.
    holder = next((str(r["holder"]) for r in failed if r.get("holder")), None)
    if report is None and holder:
        return ClusterOutcome(cluster, "locked", [], f"skipped: locked by {holder}", holder)
    if failed:
        error = str(failed[-1].get("msg") or "the rollout failed")
    elif rc == 0:
        error = "the rollout ended without writing its report"
    else:
        error = f"the rollout run ended with exit code {rc} before any task failed (see its log)"
    if report is not None and report.get("last_error"):
        error = str(report["last_error"])
    return ClusterOutcome(cluster, "failed", restarted, error, None, state, still)


def cancel_taken(answers: Mapping[str, Any]) -> bool:
    """Whether a cancel run (cancel.yml) set the cancel flag of the rollout it was meant for."""
    cancel = answers.get("cancel")
    return isinstance(cancel, Mapping) and bool(cancel.get("cancel_requested"))


def cancelled_outcome(outcome: ClusterOutcome, signal_name: str, stopped: bool, cancel_timeout: float) -> ClusterOutcome:
    """The outcome of a rollout that was running when the fleet's job was cancelled.

    ``stopped``: it did not end within ``cancel_timeout`` seconds of the cancel and was stopped
    (SIGTERM to its process group), so it may have ended in the middle of a node.
    """
    if outcome.outcome in ENDED_WELL and not stopped:
        return outcome
    if stopped:
        why = (f"the fleet's job was cancelled ({signal_name}); the rollout did not end within fleet_cancel_timeout="
               f"{cancel_timeout:g} s and was stopped: run the fleet again to resume it (it takes over the expired lock)")
    else:
        why = f"the fleet's job was cancelled ({signal_name}); the rollout stopped before its next batch and released"
    detail = outcome.last_error if outcome.last_error and "cancelled" not in outcome.last_error else None
    return ClusterOutcome(outcome.cluster, "cancelled", outcome.nodes_restarted, f"{why}{f' ({detail})' if detail else ''}",
                          outcome.locked_by, outcome.cluster_state, outcome.still_out_of_date, outcome.plan)


def plan_line(plan: Mapping[str, Any]) -> str:
    """A dry run's plan in one line: the out-of-date counts per node type, then the batches."""
    counts = ", ".join(f"{name} {count}" for name, count in (plan.get("out_of_date") or {}).items() if count)
    batches = plan.get("batches") or []
    shown = "; ".join(f"{batch.get('node_type')} [{', '.join(batch.get('nodes') or [])}]" for batch in batches)
    return f"out of date: {counts or 'none'}; {len(batches)} batch(es){': ' + shown if shown else ''}"


def fleet_report(results: Sequence[Mapping[str, Any]], run_id: str, started: Optional[str],
                 ended: Optional[str]) -> dict[str, Any]:
    """The fleet report: each cluster's outcome (as the fleet's rollout module returned it) and the counts."""
    clusters: list[dict[str, Any]] = [
        {"cluster": r.get("cluster"), "outcome": r.get("outcome"), "nodes_restarted": list(r.get("nodes_restarted") or []),
         "last_error": r.get("last_error"), "locked_by": r.get("locked_by"), "seconds": r.get("seconds"),
         "started": r.get("started"), "ended": r.get("ended"), "report_path": r.get("report_path"),
         "log_path": r.get("log_path"), "plan": r.get("plan")}
        for r in sorted(results, key=lambda r: str(r.get("cluster")))
    ]
    counts = {name: sum(1 for c in clusters if c["outcome"] == name) for name in OUTCOMES}
    return {"run_id": run_id, "started": started, "ended": ended, "clusters": clusters, "counts": counts,
            "nodes_restarted": sum(len(c["nodes_restarted"] or []) for c in clusters)}


def fleet_summary(report: Mapping[str, Any]) -> list[str]:
    """The lines shown at the end of a fleet run: the counts, then one line per cluster."""
    counts = report.get("counts") or {}
    shown = ", ".join(f"{counts[name]} {name}" for name in OUTCOMES if counts.get(name))
    lines = [f"Fleet {report.get('run_id')}: {len(report.get('clusters') or [])} cluster(s): {shown or 'none'}; "
             f"{report.get('nodes_restarted', 0)} node(s) restarted"]
    for entry in report.get("clusters") or []:
        line = f"{entry['cluster']}: {entry['outcome']}"
        if entry.get("plan"):
            line += f", {plan_line(entry['plan'])}"
        if entry.get("nodes_restarted"):
            line += f", restarted {', '.join(entry['nodes_restarted'])}"
        if entry.get("seconds") is not None:
            line += f" ({entry['seconds']} s)"
        if entry.get("last_error"):
            line += f"; {entry['last_error']}"
        lines.append(line)
    return lines


def fleet_report_document(results: Sequence[Mapping[str, Any]], run_id: str, started: Optional[str], ended: Optional[str],
                          cancelled: bool) -> dict[str, Any]:
    """The fleet report as written to its file, the same whether the fleet's last play writes it (a normal end)
    or the clusters ending after a cancel of the fleet's job do (``cancelled``: that play never runs)."""
    report = fleet_report(results, run_id, started, ended)
    report["summary"] = fleet_summary(report)
    report["cancelled"] = cancelled
    return report
