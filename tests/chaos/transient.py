"""Rollouts under transient faults on both APIs: do they ride them out in one run?

    .venv/bin/python tests/chaos/transient.py --runs 20 --mode 5xx --rate 0.05 --seed 100 --out out/transient-5xx
    .venv/bin/python tests/chaos/transient.py --runs 20 --mode drop --rate 0.05 --seed 200 --out out/transient-drop
    .venv/bin/python tests/chaos/transient.py --runs 10 --mode mixed --rate 0.05 --seed 300 --out out/transient-mixed

The rollout is the four workers of ``tests/sim/examples/small.yml`` to cks-large, a 30 GB root disk
and the workers-spread group (two batches of two). Each run starts a fresh cks-sim whose seed is ``--seed`` + the run's index (so the faults fall on
different requests in every run), adds cks-sim's ``transient`` fault to both APIs (``5xx``: a
503; ``drop``: the connection closed before the request is handled; ``mixed``: both, each at
``--rate``) for the whole playbook, and runs ``playbooks/rollout.yml`` once, unkilled and not
rerun. Then the faults are cleared and the cluster judged as the kill-anywhere runner judges it
(run.py): every node up to date, Running, Ready and schedulable, no annotation left, the lock
free, etcd quorum kept, the simulator's invariants empty.

A run counts as completed when the playbook exited 0 and the cluster converged. Independently of
that, no run may leave the lock held or a node Stopped or cordoned. Output: one JSON line per run
in OUT/runs.jsonl and OUT/summary.json; exit status 0 when at least ``--need`` runs completed and
none left the lock held, a node Stopped or cordoned, or an invariant broken.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Optional

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import simctl  # noqa: E402  (a sibling file, not a package)
from run import Options, Run  # noqa: E402

MODES = {"5xx": ["5xx"], "drop": ["drop"], "mixed": ["5xx", "drop"]}


def seeded_spec(spec: str, seed: int, workdir: str) -> str:
    with open(spec, encoding="utf-8") as f:
        raw = yaml.safe_load(f)
    raw["seed"] = seed
    path = os.path.join(workdir, f"spec-{seed}.yml")
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(raw, f)
    return path


def retries_of(report: Optional[dict[str, Any]]) -> dict[str, int]:
    """Retries and settled lost answers the report's batches show."""
    totals = {"retries": 0, "lost_answers_settled": 0}
    for batch in (report or {}).get("batches") or []:
        retries = batch.get("retries") or {}
        totals["retries"] += int(retries.get("total") or 0)
        for api in ("cloudstack", "kubernetes"):
            settled = (retries.get(api) or {}).get("lost_answers_settled") or {}
            totals["lost_answers_settled"] += sum(int(n) for n in settled.values())
    return totals


def faults_fired(sim: simctl.SimProcess) -> dict[str, int]:
    fired = {"cloudstack": 0, "kubernetes": 0}
    for call in sim.admin("/calls"):
        if call.get("fault") in ("5xx", "drop") or call.get("dropped") or (
                call.get("api") == "kubernetes" and call.get("status") == 503):
            fired[call.get("api", "cloudstack")] = fired.get(call.get("api", "cloudstack"), 0) + 1
    return fired


def one_run(index: int, args: argparse.Namespace, workdir: str) -> dict[str, Any]:
    seed = args.seed + index
    name = f"run-{index:03d}"
    state_dir = os.path.join(workdir, name, "sim")
    os.makedirs(os.path.dirname(state_dir), exist_ok=True)
    spec = seeded_spec(args.spec, seed, workdir)
    # The rollout: the four workers only (two batches of two), each through all five
    # CloudStack changes (stop, offering, root disk, affinity groups, start).
    target = simctl.Target(root_disk_sizes={"worker": 30})
    sim = simctl.start_sim(spec, state_dir, args.time_scale)
    record: dict[str, Any] = {"run": index, "seed": seed, "mode": args.mode, "rate": args.rate}
    try:
        sim.admin("/actions", {"action": "set_config", "max_unavailable": {"worker": target.max_unavailable}})
        for mode in MODES[args.mode]:
            sim.admin("/faults", {"kind": "transient", "api": "both", "rate": args.rate, "mode": mode})
        opts = Options(trials=1, seed=seed, spec=spec, out=args.out, time_scale=args.time_scale,
                       lock_duration=args.lock_duration, max_reruns=0, foreign_cordon_rate=0.0, duration=None,
                       workdir=workdir)
        run = Run(sim, target, opts, os.path.join(workdir, name, "rollout"))
        rc, seconds = run.run(timeout=args.timeout)
        record.update(rc=rc, seconds=round(seconds, 1), faults_fired=faults_fired(sim))
        sim.admin("/faults", method="DELETE")
        verdict = simctl.judge(sim, target, set())
        cloud, _kube, _etcd = simctl.cluster_state(sim)
        stopped = sorted(vm["name"] for vm in cloud["vms"] if vm["state"] != "Running")
        try:
            with open(run.report_path) as f:
                report = json.load(f)
        except (OSError, ValueError):
            report = None
        record.update(
            completed=rc == 0 and simctl.converged(verdict),
            lock_held=bool(verdict["lock"]),
            stopped=stopped,
            cordoned=verdict["cordoned"],
            invariants=verdict["invariants"],
            verdict=verdict,
            last_error=(report or {}).get("last_error"),
            **retries_of(report),
        )
        if not record["completed"]:
            record["log"] = run.log_path
    finally:
        sim.stop()
    return record


def summarise(records: list[dict[str, Any]], args: argparse.Namespace, seconds: float) -> dict[str, Any]:
    return {
        "runs": len(records),
        "mode": args.mode,
        "rate": args.rate,
        "seeds": [r["seed"] for r in records],
        "completed": sum(1 for r in records if r["completed"]),
        "failed": [{"run": r["run"], "seed": r["seed"], "rc": r["rc"], "last_error": r.get("last_error"),
                    "log": r.get("log")} for r in records if not r["completed"]],
        "lock_left_held": sum(1 for r in records if r["lock_held"]),
        "node_left_stopped": sum(1 for r in records if r["stopped"]),
        "node_left_cordoned": sum(1 for r in records if r["cordoned"]),
        "invariant_violations": [v for r in records for v in r["invariants"]],
        "faults_fired": {api: sum(r["faults_fired"].get(api, 0) for r in records)
                         for api in ("cloudstack", "kubernetes")},
        "retries": sum(r["retries"] for r in records),
        "lost_answers_settled": sum(r["lost_answers_settled"] for r in records),
        "rollout_seconds": sorted(r["seconds"] for r in records),
        "wall_seconds": round(seconds, 1),
    }


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mode", choices=sorted(MODES), default="mixed")
    parser.add_argument("--rate", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=100, help="the first run's sim seed (+1 per run)")
    parser.add_argument("--need", type=int, help="runs that must complete (default: all but one per 20)")
    parser.add_argument("--spec", default=simctl.SMALL_SPEC)
    parser.add_argument("--out", default=os.path.join(simctl.ROOT, "out", "transient"))
    parser.add_argument("--time-scale", type=float, default=0.01)
    parser.add_argument("--lock-duration", type=int, default=30)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--workdir")
    args = parser.parse_args(argv)
    args.spec = os.path.abspath(args.spec)
    if args.need is None:
        args.need = args.runs - args.runs // 20
    return args


def main(argv: list[str]) -> int:
    args = parse(argv)
    os.makedirs(args.out, exist_ok=True)
    workdir = os.path.abspath(args.workdir) if args.workdir else tempfile.mkdtemp(prefix="cks-transient-")
    began = time.monotonic()
    records = []
    with open(os.path.join(args.out, "runs.jsonl"), "w") as lines:
        for index in range(args.runs):
            record = one_run(index, args, workdir)
            records.append(record)
            lines.write(json.dumps(record, sort_keys=True) + "\n")
            lines.flush()
            print(f"transient {args.mode}: run {index} (seed {record['seed']}): rc {record['rc']}, "
                  f"{'completed' if record['completed'] else 'NOT COMPLETED'} in {record['seconds']}s, "
                  f"faults {record['faults_fired']}, retries {record['retries']}, "
                  f"lost answers settled {record['lost_answers_settled']}", flush=True)
    summary = summarise(records, args, time.monotonic() - began)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2, sort_keys=True)
        f.write("\n")
    print(json.dumps({k: v for k, v in summary.items() if k not in ("failed", "rollout_seconds", "seeds")},
                     sort_keys=True))
    clean = not (summary["lock_left_held"] or summary["node_left_stopped"] or summary["node_left_cordoned"]
                 or summary["invariant_violations"])
    ok = summary["completed"] >= args.need and clean
    if ok and not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
