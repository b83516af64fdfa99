"""`make demo`: start cks-sim with a small cluster and roll it end to end with the real playbook.

The cluster (tests/sim/examples/small.yml) has 3 stacked control nodes, each running a real etcd
member, and 4 workers. The rollout gives the workers a larger offering and a host anti-affinity
group and grows every root disk, exactly as an operator would ask for it on a real cloud:

    ansible-playbook cloudstack.cks.rollout -e @demo-vars.yml

Everything the demo writes goes to out/demo/ (the simulator's state, the variables, the report).

`python tests/demo.py --check` (`make demo-check`) runs the same playbook as a dry run instead: it prints
the plan and what would block each drain, and changes nothing.

`python tests/demo.py --kube real` (`make demo-real`) rolls the same cluster on a real Kubernetes control
plane (kube-apiserver, kube-controller-manager and kube-scheduler built by `make kube-plane`), cks-sim
playing the kubelets: the budgets' status comes from the disruption controller, every eviction from the
real API server. The etcd checks then ask the members directly (a real API server's pods/exec needs a
kubelet that runs containers).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "sim"))
from cks_sim import harness  # noqa: E402  pylint: disable=wrong-import-position

OUT = os.path.join(ROOT, "out", "demo")
SPEC = harness.SMALL_SPEC
VENV_BIN = os.path.dirname(sys.executable)


def demo_vars(env: dict[str, Any], real: bool = False) -> dict[str, Any]:
    # No etcd variable on cks-sim's own Kubernetes: the control nodes' quorum checks run etcdctl in their
    # etcd pods through the Kubernetes API (docs/etcd-checks.md), with nothing but the kubeconfig
    # CloudStack hands out. On a real control plane no kubelet runs them: the members are asked directly.
    etcd = {f"rollout_{name}": value for name, value in harness.etcd_options(env).items()} if real else {}
    return {
        **etcd,
        "rollout_cluster": env["cluster_name"],
        "rollout_node_offerings": {"worker": "cks-large"},
        "rollout_node_root_disk_sizes": {"control": 30, "worker": 30},
        "rollout_node_affinity_groups": {"worker": ["workers-spread"]},
        "rollout_max_unavailable": 2,
        # The simulator runs 50x faster than a cloud: poll and retry evictions accordingly.
        "rollout_eviction_retry_interval": 0.5,
        "rollout_poll_interval": 0.2,
        "rollout_delete_emptydir_data": True,
        "rollout_report_path": os.path.join(OUT, "report.json"),
    }


def draw_timeline(env: dict[str, Any], report_path: str) -> None:
    """The rollout as an SVG timeline next to the report (bench/timeline.py), beside the simulator's ideal."""
    state = harness.admin(env, "GET", "/state")
    sim_path = os.path.join(OUT, "sim-timeline.json")
    with open(sim_path, "w") as f:
        json.dump({"timeline": harness.admin(env, "GET", "/timeline"), "timings": state["timings"], "time_scale": state["time_scale"]}, f)
    subprocess.call([sys.executable, os.path.join(ROOT, "bench", "timeline.py"), report_path,
                     "--sim-timeline", sim_path, "-o", os.path.join(OUT, "timeline.svg")], cwd=ROOT)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    real = "--kube" in argv[:-1] and argv[argv.index("--kube") + 1] == "real"
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    state_dir = os.path.join(OUT, "sim")
    print(f"Starting cks-sim ({os.path.relpath(SPEC, ROOT)}{', a real Kubernetes control plane' if real else ''}) ...",
          flush=True)
    try:
        sim = harness.SimProcess.start(SPEC, state_dir, *(["--kube", "real"] if real else []),
                                       log_path=os.path.join(OUT, "cks-sim.log"))
    except harness.SimStartError as exc:
        raise SystemExit(str(exc)) from None
    env = sim.env
    try:
        variables = demo_vars(env, real)
        if real:
            print(f"Kubernetes {env['kube_version']} at {env['kube_url']} (kubeconfig {env['kubeconfig']})", flush=True)
        # The simulator flags more workers down at once than the rollout may take (the clamp).
        harness.admin(env, "POST", "/actions", {"action": "set_config", "max_unavailable": {"worker": variables["rollout_max_unavailable"]}})
        vars_path = os.path.join(OUT, "demo-vars.yml")
        with open(vars_path, "w") as f:
            yaml.safe_dump(variables, f, sort_keys=False)
        environment = dict(
            os.environ,
            ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".venv", "collections"),
            ANSIBLE_FORCE_COLOR=os.environ.get("ANSIBLE_FORCE_COLOR", "0"),
            PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""),
            # What an AWX CloudStack credential would set; the secret never goes on a command line.
            CLOUDSTACK_ENDPOINT=env["cloudstack_endpoint"],
            CLOUDSTACK_KEY=env["cloudstack_key"],
            CLOUDSTACK_SECRET=env["cloudstack_secret"],
            # The simulated API server's certificate is signed by the simulator's own CA.
            K8S_AUTH_SSL_CA_CERT=env["kube_ca"],
        )
        print(f"{'Dry run of rolling' if check else 'Rolling'} cluster {env['cluster_name']}: workers to cks-large "
              "with host anti-affinity, root disks to 30 GB\n", flush=True)
        cmd = [os.path.join(VENV_BIN, "ansible-playbook"), os.path.join(ROOT, "playbooks", "rollout.yml"),
               "-e", f"@{vars_path}"] + (["--check"] if check else [])
        calls_before = len(harness.admin(env, "GET", "/calls"))
        rc = subprocess.call(cmd, env=environment, cwd=ROOT)
        if check:
            writes = [c for c in harness.admin(env, "GET", "/calls")[calls_before:]
                      if not str(c.get("command") or c.get("verb")).lower().startswith(("list", "get", "query"))]
            print(f"\nCalls that changed something (the simulator's call log): {len(writes)}")
            return rc
        report_path = os.path.join(OUT, "report.json")
        if os.path.exists(report_path):
            print(f"\nReport: {os.path.relpath(report_path, ROOT)}")
        invariants = harness.admin(env, "GET", "/invariants")
        print(f"Simulator invariants violated: {len(invariants)}")
        for violation in invariants:
            print(f"  {violation}")
        if os.path.exists(report_path):
            draw_timeline(env, report_path)
        return rc
    finally:
        sim.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
