"""Two rollouts run side by side from one test (test_two_rollouts_racing_for_the_lease): each runs with
its own variables and writes its own report, however the threads interleave.

The run number named both files and was read again after ``base_vars()``: a second rollout that took
its number meanwhile (a thread held up on a loaded machine) left both playbooks reading one vars file,
so both rolled as the same Lease holder, side by side."""

from __future__ import annotations

import json
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import pytest
from in_process_sims import RolloutSim


class HeldUpSim(RolloutSim):
    """The first rollout's variables are read only once the second rollout is reading its own."""

    def __init__(self, work_dir: str) -> None:
        env = {"cluster_id": "c1", "cloudstack_endpoint": "http://127.0.0.1:1/client/api", "cloudstack_key": "key",
               "cloudstack_secret": "secret", "kubeconfig": "kubeconfig", "kube_ca": "ca.crt"}
        super().__init__(env, process=SimpleNamespace(state_dir=work_dir), work_dir=work_dir)
        self.second_numbered = threading.Event()

    def base_vars(self) -> dict[str, Any]:
        if threading.current_thread().name == "race-a":
            assert self.second_numbered.wait(10), "the second rollout never started"
        else:
            self.second_numbered.set()
        return {}


def test_two_rollouts_side_by_side_each_run_with_their_own_variables(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    sim = HeldUpSim(str(tmp_path))
    seen: dict[str, dict[str, Any]] = {}

    def playbook(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        with open(cmd[cmd.index("-e") + 1].lstrip("@"), encoding="utf-8") as handle:
            variables = json.load(handle)
        seen[variables["rollout_run_id"]] = variables
        with open(variables["rollout_report_path"], "w", encoding="utf-8") as handle:
            json.dump({"run_id": variables["rollout_run_id"]}, handle)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", playbook)
    with ThreadPoolExecutor(2, thread_name_prefix="race") as pool:
        runs = {holder: pool.submit(named, holder, sim.rollout, rollout_run_id=holder) for holder in ("race-a", "race-b")}
        reports = {holder: run.result(30).report for holder, run in runs.items()}
    assert set(seen) == {"race-a", "race-b"}
    assert seen["race-a"]["rollout_report_path"] != seen["race-b"]["rollout_report_path"]
    assert reports == {"race-a": {"run_id": "race-a"}, "race-b": {"run_id": "race-b"}}


def named(name: str, call: Any, **kwargs: Any) -> Any:
    """``call(**kwargs)`` on a thread named ``name`` for the time of the call."""
    thread = threading.current_thread()
    before, thread.name = thread.name, name
    try:
        return call(**kwargs)
    finally:
        thread.name = before
