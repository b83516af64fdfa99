# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The fleet report after a cancel of the fleet's job holds every cluster, however close together they end.

Each cluster ends in a process of its own and rewrites the report from the outcomes in the fleet run's
folder. The race: A reads the outcomes before B wrote its own, B writes the report with both, A's
replace lands last without B. Here two real processes run the real ``roll_cluster`` (only the rollout run
is played by a fake runner) and that interleaving is forced: A's read of the outcomes waits until B has
ended - or, when B cannot go on meanwhile (the folder's lock), for a bound - before A writes its report.
"""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any, Callable

from fakes import FakePlaybookRunner

from ansible_collections.cloudstack.cks.plugins.filter.fleet_report import fleet_report as fleet_report_filter
from ansible_collections.cloudstack.cks.plugins.module_utils._services.fleet import roll_cluster
from ansible_collections.cloudstack.cks.plugins.module_utils._state.fleet_run import FleetRunFolder

CONTEXT = multiprocessing.get_context("fork")
#: How long A's read waits for B. B ends in milliseconds when nothing holds it back; with the lock it
#: cannot end while A holds it, and A goes on after this bound.
HOLD_SECONDS = 3.0


def params(tmp_path: Path, cluster: str) -> dict[str, Any]:
    playbook = tmp_path / "rollout.yml"
    playbook.write_text("---\n", encoding="utf-8")
    return {"cluster": f"id-{cluster}", "name": cluster, "run_id": "awx-job-7", "fleet_dir": str(tmp_path / "run"),
            "playbook": str(playbook), "rollout_vars": {}, "max_failed": 0, "timeout": 0, "cwd": None,
            "fleet_started": "2026-12-04T14:00:00Z"}


def cancelled_during_the_run(variables: dict[str, Any]) -> tuple[Any, ...]:
    if "rollout_cancel_holder" in variables:  # the cancel.yml run
        return 0, None, [], {"cancel": {"cancel_requested": True}}
    return 2, {"nodes": [{"name": "w1", "outcome": "done"}], "cancelled": True, "outcome": "Running",
               "last_error": "cancelled before batch 2 of 3"}, [{"failed": True, "msg": "cancelled"}], {"cancelled_by": "SIGTERM"}


def ended_by_itself(variables: dict[str, Any]) -> tuple[Any, ...]:
    return 0, {"nodes": [{"name": "w2", "outcome": "done"}], "cancelled": False, "outcome": "Running"}, []


def cluster_a(tmp_path: Path, a_read: Any, b_ended: Any) -> None:
    original: Callable[[FleetRunFolder], list[dict[str, Any]]] = FleetRunFolder.outcomes

    def read_then_wait_for_b(self: FleetRunFolder) -> list[dict[str, Any]]:
        found = original(self)
        # Only the read for the report (A's own outcome written), not the fleet_max_failed count at the start.
        if any(outcome.get("cluster") == "fleet-a" for outcome in found):
            a_read.set()
            b_ended.wait(HOLD_SECONDS)
        return found

    FleetRunFolder.outcomes = read_then_wait_for_b  # type: ignore[method-assign]  # this process only (a fork)
    roll_cluster(params(tmp_path, "fleet-a"), FakePlaybookRunner(cancelled_during_the_run))  # type: ignore[arg-type]


def cluster_b(tmp_path: Path, a_read: Any, b_ended: Any) -> None:
    assert a_read.wait(60), "cluster A never read the outcomes"
    roll_cluster(params(tmp_path, "fleet-b"), FakePlaybookRunner(cancelled_during_the_run))  # type: ignore[arg-type]
    b_ended.set()


def report_of(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "run" / "fleet-report.json").read_text(encoding="utf-8"))


def test_two_clusters_ending_their_cancel_at_once_are_both_in_the_fleet_report(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    a_read, b_ended = CONTEXT.Event(), CONTEXT.Event()
    processes = [CONTEXT.Process(target=target, args=(tmp_path, a_read, b_ended)) for target in (cluster_a, cluster_b)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
    assert [process.exitcode for process in processes] == [0, 0]
    # Each cluster's own outcome is there in any case; the report is what raced.
    assert sorted(o["cluster"] for o in FleetRunFolder(str(tmp_path / "run")).outcomes()) == ["fleet-a", "fleet-b"]
    report = report_of(tmp_path)
    assert [entry["cluster"] for entry in report["clusters"]] == ["fleet-a", "fleet-b"], report["summary"]
    assert report["counts"]["cancelled"] == 2 and report["nodes_restarted"] == 2 and report["cancelled"] is True


def test_a_cluster_that_ends_by_itself_after_the_cancel_rewrote_the_report_is_in_it(tmp_path: Path) -> None:
    """Its run ended before it could be asked to stop, so it was not cancelled itself; it ended after A wrote the report."""
    (tmp_path / "run").mkdir()
    roll_cluster(params(tmp_path, "fleet-a"), FakePlaybookRunner(cancelled_during_the_run))  # type: ignore[arg-type]
    assert [entry["cluster"] for entry in report_of(tmp_path)["clusters"]] == ["fleet-a"]
    roll_cluster(params(tmp_path, "fleet-c"), FakePlaybookRunner(ended_by_itself))  # type: ignore[arg-type]
    report = report_of(tmp_path)
    assert {entry["cluster"]: entry["outcome"] for entry in report["clusters"]} == {"fleet-a": "cancelled", "fleet-c": "rolled"}


def ended_as_the_cancel_came(variables: dict[str, Any]) -> tuple[Any, ...]:
    return 0, {"nodes": [{"name": "w3", "outcome": "done"}], "cancelled": False, "outcome": "Running"}, [], {"job_cancelled": True}


def test_a_cluster_whose_run_ended_in_the_poll_the_cancel_came_in_writes_the_report_even_first(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    result = roll_cluster(params(tmp_path, "fleet-d"), FakePlaybookRunner(ended_as_the_cancel_came))  # type: ignore[arg-type]
    assert result["outcome"] == "rolled"  # kept as it ended: it was not stopped by the cancel
    report = report_of(tmp_path)
    assert report["cancelled"] is True and [entry["cluster"] for entry in report["clusters"]] == ["fleet-d"]


def test_without_a_cancel_no_cluster_writes_the_report_the_fleets_last_play_writes_it(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    results = [roll_cluster(params(tmp_path, name), FakePlaybookRunner(ended_by_itself)) for name in ("fleet-a", "fleet-b")]  # type: ignore[arg-type]
    assert not (tmp_path / "run" / "fleet-report.json").exists()
    assert [entry["cluster"] for entry in fleet_report_filter(results, "awx-job-7")["clusters"]] == ["fleet-a", "fleet-b"]


def test_the_report_after_a_cancel_has_the_shape_of_the_one_the_fleets_last_play_writes(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    result = roll_cluster(params(tmp_path, "fleet-a"), FakePlaybookRunner(cancelled_during_the_run))  # type: ignore[arg-type]
    after_cancel = report_of(tmp_path)
    at_the_end = fleet_report_filter([result], "awx-job-7", started="2026-12-04T14:00:00Z", ended=after_cancel["ended"])
    assert after_cancel == dict(at_the_end, cancelled=True)
    assert at_the_end["cancelled"] is False and after_cancel["started"] == "2026-12-04T14:00:00Z"
    assert (tmp_path / "run" / "fleet-report.json").stat().st_mode & 0o777 == 0o600
