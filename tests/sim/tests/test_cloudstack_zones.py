"""Many clusters in several zones and accounts (the fleet specs), as CloudStack serves them.

Rules followed:
- ``ListZonesCmd`` / ``ManagementServerImpl.listDataCenters``: every zone is listed, filtered by id,
  name and keyword.
- ``DeploymentPlanningManagerImpl.planDeployment``: a VM is planned within its own zone (the
  ``DataCenterDeployment`` of its data center), so a cluster's VMs run on hosts of its zone only.
- ``KubernetesClusterManagerImpl.createKubernetesClusterResponse``: ``zoneid``/``zonename`` are the
  cluster's own zone; ``UserVmJoinDaoImpl.newUserVmResponse``: a VM reports its zone.
- ``KubernetesClusterManagerImpl.listKubernetesClusters`` through
  ``AccountManagerImpl.buildACLSearchParameters``: a plain user sees only its own account's
  clusters, whatever ``listall`` says; a root admin with ``listall=true`` sees every account's.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import yaml

from cks_sim.spec import SpecError, load_spec, normalize

from simkit import TEST_TIME_SCALE, small_spec

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")
FLEET = os.path.join(EXAMPLES, "inventory.yml")
FLEET_200 = os.path.join(EXAMPLES, "inventory-200.yml")


def _raw(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as handle:
        raw = yaml.safe_load(handle)
    raw["time_scale"] = TEST_TIME_SCALE
    return raw


def test_the_fleet_specs_load_with_their_zones_and_owners():
    fleet = load_spec(FLEET)
    assert normalize(fleet) == fleet
    assert [z["name"] for z in fleet["zones"]] == ["zone-east", "zone-west"]
    assert len(fleet["clusters"]) == 12
    assert {c["zone"] for c in fleet["clusters"]} == {"zone-east", "zone-west"}
    owners = {c["account"] for c in fleet["clusters"]} - {None}
    assert owners == {"acme", "globex", "initech"}
    big = load_spec(FLEET_200)
    assert len(big["clusters"]) == 200
    assert not big["workloads"] and all(c["etcd_nodes"] == 0 for c in big["clusters"])


def test_zone_mistakes_name_the_field():
    raw = small_spec(zones=[{"name": "zone-2"}, {"name": "zone-2"}])
    with pytest.raises(SpecError, match=r"^zones: duplicate name 'zone-2'$"):
        normalize(raw)
    raw = small_spec()
    raw["clusters"][0]["zone"] = "zone-9"
    with pytest.raises(SpecError, match=r"^clusters\[0\]\.zone: no zone named 'zone-9'; add it to zones$"):
        normalize(raw)
    raw = small_spec()
    raw["hosts"][0]["zone"] = "zone-9"
    with pytest.raises(SpecError, match=r"^hosts\[0\]\.zone: no zone named 'zone-9'; add it to zones$"):
        normalize(raw)


def test_a_one_zone_spec_keeps_its_ids():
    """Extra zone ids are drawn only when a spec has extra zones: older specs keep their ids."""
    plain = normalize(small_spec())
    assert plain["zones"] == [plain["zone"]]


def test_the_fleet_serves_two_zones_and_places_each_cluster_in_its_own(sim_factory):
    handle = sim_factory(spec=_raw(FLEET))
    api = handle.cs()
    zones = {z["name"]: z["id"] for z in api.listZones(fetch_list=True)}
    assert set(zones) == {"zone-east", "zone-west"}
    assert [z["name"] for z in api.listZones(fetch_list=True, id=zones["zone-west"])] == ["zone-west"]
    hosts = {h["id"]: h["zonename"] for h in api.listHosts(fetch_list=True)}
    clusters = api.listKubernetesClusters(fetch_list=True, listall=True)
    assert len(clusters) == 12
    by_name = {c["name"]: c for c in clusters}
    assert by_name["acme-prod-west"]["zonename"] == "zone-west"
    assert by_name["acme-prod-west"]["zoneid"] == zones["zone-west"]
    assert by_name["acme-prod-east"]["zonename"] == "zone-east"
    vms = api.listVirtualMachines(fetch_list=True, listall=True)
    assert len(vms) == sum(len(c["virtualmachines"]) for c in clusters)
    cluster_of = {vm["id"]: c for c in clusters for vm in c["virtualmachines"]}
    for vm in vms:
        assert vm["zonename"] == cluster_of[vm["id"]]["zonename"]
        if vm["state"] == "Running":
            assert hosts[vm["hostid"]] == vm["zonename"], vm["name"]
    west = api.listVirtualMachines(fetch_list=True, listall=True, zoneid=zones["zone-west"])
    assert west and all(vm["zonename"] == "zone-west" for vm in west)


def test_a_customer_key_sees_only_its_own_clusters(sim_factory):
    handle = sim_factory(spec=_raw(FLEET))
    acme = handle.cs(key="acme-key", secret="acme-secret")
    names = sorted(c["name"] for c in acme.listKubernetesClusters(fetch_list=True, listall=True))
    assert names == ["acme-dev", "acme-prod-east", "acme-prod-west", "acme-staging"]
    admin = handle.cs()
    assert len(admin.listKubernetesClusters(fetch_list=True)) == 1  # without listall: its own (ops-tools)
    assert len(admin.listKubernetesClusters(fetch_list=True, listall=True)) == 12


def test_projectid_minus_one_lists_the_projects_clusters_the_caller_may_see(sim_factory):
    """``ParamProcessWorker.translateUuidToInternalId`` passes "-1" through for any uuid parameter, and
    ``AccountManagerImpl.buildACLSearchParameters`` reads projectid=-1 as "the projects' resources":
    all projects for a root admin, the caller's projects for a user. Without it, listall leaves them out."""
    handle = sim_factory(spec=_raw(os.path.join(EXAMPLES, "tenants.yml")))
    root = handle.cs(key="root-key", secret="root-secret")
    assert sorted(c["name"] for c in root.listKubernetesClusters(fetch_list=True, listall=True)) == ["alice-k8s"]
    projects = root.listKubernetesClusters(fetch_list=True, listall=True, projectid="-1")
    assert [c["name"] for c in projects] == ["platform-k8s"]
    alice = handle.cs(key="alice-key", secret="alice-secret")
    assert [c["name"] for c in alice.listKubernetesClusters(fetch_list=True, projectid="-1")] == ["platform-k8s"]
    bob = handle.cs(key="bob-key", secret="bob-secret")
    assert bob.listKubernetesClusters(fetch_list=True, projectid="-1") == []
    with pytest.raises(Exception, match="Invalid parameter projectid value=-2"):
        root.listKubernetesClusters(projectid="-2")
