# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The live path's time per node beside the restart path's, on the same cluster (issue 35).

One cluster (1 control + N workers, CloudStack 4.23 rules, ``enable.dynamic.scale.vm`` on): the
workers go cks-medium -> cks-large with ``rollout_live_scale: auto`` (scaleVirtualMachine, guest
check, kubelet restart), then cks-large -> cks-xlarge with ``never`` (drain, stop, change, start).
Per node: the seconds from its first step to its last, as the cycle recorded them, and the same at a
real cloud's timings (time_scale 1): a node's simulated durations divided by the time scale, the
collection's own time added as measured.

    .venv/bin/python bench/run.py --skip rollout --skip concurrency --skip planning   # only this one
"""

from __future__ import annotations

import statistics
from typing import Any, Callable

from rollout import RolloutRun, run_rollout
from simproc import TIMINGS, BenchSim, bench_spec

#: The simulated seconds of each path's critical path: the pod's start, the live scale job, the
#: kubelet restart timer (1 s) and the restart; and the restart path's pod termination, stop, start and boot.
LIVE_IDEAL = TIMINGS["pod_start"] + TIMINGS.get("live_scale", 2.0) + 1.0 + TIMINGS.get("kubelet_restart", 2.0)
RESTART_IDEAL = TIMINGS["pod_termination"] + TIMINGS["stop"] + TIMINGS["start"] + TIMINGS["boot_to_ready"]


def live_spec(workers: int, time_scale: float) -> dict[str, Any]:
    spec = bench_spec(workers, control_nodes=1, time_scale=time_scale, max_unavailable=workers)
    spec["cloud"] = {"version": "4.23.0.0"}
    spec["zone"] = dict(spec["zone"], dynamic_scale=True)
    spec["service_offerings"] = spec["service_offerings"] + [{"name": "cks-xlarge", "cpu": 8, "memory": 16384}]
    return spec


def _node_seconds(run: RolloutRun) -> list[dict[str, Any]]:
    out = []
    for node in run.report.get("nodes") or []:
        steps = [s for s in node.get("steps") or [] if s.get("ended") is not None]
        if node.get("node_type") != "worker" or not steps:
            continue
        seconds = max(float(s["ended"]) for s in steps) - min(float(s["started"]) for s in steps)
        # The bench's cycle records carry the steps only: the live path ends with node_reports.
        names = {s.get("name"): s.get("outcome") for s in steps}
        path = "live" if names.get("node_reports") == "ok" else "fell_back" if "guest_check" in names else "restart"
        out.append({"node": node.get("name"), "path": path, "seconds": round(seconds, 3)})
    return out


def _summary(rows: list[dict[str, Any]], ideal: float, time_scale: float) -> dict[str, Any]:
    if not rows:
        return {"nodes": 0}
    mean = statistics.mean(r["seconds"] for r in rows)
    own = max(0.0, mean - ideal * time_scale)
    return {"nodes": len(rows), "seconds_per_node": round(mean, 3), "ideal_simulated": ideal,
            "own_seconds_per_node": round(own, 3), "at_time_scale_1": round(ideal + own, 1)}


def live_vs_restart(workers: int, time_scale: float, out: str, log: Callable[[str], None]) -> dict[str, Any]:
    with BenchSim.from_spec(live_spec(workers, time_scale), etcd=True) as sim:
        log(f"cks-sim 1 control + {workers} workers up (live scale vs restart)")
        live = run_rollout(sim, f"live-w{workers}", out, forks=5, rollout_max_unavailable=workers,
                           rollout_node_offerings={"worker": "cks-large"}, rollout_live_scale="auto")
        restart = run_rollout(sim, f"restart-w{workers}", out, forks=5, rollout_max_unavailable=workers,
                              rollout_node_offerings={"worker": "cks-xlarge"}, rollout_live_scale="never")
    live_rows, restart_rows = _node_seconds(live), _node_seconds(restart)
    result = {
        "workers": workers, "rc": {"live": live.rc, "restart": restart.rc},
        "live": _summary([r for r in live_rows if r["path"] == "live"], LIVE_IDEAL, time_scale),
        "restart": _summary(restart_rows, RESTART_IDEAL, time_scale),
        "fell_back": [r["node"] for r in live_rows if r["path"] == "fell_back"],
        "stops_in_live_run": sum(1 for c in live.calls if c.get("command") == "stopVirtualMachine"),
        "invariant_violations": len(live.invariants) + len(restart.invariants),
    }
    log(f"  live: {result['live'].get('seconds_per_node')}s/node, restart: {result['restart'].get('seconds_per_node')}s/node "
        f"(at time_scale 1: {result['live'].get('at_time_scale_1')}s vs {result['restart'].get('at_time_scale_1')}s)")
    return result


def markdown(result: dict[str, Any]) -> str:
    if not result:
        return ""
    live, restart = result.get("live") or {}, result.get("restart") or {}
    return "\n".join([
        "", f"## Live scale vs restart ({result['workers']} workers, same cluster)", "",
        "| path | nodes | seconds per node | own seconds per node | at time_scale 1 (s) |",
        "|---|---|---|---|---|",
        f"| live | {live.get('nodes')} | {live.get('seconds_per_node')} | {live.get('own_seconds_per_node')} | "
        f"{live.get('at_time_scale_1')} |",
        f"| restart | {restart.get('nodes')} | {restart.get('seconds_per_node')} | {restart.get('own_seconds_per_node')} | "
        f"{restart.get('at_time_scale_1')} |",
        "", f"Fell back: {', '.join(result.get('fell_back') or []) or 'none'}; stopVirtualMachine in the live run: "
        f"{result.get('stops_in_live_run')}; invariant violations: {result.get('invariant_violations')}", ""])
