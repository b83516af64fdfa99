"""Affinity groups of a VM in cks-sim's CloudStack world: the access checks before the job
(ParamProcessWorker.doAccessChecks) and updateVMAffinityGroup itself
(AffinityGroupServiceImpl.updateVMAffinityGroups), owners' rules from ``owners.Directory``. A
mixin over ``cloud_state.CloudState``: methods only."""

from __future__ import annotations

from typing import Callable, Optional

from .cloud_entities import VM, AffinityGroup, Job
from .cloud_errors import CS_PERMISSION_DENIED, NOT_STOPPED_HINT, CloudError, param_error
from .cloud_power import CloudPower
from .owners import OwnerError


class CloudAffinity(CloudPower):
    """updateVMAffinityGroup and who may use which group."""

    def group_ref(self, group: AffinityGroup) -> str:
        return group.ref(list(self.affinity_groups).index(group.id) + 1)

    def check_affinity_acl(self, vm: VM, group_ids: list[str]) -> None:
        """ParamProcessWorker.doAccessChecks for updateVMAffinityGroup, before any job: the VM's
        owner, then every group named by id (``@ACL`` on affinitygroupids, UseEntry)."""
        self.check_access(vm.owner_id, self.vm_ref(vm))
        for group_id in group_ids:
            group = self.affinity_groups[group_id]
            try:
                self.directory.check_group_access(self.caller, group.owner_id, group.domain_level_id, self.group_ref(group))
            except OwnerError as err:
                raise self.owner_error(err) from None

    def update_affinity(self, vm: VM, group_ids: Optional[list[str]], group_names: Optional[list[str]]) -> Job:
        job = self.new_job("updateVMAffinityGroup", "VirtualMachine", vm.id)
        caller = self.caller

        def body(job: Job, done: Callable[[], None]) -> None:
            # UpdateVMAffinityGroupCmd.execute, then AffinityGroupServiceImpl.updateVMAffinityGroups.
            if group_ids is not None and group_names is not None:
                raise param_error("affinitygroupids parameter is mutually exclusive with affinitygroupnames parameter")
            if group_ids is None and group_names is None:
                raise param_error("affinitygroupids parameter or affinitygroupnames parameter must be given")
            if group_names is not None:
                ids = []
                owner = self.directory.accounts[vm.owner_id]
                for name in group_names:
                    # ApiResponseHelper.getAffinityGroupId: by name among the VM owner's groups.
                    group = next((g for g in self.affinity_groups.values()
                                  if g.name == name and g.owner_id == vm.owner_id and g.domain_level_id is None), None)
                    if group is None:
                        raise param_error(f"Unable to find group by name {name} for account {owner.number}")
                    ids.append(group.id)
            else:
                ids = list(group_ids or [])
            if vm.state != "Stopped":
                raise param_error(f"Unable update affinity groups of the virtual machine {self.vm_ref(vm)} in state {vm.state};"
                                  f" {NOT_STOPPED_HINT} and not in an error state before updating.")
            for group_id in ids:
                group = self.affinity_groups[group_id]
                if caller.role == "admin":
                    # Root admin has access to both, but they must have the same owner; a
                    # PermissionDeniedException in a job ends it with 530 (ApiAsyncJobDispatcher).
                    if group.owner_id != vm.owner_id:
                        raise CloudError(530, f"Affinity Group {self.group_ref(group)} does not belong to the VM's account",
                                         CS_PERMISSION_DENIED)
                else:
                    try:
                        self.directory.check_group_access(caller, group.owner_id, group.domain_level_id,
                                                          self.group_ref(group))
                    except OwnerError as err:
                        raise CloudError(530, err.text, err.cserrorcode) from None
            fault = self._job_fault("updateVMAffinityGroup", vm)

            def finish() -> None:
                if fault is not None:
                    self._fail_from_fault(job, fault)
                else:
                    previous = [self.affinity_groups[g].name for g in vm.affinity_group_ids]
                    vm.affinity_group_ids = list(dict.fromkeys(ids))
                    self._timeline(vm, "affinity_updated", groups=[self.affinity_groups[g].name for g in vm.affinity_group_ids],
                                   previous=previous)
                    self._complete(job, {"virtualmachine": self.vm_view(vm)})
                done()

            self.sim.scheduler.schedule(self.sim.delay("affinity"), finish)

        return self._run_vm_job(vm, job, body)
