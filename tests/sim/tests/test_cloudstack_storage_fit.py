"""An offering must fit the storage the VM's ROOT volume is on.

``VirtualMachineManagerImpl.checkIfCanUpgrade`` (changeServiceForVirtualMachine of a stopped VM,
through ``UserVmManagerImpl.upgradeStoppedVirtualMachine``):
``checkIfNewOfferingStorageScopeMatchesStoragePool`` refuses a local-storage offering for a
volume on shared storage and the other way round; with match.storage.pool.tags.with.disk.offering
(true by default) ``VolumeApiServiceImpl.doesNewDiskOfferingHasTagsAsOldDiskOffering`` needs the
current offering's storage tags within the new offering's. Both are InvalidParameterValueException
(431), and the VM keeps its offering.
"""

from __future__ import annotations

import pytest
from cs import CloudStackApiException

from simkit import small_spec


def _spec(**cluster: object) -> dict:
    raw = small_spec()
    raw["storage_pools"] = [{"name": "ceph", "scope": "shared", "tags": "ssd,fast"},
                            {"name": "local-1", "scope": "local"}]
    raw["service_offerings"] += [
        {"name": "local-large", "cpu": 4, "memory": 8192, "storagetype": "local"},
        {"name": "ssd-medium", "cpu": 2, "memory": 4096, "tags": "ssd"},
        {"name": "ssd-fast-large", "cpu": 4, "memory": 8192, "tags": ["ssd", "fast"]},
        {"name": "hdd-large", "cpu": 4, "memory": 8192, "tags": "hdd"},
    ]
    raw["clusters"][0].update(cluster)
    return raw


def _stopped_worker(handle):
    vm = handle.node_vms("worker")[0]
    handle.cs().stopVirtualMachine(id=vm["id"], fetch_result=True)
    return vm


def _refused(handle, vm, offering):
    with pytest.raises(CloudStackApiException) as caught:
        handle.cs().changeServiceForVirtualMachine(id=vm["id"], serviceofferingid=handle.offering(offering)["id"])
    assert caught.value.response.status_code == 431
    assert handle.vm(vm["name"])["serviceofferingname"] != offering
    return caught.value.error["errortext"]


def test_a_local_storage_offering_is_refused_for_a_volume_on_shared_storage(sim_factory):
    handle = sim_factory(spec=_spec(storage_pool="ceph"))
    vm = _stopped_worker(handle)
    root = handle.cs().listVolumes(virtualmachineid=vm["id"], type="ROOT")["volume"][0]
    assert (root["storage"], root["storagetype"]) == ("ceph", "shared")
    assert handle.offering("local-large")["storagetype"] == "local"
    text = _refused(handle, vm, "local-large")
    assert text.startswith("Unable to upgrade virtual machine VM instance {")
    assert text.endswith(", target offering use local storage but the storage pool where the volume is allocated"
                         " is a shared storage.")


def test_a_shared_storage_offering_is_refused_for_a_volume_on_local_storage(sim_factory):
    handle = sim_factory(spec=_spec(storage_pool="local-1", offering="local-large"))
    vm = _stopped_worker(handle)
    text = _refused(handle, vm, "cks-large")
    assert text.endswith(", target offering use shared storage but the storage pool where the volume is allocated"
                         " is a local storage.")


def test_the_current_offerings_tags_must_be_within_the_new_ones(sim_factory):
    handle = sim_factory(spec=_spec(storage_pool="ceph", offering="ssd-medium"))
    vm = _stopped_worker(handle)
    assert handle.offering("ssd-medium")["storagetags"] == "ssd"
    assert _refused(handle, vm, "hdd-large") == (
        "Unable to upgrade virtual machine; the current service offering  should have tags as subset of the new"
        " service offering tags. Current service offering tags: [ssd]; new service offering tags: [hdd]")
    assert "new service offering tags: []" in _refused(handle, vm, "cks-large")
    changed = handle.cs().changeServiceForVirtualMachine(id=vm["id"], serviceofferingid=handle.offering("ssd-fast-large")["id"])
    assert changed["virtualmachine"]["serviceofferingname"] == "ssd-fast-large"


def test_untagged_offerings_on_shared_storage_change_freely(sim_factory):
    handle = sim_factory(spec=_spec(storage_pool="ceph"))
    vm = _stopped_worker(handle)
    changed = handle.cs().changeServiceForVirtualMachine(id=vm["id"], serviceofferingid=handle.offering("hdd-large")["id"])
    assert changed["virtualmachine"]["serviceofferingname"] == "hdd-large"
