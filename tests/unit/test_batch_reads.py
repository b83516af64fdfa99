# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""What a batch reads of CloudStack (each read is load on the management server): its nodes' ROOT volumes only when a change of one of
them needs the volume, and then only theirs; the node list read while CloudStack answers."""

from __future__ import annotations

import threading
from typing import Any, Optional

import pytest
from factories import ClusterFactory, cloud_for, so
from fakes import FakeCloudStack, FakeKube

from ansible_collections.cloudstack.cks.plugins.module_utils._common.background import Background, side_by_side
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CloudStackError, KubernetesError
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node import change_plan, needs_root_volume
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings
from ansible_collections.cloudstack.cks.plugins.module_utils._model.loader import ClusterLoader

GROUPS_ONLY = TypeSettings(affinity_group_ids=("ag-spread",))


def batch_loader(f: ClusterFactory, settings: Optional[Settings]) -> tuple[ClusterLoader, FakeCloudStack]:
    cloud = cloud_for(f, [f.raw_cluster()])
    rule = None if settings is None else (lambda node: needs_root_volume(node, settings[node.node_type]))
    return ClusterLoader(cloud, FakeKube(nodes=f.raw_k8s_nodes), root_volume_needed=rule), cloud


@pytest.mark.parametrize(("settings", "needed"), [
    (TypeSettings(root_disk_gb=30), True),
    # A disk already as large: still read, the size is what says so.
    (TypeSettings(root_disk_gb=20), True),
    # A new offering: the storage fit is judged on the volume's pool before the drain.
    (TypeSettings(offering_id=so("large")), True),
    (TypeSettings(offering_id=so("medium")), False),
    (GROUPS_ONLY, False),
    (TypeSettings(), False),
])
def test_which_changes_need_the_root_volume(settings: TypeSettings, needed: bool) -> None:
    f = ClusterFactory(control=1, workers=1)
    node = f.view().node(f.w(1))
    assert node.offering_id == so("medium") and node.root_disk_gb == 20
    assert needs_root_volume(node, settings) is needed


def test_a_batch_changing_only_groups_lists_no_volume() -> None:
    f = ClusterFactory(control=1, workers=3)
    loader, cloud = batch_loader(f, Settings(worker=GROUPS_ONLY))
    view = loader.load("demo", detail_for=[f.w(2)])
    assert "listVolumes" not in cloud.commands()
    node = view.node(f.w(2))
    # What the groups change needs is there; the disk is unknown, so nothing is planned for it.
    assert node.root_disk_gb is None and node.root_volume_id is None
    plan = change_plan(node, GROUPS_ONLY)
    assert plan.affinity_groups is not None and plan.root_disk is None and plan.offering is None


def test_one_node_batch_lists_only_its_vms_root_volume() -> None:
    f = ClusterFactory(control=1, workers=3)
    loader, cloud = batch_loader(f, Settings(worker=TypeSettings(offering_id=so("large"), root_disk_gb=30)))
    view = loader.load("demo", detail_for=[f.w(1)])
    [volumes] = [p for c, p in cloud.asked if c == "listVolumes"]
    assert volumes == {"type": "ROOT", "virtualmachineid": f.vm_id(f.w(1)), "listall": True,
                       "account": "admin", "domainid": "domain-root"}
    node = view.node(f.w(1))
    assert node.root_volume_id == f"vol-{f.w(1)}" and node.root_disk_gb == 20


def test_a_batch_of_several_lists_the_owners_root_volumes_once() -> None:
    f = ClusterFactory(control=1, workers=3)
    loader, cloud = batch_loader(f, Settings(worker=TypeSettings(root_disk_gb=30)))
    view = loader.load("demo", detail_for=[f.w(1), f.w(3)])
    assert [p for c, p in cloud.asked if c == "listVolumes"] == [
        {"type": "ROOT", "listall": True, "account": "admin", "domainid": "domain-root"}]
    assert view.node(f.w(1)).root_disk_gb == view.node(f.w(3)).root_disk_gb == 20


def test_a_batch_whose_nodes_are_on_their_offering_already_lists_no_volume() -> None:
    # A rerun after a crash finds the node's offering changed already (its start failed, say).
    f = ClusterFactory(control=1, workers=2)
    f.set(f.w(1), offering="large")
    loader, cloud = batch_loader(f, Settings(worker=TypeSettings(offering_id=so("large"))))
    view = loader.load("demo", detail_for=[f.w(1)])
    assert "listVolumes" not in cloud.commands()
    assert change_plan(view.node(f.w(1)), TypeSettings(offering_id=so("large"))).empty


def test_without_a_rule_a_batch_lists_its_volumes_as_before() -> None:
    f = ClusterFactory(control=1, workers=2)
    loader, cloud = batch_loader(f, None)
    loader.load("demo", detail_for=[f.w(1)])
    assert cloud.commands().count("listVolumes") == 1


def test_a_node_list_that_fails_fails_the_load() -> None:
    f = ClusterFactory(control=1, workers=1)
    cloud = cloud_for(f, [f.raw_cluster()])
    loader = ClusterLoader(cloud, FakeKube(nodes=KubernetesError("list nodes", "HTTP 503")))
    with pytest.raises(KubernetesError, match="503"):
        loader.load("demo", detail_for=[f.w(1)])


def test_background_hands_back_the_value_or_the_error_on_the_callers_thread() -> None:
    ran_on: list[str] = []

    def read() -> int:
        ran_on.append(threading.current_thread().name)
        return 7

    assert Background(read, name="reader").result() == 7 and ran_on == ["reader"]

    def broken() -> Any:
        raise KubernetesError("list nodes", "HTTP 500")

    with pytest.raises(KubernetesError, match="500"):
        Background(broken).result()


def test_vms_read_ahead_are_the_batchs_and_are_not_listed_again() -> None:
    f = ClusterFactory(control=1, workers=3)
    loader, cloud = batch_loader(f, Settings(worker=GROUPS_ONLY))
    entry = f.raw_cluster()
    loader.read_batch_vms(entry, [f.w(2).upper()])
    assert [p["ids"] for c, p in cloud.asked if c == "listVirtualMachines"] == [f.vm_id(f.w(2))]
    view = loader.load_cluster(entry, detail_for=[f.w(2)])
    assert cloud.commands().count("listVirtualMachines") == 1
    assert view.node(f.w(2)).offering_id == so("medium")
    # Read ahead once: a later load (another batch's nodes, or the same again) lists afresh.
    loader.load_cluster(entry, detail_for=[f.w(2)])
    assert cloud.commands().count("listVirtualMachines") == 2


def test_side_by_side_waits_for_both_and_reports_this_threads_error_first() -> None:
    from_there = threading.Event()

    def there() -> str:
        from_there.set()
        return "kube"

    assert side_by_side(lambda: "vms", there) == ("vms", "kube") and from_there.is_set()

    # here fails while there is still at work: side_by_side returns only once there ended too
    # (a Kubernetes client half made must not outlive the run that closes it).
    gate, finished = threading.Event(), threading.Event()

    def there_after_gate() -> None:
        gate.wait(30)
        finished.set()
        raise KubernetesError("connect", "refused")

    def failing_here() -> None:
        gate.set()
        raise CloudStackError("listVirtualMachines", "HTTP 530")

    with pytest.raises(CloudStackError):
        side_by_side(failing_here, there_after_gate)
    assert finished.is_set()
    with pytest.raises(KubernetesError):
        side_by_side(lambda: None, _refused_connect)


def _refused_connect() -> None:
    raise KubernetesError("connect", "refused")
