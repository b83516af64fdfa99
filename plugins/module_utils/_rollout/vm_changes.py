# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The CloudStack changes of one node's VM, each safe to carry out after a lost answer.

Each change says what it would have changed, so that ``CloudStackClient.run_change`` can tell,
when the answer to the command is lost, whether it went through (skip it), is still running
(poll its job) or never ran (send it again):

============================== ================================ ===========================
change                         the job runs on                  done when
============================== ================================ ===========================
stopVirtualMachine             the VM                           the VM is Stopped
changeServiceForVirtualMachine (synchronous: no job)            the VM has the new offering
resizeVolume                   the ROOT volume                  the volume is that large
updateVMAffinityGroup          the VM                           the VM has exactly the groups
startVirtualMachine            the VM                           the VM is Running
============================== ================================ ===========================

A start answered 431 "already running" (the VM was started meanwhile), or one whose job failed
while the VM came up all the same, counts as started.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CloudStackError
from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import CloudStackApi
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline

GIB = 1024 ** 3
#: ApiErrorCode.PARAM_ERROR, as a start of a Running VM is answered.
ALREADY_RUNNING_CODE = 431


class VmChanges:
    """The changes of one VM (``vm_id``, named ``target`` in messages)."""

    def __init__(self, cloud: CloudStackApi, vm_id: str, target: Optional[str] = None,
                 project_id: Optional[str] = None) -> None:
        self.cloud = cloud
        self.vm_id = vm_id
        self.target = target
        # A project's VMs and volumes are listed only with their project, even by id.
        self.scope: dict[str, Any] = {"projectid": project_id} if project_id else {}

    # -- reads: what a change would have changed ---------------------------------------------------

    def read_vm(self) -> dict[str, Any]:
        found = self.cloud.list("listVirtualMachines", id=self.vm_id, listall=True, **self.scope)
        if not found:
            raise CloudStackError("listVirtualMachines", "the VM is gone", target=self.target)
        return found[0]

    def read_root(self) -> Optional[dict[str, Any]]:
        volumes = self.cloud.list("listVolumes", virtualmachineid=self.vm_id, type="ROOT", listall=True, **self.scope)
        return volumes[0] if volumes else None

    def job_answer(self, command: str, instance_id: Optional[str] = None) -> Optional[dict[str, Any]]:
        """The object the last ``command`` job on ``instance_id`` (the VM by default) ended with, if
        this client sent it and saw it end; None after a lost answer or when it did not run."""
        found = self.cloud.job_results.get((command, instance_id or self.vm_id))
        return found if isinstance(found, dict) and found.get("id") else None

    def _state_is(self, state: str) -> bool:
        return self.read_vm().get("state") == state

    def _has_offering(self, offering_id: str) -> bool:
        return str(self.read_vm().get("serviceofferingid") or "").lower() == offering_id.lower()

    def _has_groups(self, group_ids: Sequence[str]) -> bool:
        groups = {str(g.get("id")).lower() for g in self.read_vm().get("affinitygroup") or []}
        return groups == {g.lower() for g in group_ids}

    def _volume_at_least(self, volume_id: str, size_gb: int) -> bool:
        found = self.cloud.list("listVolumes", id=volume_id, listall=True, **self.scope)
        return bool(found) and int(found[0].get("size") or 0) >= int(size_gb) * GIB

    # -- the changes ---------------------------------------------------------------------------------

    def stop(self, deadline: Deadline) -> str:
        return self.cloud.run_change("stopVirtualMachine", deadline, lambda: self._state_is("Stopped"),
                                     instance_id=self.vm_id, target=self.target, id=self.vm_id)

    def change_offering(self, offering_id: str, deadline: Deadline) -> str:
        return self.cloud.run_change("changeServiceForVirtualMachine", deadline,
                                     lambda: self._has_offering(offering_id), target=self.target,
                                     id=self.vm_id, serviceofferingid=offering_id)

    def resize_root_disk(self, volume_id: str, size_gb: int, deadline: Deadline) -> str:
        return self.cloud.run_change("resizeVolume", deadline, lambda: self._volume_at_least(volume_id, size_gb),
                                     instance_id=volume_id, target=self.target, id=volume_id, size=size_gb)

    def set_affinity_groups(self, group_ids: Sequence[str], deadline: Deadline) -> str:
        return self.cloud.run_change("updateVMAffinityGroup", deadline, lambda: self._has_groups(group_ids),
                                     instance_id=self.vm_id, target=self.target, id=self.vm_id,
                                     affinitygroupids=",".join(group_ids))

    def start(self, deadline: Deadline) -> str:
        try:
            return self.cloud.run_change("startVirtualMachine", deadline, lambda: self._state_is("Running"),
                                         instance_id=self.vm_id, target=self.target, id=self.vm_id)
        except CloudStackError as exc:
            # UserVmManagerImpl.startVirtualMachine refuses a Running VM with 431 ("... is already
            # running"): someone else, or an earlier run whose answer was lost, started it.
            if not self._state_is("Running"):
                raise
            # A job failed by a management server restart (530, no result) whose start the
            # hypervisor finished all the same is a start too.
            return "already running" if exc.errorcode == ALREADY_RUNNING_CODE else "the VM is Running after all"


def settled(detail: str, how: str) -> str:
    """A step's detail, with how a lost answer was settled when one was."""
    return detail if how == "sent" else f"{detail} ({how})"
