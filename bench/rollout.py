# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Run playbooks/rollout.yml against a running cks-sim, exactly as `make demo` does, and collect
what the benchmark needs: the wall time, the JSON report, the per-task times (bench_timer
callback), and the simulator's call log and timeline of the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import yaml
from simproc import ROOT, BenchSim

BENCH = os.path.dirname(os.path.abspath(__file__))
VENV_BIN = os.path.join(ROOT, ".venv", "bin")


@dataclass
class RolloutRun:
    name: str
    rc: int
    started: float  # Unix time, the sim's clock
    ended: float
    report: dict[str, Any]
    tasks: list[dict[str, Any]]  # bench_timer events
    calls: list[dict[str, Any]]
    timeline: list[dict[str, Any]]
    invariants: list[dict[str, Any]]
    vm_ids: dict[str, str]
    timings: dict[str, float]
    time_scale: float
    forks: int
    log_path: str
    cluster_nodes: int = 0
    variables: dict[str, Any] = field(default_factory=dict)

    @property
    def wall(self) -> float:
        return self.ended - self.started


def rollout_vars(sim: BenchSim, report_path: str, **overrides: Any) -> dict[str, Any]:
    """The operator's variables. Poll and retry settings stay at the role's defaults unless given."""
    variables: dict[str, Any] = {
        "rollout_cluster": sim.env["cluster_name"],
        "rollout_max_unavailable": 1,
        "rollout_report_path": report_path,
    }
    etcd = sim.env.get("etcd")
    if etcd:
        variables.update(
            rollout_etcd_endpoints=[m["client_url"] for m in etcd["members"]],
            rollout_etcd_ca_cert=etcd["ca_cert"], rollout_etcd_client_cert=etcd["client_cert"],
            rollout_etcd_client_key=etcd["client_key"])
    variables.update(overrides)
    return variables


def run_rollout(sim: BenchSim, name: str, out_dir: str, forks: int = 5, **overrides: Any) -> RolloutRun:
    """One `ansible-playbook playbooks/rollout.yml -e @vars.yml`; its output goes to a log file."""
    os.makedirs(out_dir, exist_ok=True)
    report_path = os.path.join(out_dir, f"{name}-report.json")
    timer_path = os.path.join(out_dir, f"{name}-tasks.jsonl")
    log_path = os.path.join(out_dir, f"{name}-ansible.log")
    vars_path = os.path.join(out_dir, f"{name}-vars.yml")
    for path in (report_path, timer_path):
        if os.path.exists(path):
            os.remove(path)
    variables = rollout_vars(sim, report_path, **overrides)
    with open(vars_path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(variables, fh, sort_keys=False)
    environment = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".venv", "collections"),
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_FORKS=str(forks),
        ANSIBLE_CALLBACK_PLUGINS=os.path.join(BENCH, "callback_plugins"),
        ANSIBLE_CALLBACKS_ENABLED="bench_timer",
        BENCH_TIMER_FILE=timer_path,
        PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""),
        **sim.connection_env(),
    )
    cmd = [os.path.join(VENV_BIN, "ansible-playbook"), os.path.join(ROOT, "playbooks", "rollout.yml"),
           "-e", f"@{vars_path}"]
    state = sim.admin("/state")
    with open(log_path, "w", encoding="utf-8") as log:
        started = time.time()
        rc = subprocess.call(cmd, env=environment, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        ended = time.time()
    report: dict[str, Any] = {}
    if os.path.exists(report_path):
        with open(report_path, encoding="utf-8") as fh:
            report = json.load(fh)
    tasks: list[dict[str, Any]] = []
    if os.path.exists(timer_path):
        with open(timer_path, encoding="utf-8") as fh:
            tasks = [json.loads(line) for line in fh if line.strip()]
    calls = [c for c in sim.calls(started) if c["t"] <= ended + 1]
    events = [e for e in sim.timeline(started) if e["t"] <= ended + 1]
    with open(os.path.join(out_dir, f"{name}-sim.json"), "w", encoding="utf-8") as fh:
        # Kept for re-analysis and re-drawing: python bench/timeline.py REPORT --sim-timeline this.
        json.dump({"timeline": events, "calls": calls, "timings": state["timings"], "time_scale": state["time_scale"],
                   "vm_ids": sim.vm_ids, "started": started, "ended": ended}, fh)
    cycles = [e for e in tasks if e["event"] == "cycle"]
    if cycles:
        # The batches and steps as cks_node_cycle returned them (Unix times, full precision).
        report = dict(report, batches=[{"batch": i + 1, "nodes": c["batch"],
                                        "node_type": (c["nodes"][0]["node_type"] if c["nodes"] else "")}
                                       for i, c in enumerate(cycles)],
                      nodes=[n for c in cycles for n in c["nodes"]])
    return RolloutRun(
        name=name, rc=rc, started=started, ended=ended, report=report, tasks=tasks,
        calls=calls, timeline=events,
        invariants=sim.invariants(started), vm_ids=dict(sim.vm_ids),
        timings={k: float(v) for k, v in state["timings"].items()}, time_scale=float(state["time_scale"]),
        forks=forks, log_path=log_path, cluster_nodes=len(sim.vm_ids), variables=variables)


def tail(path: str, lines: int = 30) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return "".join(fh.readlines()[-lines:])


if __name__ == "__main__":  # a quick manual run: python bench/rollout.py WORKERS MAXUNAVAILABLE
    from simproc import bench_spec

    workers, mu = int(sys.argv[1]), int(sys.argv[2])
    with BenchSim.from_spec(bench_spec(workers, max_unavailable=mu)) as s:
        run = run_rollout(s, "manual", "/tmp/bench-manual", rollout_max_unavailable=mu,
                          rollout_node_offerings={"control": "cks-large", "worker": "cks-large"},
                          rollout_node_root_disk_sizes={"control": 21, "worker": 21})
        print(run.rc, round(run.wall, 2), "startup", round(s.startup_seconds, 2))
        print(tail(run.log_path, 15))
