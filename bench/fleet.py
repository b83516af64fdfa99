# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The fleet's wall time against its slowest cluster rolled alone.

    .venv/bin/python bench/fleet.py                 # 12 clusters, fleet_parallel 12, time scale 0.5
    .venv/bin/python bench/fleet.py --smoke         # 3 clusters of 1 worker, a tiny run of the same machinery
    .venv/bin/python bench/fleet.py --clusters 6 --time-scale 1.0

1. cks-sim with N clusters (1 control node, W workers each, the same workloads), and playbooks/fleet.yml
   over all of them at ``fleet_parallel`` N (forks N): the fleet's wall time, each cluster's time.
2. A fresh cks-sim of the same spec, and playbooks/rollout.yml for the slowest cluster of step 1 alone.

The ratio fleet / alone is what running many clusters at once costs over one; the target is 1.25 at
a time scale where the machine's CPU is not the limit (each rollout then mostly waits on the
simulated cloud, as it waits on a real one). The CPU the controller used (user + system of the
ansible-playbook process tree) is reported next to the wall time, to tell whether it was the limit.
Results: bench/results/fleet.json (or --out).

    .venv/bin/python bench/fleet.py --rate-limit 25 --clusters 6 --workers 1 --time-scale 0.05

The fleet under CloudStack's API rate limit: the same fleet rolled twice, on a cloud without a limit
and on one limiting the fleet's key (a domain admin: a root admin is never limited) to N calls a real
second, with ``fleet_api_rate: N``; the wall times side by side, and the share of the limited run's
wall time the account spent refused (from cks-sim's call log: each refusal names the milliseconds
left of its window). Results: bench/results/fleet-rate-limit.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import yaml
from simproc import ROOT, TIMINGS

sys.path.insert(0, os.path.join(ROOT, "tests", "sim"))
from cks_sim import harness  # noqa: E402  pylint: disable=wrong-import-position

VENV_BIN = os.path.join(ROOT, ".venv", "bin")
COLLECTIONS = os.path.join(ROOT, ".venv", "collections")
TARGET_RATIO = 1.25


def fleet_spec(clusters: int, workers: int, time_scale: float) -> dict[str, Any]:
    """N clusters of one control node and ``workers`` workers; no PDB, so a drain is one pod termination."""
    return {
        "time_scale": time_scale, "seed": 18, "timings": dict(TIMINGS),
        "zone": {"name": "zone-1"},
        "account": {"name": "admin", "domain": "ROOT", "apikey": "bench-api-key", "secretkey": "bench-secret-key"},
        "hosts": [{"name": f"kvm-{i}", "cpu": 256, "memory": 1048576} for i in range(1, 5)],
        "disk_offerings": [{"name": "custom-root", "size": 0, "iscustomized": True}],
        "service_offerings": [{"name": "cks-small", "cpu": 1, "memory": 2048}, {"name": "cks-medium", "cpu": 2, "memory": 4096}],
        "affinity_groups": [{"name": "dedicated-admin", "type": "ExplicitDedication"}],
        "clusters": [{"name": f"fleet-{i:02d}", "control_nodes": 1, "workers": workers, "offering": "cks-small",
                      "root_disk_offering": "custom-root"} for i in range(1, clusters + 1)],
        "workloads": [{"kind": "DaemonSet", "namespace": "kube-system", "name": "kube-proxy"},
                      {"kind": "Deployment", "namespace": "default", "name": "web", "replicas": workers}],
        "pdbs": [],
        "invariants": {"max_unavailable": {"control": 1, "etcd": 1, "worker": 1}},
    }


def playbook_env(env: dict[str, Any], work: str) -> dict[str, str]:
    out = dict(os.environ)
    out.update({
        "ANSIBLE_COLLECTIONS_PATH": COLLECTIONS, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_LOCAL_TEMP": os.path.join(work, "tmp"), "ANSIBLE_HOME": os.path.join(work, "home"),
        "ANSIBLE_LOCALHOST_WARNING": "0", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0", "ANSIBLE_PIPELINING": "1",
        "ANSIBLE_PYTHON_INTERPRETER": os.path.join(VENV_BIN, "python"),
        "PATH": VENV_BIN + os.pathsep + os.environ.get("PATH", ""),
        "CLOUDSTACK_ENDPOINT": env["cloudstack_endpoint"], "CLOUDSTACK_KEY": env["cloudstack_key"],
        "CLOUDSTACK_SECRET": env["cloudstack_secret"], "K8S_AUTH_SSL_CA_CERT": env["kube_ca"],
    })
    out.pop("K8S_AUTH_KUBECONFIG", None)
    return out


def run_timed(command: list[str], env: dict[str, str], cwd: str, log: str) -> tuple[int, float, float]:
    """(exit code, wall seconds, CPU seconds of the process tree)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    with open(log, "w", encoding="utf-8") as fh:
        rc = subprocess.run(command, env=env, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT, check=False).returncode
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return rc, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


ROLLOUT_VARS = {"rollout_poll_interval": 0.2, "rollout_eviction_retry_interval": 0.3, "rollout_batch_timeout": 1800,
                "rollout_validate_interval": 1}


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of one running process (the simulator's: it is no child of ours
    that has ended, so getrusage does not count it)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_sim(spec: dict[str, Any], work: str, name: str) -> harness.SimProcess:
    spec_path = os.path.join(work, f"{name}.yml")
    with open(spec_path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(spec, fh)
    # No real etcd: only workers change, so no etcd check is asked for, and 12 etcd members would
    # only add CPU load that is not the fleet's.
    return harness.SimProcess.start(spec_path, os.path.join(work, f"{name}-state"), "--no-etcd", ready_timeout=180)


RATE_KEY = {"name": "fleetops", "domain": "ROOT", "role": "domainadmin", "apikey": "bench-ops-key",
            "secretkey": "bench-ops-secret"}


def limited(spec: dict[str, Any], rate: int) -> dict[str, Any]:
    """The spec with the fleet's own key limited to ``rate`` calls per real second."""
    return dict(spec, accounts=[RATE_KEY],
                cloud={"api_throttling_max": rate, "api_throttling_interval": 1 / float(spec["time_scale"])})


def refused_seconds(calls: list[dict[str, Any]]) -> tuple[int, float]:
    """Refused calls and the time the account spent refused: the union of [t, t + the wait named]."""
    spans = sorted((c["t"], c["t"] + int(c.get("retry_after_ms") or 0) / 1000) for c in calls if c.get("throttled"))
    total, end = 0.0, float("-inf")
    for start, stop in spans:
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return len(spans), total


def roll_fleet(spec: dict[str, Any], work: str, parallel: int, rate: int = 0) -> dict[str, Any]:
    with start_sim(spec, work, "fleet-limited" if rate else "fleet") as sim:
        hosts = {c["name"]: {"id": c["id"]} for c in sim.env["clusters"]}
        inventory = os.path.join(work, "inventory.yml")
        with open(inventory, "w", encoding="utf-8") as fh:
            yaml.safe_dump({"all": {"children": {"fleet": {"hosts": hosts}}}}, fh)
        report_path = os.path.join(work, "fleet-report.json")
        variables = dict(ROLLOUT_VARS, fleet_group="fleet", fleet_parallel=parallel, fleet_node_offerings={"worker": "cks-medium"},
                         fleet_work_dir=os.path.join(work, "runs"), fleet_report_path=report_path)
        env = playbook_env(sim.env, work)
        if rate:
            variables["fleet_api_rate"] = rate
            env.update(CLOUDSTACK_KEY=RATE_KEY["apikey"], CLOUDSTACK_SECRET=RATE_KEY["secretkey"])
        since = time.time()
        vars_path = os.path.join(work, "fleet-vars.json")
        with open(vars_path, "w", encoding="utf-8") as fh:
            json.dump(variables, fh)
        rc, wall, cpu = run_timed([os.path.join(VENV_BIN, "ansible-playbook"), "cloudstack.cks.fleet", "-i", inventory,
                                   "-e", f"@{vars_path}", "--forks", str(parallel)],
                                  env, work, os.path.join(work, "fleet.log"))
        sim_cpu = process_cpu(sim.proc.pid)
        with open(report_path, encoding="utf-8") as fh:
            report = json.load(fh)
        import urllib.request

        with urllib.request.urlopen(f"{sim.env['admin_url']}/calls?since={since}", timeout=30) as answer:
            calls = [c for c in json.load(answer) if c.get("api") == "cloudstack"]
    refused, refused_s = refused_seconds(calls)
    return {"rc": rc, "wall": round(wall, 1), "cpu": round(cpu, 1), "sim_cpu": round(sim_cpu, 1), "report": report,
            "cloudstack_calls": len(calls), "refused_calls": refused, "refused_seconds": round(refused_s, 2),
            "refused_share": round(refused_s / wall, 3) if wall else None}


def rate_limit_bench(spec: dict[str, Any], work: str, rate: int, out: str) -> int:
    """The fleet unlimited, then limited to ``rate`` calls a second with fleet_api_rate ``rate``."""
    parallel = len(spec["clusters"])
    free = roll_fleet(spec, work, parallel)
    capped = roll_fleet(limited(spec, rate), work, parallel, rate=rate)
    result = {"clusters": parallel, "workers_per_cluster": len(spec["clusters"]) and spec["clusters"][0]["workers"],
              "fleet_parallel": parallel, "time_scale": spec["time_scale"], "rate": rate, "cpu_count": os.cpu_count(),
              "unlimited": {k: v for k, v in free.items() if k != "report"} | {"counts": free["report"]["counts"]},
              "limited": {k: v for k, v in capped.items() if k != "report"} | {"counts": capped["report"]["counts"]},
              "slowdown": round(capped["wall"] / free["wall"], 2) if free["wall"] else None}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "fleet-rate-limit.json"), "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2)
    print(f"fleet of {parallel}: unlimited {free['wall']} s ({free['cloudstack_calls']} calls); limited to {rate}/s with "
          f"fleet_api_rate {rate}: {capped['wall']} s ({capped['cloudstack_calls']} calls, {capped['refused_calls']} refused, "
          f"account refused {capped['refused_seconds']} s = {capped['refused_share']:.1%} of the wall time)")
    return 0 if free["rc"] == 0 and capped["rc"] == 0 else 1


def saved_rate_limit_markdown(out: str) -> list[str]:
    """The last saved fleet-under-a-limit result, for bench/run.py's report."""
    path = os.path.join(out, "fleet-rate-limit.json")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as fh:
        r = json.load(fh)
    free, capped = r["unlimited"], r["limited"]
    return [
        f"| fleet under the API rate limit ({r['clusters']} clusters of {r['workers_per_cluster']} workers, fleet_parallel "
        f"{r['fleet_parallel']}, time scale {r['time_scale']}) | wall s | CloudStack calls | refused | account refused |",
        "| --- | ---: | ---: | ---: | ---: |",
        f"| no limit | {free['wall']} | {free['cloudstack_calls']} | - | - |",
        f"| {r['rate']} calls/s, fleet_api_rate {r['rate']} | {capped['wall']} | {capped['cloudstack_calls']} | "
        f"{capped['refused_calls']} | {capped['refused_seconds']} s ({capped['refused_share']:.1%}) |",
        "", "(from `bench/fleet.py --rate-limit`; run it again to refresh)", "",
    ]


def roll_alone(spec: dict[str, Any], work: str, cluster: str) -> dict[str, Any]:
    with start_sim(spec, work, "alone") as sim:
        variables = dict(ROLLOUT_VARS, rollout_cluster=cluster, rollout_node_offerings={"worker": "cks-medium"})
        vars_path = os.path.join(work, "alone-vars.json")
        with open(vars_path, "w", encoding="utf-8") as fh:
            json.dump(variables, fh)
        rc, wall, cpu = run_timed([os.path.join(VENV_BIN, "ansible-playbook"), os.path.join(ROOT, "playbooks", "rollout.yml"),
                                   "-e", f"@{vars_path}"], playbook_env(sim.env, work), work, os.path.join(work, "alone.log"))
        sim_cpu = process_cpu(sim.proc.pid)
    return {"rc": rc, "wall": round(wall, 1), "cpu": round(cpu, 1), "sim_cpu": round(sim_cpu, 1), "cluster": cluster}


def saved_markdown(out: str) -> list[str]:
    """The last saved fleet result (fleet.json), for bench/run.py's report (empty before the first run)."""
    path = os.path.join(out, "fleet.json")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as fh:
        result = json.load(fh)
    fleet, alone = result["fleet"], result["slowest_alone"]
    counts = ", ".join(f"{n} {name}" for name, n in (fleet.get("counts") or {}).items() if n)
    return [
        f"| fleet ({result['clusters']} clusters of {result['workers_per_cluster']} workers, fleet_parallel "
        f"{result['fleet_parallel']}, time scale {result['time_scale']}) | wall s | controller CPU s | simulator CPU s | outcomes |",
        "| --- | ---: | ---: | ---: | --- |",
        f"| the fleet | {fleet['wall']} | {fleet['cpu']} | {fleet.get('sim_cpu', '-')} | {counts or '-'} |",
        f"| its slowest cluster ({alone['cluster']}) rolled alone | {alone['wall']} | {alone['cpu']} | {alone.get('sim_cpu', '-')} | rc {alone['rc']} |",
        "",
        f"Fleet / slowest alone: {result['ratio']} (target ≤ {result['target']}: {result['verdict']}); "
        f"{result['cpu_count']} CPUs, load average after {result['load_average_after'][0]:.2f}"
        + (f", the cores {fleet['cpu_busy']:.0%} busy during the fleet (controller and simulator)" if "cpu_busy" in fleet else "") + ".",
        "(from `bench/fleet.py`; run it again to refresh)", "",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="3 clusters of 1 worker at time scale 0.02")
    parser.add_argument("--clusters", type=int, default=12)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--time-scale", type=float, default=0.5)
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    parser.add_argument("--rate-limit", type=int, default=0, metavar="N",
                        help="the fleet unlimited and under a limit of N calls a second (fleet_api_rate N)")
    args = parser.parse_args()
    clusters, workers, scale = (3, 1, 0.02) if args.smoke else (args.clusters, args.workers, args.time_scale)
    spec = fleet_spec(clusters, workers, scale)
    work = tempfile.mkdtemp(prefix="cks-bench-fleet-")
    if args.rate_limit:
        try:
            return rate_limit_bench(spec, work, args.rate_limit, args.out)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    try:
        fleet = roll_fleet(spec, work, parallel=clusters)
        entries = fleet["report"]["clusters"]
        slowest = max(entries, key=lambda e: e.get("seconds") or 0)
        alone = roll_alone(spec, work, slowest["cluster"])
    finally:
        logs = {name: open(os.path.join(work, name), encoding="utf-8").read()[-4000:]
                for name in ("fleet.log", "alone.log") if os.path.exists(os.path.join(work, name))}
        shutil.rmtree(work, ignore_errors=True)
    ratio = round(fleet["wall"] / alone["wall"], 2) if alone["wall"] else None
    result = {
        "smoke": args.smoke, "clusters": clusters, "workers_per_cluster": workers, "fleet_parallel": clusters,
        "time_scale": scale, "cpu_count": os.cpu_count(), "load_average_after": list(os.getloadavg()),
        "fleet": {"rc": fleet["rc"], "wall": fleet["wall"], "cpu": fleet["cpu"], "sim_cpu": fleet["sim_cpu"],
                  # How busy the machine was: the controller's and the simulator's CPU over what the cores could give.
                  "cpu_busy": round((fleet["cpu"] + fleet["sim_cpu"]) / (fleet["wall"] * (os.cpu_count() or 1)), 2),
                  "counts": fleet["report"]["counts"],
                  "cluster_seconds": {e["cluster"]: e.get("seconds") for e in entries}},
        "slowest_alone": alone, "ratio": ratio, "target": TARGET_RATIO,
        "verdict": "met" if ratio is not None and ratio <= TARGET_RATIO else "not met",
    }
    if fleet["rc"] != 0 or alone["rc"] != 0:
        result["logs"] = logs
    os.makedirs(args.out, exist_ok=True)
    name = "fleet-smoke.json" if args.smoke else "fleet.json"
    with open(os.path.join(args.out, name), "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2)
    print(f"fleet of {clusters} at fleet_parallel {clusters}: {fleet['wall']} s (controller CPU {fleet['cpu']} s); "
          f"simulator CPU {fleet['sim_cpu']} s; slowest ({alone['cluster']}) alone: {alone['wall']} s (CPU {alone['cpu']} s); ratio {ratio} "
          f"(target <= {TARGET_RATIO}: {result['verdict']})")
    return 0 if fleet["rc"] == 0 and alone["rc"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
