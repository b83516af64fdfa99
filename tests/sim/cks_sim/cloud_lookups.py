"""Lookups every CloudStack concern of cks-sim shares: a record by id (with the 431 CloudStack
gives for an unknown one), a VM's cpu and memory and its name in server messages, the caller's
access and resource limits (the rules are ``owners.Directory``'s), and the deployment planner's
entry points (the planner is ``placement``). A mixin over ``cloud_state.CloudState``: methods only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, cast

from . import placement
from .cloud_entities import VM, Cluster, DiskOffering, Host, ServiceOffering, Volume
from .cloud_errors import CloudError, param_error
from .cloud_state import CloudState
from .owners import OwnerError

if TYPE_CHECKING:  # pragma: no cover
    from .cloud import CloudWorld


class CloudLookups(CloudState):
    """Records by id, the caller's access and limits, and the planner's entry points."""

    @property
    def world(self) -> CloudWorld:
        """This world as the ``CloudWorld`` it always is: ``placement`` is written against that."""
        return cast("CloudWorld", self)

    # -- the caller, its access and limits (rules in owners.Directory) -----------------------

    @property
    def is_admin(self) -> bool:
        """The caller is a root admin: the full VM view, listHosts, admin-only parameters."""
        return self.caller.role == "admin"

    def owner_error(self, err: OwnerError) -> CloudError:
        return CloudError(err.code, err.text, err.cserrorcode)

    def check_access(self, owner_id: str, entity_ref: str) -> None:
        """@ACL(OperateEntry) on the command's id: the caller must be allowed the owner's resources."""
        try:
            self.directory.check_access(self.caller, owner_id, entity_ref)
        except OwnerError as err:
            raise self.owner_error(err) from None

    def list_scope(self, values: dict[str, Any]) -> Callable[[str], bool]:
        try:
            return self.directory.list_scope(self.caller, values)
        except OwnerError as err:
            raise self.owner_error(err) from None

    def usage(self, kind: str, owner_id: str, resource: str) -> int:
        """The resource count of an account or a domain (tree): cores, MiB, bytes of primary storage.

        resource.count.running.vms.only is false by default: stopped VMs count as well.
        """
        directory = self.directory
        if kind == "account":
            owners = {owner_id}
        else:
            owners = {a.id for a in directory.accounts.values() if directory.in_subtree(a.domain_id, owner_id)}
        if resource == "primarystorage":
            return sum(v.size for v in self.volumes.values() if self.vms[v.vm_id].owner_id in owners)
        total = 0
        for vm in self.vms.values():
            if vm.owner_id in owners:
                cpu, memory = self.vm_cpu_memory(vm)
                total += cpu if resource == "cpu" else memory
        return total

    def check_limit(self, owner_id: str, resource: str, amount: int) -> None:
        try:
            self.directory.check_limit(owner_id, resource, amount, self.usage)
        except OwnerError as err:
            raise self.owner_error(err) from None

    # -- records by id -----------------------------------------------------------------------

    @staticmethod
    def invalid_uuid(name: str, value: str) -> CloudError:
        return param_error(
            f"Invalid parameter {name} value={value} due to incorrect long value format, or entity does not exist"
            " or due to incorrect parameter annotation for the field in api cmd class.")

    def _existing(self, table: dict[str, Any], uuid: str, param: str) -> Any:
        """The object with that uuid, or the 431 CloudStack gives for an unknown one."""
        found = table.get(uuid)
        if found is None:
            raise self.invalid_uuid(param, uuid)
        return found

    def get_vm(self, vm_id: str, param: str = "id") -> VM:
        return self._existing(self.vms, vm_id, param)

    def find_vm(self, name_or_id: str) -> VM:
        vm = self.vms.get(name_or_id) or self.vm_by_name.get(name_or_id)
        if vm is None:
            lowered = name_or_id.lower()
            vm = next((v for v in self.vms.values() if v.name.lower() == lowered), None)
        if vm is None:
            raise KeyError(f"no VM named {name_or_id!r}")
        return vm

    def get_service_offering(self, offering_id: str, param: str = "serviceofferingid") -> ServiceOffering:
        return self._existing(self.service_offerings, offering_id, param)

    def get_disk_offering(self, offering_id: str, param: str = "diskofferingid") -> DiskOffering:
        return self._existing(self.disk_offerings, offering_id, param)

    def get_volume(self, volume_id: str, param: str = "id") -> Volume:
        return self._existing(self.volumes, volume_id, param)

    def get_cluster(self, cluster_id: str, param: str = "id") -> Cluster:
        return self._existing(self.clusters, cluster_id, param)

    def vm_cpu_memory(self, vm: VM) -> tuple[int, int]:
        offering = self.service_offerings[vm.service_offering_id]
        return (vm.custom_cpu or offering.cpu, vm.custom_memory or offering.memory)

    @staticmethod
    def vm_ref(vm: VM) -> str:
        # VMInstanceVO.toString() as it shows up in the server's messages.
        return (f'VM instance {{"id":{vm.number},"instanceName":"{vm.instancename}","name":"{vm.name}",'
                f'"state":"{vm.state}","type":"User","uuid":"{vm.id}"}}')

    def cluster_vms(self, cluster: Cluster) -> list[VM]:
        return [self.vms[v] for v in cluster.vm_ids]

    # -- placement (the planner is placement.py) ---------------------------------------------

    def host_usage(self) -> dict[str, tuple[int, int]]:
        """Allocated (cpu MHz, memory MB) per host."""
        return placement.host_usage(self.world)

    def _place(self, vm: VM, considerlasthost: bool, hostid: Optional[str] = None) -> Optional[Host]:
        """DeploymentPlanningManagerImpl.planDeployment (placement.plan); None means 533."""
        return placement.plan(self.world, vm, considerlasthost, hostid)
