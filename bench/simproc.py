# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""cks-sim as a subprocess for the benchmarks: the spec they use, start, the admin API, stop.

The benchmarks run the simulator as its own process (as `make demo` does, through
``cks_sim.harness``) so that its CPU time is not mixed with the timer's, and each run gets its own
state directory: never out/demo, which the demo and other runs rebuild.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from typing import Any, Optional

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.join(ROOT, "tests", "sim") not in sys.path:
    sys.path.insert(0, os.path.join(ROOT, "tests", "sim"))
from cks_sim import harness  # noqa: E402  pylint: disable=wrong-import-position

# Simulated seconds, as a KVM cloud takes them (the fixed timings). time_scale turns them
# into real seconds; the benchmark picks it (see bench/run.py).
TIMINGS: dict[str, float] = {
    "stop": 10,
    "start": 15,
    "boot_to_ready": 30,
    "pod_termination": 5,
    "pod_start": 3,
    "resize": 2,
    "affinity": 1,
    "notready_grace": 40,
    "scanner_period": 30,
}


def bench_spec(workers: int, control_nodes: int = 3, time_scale: float = 0.1,
               max_unavailable: int = 1, seed: int = 11) -> dict[str, Any]:
    """A cluster to roll: `control_nodes` stacked control nodes, `workers` workers.

    Workloads: one DaemonSet pod per node (stays) and one Deployment pod per worker (evicted),
    no PodDisruptionBudget, so a drain takes one pod termination and nothing else: the ideal is
    then exactly the simulator's timings, and a PDB's 429-and-retry (eviction_retry_interval)
    does not blur the comparison.
    """
    nodes = workers + control_nodes
    return {
        "time_scale": time_scale,
        "seed": seed,
        "timings": dict(TIMINGS),
        "zone": {"name": "zone-1"},
        "account": {"name": "admin", "domain": "ROOT", "apikey": "bench-api-key", "secretkey": "bench-secret-key"},
        "hosts": [{"name": "kvm-1", "cpu": 128, "memory": 524288}],
        # 16 nodes of the largest offering per host, with room to spare.
        "scale": {"hosts": max(2, math.ceil(nodes / 12))},
        "disk_offerings": [{"name": "custom-root", "size": 0, "iscustomized": True, "disksizestrictness": False}],
        "service_offerings": [{"name": "cks-medium", "cpu": 2, "memory": 4096},
                              {"name": "cks-large", "cpu": 4, "memory": 8192}],
        "affinity_groups": [{"name": "dedicated-admin", "type": "ExplicitDedication"}],
        "clusters": [{
            "name": "bench", "state": "Running", "kubernetes_version": "1.30.4",
            "control_nodes": control_nodes, "workers": workers, "etcd_nodes": 0,
            "offering": "cks-medium", "root_disk_size": 20, "root_disk_offering": "custom-root",
            "affinity_groups": {"control": [], "worker": [], "etcd": []},
        }],
        "workloads": [
            {"kind": "DaemonSet", "namespace": "kube-system", "name": "kube-proxy"},
            {"kind": "Deployment", "namespace": "default", "name": "web", "replicas": max(1, workers)},
        ],
        "pdbs": [],
        "invariants": {"max_unavailable": {"control": 1, "etcd": 1, "worker": max_unavailable}},
    }


class BenchSim(harness.SimProcess):
    """A running cks-sim and what the benchmarks read from it. ``BenchSim.from_spec`` starts one."""

    vm_ids: dict[str, str]

    @classmethod
    def from_spec(cls, spec: dict[str, Any], etcd: bool = True, state_dir: Optional[str] = None,
                  timeout: float = 300) -> BenchSim:
        state_dir = state_dir or tempfile.mkdtemp(prefix="cks-bench-")
        os.makedirs(state_dir, exist_ok=True)
        spec_path = os.path.join(state_dir, "spec.yml")
        with open(spec_path, "w", encoding="utf-8") as fh:
            yaml.safe_dump(spec, fh, sort_keys=False)
        sim = cls.start(spec_path, state_dir, *([] if etcd else ["--no-etcd"]), ready_timeout=timeout)
        try:
            sim.refresh_vm_ids()
        except BaseException:
            sim.stop()
            raise
        return sim

    def admin(self, path: str, body: Any = None, method: Optional[str] = None) -> Any:
        # 1,000 VMs in one GET /state take a while to serialise on a loaded machine.
        return harness.admin(self.env, method or ("POST" if body is not None else "GET"), path, body, timeout=120)

    def refresh_vm_ids(self) -> None:
        """VM name (lowercase) -> id, to match the call log (ids) with the timeline (names)."""
        state = self.admin("/state")
        self.vm_ids = {vm["name"].lower(): vm["id"] for c in state["cloud"]["clusters"] for vm in c["vms"]}

    def set_config(self, **config: Any) -> Any:
        return self.admin("/actions", dict(config, action="set_config"))

    def calls(self, since: float = 0.0) -> list[dict[str, Any]]:
        return self.admin(f"/calls?since={since}")

    def timeline(self, since: float = 0.0) -> list[dict[str, Any]]:
        return self.admin(f"/timeline?since={since}")

    def invariants(self, since: float = 0.0) -> list[dict[str, Any]]:
        return self.admin(f"/invariants?since={since}")

    def connection_env(self) -> dict[str, str]:
        """What an AWX CloudStack credential would set; the secret never goes on a command line."""
        return {
            "CLOUDSTACK_ENDPOINT": self.env["cloudstack_endpoint"],
            "CLOUDSTACK_KEY": self.env["cloudstack_key"],
            "CLOUDSTACK_SECRET": self.env["cloudstack_secret"],
            # The simulated API server's certificate is signed by the simulator's own CA.
            "K8S_AUTH_SSL_CA_CERT": self.env["kube_ca"],
        }

    def stop(self, timeout: float = 60.0) -> int:
        # A sim of a thousand nodes takes longer to stop than the tests' small ones.
        return super().stop(timeout)
