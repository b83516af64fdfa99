"""Smoke test of the kill-anywhere runner: two seeded trials, each SIGKILLs a real rollout.

The runner is the test (it asserts convergence and the simulator's invariants per trial); this
checks its verdict and its output, and that the kills really landed inside the rollout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


@pytest.mark.timeout(1200)
def test_two_killed_rollouts_converge_and_lose_nothing(tmp_path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "run.py"), "--trials", "2", "--seed", "7", "--out", str(out),
         "--workdir", str(tmp_path / "work"), "--foreign-cordon-rate", "0.5"],
        cwd=ROOT, capture_output=True, text=True, timeout=1150, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    trials = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    assert len(trials) == 2 and summary["trials"] == 2
    assert summary["lost"] == [] and summary["invariant_violations"] == []
    assert summary["converged"] == 2
    for trial in trials:
        assert trial["ok"], trial
        assert 0 <= trial["kill_at"] < trial["duration_used"]
        verdict = trial["verdict"]
        assert verdict["lock"] is None and verdict["annotated"] == [] and verdict["cordoned"] == []
        assert verdict["not_up_to_date"] == {} and verdict["invariants"] == []
        if trial["killed"]:
            # A killed run always needs at least one rerun, and the rerun is what converged.
            assert trial["reruns"] >= 1 and trial["rerun_rcs"][-1] == 0
            assert trial["phase"] in ("startup", "plan", "batch:cycle", "batch:bookkeeping", "batch:release",
                                      "release")
