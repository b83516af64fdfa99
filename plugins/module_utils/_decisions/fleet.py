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
- ``not_started``: the fleet had already seen ``fleet_max_failed`` failed clusters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Optional, Sequence

OUTCOMES = ("rolled", "up_to_date", "cancelled", "failed", "locked", "not_started")
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

    @property
    def failed(self) -> bool:
        return self.outcome == "failed"

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "outcome": self.outcome, "nodes_restarted": list(self.nodes_restarted),
                "last_error": self.last_error, "locked_by": self.locked_by, "cluster_state": self.cluster_state,
                "still_out_of_date": self.still_out_of_date}


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
                    report: Optional[Mapping[str, Any]]) -> ClusterOutcome:
    """The outcome of one cluster's rollout run (``report`` None: it wrote no report)."""
    failed = list(failed_results(failures))
    restarted: list[str] = []
    state = None
    still = None
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


def fleet_report(results: Sequence[Mapping[str, Any]], run_id: str, started: Optional[str],
                 ended: Optional[str]) -> dict[str, Any]:
    """The fleet report: each cluster's outcome (as the fleet's rollout module returned it) and the counts."""
    clusters: list[dict[str, Any]] = [
        {"cluster": r.get("cluster"), "outcome": r.get("outcome"), "nodes_restarted": list(r.get("nodes_restarted") or []),
         "last_error": r.get("last_error"), "locked_by": r.get("locked_by"), "seconds": r.get("seconds"),
         "started": r.get("started"), "ended": r.get("ended"), "report_path": r.get("report_path"),
         "log_path": r.get("log_path")}
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
        if entry.get("nodes_restarted"):
            line += f", restarted {', '.join(entry['nodes_restarted'])}"
        if entry.get("seconds") is not None:
            line += f" ({entry['seconds']} s)"
        if entry.get("last_error"):
            line += f"; {entry['last_error']}"
        lines.append(line)
    return lines
