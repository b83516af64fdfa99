"""Kill anywhere: SIGKILL a rollout at a random moment, rerun it, and prove nothing was lost.

    .venv/bin/python tests/chaos/run.py --trials 50 --seed 1 --out out/chaos

One unkilled rollout first measures how long a rollout takes (D; a trial whose rollout finished
before its kill moment measures D again, as load on the machine changes). Each trial then starts a fresh
cks-sim, starts `ansible-playbook playbooks/rollout.yml` in its own process group, and SIGKILLs
the whole group at a moment drawn uniformly from [0, D) (seeded: trial i of seed S always draws
the same moment). Module processes that outlived the kill (found by the run's private Ansible
temp dir on their command line) are killed too, so the kill is total - as when the controller
host dies. The runner then waits out the lease (``--lock-duration``) and reruns the rollout until
it succeeds, at most ``--max-reruns`` times.

Per trial it asserts the rerun converged: every node up to date and Running, Ready, schedulable
(unless someone else cordoned it), no rollout annotation left, the lock released, etcd quorum
kept, and the simulator's invariants empty (no PDB below budget, no more nodes of a type down
than allowed, no owned pod lost, no foreign cordon undone).

Output: one JSON line per trial in OUT/trials.jsonl and OUT/summary.json (trials, kills by phase
and step, reruns needed, anything lost). Exit status 0 only if every trial converged.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Optional

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import simctl  # noqa: E402  (a sibling file, not a package)

TASK_LINE = re.compile(r"^TASK \[(?:[^\]:]+ : )?(?P<task>.*?)\] \*+$")
PLAY_LINE = re.compile(r"^PLAY \[(?P<play>.*?)\] \*+$")


@dataclass
class Options:
    trials: int
    seed: int
    spec: str
    out: str
    time_scale: Optional[float]
    lock_duration: int
    max_reruns: int
    foreign_cordon_rate: float
    duration: Optional[float]
    workdir: str
    keep_workdir: bool = False
    # Mixed-fault mode: this rate of 5xx answers and as much of dropped connections on both APIs,
    # during every trial (the kills and the reruns alike). 0: off.
    transient_rate: float = 0.0


class Run:
    """One ansible-playbook run of the rollout against a sim, killable at a given moment."""

    def __init__(self, sim: simctl.SimProcess, target: simctl.Target, opts: Options, run_dir: str) -> None:
        self.sim = sim
        self.dir = run_dir
        os.makedirs(run_dir, exist_ok=True)
        self.vars_path = os.path.join(run_dir, "vars.yml")
        self.log_path = os.path.join(run_dir, "ansible.log")
        self.report_path = os.path.join(run_dir, "report.json")
        with open(self.vars_path, "w") as f:
            yaml.safe_dump(simctl.rollout_vars(sim.env, target, opts.lock_duration, self.report_path), f)

    def start(self) -> subprocess.Popen:
        self.log = open(self.log_path, "w")
        self.started = time.monotonic()
        return subprocess.Popen(simctl.playbook_command(self.vars_path), cwd=simctl.ROOT, stdout=self.log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                env=simctl.playbook_environment(self.sim.env, self.dir))

    def run(self, timeout: float = 900) -> tuple[int, float]:
        proc = self.start()
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait()
        self.log.close()
        return rc, time.monotonic() - self.started

    def run_and_kill(self, kill_at: float) -> dict[str, Any]:
        """Start, SIGKILL the process group at ``kill_at`` s; what was running then."""
        proc = self.start()
        try:
            rc = proc.wait(timeout=kill_at)
            self.log.close()
            return {"killed": False, "rc": rc, "elapsed": time.monotonic() - self.started}
        except subprocess.TimeoutExpired:
            pass
        os.killpg(proc.pid, signal.SIGKILL)
        elapsed = time.monotonic() - self.started
        proc.wait()
        # SIGKILL is delivered asynchronously: let the group die, then kill whatever escaped it
        # (a module that called setsid), so the kill is total.
        deadline = time.monotonic() + 10
        while simctl.group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        strays = simctl.processes_under(self.dir, proc.pid)
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.log.close()
        play, task = self.last_play_and_task()
        return {"killed": True, "elapsed": round(elapsed, 3), "play": play, "task": task, "strays_killed": len(strays)}

    def last_play_and_task(self) -> tuple[Optional[str], Optional[str]]:
        play = task = None
        with open(self.log_path, errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                if (m := PLAY_LINE.match(line)):
                    play, task = m.group("play"), None
                elif (m := TASK_LINE.match(line)):
                    task = m.group("task")
        return play, task


def phase_of(play: Optional[str], task: Optional[str]) -> str:
    if play is None:
        return "startup"
    if play.startswith("Store the node settings"):
        return "plan"
    if play.startswith("Restart"):
        if task and task.startswith("Batch "):
            return "batch:cycle"
        if task and ("Release" in task or "release" in task):
            return "batch:release"
        return "batch:bookkeeping"
    if play.startswith("Release"):
        return "release"
    return play


def node_steps(sim: simctl.SimProcess) -> dict[str, str]:
    """Where each node stood at the kill, as an operator would see it (only nodes not idle)."""
    cloud, kube, _etcd = simctl.cluster_state(sim)
    vms = {vm["name"].lower(): vm for vm in cloud["vms"]}
    nodes = {n["name"]: n for n in kube["nodes"]}
    steps = {}
    for name, vm in vms.items():
        node = nodes.get(name)
        annotated = bool(node and simctl.ANNOTATION in node.get("annotations", {}))
        cordoned = bool(node and node["unschedulable"] and not node.get("foreign_cordon"))
        if vm["state"] in ("Stopping", "Stopped", "Starting"):
            step = f"vm_{vm['state'].lower()}"
        elif node is not None and node["ready"] != "True":
            step = "booting"
        elif annotated and cordoned:
            step = "cordoned_or_draining"
        elif annotated:
            step = "annotated"
        elif cordoned:
            step = "cordoned_no_annotation"
        else:
            continue
        steps[name] = step
    return steps


def step_label(steps: dict[str, str]) -> str:
    if not steps:
        return "no_node_touched"
    order = ["vm_stopping", "vm_stopped", "vm_starting", "booting", "cordoned_or_draining", "annotated",
             "cordoned_no_annotation"]
    return min(steps.values(), key=order.index)


class Trials:
    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.target = simctl.Target()

    def fresh_sim(self, name: str) -> tuple[simctl.SimProcess, set[str]]:
        state_dir = os.path.join(self.opts.workdir, name, "sim")
        shutil.rmtree(os.path.dirname(state_dir), ignore_errors=True)
        os.makedirs(os.path.dirname(state_dir))
        sim = simctl.start_sim(self.opts.spec, state_dir, self.opts.time_scale)
        # The sim flags more workers down at once than the rollout may take (its clamp).
        simctl.admin(sim.env, "POST", "/actions",
                     {"action": "set_config", "max_unavailable": {"worker": self.target.max_unavailable}})
        self.transient_on(sim)
        return sim, set()

    def transient_on(self, sim: simctl.SimProcess) -> None:
        if self.opts.transient_rate > 0:
            for mode in ("5xx", "drop"):
                sim.admin("/faults", {"kind": "transient", "api": "both", "rate": self.opts.transient_rate, "mode": mode})

    def judge(self, sim: simctl.SimProcess, foreign: set[str]) -> dict[str, Any]:
        """The verdict, read with the transient faults off (the judge's Lease read is no rollout's)."""
        if self.opts.transient_rate <= 0:
            return simctl.judge(sim, self.target, foreign)
        sim.admin("/faults", method="DELETE")
        try:
            return simctl.judge(sim, self.target, foreign)
        finally:
            self.transient_on(sim)

    def foreign_cordon(self, sim: simctl.SimProcess, rng: random.Random) -> set[str]:
        _cloud, kube, _etcd = simctl.cluster_state(sim)
        workers = sorted(n["name"] for n in kube["nodes"] if n["node_type"] == "worker")
        victim = rng.choice(workers)
        simctl.admin(sim.env, "POST", "/faults", {"kind": "foreign_cordon", "node": victim})
        return {victim}

    def calibrate(self) -> dict[str, Any]:
        sim, foreign = self.fresh_sim("calibrate")
        try:
            run = Run(sim, self.target, self.opts, os.path.join(self.opts.workdir, "calibrate", "run"))
            rc, duration = run.run()
            verdict = self.judge(sim, foreign)
        finally:
            sim.stop()
        if rc != 0 or not simctl.converged(verdict):
            raise SystemExit(f"chaos: the unkilled rollout did not converge (rc {rc}): {json.dumps(verdict)}; "
                             f"see {run.log_path}")
        return {"duration": round(duration, 3), "rc": rc}

    def trial(self, index: int, duration: float) -> dict[str, Any]:
        rng = random.Random(f"{self.opts.seed}:{index}")
        kill_at = rng.uniform(0, duration)
        cordon = rng.random() < self.opts.foreign_cordon_rate
        name = f"trial-{index:03d}"
        record: dict[str, Any] = {"trial": index, "seed": self.opts.seed, "kill_at": round(kill_at, 3)}
        sim, foreign = self.fresh_sim(name)
        try:
            if cordon:
                foreign = self.foreign_cordon(sim, rng)
                record["foreign_cordon"] = sorted(foreign)
            first = Run(sim, self.target, self.opts, os.path.join(self.opts.workdir, name, "run-0"))
            kill = first.run_and_kill(kill_at)
            record.update(kill)
            if kill["killed"]:
                record["phase"] = phase_of(kill["play"], kill["task"])
                steps = node_steps(sim)
                record["nodes_at_kill"] = steps
                record["step"] = step_label(steps)
                record["lock_at_kill"] = bool(self.judge(sim, foreign)["lock"])
            else:
                record["phase"] = record["step"] = "finished_before_kill"
            reruns: list[dict[str, Any]] = []
            verdict = self.judge(sim, foreign)
            done = not kill["killed"] and kill["rc"] == 0 and simctl.converged(verdict)
            while not done and len(reruns) < self.opts.max_reruns:
                self.wait_out_lease(sim)
                rerun = Run(sim, self.target, self.opts, os.path.join(self.opts.workdir, name, f"run-{len(reruns) + 1}"))
                rc, took = rerun.run()
                reruns.append({"rc": rc, "seconds": round(took, 3), "log": rerun.log_path,
                               "previous_holder_stopped": self._taken_over(rerun)})
                verdict = self.judge(sim, foreign)
                done = rc == 0 and simctl.converged(verdict)
            record["reruns"] = len(reruns)
            record["rerun_rcs"] = [r["rc"] for r in reruns]
            record["rerun_seconds"] = [r["seconds"] for r in reruns]
            record["takeover_reported"] = [r["previous_holder_stopped"] for r in reruns]
            record["verdict"] = verdict
            record["ok"] = simctl.converged(verdict) and (not reruns or reruns[-1]["rc"] == 0)
            if not record["ok"]:
                record["logs"] = [first.log_path] + [r["log"] for r in reruns]
        finally:
            sim.stop()
        return record

    def wait_out_lease(self, sim: simctl.SimProcess) -> float:
        """Sleep until a lease left by a dead run counts as expired for the collection; seconds slept."""
        lease = self.judge(sim, set())["lock"]
        if not lease:
            return 0.0
        until = simctl.lease_expiry(lease) - time.time()
        if until > 0:
            time.sleep(until)
        return max(until, 0.0)

    @staticmethod
    def _taken_over(run: Run) -> Optional[bool]:
        try:
            with open(run.report_path) as f:
                report = json.load(f)
        except (OSError, ValueError):
            return None
        text = json.dumps(report.get("release", {})) + json.dumps(report.get("last_error"))
        return "stopped" in text


def summarise(records: list[dict[str, Any]], calibration: dict[str, Any], opts: Options,
              seconds: float) -> dict[str, Any]:
    lost = [r for r in records if not r["ok"]]
    invariants = [v for r in records for v in r["verdict"]["invariants"]]
    return {
        "trials": len(records),
        "seed": opts.seed,
        "spec": os.path.relpath(opts.spec, simctl.ROOT),
        "time_scale": opts.time_scale,
        "lock_duration": opts.lock_duration,
        "transient_rate": opts.transient_rate,
        "unkilled_rollout_seconds": calibration["duration"],
        "killed": sum(1 for r in records if r["killed"]),
        "finished_before_kill": sum(1 for r in records if not r["killed"]),
        "kills_by_phase": dict(collections.Counter(r["phase"] for r in records)),
        "kills_by_step": dict(collections.Counter(r["step"] for r in records)),
        "kills_by_task": dict(collections.Counter(r.get("task") or "-" for r in records if r["killed"])),
        "lock_held_at_kill": sum(1 for r in records if r.get("lock_at_kill")),
        "strays_killed": sum(r.get("strays_killed", 0) for r in records),
        "reruns_needed": dict(collections.Counter(str(r["reruns"]) for r in records)),
        "foreign_cordons": sum(1 for r in records if r.get("foreign_cordon")),
        "converged": len(records) - len(lost),
        "lost": [{"trial": r["trial"], "kill_at": r["kill_at"], "phase": r["phase"], "step": r["step"],
                  "verdict": r["verdict"], "logs": r.get("logs")} for r in lost],
        "invariant_violations": invariants,
        "wall_seconds": round(seconds, 1),
    }


def parse(argv: list[str]) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--spec", default=simctl.SMALL_SPEC)
    parser.add_argument("--out", default=os.path.join(simctl.ROOT, "out", "chaos"))
    parser.add_argument("--time-scale", type=float, default=0.01,
                        help="simulated -> real seconds (default 0.01: 100x faster than a cloud)")
    parser.add_argument("--lock-duration", type=int, default=5, help="the rollout's lease, real seconds")
    parser.add_argument("--max-reruns", type=int, default=3)
    parser.add_argument("--foreign-cordon-rate", type=float, default=0.25,
                        help="share of trials in which someone else cordons a worker before the rollout")
    parser.add_argument("--duration", type=float, help="skip the unkilled run; kill within [0, DURATION)")
    parser.add_argument("--workdir", help="where the sims and logs go (default: a temp dir, kept on failure)")
    parser.add_argument("--transient", type=float, default=0.0, metavar="RATE",
                        help="mixed-fault mode: RATE of 5xx answers plus RATE of dropped connections on both "
                             "APIs during every trial (e.g. 0.05)")
    args = parser.parse_args(argv)
    workdir = os.path.abspath(args.workdir) if args.workdir else tempfile.mkdtemp(prefix="cks-chaos-")
    return Options(args.trials, args.seed, os.path.abspath(args.spec), os.path.abspath(args.out), args.time_scale,
                   args.lock_duration, args.max_reruns, args.foreign_cordon_rate, args.duration, workdir,
                   keep_workdir=bool(args.workdir), transient_rate=args.transient)


def main(argv: list[str]) -> int:
    opts = parse(argv)
    os.makedirs(opts.out, exist_ok=True)
    began = time.monotonic()
    trials = Trials(opts)
    calibration = {"duration": opts.duration} if opts.duration else trials.calibrate()
    print(f"chaos: unkilled rollout took {calibration['duration']:.1f}s; {opts.trials} trial(s), seed {opts.seed}, "
          f"work dir {opts.workdir}", flush=True)
    records = []
    duration = calibration["duration"]
    with open(os.path.join(opts.out, "trials.jsonl"), "w") as lines:
        for index in range(opts.trials):
            record = trials.trial(index, duration)
            record["duration_used"] = round(duration, 3)
            if not record["killed"] and record.get("rc") == 0:
                # The rollout ran faster than measured (the machine got less busy): a run that
                # finished unkilled is the newest measure of a rollout's duration.
                duration = record["elapsed"]
            records.append(record)
            lines.write(json.dumps(record, sort_keys=True) + "\n")
            lines.flush()
            print(f"chaos: trial {index}: kill at {record['kill_at']:.1f}s ({record['phase']}, {record['step']}), "
                  f"reruns {record['reruns']}, {'converged' if record['ok'] else 'NOT CONVERGED'}", flush=True)
    summary = summarise(records, calibration, opts, time.monotonic() - began)
    with open(os.path.join(opts.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2, sort_keys=True)
        f.write("\n")
    print(json.dumps({k: summary[k] for k in ("trials", "killed", "kills_by_phase", "kills_by_step",
                                              "reruns_needed", "converged", "invariant_violations",
                                              "wall_seconds")}, sort_keys=True))
    if not summary["lost"] and not opts.keep_workdir:
        shutil.rmtree(opts.workdir, ignore_errors=True)
    return 0 if not summary["lost"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
