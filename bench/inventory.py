# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The ``cloudstack.cks.clusters`` inventory at fleet scale: 200 CKS clusters (tests/sim/examples/
inventory-200.yml, no etcd, no workloads) listed without ``out_of_date``.

    .venv/bin/python bench/inventory.py              # 3 runs; writes bench/results/inventory.json and .md
    .venv/bin/python bench/inventory.py --runs 1

Two timings per run, both against the simulator as its own process:
- ``plugin``: the plugin parsing its configuration file in this process (Ansible's InventoryManager),
  which is the plugin's own cost;
- ``ansible_inventory``: ``ansible-inventory --list`` from spawn to exit, which adds Ansible's start-up
  (loading the CLI, the plugins and the collection) and printing the JSON.
The CloudStack calls are counted from the simulator's call log. Targets: <= 3 s and <= 10 calls. The
first plugin run imports ``cs`` and the collection (the median of 3 is a warm run); the plugin's CPU
time is reported next to its wall time, since a loaded machine stretches the wall time only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from simproc import ROOT, harness  # noqa: E402

SPEC = os.path.join(ROOT, "tests", "sim", "examples", "inventory-200.yml")
COLLECTIONS = os.path.join(ROOT, ".venv", "collections")
ANSIBLE_INVENTORY = os.path.join(ROOT, ".venv", "bin", "ansible-inventory")
TARGET_SECONDS = 3.0
_LOADER_READY: list[bool] = []
TARGET_CALLS = 10
# The listing alone: keyed groups add Ansible's templating (about 7 ms of CPU per expression and host here).
CONFIG = "plugin: cloudstack.cks.clusters\n"


def _connection(env: dict[str, Any]) -> dict[str, str]:
    return {"CLOUDSTACK_ENDPOINT": env["cloudstack_endpoint"], "CLOUDSTACK_KEY": env["cloudstack_key"],
            "CLOUDSTACK_SECRET": env["cloudstack_secret"]}


def _cloudstack_calls(env: dict[str, Any], since: float) -> int:
    return len(harness.admin(env, "GET", f"/calls?since={since}&api=cloudstack", timeout=120))


def plugin_run(env: dict[str, Any], config_path: str) -> dict[str, Any]:
    """The plugin's parse, timed in this process (a fresh InventoryManager, so no cache between runs)."""
    from ansible.inventory.manager import InventoryManager  # pylint: disable=import-outside-toplevel
    from ansible.parsing.dataloader import DataLoader  # pylint: disable=import-outside-toplevel
    from ansible.plugins.loader import init_plugin_loader  # pylint: disable=import-outside-toplevel

    # What the CLI does first: the collection loader, so that cloudstack.cks.clusters resolves (once a process).
    if not _LOADER_READY:
        init_plugin_loader([COLLECTIONS])
        _LOADER_READY.append(True)
    os.environ.update(_connection(env))
    since = time.time()
    started, cpu = time.perf_counter(), time.process_time()
    manager = InventoryManager(loader=DataLoader(), sources=[config_path])
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    hosts = len(manager.get_groups_dict().get("cks_clusters", []))
    return {"wall": round(wall, 3), "cpu": round(cpu, 3), "hosts": hosts, "cloudstack_calls": _cloudstack_calls(env, since)}


def cli_run(env: dict[str, Any], config_path: str, home: str) -> dict[str, Any]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "CLOUDSTACK_"))}
    environment.update(_connection(env), ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_HOME=home,
                       ANSIBLE_INVENTORY_UNPARSED_FAILED="1")
    since = time.time()
    started = time.perf_counter()
    run = subprocess.run([ANSIBLE_INVENTORY, "-i", config_path, "--list"], capture_output=True, text=True,
                         env=environment, timeout=600, check=False)
    wall = time.perf_counter() - started
    if run.returncode != 0:
        raise RuntimeError(f"ansible-inventory failed: {run.stderr[-2000:]}")
    hosts = len(json.loads(run.stdout).get("cks_clusters", {}).get("hosts", []))
    return {"wall": round(wall, 3), "hosts": hosts, "cloudstack_calls": _cloudstack_calls(env, since)}


def measure(runs: int) -> dict[str, Any]:
    state_dir = tempfile.mkdtemp(prefix="cks-bench-inventory-")
    started = time.perf_counter()
    sim = harness.SimProcess.start(SPEC, state_dir, "--no-etcd", ready_timeout=300)
    ready = time.perf_counter() - started
    try:
        config_path = os.path.join(state_dir, "fleet.cks.yml")
        with open(config_path, "w", encoding="utf-8") as fh:
            fh.write(CONFIG)
        os.environ["ANSIBLE_COLLECTIONS_PATH"] = COLLECTIONS
        plugin = [plugin_run(sim.env, config_path) for _ in range(runs)]
        cli = [cli_run(sim.env, config_path, os.path.join(state_dir, "ansible-home")) for _ in range(runs)]
    finally:
        sim.stop(timeout=60)
    result = {
        "clusters": 200, "runs": runs, "sim_ready_seconds": round(ready, 1),
        "plugin": plugin, "ansible_inventory": cli,
        "plugin_wall_median": statistics.median(r["wall"] for r in plugin),
        # This process's CPU: what the plugin costs whatever else the machine runs (the first run imports cs).
        "plugin_cpu_median": statistics.median(r["cpu"] for r in plugin),
        "ansible_inventory_wall_median": statistics.median(r["wall"] for r in cli),
        "cloudstack_calls": max(r["cloudstack_calls"] for r in plugin + cli),
        "hosts": min(r["hosts"] for r in plugin + cli),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "load_1m": round(os.getloadavg()[0], 2)},
    }
    result["verdicts"] = {
        "plugin_le_3s": result["plugin_wall_median"] <= TARGET_SECONDS,
        "ansible_inventory_le_3s": result["ansible_inventory_wall_median"] <= TARGET_SECONDS,
        "calls_le_10": result["cloudstack_calls"] <= TARGET_CALLS,
        "all_listed": result["hosts"] == 200,
    }
    return result


def saved_markdown(out: str) -> list[str]:
    """The last saved inventory table, for bench/run.py's report (empty before the first run)."""
    path = os.path.join(out, "inventory.json")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as fh:
        return markdown(json.load(fh)).splitlines() + ["(from `bench/inventory.py`; run it again to refresh)", ""]


def markdown(result: dict[str, Any]) -> str:
    def yes(value: Optional[bool]) -> str:
        return "yes" if value else "NO"

    v = result["verdicts"]
    return "\n".join([
        "| inventory (cloudstack.cks.clusters, 200 clusters) | wall s (median) | CloudStack calls | hosts |",
        "| --- | ---: | ---: | ---: |",
        f"| the plugin's parse (CPU {result['plugin_cpu_median']:.2f} s) | {result['plugin_wall_median']:.2f} | "
        f"{result['cloudstack_calls']} | {result['hosts']} |",
        f"| `ansible-inventory --list`, spawn to exit | {result['ansible_inventory_wall_median']:.2f} | "
        f"{result['cloudstack_calls']} | {result['hosts']} |",
        "",
        f"Plugin ≤ 3 s: {yes(v['plugin_le_3s'])}; ansible-inventory ≤ 3 s: {yes(v['ansible_inventory_le_3s'])}; "
        f"≤ 10 CloudStack calls: {yes(v['calls_le_10'])}; all 200 listed: {yes(v['all_listed'])} "
        f"({result['runs']} runs, load {result['machine']['load_1m']} on {result['machine']['cpus']} CPUs).",
        "",
    ])


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args(argv)
    result = measure(args.runs)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "inventory.json"), "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2)
        fh.write("\n")
    table = markdown(result)
    with open(os.path.join(args.out, "inventory.md"), "w", encoding="utf-8") as fh:
        fh.write(table)
    print(table)
    return 0 if all(result["verdicts"][k] for k in ("plugin_le_3s", "calls_le_10", "all_listed")) else 1


if __name__ == "__main__":
    sys.exit(main())
