"""Shared helpers of the cks-sim tests: the small spec and the handle a test talks to an in-process
sim through (starting and stopping is ``cks_sim.harness``'s). A plain module (not conftest.py) so
test files import it by a name that no other test folder's conftest shadows when pytest collects
several folders in one run."""

from __future__ import annotations

import copy
from typing import Any, Callable, Optional

import requests
from cs import CloudStack

from cks_sim.harness import CKS_SIM, SIM_DIR, SMALL_SPEC, wait_until
from cks_sim.server import SimServer

__all__ = ["CKS_SIM", "SIM_DIR", "SMALL_SPEC", "TEST_TIME_SCALE", "SimHandle", "small_spec"]

TEST_TIME_SCALE = 0.01


def small_spec(**overrides: Any) -> dict[str, Any]:
    """small.yml as a raw dict (before normalisation), with top-level overrides."""
    import yaml

    with open(SMALL_SPEC, encoding="utf-8") as handle:
        raw = yaml.safe_load(handle)
    raw["time_scale"] = TEST_TIME_SCALE
    raw.update(copy.deepcopy(overrides))
    return raw


class SimHandle:
    """A running in-process sim and the ways a test talks to it."""

    def __init__(self, server: SimServer) -> None:
        self.server = server
        self.sim = server.sim
        self.env: dict[str, Any] = server.env

    def cs(self, **kwargs: Any) -> CloudStack:
        options = {"endpoint": self.env["cloudstack_endpoint"], "key": self.env["cloudstack_key"],
                   "secret": self.env["cloudstack_secret"], "poll_interval": 0.02, "job_timeout": 30}
        options.update(kwargs)
        return CloudStack(**options)

    def admin(self, method: str, path: str, body: Optional[dict[str, Any]] = None) -> Any:
        response = requests.request(method, self.env["admin_url"] + path, json=body, timeout=10)
        response.raise_for_status()
        return response.json()

    def cluster(self, cluster_id: Optional[str] = None) -> dict[str, Any]:
        answer = self.cs().listKubernetesClusters(id=cluster_id or self.env["cluster_id"])
        return answer["kubernetescluster"][0]

    def vms(self, **filters: Any) -> list[dict[str, Any]]:
        return self.cs().listVirtualMachines(fetch_list=True, **filters)

    def vm(self, name: str) -> dict[str, Any]:
        return self.cs().listVirtualMachines(name=name)["virtualmachine"][0]

    def node_vms(self, node_type: str) -> list[dict[str, Any]]:
        marker = {"control": "-control-", "worker": "-node-", "etcd": "-etcd-"}[node_type]
        return [vm for vm in self.vms() if marker in vm["name"]]

    def offering(self, name: str) -> dict[str, Any]:
        return self.cs().listServiceOfferings(name=name)["serviceoffering"][0]

    def group(self, name: str) -> dict[str, Any]:
        return self.cs().listAffinityGroups(name=name)["affinitygroup"][0]

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.02) -> Any:
        return wait_until(predicate, timeout, interval=interval)

