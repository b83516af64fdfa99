# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Planning at scale: cks_node_outdated on large simulated clusters, run as Ansible runs a module
(its own Python process with the arguments in a file), timed from spawn to exit, with its peak
memory (max RSS from wait4) and the calls it made (the simulator's call log)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional

from simproc import ROOT, BenchSim, bench_spec

MODULE = "ansible_collections.cloudstack.cks.plugins.modules.cks_node_outdated"
SETTINGS_MODULE = "ansible_collections.cloudstack.cks.plugins.modules.cks_node_settings"
COLLECTIONS = os.path.join(ROOT, ".venv", "collections")
PYTHON = os.path.join(ROOT, ".venv", "bin", "python")


def run_module(sim: BenchSim, args: dict[str, Any], profile: Optional[str] = None,
               module: str = MODULE) -> dict[str, Any]:
    """One module run: {"wall", "max_rss_mb", "calls": {"cloudstack": n, "kubernetes": n}, "result"}."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, fh)
        args_path = fh.name
    env = dict(os.environ, PYTHONPATH=COLLECTIONS, **sim.connection_env())
    cmd = [PYTHON, "-m", module, args_path]
    if profile:
        cmd = [PYTHON, "-m", "cProfile", "-o", profile, "-m", module, args_path]
    try:
        with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
            started = time.time()
            proc = subprocess.Popen(cmd, env=env, stdout=stdout, stderr=stderr)  # pylint: disable=consider-using-with
            # wait4, not wait(): the module's own peak RSS, not the largest of all children so far.
            _, _, usage = os.wait4(proc.pid, 0)
            ended = time.time()
            proc.returncode = 0
            stdout.seek(0)
            stderr.seek(0)
            out, err = stdout.read(), stderr.read()
    finally:
        os.unlink(args_path)
    max_rss_mb = usage.ru_maxrss / 1024.0
    try:
        result = json.loads(out.decode())
    except json.JSONDecodeError:
        raise RuntimeError(f"{module} did not answer JSON: {out.decode()[-500:]} {err.decode()[-2000:]}") from None
    if result.get("failed"):
        raise RuntimeError(f"{module} failed: {result.get('msg')}")
    calls = [c for c in sim.calls(started) if c["t"] <= ended]
    by_api: dict[str, int] = {}
    commands: dict[str, int] = {}
    for call in calls:
        by_api[call["api"]] = by_api.get(call["api"], 0) + 1
        key = call.get("command") or f"{call.get('verb')} {call.get('resource')}"
        commands[f"{call['api']}:{key}"] = commands.get(f"{call['api']}:{key}", 0) + 1
    return {"wall": ended - started, "max_rss_mb": max_rss_mb, "calls": by_api, "commands": commands, "result": result}


def measure(sim: BenchSim, repeats: int = 3) -> dict[str, Any]:
    # Store new worker settings first (not timed), so that every worker is out of date and the
    # plan has its full number of batches.
    run_module(sim, {"cluster": sim.env["cluster_name"], "node_offerings": {"worker": "cks-large"},
                     "rollout": False}, module=SETTINGS_MODULE)
    args = {"cluster": sim.env["cluster_name"], "max_unavailable": 10}
    runs = [run_module(sim, args) for _ in range(repeats)]
    walls = [r["wall"] for r in runs]
    nodes = len(runs[0]["result"].get("nodes") or [])
    return {
        "nodes": nodes,
        "wall_median": statistics.median(walls),
        "wall_all": [round(w, 3) for w in walls],
        "max_rss_mb": max(r["max_rss_mb"] for r in runs),
        "calls": runs[-1]["calls"],
        "commands": runs[-1]["commands"],
        "batches": len(runs[-1]["result"].get("plan") or []),
        "out_of_date": len(runs[-1]["result"].get("out_of_date") or []),
    }


def planning_scale(sizes: tuple[int, ...], time_scale: float, repeats: int = 3,
                   log: Any = print) -> list[dict[str, Any]]:
    """Each size is a cluster of 3 control nodes + N-3 workers, its own simulator (no etcd:
    planning never asks etcd)."""
    rows = []
    for size in sizes:
        spec = bench_spec(workers=size - 3, time_scale=time_scale, max_unavailable=10)
        started = time.monotonic()
        with BenchSim.from_spec(spec, etcd=False, timeout=600) as sim:
            log(f"  planning {size} nodes: cks-sim up in {time.monotonic() - started:.1f}s")
            row = measure(sim, repeats)
            row["sim_startup"] = round(sim.startup_seconds, 1)
            rows.append(row)
            log(f"  planning {size} nodes: {row['wall_median']:.2f}s, {row['calls']}, {row['max_rss_mb']:.0f} MB")
    return rows


if __name__ == "__main__":  # python bench/planning.py SIZE [PROFILE_OUT]
    size = int(sys.argv[1])
    with BenchSim.from_spec(bench_spec(size - 3), etcd=False, timeout=600) as s:
        print("startup", round(s.startup_seconds, 1))
        r = run_module(s, {"cluster": s.env["cluster_name"]}, profile=sys.argv[2] if len(sys.argv) > 2 else None)
        print(round(r["wall"], 3), r["calls"], r["commands"], r["max_rss_mb"])
