"""How many module runs a whole rollout makes (each costs a Python start and a round of reads), through the playbook
(``playbooks/rollout.yml``) against cks-sim, counted by a callback (``callback_plugins/cks_module_runs.py``).

The start of a rollout is one run of ``cks_node_settings`` (``plan: true``): the refusals before the
lock, the settings stored and the lock taken, the plan and the pending taint. Then one run per batch and
one release, which also writes the report (0600): nothing else runs a module. The old start made four
runs (the checks before the lock, store and lock, the plan, the taint) and the report had a task of
its own; this fails on it. A dry run (``--check``) is the same one run, and stores and takes nothing.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(900)

SPEC = "rollout_pending.yml"
HERE = os.path.dirname(os.path.abspath(__file__))
CALLBACKS = os.path.join(HERE, "callback_plugins")
WORKERS_LARGER: dict[str, Any] = {"rollout_node_offerings": {"worker": "cks-large"}, "rollout_max_unavailable": 1}
START = "cloudstack.cks.cks_node_settings"
CYCLE = "cloudstack.cks.cks_node_cycle"


def counted(path: Path) -> dict[str, str]:
    return {"ANSIBLE_CALLBACK_PLUGINS": CALLBACKS, "ANSIBLE_CALLBACKS_ENABLED": "cks_module_runs",
            "CKS_MODULE_RUNS_PATH": str(path)}


def module_runs(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_a_rollout_starts_in_one_module_run_and_its_release_writes_the_report(rollout_sim: Any, tmp_path: Path) -> None:
    sim = rollout_sim(SPEC)
    log = tmp_path / "runs.jsonl"
    started = time.time()
    run = sim.rollout(env=counted(log), rollout_taint_pending=True, **WORKERS_LARGER)
    assert run.rc == 0, run.output
    sim.assert_converged()
    runs = module_runs(log)
    assert runs and not any(r["failed"] for r in runs), runs
    first_batch = next(i for i, r in enumerate(runs) if r["module"] == CYCLE and r["mode"] in (None, "cycle"))
    # Shown with -s: what the start costs (the module runs before the first batch and their seconds).
    print(f"module runs: {len(runs)}, before the first batch: {first_batch}, in "
          f"{runs[first_batch - 1]['ended'] - runs[0]['started']:.2f} s: "
          + "; ".join(f"{r['task']} {r['ended'] - r['started']:.2f} s" for r in runs[:first_batch]))

    assert [r["module"] for r in runs[:first_batch]] == [START], runs[:first_batch]
    # The three rolling workers one at a time (the spec allows one worker down): three batches, then the
    # release; nothing else.
    batches = run.report["batches"]
    assert [b["outcome"] for b in batches] == ["done", "done", "done"]
    assert [(r["module"], r["mode"]) for r in runs] == [(START, None)] + [(CYCLE, None)] * len(batches) + [(CYCLE, "release")]

    # What the four runs did, the one did: settings stored, lock taken and given back, nodes tainted first.
    status = sim.status()
    assert status["settings_recorded"] and status["settings"]["worker"]["offering"] == "cks-large"
    assert status["lock_holder"] is None and status["last_error"] is None
    items = [e for e in sim.timeline() if e["t"] >= started]
    first_cordon = next(e["t"] for e in items if e["event"] == "cordoned")
    tainted = [e["node"] for e in items if e["event"] == "tainted" and e["t"] < first_cordon]
    assert sorted(tainted) == sorted(sim.names("worker")[:3])

    # The release wrote the report: private, whole, and saying how the rollout ended.
    report_path = os.path.join(sim.work_dir, f"report-{sim.runs}.json")
    assert stat.S_IMODE(os.stat(report_path).st_mode) == 0o600
    assert run.report["outcome"] == "Running" and run.report["result"] == "done"
    assert run.report["out_of_date_before"]["worker"]["out_of_date"] == 3
    assert run.report["out_of_date_after"]["worker"]["out_of_date"] == 0
    assert run.report["settings"]["worker"]["offering"] == "cks-large"
    assert [n["name"] for n in run.report["nodes"]] == sim.names("worker")[:3]
    assert not [name for name in os.listdir(sim.work_dir) if name.endswith(".part")]
    assert "Write the rollout report" not in run.stdout


def test_a_dry_run_is_one_module_run_and_changes_nothing(rollout_sim: Any, tmp_path: Path) -> None:
    sim = rollout_sim(SPEC)
    log = tmp_path / "runs.jsonl"
    lease_before = sim.lease()
    run = sim.rollout(env=counted(log), args=("--check",), rollout_taint_pending=True, **WORKERS_LARGER)
    assert run.rc == 0, run.output
    assert [(r["module"], r["mode"]) for r in module_runs(log)] == [(START, None)]
    assert "Dry run of" in run.stdout and "no lock taken" in run.stdout
    assert run.report is None
    status = sim.status()
    assert not status["settings_recorded"] and status["lock_holder"] is None
    assert sim.lease() == lease_before
    assert not [n["name"] for n in sim.state()["kube"][sim.cluster_id]["nodes"]
                if any("rollout-pending" in taint for taint in n["taints"])]


def test_a_start_that_fails_after_the_lock_releases_in_the_same_run(rollout_sim: Any, tmp_path: Path) -> None:
    """The taint is refused once the lock is taken: that one run releases (the lock back, why kept as
    the last error) and fails saying so; no node was touched and no other module run was needed."""
    sim = rollout_sim(SPEC)
    log = tmp_path / "runs.jsonl"
    since = time.time()
    sim.fault(kind="kube_error", verb="patch", resource="nodes", status=403, count=1, message="injected taint refusal")
    try:
        run = sim.rollout(env=counted(log), rollout_taint_pending=True, **WORKERS_LARGER)
    finally:
        sim.clear_faults()
    assert run.rc != 0, run.output
    assert "Planning the rollout failed" in run.stdout and "injected taint refusal" in run.stdout, run.output
    assert "the lock was released" in run.stdout, run.output
    assert [(r["module"], r["failed"]) for r in module_runs(log)] == [(START, True)]
    status = sim.status()
    assert status["lock_holder"] is None
    assert status["last_error"].startswith("planning failed: ") and "injected taint refusal" in status["last_error"]
    assert [e for e in sim.timeline() if e["t"] >= since and e["event"] in ("cordoned", "stop_requested")] == []
    assert not [n["name"] for n in sim.state()["kube"][sim.cluster_id]["nodes"]
                if any("rollout-pending" in taint for taint in n["taints"])]
