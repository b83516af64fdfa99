"""Shared fixtures of the integration tests. Add fixtures here; do not replace the file.

``cycle_sim`` (node cycle and release tests): a factory that starts cks-sim in this process
(its HTTP APIs on loopback, real etcd members) and gives the collection's REAL clients for it:

    def test_x(cycle_sim):
        sim = cycle_sim("small.yml")                   # a file under specs/ or tests/sim/examples
        sim = cycle_sim(spec_dict)                     # or a raw spec dict
        sim.cloud, sim.kube, sim.loader                # CloudStackClient, KubeClient, ClusterLoader
        sim.fault(kind="pdb_block", namespace="default", name="web")
        sim.timeline(), sim.calls(), sim.invariants()  # the admin API's journals
"""

from __future__ import annotations

import copy
import logging
import os
from typing import Any, Callable, Iterator, Optional, Union

import pytest
import requests
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SPEC_DIRS = (os.path.join(HERE, "specs"), os.path.join(ROOT, "tests", "sim", "examples"))
# The sim's werkzeug servers log every request: keep test output readable.
logging.getLogger("werkzeug").setLevel(logging.ERROR)


def load_raw_spec(name: str, time_scale: float = 0.01) -> dict[str, Any]:
    for folder in SPEC_DIRS:
        path = os.path.join(folder, name)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                raw = yaml.safe_load(fh)
            raw["time_scale"] = time_scale
            return raw
    raise FileNotFoundError(name)


class CycleSim:
    """A running in-process cks-sim with the collection's clients pointed at it."""

    def __init__(self, server: Any) -> None:
        from ansible_collections.cloudstack.cks.plugins.module_utils.cloudstack import (
            CloudStackClient,
            CloudStackOptions,
        )
        from ansible_collections.cloudstack.cks.plugins.module_utils.cluster import ClusterLoader
        from ansible_collections.cloudstack.cks.plugins.module_utils.kube import KubeClient, KubeOptions

        self.server = server
        self.env: dict[str, Any] = server.env
        self.cluster_id: str = self.env["cluster_id"]
        self.cloud = CloudStackClient(CloudStackOptions(
            api_url=self.env["cloudstack_endpoint"], api_key=self.env["cloudstack_key"],
            api_secret=self.env["cloudstack_secret"], poll_interval=0.02))
        self.kube = KubeClient.connect(KubeOptions(kubeconfig=self.env["kubeconfig"]))
        self.loader = ClusterLoader(self.cloud, self.kube)

    # -- admin API ---------------------------------------------------------------------------

    def admin(self, method: str, path: str, body: Optional[Any] = None) -> Any:
        response = requests.request(method, self.env["admin_url"].rstrip("/") + path, json=body, timeout=30)
        response.raise_for_status()
        return response.json() if response.content else None

    def fault(self, **fault: Any) -> Any:
        return self.admin("POST", "/faults", fault)

    def clear_faults(self) -> Any:
        return self.admin("DELETE", "/faults")

    def _items(self, path: str, key: str) -> list[dict[str, Any]]:
        answer = self.admin("GET", path)
        return answer.get(key, []) if isinstance(answer, dict) else answer

    def timeline(self) -> list[dict[str, Any]]:
        return self._items("/timeline", "timeline")

    def calls(self) -> list[dict[str, Any]]:
        return self._items("/calls", "calls")

    def invariants(self) -> list[dict[str, Any]]:
        return self._items("/invariants", "violations")

    # -- reading the cluster ---------------------------------------------------------------------

    def view(self) -> Any:
        return self.loader.load(self.cluster_id)

    def offering_id(self, name: str) -> str:
        return next(o.id for o in self.view().offerings.values() if o.name == name)

    def group_id(self, name: str) -> str:
        return next(g.id for g in self.view().affinity_groups.values() if g.name == name)

    def names(self, node_type: str) -> list[str]:
        return sorted(n.name for n in self.view().nodes_of(node_type))

    def etcd_endpoints(self) -> dict[str, Any]:
        """Module-style etcd options for the first cluster's members."""
        etcd = self.env["etcd"]
        options: dict[str, Any] = {"etcd_endpoints": [m["client_url"] for m in etcd["members"]]}
        if etcd.get("mode") == "stacked":
            options.update(etcd_ca_cert=etcd["ca_cert"], etcd_client_cert=etcd["client_cert"],
                           etcd_client_key=etcd["client_key"])
        return options

    # -- running the collection's node cycle and release directly ------------------------------

    def cycle(self, nodes: list[str], settings: Any, etcd: bool = False, lock: Any = None,
              batch_timeout: float = 120, **drain: Any) -> Any:
        """One batch through ``cycle.BatchCycle`` with fast polling; returns the BatchResult."""
        from ansible_collections.cloudstack.cks.plugins.module_utils import cycle
        from ansible_collections.cloudstack.cks.plugins.module_utils.drain import DrainOptions

        options = cycle.CycleOptions(
            batch_timeout=batch_timeout, poll_interval=0.05,
            drain=DrainOptions(**dict({"delete_emptydir_data": True, "eviction_retry_interval": 0.05,
                                       "poll_interval": 0.05}, **drain)))
        check = cycle.etcd_check_for(self.etcd_endpoints()) if etcd else None
        return cycle.BatchCycle(self.cloud, self.kube, self.loader, self.cluster_id, settings, nodes,
                                options=options, etcd_check=check, lock=lock).run()

    def release(self, last_error: Optional[str] = None, skipped: Any = None, lock: Any = None) -> Any:
        from ansible_collections.cloudstack.cks.plugins.module_utils.record import RecordStore
        from ansible_collections.cloudstack.cks.plugins.module_utils.release import Release

        return Release(self.cloud, self.kube, self.loader, self.cluster_id, RecordStore(self.kube),
                       lock).run(last_error=last_error, skipped=skipped)

    def close(self) -> None:
        self.kube.close()


@pytest.fixture
def cycle_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., CycleSim]]:
    from cks_sim.server import SimServer
    from cks_sim.spec import normalize

    started: list[tuple[Any, CycleSim]] = []

    def start(spec: Union[str, dict[str, Any]] = "small.yml", etcd: bool = True) -> CycleSim:
        raw = load_raw_spec(spec) if isinstance(spec, str) else copy.deepcopy(spec)
        server = SimServer(normalize(raw), str(tmp_path_factory.mktemp("cycle-sim")), with_etcd=etcd)
        server.start()
        handle = CycleSim(server)
        started.append((server, handle))
        return handle

    yield start
    for server, handle in started:
        handle.close()
        server.stop()
