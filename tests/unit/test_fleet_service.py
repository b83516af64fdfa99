"""The service behind cks_fleet_rollout, with a fake rollout run: what it hands the run (its own
variables, in a private file removed afterwards), the outcome it writes for the fleet, and the
fleet_max_failed check made from the other clusters' outcomes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from fakes import FakePlaybookRunner

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._services.fleet import roll_cluster


def params(tmp_path: Path, cluster: str, **extra: Any) -> dict[str, Any]:
    playbook = tmp_path / "rollout.yml"
    playbook.write_text("---\n", encoding="utf-8")
    return dict({"cluster": f"id-{cluster}", "name": cluster, "run_id": "awx-job-7", "fleet_dir": str(tmp_path),
                 "playbook": str(playbook), "rollout_vars": {"rollout_node_offerings": {"worker": "big"},
                                                             "rollout_api_secret": "s3cret"},
                 "max_failed": 0, "timeout": 0, "cwd": None}, **extra)


def rolled(variables: dict[str, Any]) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    return 0, {"nodes": [{"name": "w1", "outcome": "done"}], "cancelled": False, "outcome": "Running"}, []


def blocked(variables: dict[str, Any]) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    return 2, {"nodes": [], "last_error": "drain of w1: PDB default/web", "outcome": "Running"}, [
        {"failed": True, "msg": "drain of w1: PDB default/web"}]


def test_the_run_gets_the_cluster_the_fleet_names_and_its_variables_in_a_private_file(tmp_path: Path) -> None:
    runner = FakePlaybookRunner(rolled)
    result = roll_cluster(params(tmp_path, "c1"), runner)  # type: ignore[arg-type]
    run = runner.runs[0]
    assert run["vars"]["rollout_cluster"] == "id-c1" and run["vars"]["rollout_run_id"] == "awx-job-7"
    assert run["vars"]["rollout_node_offerings"] == {"worker": "big"}
    assert run["mode"] == 0o600
    assert run["cwd"] == os.getcwd()
    assert not (tmp_path / "c1" / "vars.json").exists()  # the secret does not outlive the run
    assert (result["cluster"], result["cluster_id"], result["outcome"], result["nodes_restarted"]) == ("c1", "id-c1", "rolled", ["w1"])
    assert result["changed"] and not result["rollout_failed"]
    written = json.loads((tmp_path / "c1" / "outcome.json").read_text(encoding="utf-8"))
    assert written["outcome"] == "rolled" and "s3cret" not in json.dumps(written)


def test_once_max_failed_clusters_failed_the_next_is_not_started_and_not_run(tmp_path: Path) -> None:
    runner = FakePlaybookRunner(blocked)
    first = roll_cluster(params(tmp_path, "c1", max_failed=1), runner)  # type: ignore[arg-type]
    assert first["outcome"] == "failed" and first["last_error"] == "drain of w1: PDB default/web" and first["rollout_failed"]
    second = roll_cluster(params(tmp_path, "c2", max_failed=1), runner)  # type: ignore[arg-type]
    assert second["outcome"] == "not_started" and "c1" in second["last_error"]
    assert len(runner.runs) == 1
    # Without a limit the failure of c1 does not hold c3 back.
    roll_cluster(params(tmp_path, "c3", max_failed=0), FakePlaybookRunner(rolled))  # type: ignore[arg-type]
    assert json.loads((tmp_path / "c3" / "outcome.json").read_text(encoding="utf-8"))["outcome"] == "rolled"


@pytest.mark.parametrize("owned", ["rollout_cluster", "rollout_report_path", "rollout_run_id"])
def test_the_fleets_own_variables_are_refused_before_anything_runs(tmp_path: Path, owned: str) -> None:
    runner = FakePlaybookRunner(rolled)
    given = params(tmp_path, "c1")
    given["rollout_vars"] = dict(given["rollout_vars"], **{owned: "x"})
    with pytest.raises(InvalidInput, match=owned):
        roll_cluster(given, runner)  # type: ignore[arg-type]
    assert runner.runs == [] and not (tmp_path / "c1").exists()


def test_a_missing_fleet_folder_or_playbook_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="fleet_dir"):
        roll_cluster(params(tmp_path, "c1", fleet_dir=str(tmp_path / "nope")), FakePlaybookRunner(rolled))  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="playbook"):
        roll_cluster(params(tmp_path, "c1", playbook=str(tmp_path / "nope.yml")), FakePlaybookRunner(rolled))  # type: ignore[arg-type]


def dry_run(variables: dict[str, Any]) -> tuple[Any, ...]:
    plan = {"out_of_date": {"control": 0, "etcd": 0, "worker": 2},
            "batches": [{"node_type": "worker", "nodes": ["w1"]}, {"node_type": "worker", "nodes": ["w2"]}]}
    return 0, None, [], {"plan": plan}


def test_in_check_mode_the_run_is_the_rollouts_dry_run_and_the_outcome_carries_its_plan(tmp_path: Path) -> None:
    runner = FakePlaybookRunner(dry_run)
    result = roll_cluster(params(tmp_path, "c1", check_mode=True), runner)  # type: ignore[arg-type]
    assert runner.runs[0]["extra_args"] == ["--check"]
    assert result["outcome"] == "would_roll" and not result["changed"] and not result["rollout_failed"]
    assert result["plan"]["out_of_date"]["worker"] == 2 and len(result["plan"]["batches"]) == 2
    assert result["still_out_of_date"] == 2
    # Outside check mode the same run is not given --check.
    roll_cluster(params(tmp_path, "c2"), runner)  # type: ignore[arg-type]
    assert runner.runs[1]["extra_args"] == []


def cancelled_during_the_run(variables: dict[str, Any]) -> tuple[Any, ...]:
    if "rollout_cancel_holder" in variables:  # the cancel.yml run
        return 0, None, [], {"cancel": {"cancel_requested": True, "msg": "the rollout of awx-job-7 stops before its next batch"}}
    return 2, {"nodes": [{"name": "w1", "outcome": "done"}], "cancelled": True, "outcome": "Running",
               "last_error": "cancelled before batch 2 of 3"}, [{"failed": True, "msg": "cancelled"}], {"cancelled_by": "SIGTERM"}


def test_a_cancelled_job_asks_the_rollout_to_stop_for_its_own_lock_and_writes_the_fleet_report(tmp_path: Path) -> None:
    runner = FakePlaybookRunner(cancelled_during_the_run)
    result = roll_cluster(params(tmp_path, "c1"), runner)  # type: ignore[arg-type]
    cancel_run = runner.runs[1]
    assert cancel_run["playbook"] == str(tmp_path / "cancel.yml")
    assert cancel_run["vars"]["rollout_cancel_holder"] == "awx-job-7" and cancel_run["vars"]["rollout_cluster"] == "id-c1"
    assert cancel_run["mode"] == 0o600 and not (tmp_path / "c1" / "cancel-vars.json").exists()
    assert runner.runs[0]["cancel_taken"] is True
    assert result["outcome"] == "cancelled" and result["nodes_restarted"] == ["w1"]
    assert "cancelled (SIGTERM)" in result["last_error"] and "released" in result["last_error"]
    report = json.loads((tmp_path / "fleet-report.json").read_text(encoding="utf-8"))
    assert report["cancelled"] and report["counts"]["cancelled"] == 1 and report["clusters"][0]["cluster"] == "c1"
    assert "s3cret" not in json.dumps(report)
