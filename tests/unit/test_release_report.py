"""The release writes the rollout report: put together from the rollout object (what the role kept)
and what the release said, written whole and private (0600), never half a file."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.report_file import write_private_json
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.rollout_report import rollout_report
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.state import Rollout
from ansible_collections.cloudstack.cks.plugins.module_utils._services.release import with_report

PLAN = {"cluster": {"name": "demo"}, "hosts": ["w1", "w2"], "plan": [{"node_type": "worker", "nodes": ["w1", "w2"]}],
        "max_unavailable": 2, "worker_batch_size": 2, "node_types": {"worker": {"nodes": 3, "out_of_date": 2}},
        "unrollable": {}}
RELEASE = {"outcome": "Running", "result": "done", "last_error": None, "uncordoned": [], "left_cordoned": []}
AFTER = {"out_of_date": [], "node_types": {"worker": {"nodes": 3, "out_of_date": 0}}}


def test_the_report_file_is_private_whole_and_replaces_the_old_one(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text("old", encoding="utf-8")
    os.chmod(path, 0o644)
    write_private_json(str(path), {"b": 1, "a": [1, 2]})
    assert json.loads(path.read_text(encoding="utf-8")) == {"a": [1, 2], "b": 1}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text(encoding="utf-8").endswith("}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_a_report_that_cannot_be_written_leaves_no_part_file(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        write_private_json(str(tmp_path / "report.json"), {"not json": object()})
    assert list(tmp_path.iterdir()) == []


def kept(**extra: Any) -> dict[str, Any]:
    return dict({"plan": PLAN, "run_id": "rollout-1", "started": "2026-12-04T23:00:00Z", "results": [],
                 "batches": [{"batch": 1, "outcome": "done", "uncordoned": ["w1"]}],
                 "stored": {"settings": {"worker": {"offering": "cks-large"}}, "previous_settings": {}, "lock": None},
                 "hooks": {}, "pause_seconds": 0}, **extra)


def rollout(**extra: Any) -> Rollout:
    return Rollout.from_dict(kept(**extra))


def test_the_release_puts_the_report_together_and_writes_it(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    answer = with_report({"release": RELEASE, "after": AFTER, "changed": True}, rollout(),
                         {"report_path": str(path)}, check_mode=False)
    report = answer["report"]
    assert answer["report_path"] == str(path) and "report_error" not in answer
    assert json.loads(path.read_text(encoding="utf-8")) == report
    expected = rollout_report(PLAN, release=RELEASE, after=AFTER, run_id="rollout-1", ended=report["ended"],
                              started="2026-12-04T23:00:00Z", batches=[b.to_dict() for b in rollout().batches],
                              stored=kept()["stored"])
    assert report == expected
    assert report["out_of_date_before"]["worker"]["out_of_date"] == 2 and report["out_of_date_after"]["worker"]["out_of_date"] == 0
    assert report["uncordoned"] == ["w1"] and report["settings"] == {"worker": {"offering": "cks-large"}}


def test_no_report_without_a_plan(tmp_path: Path) -> None:
    """A release of a rollout that never planned (a direct call, or the planning failed) writes no report."""
    answer = {"release": RELEASE, "after": AFTER, "changed": False}
    assert with_report(dict(answer), Rollout(), {"report_path": str(tmp_path / "r.json")}, check_mode=False) == answer
    assert with_report(dict(answer), Rollout.from_dict({"run_id": "r", "last_error": "planning failed: x"}),
                       {"report_path": str(tmp_path / "r.json")}, check_mode=False) == answer
    assert list(tmp_path.iterdir()) == []


def test_check_mode_and_an_unwritable_path_write_nothing_but_still_report(tmp_path: Path) -> None:
    answer = with_report({"release": RELEASE, "after": AFTER}, rollout(), {"report_path": str(tmp_path / "r.json")},
                         check_mode=True)
    assert answer["report"]["outcome"] == "Running" and "report_path" not in answer and list(tmp_path.iterdir()) == []
    missing = tmp_path / "no-such-folder" / "r.json"
    answer = with_report({"release": RELEASE, "after": AFTER}, rollout(), {"report_path": str(missing)},
                         check_mode=False)
    assert answer["report"]["result"] == "done" and str(missing) in answer["report_error"]
