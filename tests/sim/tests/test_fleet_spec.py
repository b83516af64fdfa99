"""examples/fleet.yml: many clusters in one simulator, each with its own API server endpoint and
owner; a pdb_block fault named for one cluster blocks that cluster's PDB only.

listKubernetesClusters scope follows ``AccountManagerImpl.buildACLSearchParameters`` (a root admin
with ``listall`` sees every account's clusters, a user only its own); the PDB status follows the
Kubernetes disruption controller (``pkg/controller/disruption/disruption.go``,
``updatePdbStatus``: disruptionsAllowed = currentHealthy - desiredHealthy, at least 0).
"""

from __future__ import annotations

import os

import requests
import yaml
from cks_sim.harness import wait_until
from simkit import SIM_DIR


def fleet_spec() -> dict:
    with open(os.path.join(SIM_DIR, "examples", "fleet.yml"), encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def test_each_cluster_has_its_own_endpoint_and_owner(sim_factory) -> None:
    handle = sim_factory(spec=fleet_spec())
    clusters = handle.env["clusters"]
    assert len(clusters) == 12
    assert len({c["kube_url"] for c in clusters}) == 12
    listed = handle.cs().listKubernetesClusters(listall=True)["kubernetescluster"]
    owners = {c["name"]: c["account"] for c in listed}
    assert sorted(owners) == [f"fleet-{i:02d}" for i in range(1, 13)]
    assert sorted(owners.values()).count("acme") == 4 and sorted(owners.values()).count("globex") == 4
    acme = handle.cs(key="acme-key", secret="acme-secret").listKubernetesClusters(listall=True)["kubernetescluster"]
    assert sorted(c["name"] for c in acme) == ["fleet-05", "fleet-06", "fleet-07", "fleet-08"]


def pdb_allowed(handle, cluster: dict) -> int:
    response = requests.get(f"{cluster['kube_url']}/apis/policy/v1/namespaces/default/poddisruptionbudgets/web",
                            headers={"Authorization": f"Bearer {token(cluster)}"}, verify=handle.env["kube_ca"], timeout=10)
    response.raise_for_status()
    return response.json()["status"]["disruptionsAllowed"]


def token(cluster: dict) -> str:
    with open(cluster["kubeconfig"], encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    return config["users"][0]["user"]["token"]


def test_a_pdb_block_for_one_cluster_blocks_only_that_cluster(sim_factory) -> None:
    handle = sim_factory(spec=fleet_spec())
    first, second = handle.env["clusters"][:2]
    assert pdb_allowed(handle, first) == 1 and pdb_allowed(handle, second) == 1
    handle.admin("POST", "/faults", {"kind": "pdb_block", "namespace": "default", "name": "web", "cluster": first["id"]})
    wait_until(lambda: pdb_allowed(handle, first) == 0, timeout=10)
    assert pdb_allowed(handle, second) == 1
