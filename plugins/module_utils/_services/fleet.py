# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The service behind cks_fleet_rollout: roll one cluster of a fleet as its own rollout run.

Each cluster gets a folder in the fleet run's folder: the variables of its run (0600, removed
once the run ends: they may hold the API secret), the run's log, its rollout report and its
outcome. The outcomes of the other clusters, read from their folders, tell whether the fleet
already saw ``max_failed`` failures; the check is made when this cluster's turn comes (throttle
lets it start), so a cluster failing meanwhile is counted.

In check mode each cluster's run is the rollout's own dry run (``--check``: no lock, nothing
stored), and its outcome carries the plan. When the fleet's job is cancelled while a run goes on,
the run is asked to stop as cancel.yml asks, for this fleet run's lock holder only; as each
cancelled cluster ends, the fleet report is rewritten from the outcomes in the run's folder, as the
fleet's last play (which a cancelled job never reaches) would have written it, under the folder's
lock so that the report left holds every cluster (see _state/fleet_run.py).
"""

from __future__ import annotations

import os
import re
import time
from typing import Any, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.pacing import API_RATE_ENV
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.playbook import CancelPolicy, PlaybookRunner
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.report_file import write_private_json
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._common.stamps import utc_stamp
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.api_pace import share_of_rate
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.fleet import (
    ClusterOutcome,
    cancel_taken,
    cancelled_outcome,
    cluster_outcome,
    fleet_report_document,
    start_refusal,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._state.fleet_run import FleetRunFolder, read_json

#: Seconds a rollout may go on after the fleet's job was cancelled (its batch finishing) before it is stopped.
DEFAULT_CANCEL_TIMEOUT = 600.0
#: Set by the fleet for each cluster; given in rollout_vars they would break the bookkeeping.
FLEET_OWNED_VARS = ("rollout_cluster", "rollout_report_path", "rollout_run_id")


def folder_name(cluster: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", cluster) or "_"


def api_rate_env(params: Mapping[str, Any]) -> dict[str, str]:
    """The cluster's share of the account's API rate (``api_rate`` calls a second shared by ``parallel``
    rollouts at once), for its rollout's CloudStack clients; {} without a rate."""
    rate = params.get("api_rate")
    if rate in (None, "", 0):
        return {}
    try:
        share = share_of_rate(float(rate), int(params.get("parallel") or 1))
    except ValueError:
        raise InvalidInput("api_rate", rate, "the account's API calls per second (api.throttling.max / api.throttling.interval), "
                                             "more than 0") from None
    return {API_RATE_ENV: f"{share:.3f}"}


def roll_cluster(params: Mapping[str, Any], runner: PlaybookRunner) -> dict[str, Any]:
    """Roll ``params['cluster']`` with the rollout playbook, unless the fleet already failed enough."""
    cluster = str(params["cluster"])
    name = str(params.get("name") or cluster)
    given = dict(params.get("rollout_vars") or {})
    owned = sorted(name for name in FLEET_OWNED_VARS if name in given)
    if owned:
        raise InvalidInput("rollout_vars", owned, "set by the fleet for each cluster; leave them out")
    if not os.path.isfile(params["playbook"]):
        raise InvalidInput("playbook", params["playbook"], "no such playbook file")
    if not os.path.isdir(params["fleet_dir"]):
        raise InvalidInput("fleet_dir", params["fleet_dir"], "no such directory; the fleet playbook creates it before the first cluster")
    rate_env = api_rate_env(params)
    fleet = FleetRunFolder(params["fleet_dir"])
    started = utc_stamp()
    begun = time.monotonic()
    refusal = start_refusal(fleet.failed_clusters(), int(params["max_failed"]))
    if refusal is not None:
        outcome = ClusterOutcome(name, "not_started", last_error=refusal)
        return finish(fleet, params, outcome, cluster, started, begun, report_path=None, log_path=None)
    folder = fleet.cluster_folder(folder_name(name))
    report_path = os.path.join(folder, "report.json")
    log_path = os.path.join(folder, "rollout.log")
    failures_path = os.path.join(folder, "failures.json")
    vars_path = os.path.join(folder, "vars.json")
    variables = dict(given, rollout_cluster=cluster, rollout_report_path=report_path, rollout_run_id=params["run_id"])
    for stale in (report_path, vars_path, failures_path):
        if os.path.exists(stale):
            os.unlink(stale)
    write_private_json(vars_path, variables, indent=None, sort_keys=False)
    dry_run = bool(params.get("check_mode"))
    cancel = CancelPolicy(lambda: ask_cancel(runner, params, given, cluster, folder), float(params.get("cancel_timeout") or DEFAULT_CANCEL_TIMEOUT))
    try:
        run = runner.run(params["playbook"], vars_path, log_path, failures_path, cwd=params["cwd"] or os.getcwd(),
                         timeout=float(params["timeout"]) or None, extra_args=("--check",) if dry_run else (), cancel=cancel,
                         env=rate_env)
    finally:
        os.unlink(vars_path)
    outcome = cluster_outcome(name, run.rc, run.output, read_json(report_path), dry_run=dry_run)
    if run.timed_out:
        outcome.outcome = "failed"
        outcome.last_error = (f"the rollout of {name} ran past timeout={params['timeout']} s and was stopped; "
                              f"run the fleet again to resume it ({outcome.last_error or 'no error recorded'})")
    if run.cancelled_by:
        outcome = cancelled_outcome(outcome, run.cancelled_by, run.stopped, cancel.timeout)
    return finish(fleet, params, outcome, cluster, started, begun, report_path if os.path.exists(report_path) else None, log_path,
                  cancelled=bool(run.cancelled_by or run.job_cancelled))


def ask_cancel(runner: PlaybookRunner, params: Mapping[str, Any], given: Mapping[str, Any], cluster: str, folder: str) -> bool:
    """Run cancel.yml for this cluster, for this fleet run's lock only; whether the cancel flag was set."""
    vars_path = os.path.join(folder, "cancel-vars.json")
    failures_path = os.path.join(folder, "cancel.json")
    write_private_json(vars_path, dict(given, rollout_cluster=cluster, rollout_cancel_holder=params["run_id"]),
                       indent=None, sort_keys=False)
    try:
        run = runner.run(params.get("cancel_playbook") or os.path.join(os.path.dirname(params["playbook"]), "cancel.yml"),
                         vars_path, os.path.join(folder, "cancel.log"), failures_path, cwd=params["cwd"] or os.getcwd(),
                         timeout=120.0)
    finally:
        os.unlink(vars_path)
    return cancel_taken(run.output)


def fleet_report_path(params: Mapping[str, Any]) -> str:
    """Where the fleet report goes: the same file the fleet's last play writes at a normal end."""
    return str(params.get("fleet_report_path") or os.path.join(str(params["fleet_dir"]), "fleet-report.json"))


def finish(fleet: FleetRunFolder, params: Mapping[str, Any], outcome: ClusterOutcome, cluster_id: str, started: str, begun: float,
           report_path: Optional[str], log_path: Optional[str], cancelled: bool = False) -> dict[str, Any]:
    """Write the cluster's outcome; after a cancel of the fleet's job also the fleet report, which its last play will not write."""
    result = dict(outcome.to_dict(), cluster_id=cluster_id, started=started, ended=utc_stamp(), seconds=round(time.monotonic() - begun, 1),
                  report_path=report_path, log_path=log_path)

    def build(outcomes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return fleet_report_document(outcomes, str(params["run_id"]), params.get("fleet_started"), utc_stamp(), cancelled=True)

    fleet.end_cluster(folder_name(outcome.cluster), result, cancelled, fleet_report_path(params), build)
    return dict(result, changed=bool(outcome.nodes_restarted), rollout_failed=outcome.failed)
