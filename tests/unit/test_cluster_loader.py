# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""ClusterLoader: a bounded number of list calls, whatever the cluster size."""

from __future__ import annotations

from typing import Any

import pytest
from factories import ClusterFactory, cloud_for, loader_for
from fakes import FakeKube

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._model import cluster as cluster_model
from ansible_collections.cloudstack.cks.plugins.module_utils._model.loader import Catalog, CatalogCache, ClusterLoader

UUID = "3f2c1a9e-8d7b-4c6a-9e5f-1a2b3c4d5e6f"


@pytest.mark.parametrize("workers", [1, 4, 99, 398, 399, 1000, 3000])
def test_call_budget_whatever_the_cluster_size(workers: int) -> None:
    f = ClusterFactory(control=1, workers=workers)
    loader, cloud, kube = loader_for(f)
    view = loader.load("demo")
    assert len(view.nodes) == workers + 1
    assert all(n.offering_id == "so-medium" and n.root_disk_gb == 20 for n in view.nodes)
    assert all(n.ready for n in view.nodes)
    assert len(cloud.asked) <= ClusterLoader.MAX_CLOUD_CALLS
    assert kube.node_lists == 1


def test_vms_are_asked_by_id_in_chunks_scoped_to_the_owner() -> None:
    f = ClusterFactory(control=3, workers=247)  # 250 VMs: 3 chunks of at most 100
    loader, cloud, _kube = loader_for(f)
    loader.load("demo")
    vm_calls = [p for c, p in cloud.asked if c == "listVirtualMachines"]
    assert [len(p["ids"].split(",")) for p in vm_calls] == [100, 100, 50]
    assert all(p["listall"] is True and p["account"] == "admin" and p["domainid"] == "domain-root"
               for p in vm_calls)
    asked = [i for p in vm_calls for i in p["ids"].split(",")]
    assert sorted(asked) == sorted(f.vm_id(n.name) for n in f.nodes)


def test_a_very_large_cluster_lists_the_owners_vms_once_and_keeps_its_own() -> None:
    f = ClusterFactory(control=3, workers=500)
    loader, cloud, _kube = loader_for(f)
    view = loader.load("demo")
    vm_calls = [p for c, p in cloud.asked if c == "listVirtualMachines"]
    assert len(vm_calls) == 1 and "ids" not in vm_calls[0]
    assert "other" not in {n.name for n in view.nodes}


@pytest.mark.parametrize("workers", [10, 1000])
def test_a_batch_reads_its_own_vms_only(workers: int) -> None:
    f = ClusterFactory(control=3, workers=workers)
    loader, cloud, kube = loader_for(f)
    batch = sorted(n.name for n in f.nodes if n.node_type == "worker")[:2]
    view = loader.load("demo", detail_for=[b.upper() for b in batch])
    vm_calls = [p for c, p in cloud.asked if c == "listVirtualMachines"]
    assert len(vm_calls) == 1 and sorted(vm_calls[0]["ids"].split(",")) == sorted(f.vm_id(b) for b in batch)
    assert len(cloud.asked) == 6 and kube.node_lists == 1  # the same for 10 and for 1,000 workers
    for node in view.nodes:
        if node.name in batch:
            assert node.offering_id == "so-medium" and node.cpu > 0
        else:
            # What the cluster's embedded VM entries say, and Kubernetes: enough for a preflight.
            assert node.offering_id is None and node.vm_state == "Running" and node.ready
    assert len(view.nodes) == workers + 3


def test_the_calls_made() -> None:
    f = ClusterFactory(control=1, workers=2)
    loader, cloud, _kube = loader_for(f)
    loader.load("demo")
    assert cloud.commands() == ["listKubernetesClusters", "listVirtualMachines", "listVolumes",
                                "listServiceOfferings", "listDiskOfferings", "listAffinityGroups"]
    params = dict(cloud.asked)
    assert params["listVolumes"] == {"type": "ROOT", "listall": True, "account": "admin", "domainid": "domain-root"}
    assert params["listAffinityGroups"] == {"listall": True}
    assert params["listKubernetesClusters"] == {"name": "demo", "listall": True}


def test_project_clusters_are_listed_in_their_project() -> None:
    f = ClusterFactory(control=1, workers=1, project=True)
    loader, cloud, _kube = loader_for(f)
    loader.load("demo", project_id="project-1")
    for command, params in cloud.asked:
        if command not in ("listServiceOfferings", "listDiskOfferings"):
            assert params.get("projectid") == "project-1", command
        assert "account" not in params


def test_resolve_by_id() -> None:
    f = ClusterFactory(control=1, workers=1)
    cluster = dict(f.raw_cluster(), id=UUID)
    loader, cloud, _kube = loader_for(f, [cluster])
    assert loader.load(UUID).id == UUID
    assert cloud.asked[0] == ("listKubernetesClusters", {"id": UUID, "listall": True})


def test_a_uuid_shaped_name_falls_back_to_the_name() -> None:
    f = ClusterFactory(control=1, workers=1)
    cluster = dict(f.raw_cluster(), name=UUID)
    loader, cloud, _kube = loader_for(f, [cluster])
    assert loader.load(UUID).name == UUID
    assert cloud.commands()[:2] == ["listKubernetesClusters", "listKubernetesClusters"]


def test_name_must_match_exactly_and_be_unique() -> None:
    f = ClusterFactory(control=1, workers=1)
    one = f.raw_cluster()
    two = dict(one, id="cluster-other", account="bob")
    near = dict(one, id="cluster-near", name="demo2")
    loader, _cloud, _kube = loader_for(f, [one, two, near])
    with pytest.raises(InvalidInput) as err:
        loader.load("demo")
    assert "cluster-demo" in err.value.msg and "cluster-other" in err.value.msg and "give the id" in err.value.msg
    loader, _cloud, _kube = loader_for(f, [near])
    with pytest.raises(InvalidInput) as err:
        loader.load("demo")
    assert "no CKS cluster" in err.value.msg


def test_without_a_kubernetes_client_nodes_have_no_kubernetes_side() -> None:
    f = ClusterFactory(control=1, workers=1)
    cloud = cloud_for(f, [f.raw_cluster()])
    view = ClusterLoader(cloud).load("demo")
    assert all(not n.k8s_present for n in view.nodes)


def test_a_catalog_listed_once_serves_every_later_view_of_the_run() -> None:
    f = ClusterFactory(control=1, workers=2)
    cloud = cloud_for(f, [f.raw_cluster()])
    shared = CatalogCache()
    first = ClusterLoader(cloud, FakeKube(nodes=f.raw_k8s_nodes), shared).load("demo")
    second = ClusterLoader(cloud, FakeKube(nodes=f.raw_k8s_nodes), shared).load("demo")
    assert [c for c in cloud.commands() if c in ("listServiceOfferings", "listDiskOfferings", "listAffinityGroups")] == [
        "listServiceOfferings", "listDiskOfferings", "listAffinityGroups"]
    assert [n.offering_name for n in first.nodes] == [n.offering_name for n in second.nodes]


def test_a_catalog_handed_over_from_an_earlier_run_lists_nothing_and_keeps_only_what_the_view_reads() -> None:
    f = ClusterFactory(control=1, workers=2)
    listed = dict(f.raw_service_offerings()[0], hypervisor="KVM", tags="ssd")
    handed = Catalog.from_option(Catalog.listed([listed], f.raw_disk_offerings(), f.raw_affinity_groups()).to_dict())
    assert handed is not None and "tags" not in handed.service_offerings[0]
    cloud = cloud_for(f, [f.raw_cluster()])
    ClusterLoader(cloud, FakeKube(nodes=f.raw_k8s_nodes), CatalogCache(handed)).load("demo")
    assert cloud.commands() == ["listKubernetesClusters", "listVirtualMachines", "listVolumes"]


@pytest.mark.parametrize("given", [["so-medium"], {"service_offerings": []},
                                   {"service_offerings": "x", "disk_offerings": [], "affinity_groups": []},
                                   {"service_offerings": [{"name": "no id"}], "disk_offerings": [], "affinity_groups": []}])
def test_a_catalog_option_that_is_no_catalog_is_refused_naming_the_option(given: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        Catalog.from_option(given)
    assert caught.value.msg.startswith("catalog") and "leave" in caught.value.msg


def test_the_first_view_takes_the_entry_the_run_just_read_and_later_ones_read_it_again() -> None:
    f = ClusterFactory(control=1, workers=2)
    cloud = cloud_for(f, [f.raw_cluster()])
    loader = ClusterLoader(cloud, FakeKube(nodes=f.raw_k8s_nodes), fresh_entry=f.raw_cluster())
    loader.load("demo")
    assert "listKubernetesClusters" not in cloud.commands()
    loader.load("demo")
    assert cloud.commands().count("listKubernetesClusters") == 1
    # An entry of another cluster is never taken for this one.
    other = ClusterLoader(cloud, FakeKube(nodes=f.raw_k8s_nodes), fresh_entry=dict(f.raw_cluster(), id="x", name="other"))
    other.load("demo")
    assert cloud.commands().count("listKubernetesClusters") == 2


def test_a_catalog_handed_to_a_later_run_builds_the_same_offerings_and_groups() -> None:
    # Each entry with every field CloudStack lists that the builders read: a field the catalog drops
    # would leave the later runs' checks before the stop (owner, state, storage) without it.
    service = {"id": "so-1", "name": "big", "cpunumber": 4, "memory": 8192, "rootdisksize": 40, "diskofferingid": "do-1",
               "diskofferingstrictness": True, "iscustomized": False, "state": "Inactive", "storagetype": "local",
               "storagetags": "ssd,fast", "displaytext": "not read"}
    disk = {"id": "do-1", "name": "root", "disksize": 40, "iscustomized": True, "disksizestrictness": True}
    group = {"id": "ag-1", "name": "spread", "type": "host anti-affinity", "account": "alice", "domainid": "d-1",
             "domainpath": "ROOT/tenants", "projectid": "p-1", "project": "web"}
    handed = Catalog.from_option(Catalog.listed([service], [disk], [group]).to_dict())
    assert handed is not None
    assert cluster_model._offering(handed.service_offerings[0]) == cluster_model._offering(service)
    assert cluster_model._disk_offering(handed.disk_offerings[0]) == cluster_model._disk_offering(disk)
    assert cluster_model._listed_group(handed.affinity_groups[0]) == cluster_model._listed_group(group)
    assert "displaytext" not in handed.service_offerings[0]
