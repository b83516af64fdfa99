# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""build_view: the join of the raw CloudStack and Kubernetes answers."""

from __future__ import annotations

import copy

import pytest
from factories import GIB, ClusterFactory, ag, do, so

from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import AffinityGroup, ROLLOUT_ANNOTATION, build_view, node_type_of
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput


@pytest.mark.parametrize("vm, expected", [
    ({"name": "demo-control-18f2a3b4c01"}, "control"),
    ({"name": "Demo-Control-18F2A3B4C01"}, "control"),
    ({"name": "demo-node-18f2a3b4c01"}, "worker"),
    ({"name": "demo-etcd-1-18f2a3b4c01", "isetcdnode": True}, "etcd"),
    ({"name": "demo-control-18f2a3b4c01", "isetcdnode": "true"}, "etcd"),
    ({"name": "demo-etcd-1-18f2a3b4c01", "isetcdnode": False}, "worker"),
    ({"name": "k8s-control-plane-node-18f2a3b4c01"}, "worker"),  # "-control-" only as the role
    ({"name": "control-control-18f2a3b4c01"}, "control"),
    ({"name": "old-master"}, "control"),  # clusters from before the control naming
    ({"name": "old-master-2"}, "control"),
    ({"name": "x-control-18f2a3b4c01", "isexternalnode": True}, "worker"),
    ({"name": "my-own-vm"}, "worker"),
])
def test_node_type_rule(vm: dict, expected: str) -> None:
    assert node_type_of(vm) == expected


def test_nodes_join_vm_volume_offering_groups_and_kubernetes() -> None:
    f = ClusterFactory(control=1, workers=2, groups={"worker": ["spread"]})
    f.set(f.w(2), offering="large", root_gb=35)
    view = f.view()

    assert [n.node_type for n in view.nodes] == ["control", "worker", "worker"]
    w2 = view.node(f.w(2))
    assert w2.vm_id == f"vm-{f.w(2)}"
    assert (w2.offering_id, w2.offering_name, w2.cpu, w2.memory_mb) == (so("large"), "cks-large", 4, 8192)
    assert (w2.root_volume_id, w2.root_disk_gb, w2.root_disk_offering_id) == (f"vol-{f.w(2)}", 35, do("custom-root"))
    assert w2.affinity_groups == (AffinityGroup(ag("dedicated"), "dedicated", "ExplicitDedication"),
                                  AffinityGroup(ag("spread"), "spread", "host anti-affinity"))
    assert w2.dedication_group_ids == (ag("dedicated"),)
    assert w2.chosen_group_ids == frozenset({ag("spread")})
    assert w2.host_id == "host-3" and w2.ip_address == "10.1.1.12"
    assert (w2.k8s_present, w2.ready, w2.boot_id, w2.unschedulable, w2.rollout_boot_id) == (
        True, True, f"boot-{f.w(2)}-1", False, None)
    assert view.offering_id == so("medium")
    assert view.offerings[so("strict")].disk_offering_strict
    assert view.disk_offerings[do("fixed-50")].strict
    assert view.affinity_groups[ag("dedicated")].is_dedication
    assert not view.affinity_groups[ag("spread")].is_dedication
    assert (view.account, view.domain_id, view.zone_id) == ("admin", "domain-root", "zone-1")
    assert view.recorded_cores == 2 + 2 + 4 and view.recorded_memory_mb == 4096 + 4096 + 8192


def test_root_disk_gb_is_the_size_in_bytes_shifted_down() -> None:
    f = ClusterFactory(control=1, workers=1)
    raw = list(f.raw())
    for vol in raw[2]:
        if vol.get("virtualmachineid") == f.vm_id(f.w(1)) and vol["type"] == "ROOT":
            vol["size"] = 21 * GIB + 12345  # a few bytes over: still 21 GB
    assert build_view(*raw).node(f.w(1)).root_disk_gb == 21


def test_volumes_of_other_vms_and_data_disks_are_ignored() -> None:
    f = ClusterFactory(control=1, workers=1, root_gb=20)
    view = f.view()
    assert all(n.root_disk_gb == 20 for n in view.nodes)
    assert all(n.root_volume_id == f"vol-{n.vm_name}" for n in view.nodes)


def test_a_node_without_a_visible_root_volume_has_no_size() -> None:
    f = ClusterFactory(control=1, workers=1)
    f.set(f.w(1), root_gb=None)
    w1 = f.view().node(f.w(1))
    assert w1.root_disk_gb is None and w1.root_volume_id is None


def test_destroyed_root_volume_is_not_the_root_disk() -> None:
    f = ClusterFactory(control=1, workers=1)
    raw = list(f.raw())
    raw[2].insert(0, {"id": "vol-old", "type": "ROOT", "size": 5 * GIB, "state": "Destroy",
                      "virtualmachineid": f.vm_id(f.w(1)), "diskofferingid": do("custom-root")})
    assert build_view(*raw).node(f.w(1)).root_volume_id == f"vol-{f.w(1)}"


@pytest.mark.parametrize("offering, root_offering, strict, offering_root", [
    ("medium", "custom-root", False, 0),
    ("medium", "fixed-50", True, 0),  # the disk offering fixes the size
    ("strict", "custom-root", True, 0),  # the service offering's disk offering strictness
    ("fixed-root", "compute-only", False, 40),
    ("medium", "compute-only", False, 0),
])
def test_root_disk_strictness_and_offering_root_size(offering: str, root_offering: str, strict: bool,
                                                     offering_root: int) -> None:
    f = ClusterFactory(control=1, workers=1)
    f.set(f.w(1), offering=offering, root_offering=root_offering)
    w1 = f.view().node(f.w(1))
    assert (w1.root_disk_strict, w1.offering_root_gb) == (strict, offering_root)


def test_per_type_offerings_reported_by_cloudstack() -> None:
    f = ClusterFactory(node_offerings={"control": "large", "worker": "xlarge"})
    assert dict(f.view().node_offerings) == {"control": so("large"), "worker": so("xlarge")}
    assert dict(ClusterFactory().view().node_offerings) == {}


def test_etcd_nodes_are_not_kubernetes_nodes_and_make_etcd_external() -> None:
    f = ClusterFactory(control=1, workers=1, etcd=3)
    view = f.view()
    assert view.external_etcd
    etcd = view.nodes_of("etcd")
    assert [n.name for n in etcd] == [f.e(1), f.e(2), f.e(3)]
    assert all(not n.k8s_present and not n.ready and n.boot_id is None for n in etcd)
    assert not ClusterFactory().view().external_etcd


def test_kubernetes_node_name_is_the_vm_name_lowercased() -> None:
    f = ClusterFactory(control=1, workers=1)
    spec = f.spec(f.w(1))
    spec.name = "Demo-Node-18F2A3B4C99"
    view = f.view()
    node = view.nodes_of("worker")[0]
    assert node.vm_name == "Demo-Node-18F2A3B4C99" and node.name == "demo-node-18f2a3b4c99"
    assert node.k8s_present and node.ready
    assert view.node("DEMO-NODE-18F2A3B4C99") is node


@pytest.mark.parametrize("ready, taints, expected", [
    (True, [], True),
    (False, [], False),
    (True, ["node.kubernetes.io/unreachable"], False),
    (True, ["node.kubernetes.io/not-ready"], False),
    (True, ["node.kubernetes.io/disk-pressure"], True),
])
def test_ready_needs_the_condition_and_no_unhealthy_taint(ready: bool, taints: list, expected: bool) -> None:
    f = ClusterFactory(control=1, workers=1)
    f.set(f.w(1), ready=ready, taints=taints)
    assert f.view().node(f.w(1)).ready is expected


def test_annotation_and_cordon_are_read() -> None:
    f = ClusterFactory(control=1, workers=2)
    f.cordon_for_rollout(f.w(1))
    f.set(f.w(2), unschedulable=True)
    view = f.view()
    w1, w2 = view.node(f.w(1)), view.node(f.w(2))
    assert w1.rollout_boot_id == w1.boot_id and w1.annotated and w1.unschedulable
    assert w1.annotations[ROLLOUT_ANNOTATION] == w1.boot_id
    assert not w1.back and not w1.cordoned_by_others
    assert w2.cordoned_by_others and not w2.annotated
    f.reboot(f.w(1))
    assert f.view().node(f.w(1)).back


def test_missing_kubernetes_node() -> None:
    f = ClusterFactory(control=1, workers=1)
    f.set(f.w(1), k8s=False)
    w1 = f.view().node(f.w(1))
    assert not w1.k8s_present and not w1.ready and w1.annotations == {}


def test_kubernetes_nodes_without_a_vm_are_kept_apart() -> None:
    f = ClusterFactory(control=1, workers=1)
    f.extra_k8s_nodes.append({"metadata": {"name": "stray"}, "spec": {},
                              "status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    view = f.view()
    assert dict(view.unmatched_k8s_nodes) == {"stray": False}
    assert view.find_node("stray") is None


def test_group_type_comes_from_list_affinity_groups_or_the_vm_entry() -> None:
    f = ClusterFactory(control=1, workers=1)
    f.listed_groups.pop("dedicated")  # a domain-level group the account does not list
    raw = list(f.raw())
    for vm in raw[1]:
        for g in vm["affinitygroup"]:
            if g["id"] == ag("dedicated"):
                g["type"] = "ExplicitDedication"
    view = build_view(*raw)
    assert view.node(f.w(1)).dedication_group_ids == (ag("dedicated"),)
    assert view.group(ag("dedicated")).is_dedication
    assert view.group("nope") is None


def test_vm_missing_from_list_virtual_machines_keeps_the_embedded_data() -> None:
    f = ClusterFactory(control=1, workers=2)
    raw = list(f.raw())
    raw[1] = [vm for vm in raw[1] if vm["name"] != f.w(2)]
    w2 = build_view(*raw).node(f.w(2))
    assert w2.vm_state == "Running" and w2.offering_id is None and w2.cpu == 0


def test_embedded_flags_win_and_inputs_are_not_changed() -> None:
    f = ClusterFactory(control=1, workers=1, etcd=1)
    raw = f.raw()
    before = copy.deepcopy(raw)
    for vm in raw[1]:
        vm.pop("isetcdnode", None)  # listVirtualMachines does not carry the CKS flags
    view = build_view(*raw)
    assert view.node(f.e(1)).node_type == "etcd"
    assert raw[0] == before[0] and raw[3:] == before[3:]


def test_external_nodes_are_workers() -> None:
    f = ClusterFactory(control=1, workers=1)
    f.add_external_worker("byo-control-box")
    node = f.view().node("byo-control-box")
    assert node.node_type == "worker" and node.external


def test_unknown_node_is_an_invalid_input_naming_the_nodes() -> None:
    f = ClusterFactory(control=1, workers=1)
    with pytest.raises(InvalidInput) as err:
        f.view().node("nope")
    assert f.c(1) in err.value.msg and f.w(1) in err.value.msg


def test_snake_case_node_info_is_read_too() -> None:
    f = ClusterFactory(control=1, workers=1)
    raw = list(f.raw())
    for node in raw[6]:
        node["status"]["node_info"] = {"boot_id": "snake"}
        del node["status"]["nodeInfo"]
    assert build_view(*raw).node(f.w(1)).boot_id == "snake"


def test_every_node_is_found_by_name_in_any_case_from_one_index() -> None:
    f = ClusterFactory(control=3, workers=40)
    view = f.view()
    for node in view.nodes:
        assert view.find_node(node.name.upper()) is node
    assert view.find_node("nope") is None
    # One index per view, built on the first look (planning looks every node up).
    assert view._nodes_by_name is view._nodes_by_name  # pylint: disable=protected-access
    assert len(view._nodes_by_name) == len(view.nodes) == 43  # pylint: disable=protected-access
