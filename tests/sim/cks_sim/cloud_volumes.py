"""Volumes of cks-sim's CloudStack world: resizeVolume (a job serialised with its VM's work) and
VolumeApiServiceImpl.resizeVolume's refusals in its order. A mixin over
``cloud_state.CloudState``: methods only."""

from __future__ import annotations

from typing import Callable, Optional

from .cloud_entities import GB, VM, DiskOffering, Job, Volume
from .cloud_errors import CS_INVALID_PARAMETER, NOT_STOPPED_HINT, CloudError, param_error
from .cloud_power import CloudPower


class CloudVolumes(CloudPower):
    """A volume's size and disk offering changes."""

    def resize_volume(self, volume: Volume, size_gb: Optional[int], shrinkok: bool,
                      new_offering: Optional[DiskOffering]) -> Job:
        vm = self.vms[volume.vm_id]
        job = self.new_job("resizeVolume", "Volume", volume.id)

        def body(job: Job, done: Callable[[], None]) -> None:
            try:
                new_size, offering_id = self._check_resize(vm, volume, size_gb, shrinkok, new_offering)
            except CloudError as err:
                if err.code != 431:
                    raise
                # ResizeVolumeCmd.execute turns every InvalidParameterValueException of
                # VolumeApiServiceImpl.resizeVolume into UNSUPPORTED_ACTION_ERROR.
                raise CloudError(432, err.text, CS_INVALID_PARAMETER) from None
            fault = self._job_fault("resizeVolume", vm)
            volume.state = "Resizing"

            def finish() -> None:
                volume.state = "Ready"
                if fault is not None:
                    self._fail_from_fault(job, fault)
                else:
                    old = volume.size
                    volume.size = new_size
                    volume.disk_offering_id = offering_id
                    if volume.type == "ROOT" and vm.cluster_id:
                        vm.details["rootdisksize"] = str(new_size // GB)
                    self._timeline(vm, "volume_resized", size_gb=new_size // GB, previous_gb=old // GB)
                    self._complete(job, {"volume": self.volume_view(volume)})
                done()

            self.sim.scheduler.schedule(self.sim.delay("resize"), finish)

        # Volume work is serialised with the owning VM's work, as the VM work queue does.
        return self._run_vm_job(vm, job, body)

    def _check_resize(self, vm: VM, volume: Volume, size_gb: Optional[int], shrinkok: bool,
                      new_offering: Optional[DiskOffering]) -> tuple[int, str]:
        """VolumeApiServiceImpl.resizeVolume's refusals, in its order. Returns (bytes, offering id)."""
        if size_gb is not None and size_gb < 0:
            raise param_error(f"Invalid size {size_gb}")
        if volume.state not in ("Ready", "Allocated"):
            raise param_error(f"Volume should be in ready or allocated state before attempting a resize. Volume {volume.id} is in state {volume.state}.")
        current = self.disk_offerings[volume.disk_offering_id]
        service = self.service_offerings[vm.service_offering_id]
        if new_offering is None or new_offering.id == current.id:
            if size_gb is None:
                raise param_error("No new size or disk offering given: nothing to resize")
            if current.disksizestrictness:
                raise param_error(f"Resize of volume {volume.id} is not allowed, since disk size is strictly fixed as per the disk offering")
            if volume.type == "ROOT" and current.compute_only and current.size > 0:
                raise param_error(
                    "Failed to resize Root volume. The service offering of this Volume has been configured with a root"
                    " disk size; on such case a Root Volume can only be resized when changing to another Service Offering"
                    " with a Root disk size. For more details please check out the Official Resizing Volumes documentation.")
            if current.iscustomized and not 1 <= size_gb <= 1024:
                raise param_error(f"Volume size must be between 1 GB and 1024 GB (custom.diskoffering.size.min/max), got {size_gb} GB")
            new_size = size_gb * GB
            offering_id = current.id
        else:
            if current.disksizestrictness != new_offering.disksizestrictness:
                raise param_error("Volume's disk offering and the new disk offering differ in disk size strictness")
            if current.disksizestrictness and current.size != new_offering.size:
                raise param_error(f"Resize of volume {volume.id} is not allowed, since disk size is strictly fixed as per the disk offering")
            if volume.type == "ROOT" and service.diskofferingstrictness:
                raise param_error(f"Cannot resize ROOT volume [{volume.id}] with new disk offering since existing disk offering"
                                  " is strictly assigned to the ROOT volume.")
            if new_offering.compute_only:
                raise self.invalid_uuid("diskofferingid", new_offering.id)
            if new_offering.iscustomized:
                if size_gb is None:
                    raise param_error("Custom disk offering: a size is needed")
                new_size = size_gb * GB
            else:
                if size_gb is not None:
                    raise param_error("Cannot specify a size with a disk offering that is not customized")
                new_size = new_offering.size * GB
            if volume.type == "ROOT" and new_size != volume.size and vm.state != "Stopped":
                raise param_error(f"Cannot resize ROOT volume {volume.id} with a new disk offering while its VM is not Stopped; {NOT_STOPPED_HINT}")
            offering_id = new_offering.id
        if new_size < volume.size:
            if not shrinkok:
                raise param_error(
                    f"Going from existing size of {volume.size} to size of {new_size} would shrink the volume."
                    "Need to sign off by supplying the shrinkok parameter with value of true.")
            # KVM ROOT volumes are QCOW2 files; CloudStack refuses to shrink those once created.
            raise param_error(f"Unable to shrink volumes of type QCOW2 (volume {volume.id})")
        if vm.state not in ("Stopped", "Running"):
            raise param_error(f"Cannot resize volume {volume.id}: its VM is in state {vm.state}")
        # checkResourceLimit(owner, primary_storage, newSize - currentSize); ResizeVolumeCmd
        # answers the ResourceAllocationException with RESOURCE_ALLOCATION_ERROR (535).
        self.check_limit(vm.owner_id, "primarystorage", new_size - volume.size)
        return new_size, offering_id
