"""The fleet tests' shared parts (test_fleet.py, test_fleet_cancel.py): the AWX project, a static
inventory of cluster hosts shaped as the cloudstack.cks.clusters inventory plugin gives them, the
fleet's variables, and reading each cluster back from cks-sim."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import rollout_helpers as rh
import yaml
from helpers import ROOT, ClusterSim

AWX_PROJECT = Path(ROOT) / "extensions" / "awx" / "project"
NEW_OFFERING = "cks-medium"
# No rollout_batch_timeout here: extra vars beat hostvars, and the blocked cluster sets its own.
FAST = {"rollout_poll_interval": 0.2, "rollout_eviction_retry_interval": 0.3, "rollout_delete_emptydir_data": True,
        "rollout_validate_interval": 1}


def inventory(sim: ClusterSim, names: list[str], path: Path, **hostvars: dict[str, Any]) -> Path:
    """A static inventory of cluster hosts in the group cks_clusters; ``hostvars`` per cluster name."""
    hosts = {}
    for name in names:
        cluster = sim.cluster(name)
        hosts[name] = dict({"cks_id": cluster["id"]}, **hostvars.get(name, {}))
    path.write_text(yaml.safe_dump({"all": {"children": {"cks_clusters": {"hosts": hosts}}}}), encoding="utf-8")
    return path


def fleet_vars(work: Path, **extra: Any) -> dict[str, Any]:
    return dict(FAST, fleet_group="cks_clusters", fleet_node_offerings={"worker": NEW_OFFERING},
                fleet_work_dir=str(work / "fleet"), **extra)


def cluster_index(sim: ClusterSim, name: str) -> int:
    return [c["name"] for c in sim.state()["cloud"]["clusters"]].index(name)


def workers(sim: ClusterSim, name: str) -> dict[str, dict[str, Any]]:
    return {vm_name: vm for vm_name, vm in rh.vms(sim, cluster_index(sim, name)).items() if vm["node_type"] == "worker"}


def stops_per_node(items: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in rh.events(items, "stop_requested"):
        counts[item["node"]] = counts.get(item["node"], 0) + 1
    return counts


def unschedulable(sim: ClusterSim, name: str) -> list[str]:
    kube = sim.state()["kube"][sim.cluster(name)["id"]]
    return [node["name"] for node in kube["nodes"] if node.get("unschedulable")]
