"""One fault on every request kind: does each run still complete in one go? (`make fault-sweep`)

    .venv/bin/python tests/chaos/fault_sweep.py --out out/fault-sweep [--jobs 2] [--only KIND]

1. Recording: each scenario's steps run once without faults against its own in-process cks-sim,
   and the sim's call log names every distinct request kind they send (``request``: ``cloudstack
   <command>``, ``kubernetes <verb> <resource>``; ``etcd_request``: ``etcd <call>`` for etcdctl
   run in an etcd pod). A kind missing from the collection's table (``_decisions/request_kinds``)
   is a failure by itself.
2. Sweep: every kind, in the first step that sent it, meets each fault cks-sim's ``request_fault``
   has for its API, exactly once, on its first request: ``503`` (CloudStack: a proxy's HTTP 503;
   etcd: etcdctl failing with deadline exceeded), ``530`` (CloudStack kinds only: CloudStack's own
   INTERNAL_ERROR answer, HTTP 530 and its JSON error body) and ``drop`` (the connection closed
   after the request was carried out, before its answer). A pair (kind, fault) passes when the
   playbook run it fell in exits 0 in one go (a dry run: with its plan), its fault fell, no
   simulator invariant broke, the lock is free, and a rollout left every node up to date.

Faults that cannot interfere share one playbook run (``plan_runs``): a fault on a read is
answered by sending the same read again, so all the reads a step first sends are armed together;
a write is settled by reading what it changes, which may send a read first sent there, so writes
are armed apart from the reads; and a write sent once (an Event) may change what the next write on
its object is, so it is never armed with another write on that object. Every fault still falls on
the first request of its kind. A run that fails is run again as two halves, down to one fault a
run, so each pair's outcome is its own (``armed_with`` in the report says how many faults shared
the run that judged it).

The steps (``scenarios()``), with nothing but the kubeconfig (etcd asked through the Kubernetes
API, so the sim sees every etcd call): on the demo cluster (small.yml, stacked etcd, two workers)
status, cancel, a dry run, a rollout changing the control and worker offerings, and unlock of a
lock left by a run that stopped; on the external-etcd cluster a rollout changing the etcd and
worker offerings. Before each step the lock lease and the rollout record are removed, as the
recording found the cluster. Each rollout flips the offerings between two sets and grows the root
disks by 1 GB, so one sim serves every run (a failed run is followed by a clean rerun). The two
scenarios' sims run at once (``--jobs``, 2 at most).

Kinds come from the recording, so a request kind added later is swept without a new test.
Output: the table of kinds x faults, and OUT/report.json: ``{"kinds": n, "runs": n, "completed": n,
"failed": [[kind, fault, what happened]], "playbook_runs": n, ...}`` (``runs``: the (kind, fault)
pairs judged; ``playbook_runs``: the faulted playbook runs they took). Exit status 0 when nothing
failed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import logging
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for _path in (os.path.join(ROOT, ".venv", "collections"), os.path.join(ROOT, "tests", "sim"),
              os.path.join(ROOT, "tests", "integration")):
    if _path not in sys.path:
        sys.path.insert(0, _path)
os.environ.setdefault("ANSIBLE_COLLECTIONS_PATH", os.path.join(ROOT, ".venv", "collections"))

FAULTS = ("503", "530", "drop")
TIME_SCALE = 0.01
STOPPED_HOLDER = "sweep-stopped-run"
ROOT_DISK_GB = 20  # the specs' root_disk_size


@dataclass
class Step:
    """One thing an operator runs: a playbook with its variables (``setup`` prepares the sim first)."""

    name: str
    playbook: str
    variables: dict[str, Any] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    setup: Optional[Callable[[Any], None]] = None
    changes: bool = False  # asks for the scenario's next offering set
    rollout: bool = False  # flips the offerings; judged converged after


@dataclass
class Scenario:
    name: str
    spec: str
    cluster: dict[str, Any]  # changes to the spec's cluster (fewer nodes: quicker runs)
    changes: tuple[dict[str, str], dict[str, str]]  # the two offering sets a rollout flips between
    steps: list[Step] = field(default_factory=list)


def as_never_rolled(sim: Any) -> None:
    """The cluster as the recording found it before each step: no lock lease, no rollout record.
    A step sends the same kinds each time then (the first rollout creates the lease and record,
    later ones update them)."""
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import LOCK_NAME, NAMESPACE, RECORD_NAME

    api = k8s_config.new_client_from_config(sim.env["kubeconfig"])
    try:
        for delete, name in ((k8s.CoordinationV1Api(api).delete_namespaced_lease, LOCK_NAME),
                             (k8s.CoreV1Api(api).delete_namespaced_config_map, RECORD_NAME)):
            try:
                delete(name, NAMESPACE)
            except k8s.ApiException as exc:
                if exc.status != 404:
                    raise
    finally:
        api.close()


def _leave_a_stopped_run(sim: Any) -> None:
    """The lock as a rollout that stopped without its release leaves it (held, never renewed)."""
    from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import Lock

    as_never_rolled(sim)
    # A short lease: unlock watches it a third of its duration for a renewal before taking it.
    Lock(sim.kube, holder_identity=STOPPED_HOLDER, duration_seconds=6, probe=lambda _pids: False).acquire()


def scenarios() -> list[Scenario]:
    demo = Scenario("demo", "small.yml", {"workers": 2},
                    ({"control": "cks-large", "worker": "cks-large"}, {"control": "cks-medium", "worker": "cks-medium"}))
    demo.steps = [
        Step("status", "status.yml"),
        Step("cancel", "cancel.yml"),
        Step("dry run", "rollout.yml", args=("--check",), changes=True),
        Step("rollout", "rollout.yml", changes=True, rollout=True),
        Step("unlock", "unlock.yml", {"rollout_holder": STOPPED_HOLDER}, setup=_leave_a_stopped_run),
    ]
    external = Scenario("external etcd", "external-etcd.yml", {"workers": 2, "control_nodes": 1},
                        ({"etcd": "cks-medium", "worker": "cks-large"}, {"etcd": "etcd-small", "worker": "cks-medium"}))
    external.steps = [Step("rollout", "rollout.yml", changes=True, rollout=True)]
    return [demo, external]


def _spec(scenario: Scenario) -> dict[str, Any]:
    from helpers import load_raw_spec

    raw = load_raw_spec(scenario.spec, TIME_SCALE)
    raw["clusters"][0].update(scenario.cluster)
    return raw


def kinds_of(calls: list[dict[str, Any]]) -> list[str]:
    """The distinct request kinds of a call log, in the order first sent."""
    seen: dict[str, None] = {}
    for call in calls:
        for key in ("request", "etcd_request"):
            if call.get(key):
                seen.setdefault(call[key], None)
    return list(seen)


def modes_for(kind: str) -> tuple[str, ...]:
    """The faults ``request_fault`` has for the kind's API, in the table's column order."""
    from cks_sim.request_kinds import MODES

    return tuple(mode for mode in FAULTS if mode in MODES.get(kind.split(" ", 1)[0], ()))


@dataclass
class Armed:
    """One playbook run of ``step`` with a ``mode`` fault on the first request of each of ``kinds``."""

    step: str
    mode: str
    kinds: list[str]


def _object_of(kind: str) -> str:
    """What a write changes, as far as its kind says: a Kubernetes resource, else the kind itself."""
    words = kind.split(" ")
    return f"kubernetes {words[-1]}" if words[0] == "kubernetes" else kind


def _interfere(one: str, other: str, effect: Callable[[str], Optional[str]]) -> bool:
    """Whether a fault on write ``one`` could move the first request of write ``other``, or the other way:
    a write sent once (its loss ridden out) may turn the next write on its object into another kind.
    A write settled by reading ends as it would have without the fault."""
    from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.request_kinds import SETTLED

    return _object_of(one) == _object_of(other) and not effect(one) == effect(other) == SETTLED


def plan_runs(first_step: dict[str, str], steps: list[str],
              effect: Optional[Callable[[str], Optional[str]]] = None) -> list[Armed]:
    """The faulted runs that prove every (kind, fault) pair of ``first_step`` (kind -> the step that
    first sent it), step by step in ``steps``' order: per fault, the step's reads in one run, its writes
    in as few runs as keep a write sent once apart from other writes on its object (module docstring)."""
    from ansible_collections.cloudstack.cks.plugins.module_utils._decisions import request_kinds

    effect = effect or request_kinds.effect
    runs: list[Armed] = []
    for step in steps:
        kinds = [kind for kind, first in first_step.items() if first == step]
        for mode in FAULTS:
            armable = [kind for kind in kinds if mode in modes_for(kind)]
            reads = [kind for kind in armable if effect(kind) == request_kinds.READ]
            if reads:
                runs.append(Armed(step, mode, reads))
            groups: list[list[str]] = []
            for kind in (kind for kind in armable if effect(kind) != request_kinds.READ):
                group = next((g for g in groups if not any(_interfere(kind, other, effect) for other in g)), None)
                if group is None:
                    groups.append([kind])
                else:
                    group.append(kind)
            runs.extend(Armed(step, mode, group) for group in groups)
    return runs


@dataclass
class Outcome:
    """What one faulted run showed: what went wrong for the whole run, and the kinds whose fault never fell."""

    problems: list[str]
    missed: set[str]
    seconds: float


class Runner:
    """One scenario's sim and its steps, run as often as the sweep asks."""

    def __init__(self, scenario: Scenario, work: str) -> None:
        from cks_sim.harness import InProcessSim
        from in_process_sims import RolloutSim

        self.scenario = scenario
        os.makedirs(work, exist_ok=True)
        self._sim = InProcessSim.start(_spec(scenario), os.path.join(work, "sim"), etcd=True)
        self.sim = RolloutSim(self._sim.env, server=self._sim.server, work_dir=work)
        self.flips = 0
        self.runs = 0  # faulted playbook runs
        # Nothing but the kubeconfig, as the demo runs (and the case): etcd is asked through
        # the Kubernetes API (etcdctl in the etcd pods, or a check pod), so the sim sees every etcd call.
        self.no_etcd_endpoints = tuple(k for k in self.sim.base_vars() if k.startswith("rollout_etcd_"))

    def variables(self, step: Step) -> dict[str, Any]:
        if not step.changes:
            return dict(step.variables)
        # The offerings flip between two sets; the root disks grow by 1 GB each time, so that every
        # run asks for the same kinds (a growth is checked against the account's limits).
        size = ROOT_DISK_GB + 1 + self.flips
        return dict(step.variables, rollout_node_offerings=self.scenario.changes[self.flips % 2],
                    rollout_node_root_disk_sizes={t: size for t in self.scenario.changes[0]},
                    rollout_max_unavailable=2)

    def close(self) -> None:
        self.sim.close()
        self._sim.stop()

    def record(self, step: Step) -> tuple[Outcome, list[dict[str, Any]]]:
        """The step without faults, and the calls it sent."""
        return self.run(step, [])

    def run(self, step: Step, faults: list[dict[str, Any]]) -> tuple[Outcome, list[dict[str, Any]]]:
        """The step with ``faults`` armed: what it showed, and the calls it sent."""
        (step.setup or as_never_rolled)(self.sim)
        since, started = time.time(), time.monotonic()
        for fault in faults:
            self.sim.fault(**fault)
        if faults:
            self.runs += 1
        run = self.sim.rollout(playbook=os.path.join(ROOT, "playbooks", step.playbook), args=step.args, timeout=600,
                               drop_vars=self.no_etcd_endpoints, **self.variables(step))
        calls = self.sim.calls(since)
        problems = []
        if run.rc != 0:
            problems.append(f"rc {run.rc}: {_last_error(run)}")
        missed = {f["request"] for f in self.sim.admin("GET", "/faults") if f.get("kind") == "request_fault"}
        if faults:
            self.sim.clear_faults()
        broken = self.sim.invariants(since)
        if broken:
            problems.append(f"invariants broken: {broken}")
        status = self.sim.status()
        if status["lock_holder"] is not None:
            problems.append(f"lock left held by {status['lock_holder']}")
        if step.rollout:
            if status["out_of_date"]:
                problems.append(f"nodes left out of date: {status['out_of_date']}")
            if run.rc != 0 or status["out_of_date"]:
                self._recover(step)
            self.flips += 1
        if step.args == ("--check",) and run.rc == 0 and "Dry run of " not in run.stdout:
            problems.append("the dry run did not report its plan")
        return Outcome(problems, missed, round(time.monotonic() - started, 1)), calls

    def _recover(self, step: Step) -> None:
        """A failed rollout's rerun without faults, so the next run starts from a converged cluster."""
        self.sim.clear_faults()
        self.sim.rollout(playbook=os.path.join(ROOT, "playbooks", step.playbook), drop_vars=self.no_etcd_endpoints,
                         **self.variables(step))

    def prove(self, step: Step, mode: str, kinds: list[str], label: str) -> list[dict[str, Any]]:
        """Each pair (kind, ``mode``) of ``kinds`` judged: all armed in one run; a failed run's pairs
        again in two halves, down to one fault a run (the outcome then is that pair's alone)."""
        try:
            outcome, _calls = self.run(step, [fault_for(kind, mode) for kind in kinds])
        except Exception as exc:  # a run the sweep could not judge is a failed run, and the next goes on
            outcome = Outcome([f"the sweep could not judge the run: {type(exc).__name__}: {exc}"], set(), 0.0)
            self.sim.clear_faults()
        if outcome.problems and len(kinds) > 1:
            print(f"  ---- {mode:<5} {label}: {len(kinds)} faults in one run failed ({'; '.join(outcome.problems)[:200]}); "
                  "their halves again", flush=True)
            half = len(kinds) // 2
            return self.prove(step, mode, kinds[:half], label) + self.prove(step, mode, kinds[half:], label)
        results, alone = [], []
        for kind in kinds:
            what = list(outcome.problems)
            if kind in outcome.missed:
                if len(kinds) > 1 and not outcome.problems:
                    # The run passed and the others' faults fell: theirs are proven. This one may have
                    # been turned away from its kind by another fault: it is tried on its own.
                    alone.append(kind)
                    continue
                what.append("the fault never fell (the kind was not sent)")
            result = {"kind": kind, "fault": mode, "step": label, "ok": not what, "what": "; ".join(what) or "completed",
                      "seconds": outcome.seconds, "armed_with": len(kinds)}
            print(f"  {'ok  ' if result['ok'] else 'FAIL'} {kind:<52} {mode:<5} {label} ({len(kinds)} armed): "
                  f"{result['what']}", flush=True)
            results.append(result)
        for kind in alone:
            results += self.prove(step, mode, [kind], label)
        return results


def _last_error(run: Any) -> str:
    for line in reversed(run.stdout.splitlines()):
        if '"msg"' in line or "FAILED" in line or "fatal" in line:
            return line.strip()[:400]
    return run.stdout.strip().splitlines()[-1][:400] if run.stdout.strip() else run.stderr[-400:]


def fault_for(kind: str, mode: str) -> dict[str, Any]:
    return {"kind": "request_fault", "request": kind, "mode": mode, "count": 1}


def sweep_scenario(index: int, scenario: Scenario, out_dir: str, only: Optional[list[str]] = None,
                   record_only: bool = False) -> dict[str, Any]:
    """Record the scenario's kinds, then fault each one no earlier scenario sends (their recordings
    are read from ``out_dir`` once written: the scenarios run at once)."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    # A SIGTERM ends the sweep through the finally below: the sim stops its etcd members.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.request_kinds import effect

    runner = Runner(scenario, os.path.join(out_dir, f"scenario-{index}"))
    out: dict[str, Any] = {"scenario": scenario.name, "recorded": {}, "results": [], "failed": [], "playbook_runs": 0}
    try:
        first_step: dict[str, Step] = {}
        for step in scenario.steps:
            outcome, calls = runner.record(step)
            if outcome.problems:
                out["failed"].append(["(recording)", "none", f"{scenario.name} {step.name}: {'; '.join(outcome.problems)}"])
            for kind in kinds_of(calls):
                first_step.setdefault(kind, step)
        for kind in first_step:
            if effect(kind) is None:
                out["failed"].append([kind, "none", "not in the request kinds table (_decisions/request_kinds.py)"])
        out["recorded"] = {kind: step.name for kind, step in first_step.items()}
        _write(os.path.join(out_dir, f"recorded-{index}.json"), out["recorded"])
        if record_only:
            return out
        taken = _recorded_before(index, out_dir)
        mine = {kind: step.name for kind, step in first_step.items()
                if kind not in taken and (not only or kind in only)}
        steps = {step.name: step for step in scenario.steps}
        for armed in plan_runs(mine, [step.name for step in scenario.steps]):
            results = runner.prove(steps[armed.step], armed.mode, armed.kinds, f"{scenario.name} {armed.step}")
            out["results"] += results
            out["failed"] += [[r["kind"], r["fault"], f"{r['step']}: {r['what']}"] for r in results if not r["ok"]]
    finally:
        out["playbook_runs"] = runner.runs
        runner.close()
    return out


def _write(path: str, data: Any) -> None:
    with open(path + ".tmp", "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    os.replace(path + ".tmp", path)


def _recorded_before(index: int, out_dir: str, timeout: float = 900) -> set[str]:
    """The kinds the scenarios before ``index`` recorded (they sweep them)."""
    taken: set[str] = set()
    for earlier in range(index):
        path = os.path.join(out_dir, f"recorded-{earlier}.json")
        deadline = time.monotonic() + timeout
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                raise TimeoutError(f"scenario {earlier} wrote no recording in {timeout:g} s")
            time.sleep(1)
        with open(path, encoding="utf-8") as fh:
            taken |= set(json.load(fh))
    return taken


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "out", "fault-sweep"))
    parser.add_argument("--jobs", type=int, default=2, help="scenarios at once (at most 2 on a 2-core machine)")
    parser.add_argument("--only", action="append", help="sweep only this kind (repeatable)")
    parser.add_argument("--record", action="store_true", help="only record the kinds each scenario sends")
    parser.add_argument("--scenario", action="append", help="only these scenarios (by name)")
    options = parser.parse_args(argv)
    # The playbooks resolve a relative path from their own folder: `make fault-sweep` gives out/fault-sweep.
    options.out = os.path.abspath(options.out)
    shutil.rmtree(options.out, ignore_errors=True)
    os.makedirs(options.out)
    started = time.monotonic()
    plans = [p for p in scenarios() if not options.scenario or p.name in options.scenario]
    with concurrent.futures.ProcessPoolExecutor(max_workers=max(1, min(options.jobs, 2))) as pool:
        futures = [pool.submit(sweep_scenario, i, plan, options.out, options.only, options.record)
                   for i, plan in enumerate(plans)]
        results = [f.result() for f in futures]
    report = _report(results, time.monotonic() - started)
    _write(os.path.join(options.out, "report.json"), report)
    _print_table(report)
    return 0 if not report["failed"] else 1


def _report(results: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    runs = [item for result in results for item in result["results"]]
    failed = [item for result in results for item in result["failed"]]
    kinds: dict[str, str] = {}
    for result in results:
        for kind, step in result["recorded"].items():
            kinds.setdefault(kind, f"{result['scenario']} {step}")
    return {"kinds": len(kinds), "runs": len(runs), "completed": sum(1 for r in runs if r["ok"]), "failed": failed,
            "playbook_runs": sum(result["playbook_runs"] for result in results), "seconds": round(seconds, 1),
            "kinds_by_step": kinds, "results": runs}


def _print_table(report: dict[str, Any]) -> None:
    by_kind: dict[str, dict[str, str]] = {}
    for run in report["results"]:
        by_kind.setdefault(run["kind"], {})[run["fault"]] = "ok" if run["ok"] else "FAILED"
    width = max([len(k) for k in by_kind] + [10])
    print(f"\n{'request kind':<{width}}  " + "  ".join(f"{f:<6}" for f in FAULTS) + "  first sent by")
    for kind in sorted(by_kind):
        cells = "  ".join(f"{by_kind[kind].get(f, '-'):<6}" for f in FAULTS)
        print(f"{kind:<{width}}  {cells}  {report['kinds_by_step'].get(kind, '')}")
    print(f"\n{report['kinds']} kinds, {report['runs']} runs (kind x fault), {report['completed']} completed, "
          f"{len(report['failed'])} failed, in {report['playbook_runs']} faulted playbook runs, {report['seconds']:.0f} s")
    for kind, fault, what in report["failed"]:
        print(f"FAILED {kind} ({fault}): {what}")


if __name__ == "__main__":
    sys.exit(main())
