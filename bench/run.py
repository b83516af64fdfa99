# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""`make bench`: roll simulated clusters with playbooks/rollout.yml and measure the overhead against
the simulator's critical path, batch concurrency, polling cost and planning at scale.

    .venv/bin/python bench/run.py                # everything (under 10 minutes on 2 cores)
    .venv/bin/python bench/run.py --smoke        # a tiny run of the same machinery (the smoke test)
    .venv/bin/python bench/run.py --rollout c3-w10-mu10   # one rollout: bench/results/rollout-c3-w10-mu10.json

Writes bench/results/latest.json, latest.md and timeline.svg (the 3 control + 10 worker rollout,
maxunavailable 5) and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from typing import Any, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import analysis  # noqa: E402
import fleet as fleet_bench  # noqa: E402
import inventory as inventory_bench  # noqa: E402
import live_scale as live_bench  # noqa: E402
import timeline as timeline_svg  # noqa: E402
from planning import planning_scale  # noqa: E402
from rollout import RolloutRun, run_rollout  # noqa: E402
from simproc import TIMINGS, BenchSim, bench_spec  # noqa: E402

# 0.05: a node's critical path (5 + 10 + 2 + 15 + 30 = 62 simulated seconds) takes 3.1 real
# seconds. Real time (1.0) would make the 31 batches alone take 32 minutes; see README.
DEFAULT_TIME_SCALE = 0.05
TARGETS = {"ratio": 1.05, "concurrency": 1.1, "detection": 1.0, "plan_1000_seconds": 3.0,
           "plan_1000_cloudstack": 10, "plan_1000_kubernetes": 5}
# What the management servers see of a rollout (judged on the projected real-cloud timings, as the targets above).
LOAD_TARGETS = {"batch_overhead_seconds": 1.5, "ratio": 1.025, "cloudstack_per_node": 12.0,
                "kubernetes_per_node": 8.0, "catalog_reads": 1, "plan_growth": 1.2}


@dataclass
class Config:
    time_scale: float
    small_workers: int
    small_max_unavailable: tuple[int, ...]
    large_workers: int
    large_max_unavailable: int
    batch_runs: tuple[tuple[int, int], ...]  # (k, forks) of the dedicated one-batch rollouts
    plan_sizes: tuple[int, ...]
    plan_repeats: int
    control_nodes: int = 3
    live_workers: int = 5  # the live path beside the restart path (bench/live_scale.py); 0: not run


# Batches of 1, 5 and 10 at forks 5 come from the rollouts above (maxunavailable 1, 5, 10); the
# dedicated one-batch rollouts add forks 1 for each size and the batch of 20 at forks 5.
FULL = Config(DEFAULT_TIME_SCALE, 10, (1, 5), 100, 10, ((1, 1), (5, 1), (10, 1), (20, 1), (20, 5)), (100, 1000, 3000), 3)
# One rollout of 1 control + 3 workers, 2 at a time (batches of 2 and 1), and planning 20 nodes.
SMOKE = Config(0.01, 3, (2,), 0, 0, (), (20,), 1, control_nodes=1, live_workers=0)


def log(message: str) -> None:
    print(message, flush=True)


def at_time_scale_1(measured: float, ideal: float, time_scale: float) -> Optional[float]:
    """``measured / ideal`` as it would be with a real cloud's timings (time_scale 1).

    Ansible's and the collection's costs do not scale with the simulated clock (polling slack is
    bounded by the poll interval), so at time_scale 1 the same overhead sits on an ideal
    1/time_scale times longer.
    """
    if not ideal:
        return None
    real_ideal = ideal / time_scale
    return round((real_ideal + measured - ideal) / real_ideal, 3)


def analyse(run: RolloutRun) -> dict[str, Any]:
    paths = analysis.node_paths(run.timeline, run.timings, run.time_scale)
    batches = analysis.batches_of(run.report, run.tasks, paths, run.ended)
    rolled = sum(len(b.nodes) for b in batches)
    rollout_calls = [c for c in run.calls if run.started <= c["t"] <= run.ended]
    cost = analysis.overhead(run.wall, batches, run.started, run.ended)
    if cost["ideal"]:
        cost["ratio_at_time_scale_1"] = at_time_scale_1(cost["wall"], cost["ideal"], run.time_scale)
    return {
        "name": run.name,
        "rc": run.rc,
        "outcome": (run.report.get("release") or {}).get("outcome"),
        "forks": run.forks,
        "nodes_rolled": rolled,
        "invariant_violations": len(run.invariants),
        "overhead": cost,
        "cycle_task": analysis.cycle_breakdown(batches),
        "tasks": analysis.task_costs(run.tasks, run.ended, batches)[:12],
        "task_runs_per_batch": analysis.task_runs_per_batch(run.tasks, batches),
        "batches": [{
            "number": b.number, "node_type": b.node_type, "nodes": len(b.nodes),
            "wall": round(b.wall, 3), "ideal": round(b.ideal, 3), "cycle_task": round(b.cycle_wall, 3),
            "steps_span": round(b.steps_span, 3), "slowest_node": round(b.slowest_node, 3),
            **analysis.concurrency(b)} for b in batches],
        "ideal_segments_mean": {s: round(sum(p.seconds(s) for p in paths.values()) / max(1, len(paths)), 3)
                                for s in analysis.SEGMENTS},
        "calls": analysis.calls_per_node(rollout_calls, rolled),
        "list_calls_per_batch": analysis.list_calls_per_batch(rollout_calls, batches),
        "list_calls_by_batch": [{"node_type": b.node_type, "nodes": len(b.nodes), "lists": n}
                                for b, n in zip(batches, analysis.list_calls_per_batch(rollout_calls, batches), strict=False)],
        "cluster_nodes": run.cluster_nodes,
        "detection_latency": analysis.detection_latency(rollout_calls, run.timeline, run.vm_ids),
    }


def rollout_runs(cfg: Config, out: str, raw: dict[str, Any], pictures: dict[str, RolloutRun]) -> list[dict[str, Any]]:
    results = []
    sizes = [(cfg.small_workers, cfg.small_max_unavailable)]
    if cfg.large_workers:
        sizes.append((cfg.large_workers, (cfg.large_max_unavailable,)))
    disk = 20
    for workers, limits in sizes:
        spec = bench_spec(workers, control_nodes=cfg.control_nodes, time_scale=cfg.time_scale,
                          max_unavailable=max(limits))
        started = time.monotonic()
        with BenchSim.from_spec(spec, etcd=True) as sim:
            log(f"cks-sim {cfg.control_nodes} control + {workers} workers up in {time.monotonic() - started:.1f}s")
            for index, limit in enumerate(limits):
                disk += 1
                offering = "cks-large" if index % 2 == 0 else "cks-medium"
                sim.set_config(max_unavailable={"worker": limit})
                name = f"c{cfg.control_nodes}-w{workers}-mu{limit}"
                # A single control node cannot go down (etcd quorum): then only the workers change.
                types = ("control", "worker") if cfg.control_nodes >= 3 else ("worker",)
                run = run_rollout(sim, name, out, forks=5, rollout_max_unavailable=limit,
                                  rollout_node_offerings={t: offering for t in types},
                                  rollout_node_root_disk_sizes={t: disk for t in types})
                row = analyse(run)
                results.append(row)
                pictures[name] = run
                raw[name] = {"calls": len(run.calls), "timeline": len(run.timeline)}
                o = row["overhead"]
                log(f"  {name}: rc {run.rc}, {o['batches']} batches, wall {o['wall']:.1f}s, ideal {o['ideal']:.1f}s, "
                    f"ratio {o['ratio']}, {o['overhead_per_batch']:.2f}s/batch")
                if run.rc != 0:
                    log(f"  {name} failed; see {run.log_path}")
    return results


def one_rollout(name: str, cfg: Config, out: str) -> int:
    """The rollout ``c<control>-w<workers>-mu<max unavailable>`` alone, as the full run rolls it: its row
    (own time per batch, calls) in ``rollout-<name>.json``, so a change is measured without the whole bench."""
    parts = {p.rstrip("0123456789"): int(p.lstrip("cmuw")) for p in name.split("-")}
    control, workers, limit = parts["c"], parts["w"], parts["mu"]
    spec = bench_spec(workers, control_nodes=control, time_scale=cfg.time_scale, max_unavailable=limit)
    with BenchSim.from_spec(spec, etcd=True) as sim:
        types = ("control", "worker") if control >= 3 else ("worker",)
        run = run_rollout(sim, name, os.path.join(out, "runs"), forks=5, rollout_max_unavailable=limit,
                          rollout_node_offerings={t: "cks-large" for t in types},
                          rollout_node_root_disk_sizes={t: 21 for t in types})
    row = dict(analyse(run), when=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               load_at_start=os.getloadavg()[0], time_scale=cfg.time_scale)
    with open(os.path.join(out, f"rollout-{name}.json"), "w", encoding="utf-8") as fh:
        json.dump(row, fh, indent=2)
        fh.write("\n")
    o = row["overhead"]
    log(f"{name}: rc {run.rc}, {o['batches']} batches, wall {o['wall']:.1f}s, ideal {o['ideal']:.1f}s, "
        f"own time per batch {o['overhead_per_batch']:.2f}s (before {o['before_batches']:.2f}s, "
        f"{o['in_batches_per_batch']:.2f}s in each batch's pass, after {o['after_batches']:.2f}s)")
    return run.rc


def concurrency_runs(cfg: Config, out: str) -> list[dict[str, Any]]:
    largest = max(k for k, _ in cfg.batch_runs)
    workers = largest + 1
    spec = bench_spec(workers, control_nodes=1, time_scale=cfg.time_scale, max_unavailable=largest)
    rows = []
    with BenchSim.from_spec(spec, etcd=False) as sim:
        log(f"cks-sim 1 control + {workers} workers up (batch concurrency)")
        disk = 20
        for k, forks in cfg.batch_runs:
            disk += 1
            name = f"batch-k{k}-forks{forks}"
            # Only the root disk grows, so every worker is out of date; select picks k of them.
            run = run_rollout(sim, name, out, forks=forks, rollout_max_unavailable=k,
                              rollout_node_root_disk_sizes={"worker": disk},
                              rollout_select=f"[?node_type=='worker'].name | [:{k}]")
            row = analyse(run)
            batch = row["batches"][0] if row["batches"] else {}
            rows.append({"k": k, "forks": forks, "rc": run.rc, "from": name, "nodes": batch.get("nodes"),
                         "cycle_task": batch.get("cycle_task"), "steps_span": batch.get("steps_span"),
                         "slowest_node": batch.get("slowest_node"), "ideal": batch.get("ideal"),
                         "task_ratio": batch.get("task_ratio"), "steps_ratio": batch.get("steps_ratio"),
                         "task_ratio_at_time_scale_1": at_time_scale_1(
                             batch.get("cycle_task") or 0, batch.get("slowest_node") or 0, cfg.time_scale),
                         "pass_wall": batch.get("wall")})
            log(f"  k={k} forks={forks}: rc {run.rc}, cycle task {batch.get('cycle_task')}s, "
                f"slowest node {batch.get('slowest_node')}s, ratio {batch.get('task_ratio')}")
    return rows


def harvested(rollouts: list[dict[str, Any]], time_scale: float) -> list[dict[str, Any]]:
    """The worker batches of the rollouts (forks 5): one row per batch size, its slowest batch."""
    rows: dict[int, dict[str, Any]] = {}
    for r in rollouts:
        for b in r["batches"]:
            if b["node_type"] != "worker" or not b.get("task_ratio"):
                continue
            k = b["nodes"]
            if k not in rows or b["task_ratio"] > rows[k]["task_ratio"]:
                rows[k] = {"k": k, "forks": r["forks"], "rc": r["rc"], "from": f"{r['name']} batch {b['number']}",
                           "nodes": k, "cycle_task": b["cycle_task"], "steps_span": b["steps_span"],
                           "slowest_node": b["slowest_node"], "ideal": b["ideal"], "task_ratio": b["task_ratio"],
                           "steps_ratio": b["steps_ratio"], "pass_wall": b["wall"],
                           "task_ratio_at_time_scale_1": at_time_scale_1(b["cycle_task"], b["slowest_node"],
                                                                         time_scale)}
    return [rows[k] for k in sorted(rows)]


def verdicts(result: dict[str, Any]) -> dict[str, Any]:
    rollouts = result["rollouts"]
    # Judged with a real cloud's timings: what the collection adds per batch is measured here, in
    # seconds, and does not shrink or grow with the simulated clock (see at_time_scale_1).
    ratios = [r["overhead"]["ratio_at_time_scale_1"] for r in rollouts if r["overhead"].get("ratio_at_time_scale_1")]
    steps = [r["steps_ratio"] for r in result["concurrency"] if r.get("steps_ratio")]
    tasks = [r["task_ratio_at_time_scale_1"] for r in result["concurrency"] if r.get("task_ratio_at_time_scale_1")]
    detect = [r["detection_latency"].get("all", {}).get("p95") for r in rollouts if r["detection_latency"].get("all")]
    plan = next((p for p in result["planning"] if p["nodes"] == 1000), None)
    # Bounded: a batch of the same kind and size makes as many list calls in a 13-node as in a
    # 103-node cluster (the per-node reads of verify grow with the batch, not the cluster).
    same_batch: dict[tuple[str, int], set[tuple[int, int]]] = {}
    for r in rollouts:
        for b in r.get("list_calls_by_batch") or []:
            same_batch.setdefault((b["node_type"], b["nodes"]), set()).add((r.get("cluster_nodes") or 0, b["lists"]))
    comparable = {key: seen for key, seen in same_batch.items() if len({size for size, _ in seen}) > 1}
    bounded = all(
        max(n for size, n in seen if size == max(sz for sz, _ in seen))
        <= max(n for size, n in seen if size == min(sz for sz, _ in seen)) for seen in comparable.values())
    out: dict[str, Any] = {
        "ratio_le_1.05": max(ratios) <= TARGETS["ratio"] if ratios else None,
        "concurrency_steps_le_1.1": max(steps) <= TARGETS["concurrency"] if steps else None,
        "concurrency_task_le_1.1": max(tasks) <= TARGETS["concurrency"] if tasks else None,
        "detection_p95_le_1s": max(detect) <= TARGETS["detection"] if detect else None,
        "list_calls_per_batch_bounded": bounded if comparable else None,
    }
    if plan:
        out["plan_1000_le_3s"] = plan["wall_median"] <= TARGETS["plan_1000_seconds"]
        out["plan_1000_calls"] = (plan["calls"].get("cloudstack", 0) <= TARGETS["plan_1000_cloudstack"]
                                  and plan["calls"].get("kubernetes", 0) <= TARGETS["plan_1000_kubernetes"])
        rows = sorted(result["planning"], key=lambda p: p["nodes"])
        if len(rows) >= 3:
            a, b, c = rows[0], rows[1], rows[2]
            first = (b["wall_median"] - a["wall_median"]) / (b["nodes"] - a["nodes"])
            second = (c["wall_median"] - b["wall_median"]) / (c["nodes"] - b["nodes"])
            out["plan_linear"] = second <= max(first, 1e-6) * LOAD_TARGETS["plan_growth"]
            result["planning_marginal_ms_per_node"] = [round(first * 1000, 3), round(second * 1000, 3)]
    result["load_targets"] = load_targets(result)
    return out


def _target(name: str, value: Optional[float], limit: float, unit: str, why: str, lower_is_better: bool = True) -> dict[str, Any]:
    if value is None:
        return {"target": name, "value": None, "limit": limit, "met": None, "by": None, "why": "not measured"}
    met = value <= limit if lower_is_better else value >= limit
    by = round(value - limit, 3)
    return {"target": name, "value": value, "limit": limit, "unit": unit, "met": met,
            "by": None if met else by, "why": "" if met else why}


def _overhead_why(r: dict[str, Any]) -> str:
    o, cb = r["overhead"], r.get("cycle_task") or {}
    count = max(1, o["batches"])
    parts = [f"{r['name']}: {o['overhead_per_batch']:.2f} s per batch = "
             f"{(o['before_batches'] + o['after_batches']) / count:.2f} s of plan, lock, release and report spread over "
             f"{count} batches + {o['in_batches_per_batch']:.2f} s in each batch's pass"]
    if cb:
        parts.append(f"of which {cb['outside_steps']:.2f} s is the cks_node_cycle run outside its steps (Python and "
                     f"Ansible start-up, the module's reads and preflight) and {cb['steps_above_ideal']:.2f} s the steps "
                     "above the ideal (waiting between polls, the API calls between the simulated steps); the rest "
                     "is the role's own tasks")
    return ", ".join(parts)


# The changes a node costs, the job polls and the reads each module run makes once (the cluster, its
# kubeconfig, its VMs and ROOT volumes, the owner's headroom): what the per-node count is made of.
_CHANGES = ("stopVirtualMachine", "changeServiceForVirtualMachine", "resizeVolume", "updateVMAffinityGroup",
            "startVirtualMachine")
_RUN_READS = ("listKubernetesClusters", "getKubernetesClusterConfig", "listVirtualMachines", "listVolumes",
              "listAccounts")


#: The async commands of a node's cycle: each a job polled with queryAsyncJobResult.
_JOB_COMMANDS = ("stopVirtualMachine", "resizeVolume", "updateVMAffinityGroup", "startVirtualMachine")


def _cloudstack_why(r: dict[str, Any]) -> str:
    """What a rolled node's CloudStack calls are, from the call counts per node."""
    c, o = r["calls"], r["overhead"]
    per = c.get("by_command_per_node") or {}
    changes = round(sum(per.get(f"cloudstack:{k}", 0.0) for k in _CHANGES), 2)
    jobs = sum(per.get(f"cloudstack:{k}", 0.0) for k in _CHANGES if k != "changeServiceForVirtualMachine")
    polls = c.get("job_polls_per_node") or 0.0
    reads = round(sum(per.get(f"cloudstack:{k}", 0.0) for k in _RUN_READS), 2)
    per_job = round(polls / jobs, 2) if jobs else 0.0
    return (f"{changes} changes, {polls} job polls ({per_job} per job: each first polled about when that command's "
            f"jobs end, probed now and then to keep that known) and {reads} reads of the cluster, kubeconfig, VMs, volumes and owner, made "
            f"once by each module run: {o['batches']} batches of "
            f"{round(r['nodes_rolled'] / max(1, o['batches']), 1)} nodes plus the plan, lock and release runs. "
            "Each batch reads afresh before its drain what could refuse its changes once its nodes are stopped "
            "(the cluster's state, its VMs, their ROOT volumes for a disk change, the owner's headroom for a larger "
            "offering); a kubeconfig given (K8S_AUTH_KUBECONFIG) saves the getKubernetesClusterConfig of each run"
            + (". The jobs of one command that run at once in a batch share what they know of it as they started: "
               "a batch's bracket narrows once per batch, not once per job, so a rollout of few large batches "
               "probes most of its jobs (a probe and an end poll each)"
               if r["nodes_rolled"] > o["batches"] and per_job > 1.5 else ""))


#: The Kubernetes calls each rolled node costs: its three writes (the boot ID annotation with the cordon in
#: one patch, the stop mark before its stop, the uncordon with the marks removed), its drain's pod list and
#: the watch until the evicted pods are gone (none without pods to evict).
_NODE_CALLS = ("patch nodes", "list pods", "watch pods")


def _kubernetes_why(r: dict[str, Any]) -> str:
    """What a rolled node's Kubernetes calls are: its own (writes, drain), and the reads and the lease write
    each batch makes once whatever its size (so a batch of one pays them all)."""
    c, o = r["calls"], r["overhead"]
    per = c.get("by_command_per_node") or {}
    nodes, batches = max(1, r["nodes_rolled"]), max(1, o["batches"])
    own = {k: per.get(f"kubernetes:{k}", 0.0) for k in _NODE_CALLS}
    besides = c.get("kubernetes_per_node_besides_evictions") or 0.0
    per_batch = round((besides - sum(own.values())) * nodes / batches, 1)
    top = sorted(((k.split(":", 1)[1], v) for k, v in per.items()
                  if k.startswith("kubernetes:") and k.split(":", 1)[1] not in _NODE_CALLS + ("create pods/eviction",)),
                 key=lambda kv: -kv[1])
    # The simulator logs /readyz and /readyz/etcd as a get of no resource.
    listed = ", ".join(f"{name if name.strip() != 'get' else 'get /readyz'} {round(v * nodes / batches, 2)}" for name, v in top)
    return (f"{round(sum(own.values()), 2)} calls of each node's own ({', '.join(f'{k} {round(v, 2)}' for k, v in own.items())}: "
            f"the boot ID annotation with the cordon, the stop mark and the uncordon; the drain's pod list and its watch) "
            f"and {per_batch} calls per batch whatever its size ({batches} batches of {round(nodes / batches, 1)} nodes, "
            f"the plan and the release included): {listed}")


def load_targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Every load target: the value measured, met or missed by how much, and why."""
    rows: list[dict[str, Any]] = []
    node_ideal = float(result["node_ideal_simulated"])
    for r in result["rollouts"]:
        o = r["overhead"]
        rows.append(_target(f"collection's own time per batch, {r['name']} ({r.get('cluster_nodes')} nodes)",
                            o["overhead_per_batch"], LOAD_TARGETS["batch_overhead_seconds"], "s", _overhead_why(r)))
        rows.append(_target(f"overhead ratio at a {node_ideal:g} s node critical path, {r['name']}",
                            round((node_ideal + o["overhead_per_batch"]) / node_ideal, 4), LOAD_TARGETS["ratio"], "",
                            "the time per batch above, on the node's critical path"))
        c = r["calls"]
        rows.append(_target(f"CloudStack calls per node, {r['name']}", c["cloudstack_per_node"],
                            LOAD_TARGETS["cloudstack_per_node"], "", _cloudstack_why(r)))
        besides = c.get("kubernetes_per_node_besides_evictions")
        rows.append(_target(f"Kubernetes calls per node besides evictions ({c.get('evictions_per_node')} per node), "
                            f"{r['name']}", besides, LOAD_TARGETS["kubernetes_per_node"], "",
                            _kubernetes_why(r)))
        reads = c.get("catalog_reads") or {}
        most = max(reads.values()) if reads else None
        rows.append(_target(f"catalog (offerings, disk offerings, groups) reads per rollout, {r['name']}", most,
                            LOAD_TARGETS["catalog_reads"], "", f"listed {reads}"))
    rows_plan = sorted(result["planning"], key=lambda p: p["nodes"])
    marginal = result.get("planning_marginal_ms_per_node")
    if len(rows_plan) >= 3 and marginal:
        growth = round(marginal[1] / max(marginal[0], 1e-6), 3)
        rows.append(_target(f"planning cost per node {rows_plan[1]['nodes']}->{rows_plan[2]['nodes']} against "
                            f"{rows_plan[0]['nodes']}->{rows_plan[1]['nodes']} ({marginal[0]} then {marginal[1]} ms)",
                            growth, LOAD_TARGETS["plan_growth"], "x",
                            "the module's own time per node still grows (see the planning rows: more pages, "
                            "a larger result to scrub)"))
    steps = [r["steps_ratio"] for r in result["concurrency"] if r.get("steps_ratio")]
    tasks = [r["task_ratio_at_time_scale_1"] for r in result["concurrency"] if r.get("task_ratio_at_time_scale_1")]
    rows.append(_target("batch / slowest node, the steps (any forks)", max(steps) if steps else None,
                        TARGETS["concurrency"], "x", "the nodes of a batch do not run their steps together"))
    rows.append(_target("batch / slowest node, the whole task at a real cloud's timings", max(tasks) if tasks else None,
                        TARGETS["concurrency"], "x", "module start-up and preflight on the batch"))
    return rows


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny run of the same machinery")
    parser.add_argument("--time-scale", type=float, default=None, help=f"default {DEFAULT_TIME_SCALE}")
    parser.add_argument("--out", default=os.path.join(HERE, "results"), help="where latest.json/.md and the SVG go")
    parser.add_argument("--render", metavar="JSON", help="only recompute the verdicts and the table of a result JSON")
    parser.add_argument("--rollout", metavar="NAME", help="only the rollout NAME (c3-w10-mu10: 3 control nodes, "
                        "10 workers, max unavailable 10)")
    parser.add_argument("--skip", action="append", default=[], choices=["rollout", "concurrency", "planning", "live"])
    args = parser.parse_args(argv)
    if args.render:
        return render_only(args.render, args.out)
    cfg = SMOKE if args.smoke else FULL
    if args.time_scale:
        cfg.time_scale = args.time_scale
    # Absolute: the report path handed to ansible-playbook must not depend on its working directory.
    args.out = os.path.abspath(args.out)
    os.makedirs(args.out, exist_ok=True)
    if args.rollout:
        return one_rollout(args.rollout, cfg, args.out)
    work = os.path.join(args.out, "runs")
    begun = time.monotonic()
    result: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_at_start": os.getloadavg()[0]},
        "time_scale": cfg.time_scale, "timings_simulated": TIMINGS,
        "node_ideal_simulated": TIMINGS["pod_termination"] + TIMINGS["stop"] + TIMINGS["resize"] + TIMINGS["start"] + TIMINGS["boot_to_ready"],
        "smoke": args.smoke, "rollouts": [], "concurrency": [], "planning": [],
    }
    raw: dict[str, Any] = {}
    pictures: dict[str, RolloutRun] = {}
    if "rollout" not in args.skip:
        result["rollouts"] = rollout_runs(cfg, work, raw, pictures)
    _partial(args.out, result)
    if "concurrency" not in args.skip and cfg.batch_runs:
        result["concurrency"] = concurrency_runs(cfg, work)
    result["concurrency"] = sorted(harvested(result["rollouts"], cfg.time_scale) + result["concurrency"], key=lambda r: (r["k"], r["forks"]))
    _partial(args.out, result)
    if "planning" not in args.skip:
        log("planning scale")
        result["planning"] = planning_scale(cfg.plan_sizes, cfg.time_scale, cfg.plan_repeats, log=log)
    if "live" not in args.skip and cfg.live_workers:
        result["live_scale"] = live_bench.live_vs_restart(cfg.live_workers, cfg.time_scale, work, log)
    result["verdicts"] = verdicts(result)
    result["elapsed"] = round(time.monotonic() - begun, 1)
    result["machine"]["load_at_end"] = os.getloadavg()[0]
    pictures_written = []
    for name, run in pictures.items():
        svg = os.path.join(args.out, f"timeline-{name}.svg")
        chart = timeline_svg.from_sim(run.timeline, run.report, run.timings, run.time_scale, origin=run.started,
                                      end=run.ended, title=f"{name}: ansible-playbook rollout.yml against the simulator's critical path")
        timeline_svg.write_svg(chart, svg)
        pictures_written.append(svg)
    main_picture = next((p for p in pictures_written if "mu5" in p), pictures_written[0] if pictures_written else None)
    if main_picture:
        with open(main_picture, encoding="utf-8") as src, open(os.path.join(args.out, "timeline.svg"), "w", encoding="utf-8") as dst:
            dst.write(src.read())
        result["timeline_svg"] = os.path.relpath(os.path.join(args.out, "timeline.svg"), os.path.dirname(HERE))
    with open(os.path.join(args.out, "latest.json"), "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2)
        fh.write("\n")
    table = markdown(result) + live_bench.markdown(result.get("live_scale") or {})
    with open(os.path.join(args.out, "latest.md"), "w", encoding="utf-8") as fh:
        fh.write(table)
    print(table)
    print(f"Wrote {os.path.join(args.out, 'latest.json')}, latest.md and timeline.svg in {result['elapsed']}s")
    failed = [r["name"] for r in result["rollouts"] if r["rc"] != 0] + [f"k{r['k']}" for r in result["concurrency"] if r["rc"] != 0]
    return 1 if failed else 0


def render_only(path: str, out: str) -> int:
    with open(path, encoding="utf-8") as fh:
        result = json.load(fh)
    for r in result["rollouts"]:
        # Results written before these fields existed: derive them from the batches and the name.
        r.setdefault("list_calls_by_batch", [{"node_type": b["node_type"], "nodes": b["nodes"], "lists": n}
                                             for b, n in zip(r["batches"], r["list_calls_per_batch"], strict=False)])
        if not r.get("cluster_nodes"):
            parts = {p[0]: p[1:] for p in r["name"].split("-") if p[:1] in ("c", "w") and p[1:].isdigit()}
            r["cluster_nodes"] = int(parts.get("c", 0)) + int(parts.get("w", 0))
        c, rolled = r["calls"], max(1, r.get("nodes_rolled") or 1)
        per = c.get("by_command_per_node") or {}
        evictions = per.get("kubernetes:create pods/eviction", 0.0)
        c.setdefault("evictions_per_node", evictions)
        c.setdefault("kubernetes_per_node_besides_evictions", round(c["kubernetes_per_node"] - evictions, 2))
        c.setdefault("job_polls_per_node", per.get("cloudstack:queryAsyncJobResult", 0.0))
        jobs = sum(per.get(f"cloudstack:{cmd}", 0.0) for cmd in _JOB_COMMANDS)
        c.setdefault("jobs_per_node", round(jobs, 2))
        c.setdefault("polls_per_job", round(c["job_polls_per_node"] / jobs, 2) if jobs else None)
        kinds = [r["detection_latency"][k] for k in analysis.JOB_EVENTS if k in r["detection_latency"]]
        if kinds and "jobs" not in r["detection_latency"]:
            # Only the mean can be put together from the kinds' summaries; the percentiles stay unknown.
            r["detection_latency"]["jobs"] = {"n": sum(k["n"] for k in kinds),
                                              "mean": round(sum(k["mean"] * k["n"] for k in kinds) / sum(k["n"] for k in kinds), 3)}
        c.setdefault("catalog_reads", {cmd: round(per.get(f"cloudstack:{cmd}", 0.0) * rolled)
                                       for cmd in analysis.CATALOG_COMMANDS})
    result["verdicts"] = verdicts(result)
    # The numbers stay those of the run named in the header; only the verdicts are new.
    result["verdicts_rendered"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "latest.json"), "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2)
        fh.write("\n")
    table = markdown(result)
    with open(os.path.join(out, "latest.md"), "w", encoding="utf-8") as fh:
        fh.write(table)
    print(table)
    return 0


def _partial(out: str, result: dict[str, Any]) -> None:
    """What is measured so far, in case a long run is stopped before the end."""
    with open(os.path.join(out, "partial.json"), "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2)


def _yes(value: Optional[bool]) -> str:
    return "not measured" if value is None else ("met" if value else "not met")


def markdown(result: dict[str, Any]) -> str:
    ts = result["time_scale"]
    lines = [f"Benchmarks ({result['when']}, {result['machine']['cpus']} CPUs, load {result['machine']['load_at_start']:.1f}; "
             f"time_scale {ts}: a node's critical path is {result['node_ideal_simulated']:g} simulated s = "
             f"{result['node_ideal_simulated'] * ts:.2f} real s; {result['elapsed']} s in all)", ""]
    if result.get("verdicts_rendered"):
        lines += [f"Verdicts recomputed at {result['verdicts_rendered']} (bench/run.py --render) from the measurements "
                  f"of {result['when']}: the numbers are that run's, not of the code as it is now.", ""]
    v = result["verdicts"]
    if result["rollouts"]:
        lines += ["| rollout | batches | wall s | ideal s | wall / ideal | at time_scale 1 (projected) | overhead s / batch | "
                  "of it: before, per batch pass, after | detection p50 / p95 s | CS, k8s calls / node | list calls / batch |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | --- |"]
        for r in result["rollouts"]:
            o, d, c = r["overhead"], r["detection_latency"].get("all", {}), r["calls"]
            lists = r["list_calls_per_batch"]
            lines.append(f"| {r['name']} | {o['batches']} | {o['wall']:.1f} | {o['ideal']:.1f} | {o['ratio']} | "
                         f"{o.get('ratio_at_time_scale_1', '-')} | {o['overhead_per_batch']:.2f} | "
                         f"{o['before_batches']:.1f}, {o['in_batches_per_batch']:.2f}, {o['after_batches']:.1f} | "
                         f"{d.get('p50', '-')} / {d.get('p95', '-')} | {c['cloudstack_per_node']}, {c['kubernetes_per_node']} | "
                         f"{min(lists) if lists else '-'}–{max(lists) if lists else '-'} |")
        lines += ["", f"Overhead ratio ≤ {TARGETS['ratio']} with a real cloud's timings (the overhead per batch measured here on "
                  f"a node critical path of {result['node_ideal_simulated']:g} s): {_yes(v.get('ratio_le_1.05'))}. "
                  f"Detection latency ≤ 1 s (p95): {_yes(v.get('detection_p95_le_1s'))}. "
                  f"List calls per batch bounded (a batch of the same type and size makes no more list calls in the larger cluster): "
                  f"{_yes(v.get('list_calls_per_batch_bounded'))}.", ""]
        big = max(result["rollouts"], key=lambda r: r["overhead"]["batches"])
        lines += [f"Where a batch's time goes ({big['name']}, seconds per run of each task):", "",
                  "| task | runs | s per run | s total |", "| --- | ---: | ---: | ---: |"]
        for t in big["tasks"][:8]:
            lines.append(f"| {t['task']} | {t['runs']} | {t['per_run']:.2f} | {t['seconds']:.1f} |")
        runs = big.get("task_runs_per_batch") or []
        if runs:
            lines += ["", f"Task runs in a batch's pass (the include_role and its argument check, each task started, "
                      f"skipped ones too): {min(runs)}–{max(runs)}, the first batch's {runs[0]}."]
        cb = big["cycle_task"]
        if cb:
            lines += ["", f"Inside the cks_node_cycle task (mean per batch): {cb['cycle_task']:.2f} s = "
                      f"{cb['outside_steps']:.2f} s before the first / after the last step (module start-up, record, cluster read, preflight) "
                      f"+ {cb['steps_span']:.2f} s of steps, which is {cb['steps_above_ideal']:.2f} s above the ideal {cb['ideal']:.2f} s "
                      "(polling slack and the API calls between the simulated steps).", ""]
    if result["rollouts"]:
        lines += job_poll_lines(result["rollouts"])
    if result["concurrency"]:
        lines += ["| batch k | forks | measured in | cks_node_cycle task s | steps span s | slowest node s | task / slowest | "
                  "at time_scale 1 (projected) | steps / slowest |",
                  "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in result["concurrency"]:
            lines.append(f"| {r['k']} | {r['forks']} | {r.get('from', '-')} | {r['cycle_task']} | {r['steps_span']} | {r['slowest_node']} | "
                         f"{r['task_ratio']} | {r.get('task_ratio_at_time_scale_1', '-')} | {r['steps_ratio']} |")
        lines += ["", f"Batch ≤ 1.1 × slowest node, the nodes' steps (concurrency, whatever forks): "
                  f"{_yes(v.get('concurrency_steps_le_1.1'))}; the whole task with its module start-up, with a real "
                  f"cloud's timings: {_yes(v.get('concurrency_task_le_1.1'))}.", ""]
    if result["planning"]:
        lines += ["| planning (cks_node_outdated) | wall s (median) | CloudStack calls | Kubernetes calls | peak RSS MB | batches |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: |"]
        for p in result["planning"]:
            lines.append(f"| {p['nodes']} nodes | {p['wall_median']:.2f} | {p['calls'].get('cloudstack', 0)} | "
                         f"{p['calls'].get('kubernetes', 0)} | {p['max_rss_mb']:.0f} | {p['batches']} |")
        marginal = result.get("planning_marginal_ms_per_node")
        lines += ["", f"1,000 nodes ≤ 3 s: {_yes(v.get('plan_1000_le_3s'))}; ≤ 10 CloudStack and ≤ 5 Kubernetes calls: "
                  f"{_yes(v.get('plan_1000_calls'))}; linear (1,000->3,000 within {LOAD_TARGETS['plan_growth']}x of "
                  f"100->1,000): {_yes(v.get('plan_linear'))}"
                  + (f" (marginal {marginal[0]} then {marginal[1]} ms per node)." if marginal else "."), ""]
    lines += inventory_bench.saved_markdown(os.path.join(HERE, "results"))
    lines += fleet_bench.saved_markdown(os.path.join(HERE, "results"))
    lines += fleet_bench.saved_rate_limit_markdown(os.path.join(HERE, "results"))
    lines += load_target_lines(result.get("load_targets") or [])
    return "\n".join(lines) + "\n"


def job_poll_lines(rollouts: list[dict[str, Any]]) -> list[str]:
    """How many polls a node costs the management server, and the slack they leave."""
    lines = ["CloudStack async jobs (stop, resize, start...): what a node costs in queryAsyncJobResult polls, and the "
             "slack from each job's end to the poll that saw it (the jobs of a node run one after another on its "
             "critical path, so a node's slack is the sum).", "",
             "| rollout | jobs / node | polls / job | polls / node | slack / job mean, p50, p95 s | slack / node s |",
             "| --- | ---: | ---: | ---: | --- | ---: |"]
    for r in rollouts:
        c, slack = r["calls"], (r.get("detection_latency") or {}).get("jobs") or {}
        per_node = c.get("jobs_per_node")
        node_slack = round(slack["mean"] * per_node, 3) if slack and per_node else "-"
        lines.append(f"| {r['name']} | {per_node if per_node is not None else '-'} | {c.get('polls_per_job', '-')} | "
                     f"{c.get('job_polls_per_node', '-')} | "
                     f"{slack.get('mean', '-')}, {slack.get('p50', '-')}, {slack.get('p95', '-')} | {node_slack} |")
    return lines + [""]


def load_target_lines(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    lines = ["Load targets (what the management servers see):", "", "| target | measured | target | verdict | why (when missed) |",
             "| --- | ---: | ---: | --- | --- |"]
    for row in rows:
        unit = row.get("unit") or ""
        if row["met"] is None:
            verdict = "not measured"
        elif row["met"]:
            verdict = "met"
        else:
            verdict = f"missed by {row['by']:g}{' ' + unit if unit else ''}"
        value = "-" if row["value"] is None else f"{row['value']:g}"
        lines.append(f"| {row['target']} | {value} | ≤ {row['limit']:g} | {verdict} | {row['why']} |")
    return lines + [""]


if __name__ == "__main__":
    sys.exit(main())
