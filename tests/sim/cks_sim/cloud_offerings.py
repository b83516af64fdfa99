"""Offering changes of cks-sim's CloudStack world: changeServiceForVirtualMachine (synchronous,
Stopped VMs) and scaleVirtualMachine (a job), with the checks UserVmManagerImpl and
VirtualMachineManagerImpl make (same offering, inactive, storage scope and tags, disk offering
strictness, custom values, resource limits); a Running VM's scale follows cloud_live_scale.py. A mixin over ``cloud_state.CloudState``: methods only."""

from __future__ import annotations

from typing import Callable

from . import cloud_live_scale
from .cloud_entities import VM, Job, ServiceOffering
from .cloud_errors import NOT_STOPPED_HINT, CloudError, param_error
from .cloud_power import CloudPower


class CloudOfferings(CloudPower):
    """What a VM's service offering may change to, and the change itself."""

    def _check_offering_change(self, vm: VM, new: ServiceOffering, details: dict[str, str]) -> None:
        current = self.service_offerings[vm.service_offering_id]
        if not new.iscustomized and current.id == new.id:
            raise param_error(f"Not upgrading vm {self.vm_ref(vm)} since it already has the requested service offering ({new.name})")
        if new.state != "Active":
            raise param_error(f"Unable to upgrade virtual machine {self.vm_ref(vm)}: service offering {new.name} is not active")
        self._check_storage_fit(vm, current, new)
        if current.diskofferingstrictness != new.diskofferingstrictness:
            raise param_error("Unable to Scale VM, since disk offering strictness flag is not same for new service offering and old service offering")
        if current.diskofferingstrictness and current.disk_offering_id != new.disk_offering_id:
            raise param_error("Unable to Scale VM, since disk offering id associated with the old service offering is not same for new service offering")
        if new.iscustomized:
            missing = [k for k in ("cpuNumber", "memory") if k not in details]
            if missing:
                raise param_error("Need to specify custom parameter values cpu, cpu speed and memory when using custom offering")

    def _check_offering_limits(self, vm: VM, new: ServiceOffering, details: dict[str, str]) -> None:
        """ResourceLimitManagerImpl.checkVmResourceLimitsForServiceOfferingChange: only growth counts."""
        cpu, memory = self.vm_cpu_memory(vm)
        new_cpu = int(details["cpuNumber"]) if new.iscustomized and "cpuNumber" in details else new.cpu
        new_memory = int(details["memory"]) if new.iscustomized and "memory" in details else new.memory
        self.check_limit(vm.owner_id, "cpu", new_cpu - cpu)
        self.check_limit(vm.owner_id, "memory", new_memory - memory)

    def _check_storage_fit(self, vm: VM, current: ServiceOffering, new: ServiceOffering) -> None:
        """VirtualMachineManagerImpl.checkIfCanUpgrade: the storage scope, then the tag subset."""
        new_disk = self.disk_offerings[new.disk_offering_id]
        root = self.root_volume.get(vm.id)
        on_local = root is not None and self.storage_pools[root.storage_id].scope == "local"
        # checkIfNewOfferingStorageScopeMatchesStoragePool
        if new_disk.storagetype == "local" and not on_local:
            raise param_error(f"Unable to upgrade virtual machine {self.vm_ref(vm)}, target offering use local storage but"
                              " the storage pool where the volume is allocated is a shared storage.")
        if new_disk.storagetype != "local" and on_local:
            raise param_error(f"Unable to upgrade virtual machine {self.vm_ref(vm)}, target offering use shared storage but"
                              " the storage pool where the volume is allocated is a local storage.")
        # match.storage.pool.tags.with.disk.offering (true): VolumeApiServiceImpl.
        # doesNewDiskOfferingHasTagsAsOldDiskOffering, the old offering's tags within the new one's.
        old_tags = self.disk_offerings[current.disk_offering_id].tag_list()
        new_tags = new_disk.tag_list()
        if old_tags and (not new_tags or not set(old_tags) <= set(new_tags)):
            raise param_error(
                "Unable to upgrade virtual machine; the current service offering  should have tags as subset of the new"
                f" service offering tags. Current service offering tags: [{', '.join(old_tags)}]; new service offering"
                f" tags: [{', '.join(new_tags)}]")

    def _apply_offering(self, vm: VM, new: ServiceOffering, details: dict[str, str]) -> None:
        old = self.service_offerings[vm.service_offering_id]
        vm.service_offering_id = new.id
        vm.custom_cpu = int(details["cpuNumber"]) if new.iscustomized else None
        vm.custom_memory = int(details["memory"]) if new.iscustomized else None
        # allow.diskoffering.change.during.scale.vm is false by default: the ROOT disk is untouched.
        self._timeline(vm, "offering_changed", offering=new.name, previous=old.name)

    def change_service(self, vm: VM, new: ServiceOffering, details: dict[str, str]) -> VM:
        """changeServiceForVirtualMachine: synchronous, Stopped VMs only."""
        if vm.state != "Stopped":
            raise param_error(f"Unable to upgrade virtual machine {self.vm_ref(vm)}  in state {vm.state}; {NOT_STOPPED_HINT}")
        self._check_offering_change(vm, new, details)
        # UpgradeVMCmd turns the ResourceAllocationException into RESOURCE_ALLOCATION_ERROR (535).
        self._check_offering_limits(vm, new, details)
        self._apply_offering(vm, new, details)
        return vm

    def scale_vm(self, vm: VM, new: ServiceOffering, details: dict[str, str]) -> Job:
        job = self.new_job("scaleVirtualMachine", "VirtualMachine", vm.id)

        def body(job: Job, done: Callable[[], None]) -> None:
            fault = self._job_fault("scaleVirtualMachine", vm)
            if vm.state == "Stopped":
                self._check_offering_change(vm, new, details)
                self._check_offering_limits(vm, new, details)
                apply = True
            elif vm.state == "Running":
                size = cloud_live_scale.check_before_job(self, vm, new, details)

                def live() -> None:
                    try:
                        if fault is None:
                            cloud_live_scale.scale_running(self, vm, new, details, size)
                    except CloudError as err:
                        self._fail(job, err.code, err.text)
                        return done()
                    if fault is not None:
                        self._fail_from_fault(job, fault)
                    else:
                        self._complete(job, {"virtualmachine": self.vm_view(vm)})
                    done()

                self.sim.scheduler.schedule(self.sim.delay("live_scale"), live)
                return
            else:
                raise param_error(f"Unable to scale {self.vm_ref(vm)} in state {vm.state}")

            def finish() -> None:
                if fault is not None:
                    self._fail_from_fault(job, fault)
                elif apply:
                    self._apply_offering(vm, new, details)
                    self._complete(job, {"virtualmachine": self.vm_view(vm)})
                done()

            self.sim.scheduler.schedule(self.sim.delay("affinity"), finish)

        return self._run_vm_job(vm, job, body)
