"""The spec: validation with clear errors, defaults, CKS node names, scale and repeatable IDs."""

from __future__ import annotations

import re

import pytest

from cks_sim.cloud import CloudWorld
from cks_sim.core import Sim
from cks_sim.spec import SpecError, etcd_vm_name, load_spec, node_name_prefix, normalize
from simkit import SMALL_SPEC, small_spec


def _world(raw: dict) -> CloudWorld:
    spec = normalize(raw)
    sim = Sim(spec, "/tmp")
    try:
        return CloudWorld(sim, spec)
    finally:
        sim.scheduler.stop()


@pytest.mark.parametrize("change, field", [
    (lambda r: r.update(hosts="many"), "hosts must be a list"),
    (lambda r: r["clusters"][0].update(offering="nope"), "clusters[0].offering"),
    (lambda r: r["clusters"][0].update(workers=-1), "clusters[0].workers"),
    (lambda r: r["affinity_groups"].append({"name": "x", "type": "spread"}), "affinity_groups[4].type"),
    (lambda r: r["clusters"][0]["affinity_groups"].update(worker=["missing"]), "affinity_groups.worker"),
    (lambda r: r["clusters"][0].update(dedication_group="workers-spread"), "ExplicitDedication"),
    (lambda r: r.update(timings={"stopp": 1}), "timings.stopp"),
    (lambda r: r["clusters"][0].update(colour="blue"), "unknown field(s) colour"),
    (lambda r: r["service_offerings"].append({"name": "cks-medium", "cpu": 1, "memory": 1}), "duplicate name"),
    (lambda r: r["clusters"][0].update(nodes=[{"type": "worker", "index": 9}]), "nodes[0].index"),
    (lambda r: r.update(clusters=[]), "at least one cluster"),
])
def test_bad_specs_name_the_field(change, field):
    raw = small_spec()
    change(raw)
    with pytest.raises(SpecError) as caught:
        normalize(raw)
    assert field in str(caught.value)


def test_small_example_loads_with_defaults():
    spec = load_spec(SMALL_SPEC)
    cluster = spec["clusters"][0]
    assert cluster["dedication_group"] == "dedicated-admin"
    assert spec["cloud"]["scanner_counts_etcd"] is True
    assert spec["invariants"]["max_unavailable"] == {"control": 1, "etcd": 1, "worker": 1}
    assert spec["zone"]["dynamic_scale"] is False


def test_vm_names_are_those_cks_gives():
    world = _world(small_spec())
    names = [vm.name for vm in world.vms.values()]
    controls = [n for n in names if re.fullmatch(r"demo-control-[0-9a-f]+", n)]
    workers = [n for n in names if re.fullmatch(r"demo-node-[0-9a-f]+", n)]
    assert (len(controls), len(workers)) == (3, 4)
    # <hex> is the creation time in ms: increasing in creation order, and matching `created`.
    stamps = [int(n.rsplit("-", 1)[1], 16) for n in controls + workers]
    assert stamps == sorted(stamps)
    first = next(iter(world.vms.values()))
    assert first.created.startswith("2025-05-20T08:00")


def test_name_prefix_rules():
    assert node_name_prefix("Demo", "id") == "demo"
    assert node_name_prefix("my_cluster!", "id") == "k8s-mycluster"
    assert node_name_prefix("___", "c0ffee") == "k8s-c0ffee"
    assert len(node_name_prefix("a" * 60, "id")) == 43
    assert etcd_vm_name("My_Cluster", 2, 255) == "MyCluster-etcd-2-ff"
    # name + "-etcd" is cut to 40 characters as a whole (reference §1.1), suffix included.
    assert etcd_vm_name("x" * 50, 1, 1) == "x" * 40 + "-1-1"


def test_scale_asks_for_many_workers():
    raw = small_spec(scale={"workers": 1000, "hosts": 40})
    world = _world(raw)
    cluster = next(iter(world.clusters.values()))
    assert cluster.workers == 1000 and len(world.hosts) == 40
    assert sum(1 for vm in world.vms.values() if vm.node_type == "worker") == 1000
    assert all(vm.host_id for vm in world.vms.values())


def test_not_enough_capacity_is_a_spec_error():
    raw = small_spec(scale={"workers": 1000})
    with pytest.raises(SpecError) as caught:
        _world(raw)
    assert "scale.hosts" in str(caught.value)


def test_ids_repeat_for_the_same_seed():
    first, second = _world(small_spec()), _world(small_spec())
    assert list(first.vms) == list(second.vms) and list(first.clusters) == list(second.clusters)
    other = _world(small_spec(seed=2))
    assert list(other.vms) != list(first.vms)


def test_node_overrides_and_per_type_groups():
    raw = small_spec()
    cluster = raw["clusters"][0]
    cluster["affinity_groups"] = {"control": ["control-spread"], "worker": ["workers-soft"], "etcd": []}
    cluster["nodes"] = [{"type": "worker", "index": 1, "offering": "cks-large", "state": "Stopped",
                         "root_disk_size": 30}]
    world = _world(raw)
    workers = [vm for vm in world.vms.values() if vm.node_type == "worker"]
    assert world.service_offerings[workers[1].service_offering_id].name == "cks-large"
    assert workers[1].state == "Stopped" and world.root_volume[workers[1].id].size == 30 * 2**30
    controls = [vm for vm in world.vms.values() if vm.node_type == "control"]
    assert [world.affinity_groups[g].name for g in controls[0].affinity_group_ids] == ["dedicated-admin", "control-spread"]
    assert len({vm.host_id for vm in controls}) == 3  # strict anti-affinity at placement


@pytest.mark.parametrize("name", ["small", "large", "external-etcd", "fleet"])
def test_example_specs_build(name):
    import os

    from simkit import SIM_DIR

    spec = load_spec(os.path.join(SIM_DIR, "examples", f"{name}.yml"))
    sim = Sim(spec, "/tmp")
    try:
        world = CloudWorld(sim, spec)
    finally:
        sim.scheduler.stop()
    for cluster, raw in zip(world.clusters.values(), spec["clusters"]):
        vms = world.cluster_vms(cluster)
        assert len(vms) == raw["control_nodes"] + raw["workers"] + raw["external_nodes"] + raw["etcd_nodes"]
        assert all(vm.state == "Running" and vm.host_id for vm in vms)
