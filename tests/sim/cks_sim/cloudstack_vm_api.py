"""The VM and volume commands of cks-sim's CloudStack API: listVirtualMachines (its JSON cached
per VM), stop, start, reboot, offering changes and affinity updates of a VM, listVolumes and
resizeVolume."""

from __future__ import annotations

from typing import Any, Optional

from . import apis
from .cloud import param_error
from .cloudstack_call import Call, RawList, handler, page_body

VM_DETAILS = {"all", "group", "nics", "stats", "secgrp", "tmpl", "servoff", "diskoff", "backoff", "iso", "volume",
              "min", "affgrp", "vnfnics"}


def _vm_details(call: Call) -> Optional[set[str]]:
    details = call.get("details")
    if not details:
        return None
    wanted = {d.lower() for d in details}
    bad = wanted - VM_DETAILS
    if bad:
        raise param_error(
            "The details parameter contains a non permitted value. The allowed values are "
            + "[" + ", ".join(sorted(VM_DETAILS)) + "]")
    return wanted


@handler("listVirtualMachines")
def list_virtual_machines(call: Call) -> Any:
    cloud = call.cloud
    if call.get("id") and call.get("ids"):
        raise param_error("Either id or ids parameter can be passed, not both")
    details = _vm_details(call)
    wanted_ids = set(call.get("ids") or ([call.get("id")] if call.get("id") else []))
    state = call.get("state")
    tags = call.get("tags") or []
    allowed = cloud.list_scope(call.values)
    out = []
    for vm in cloud.vms.values():
        if wanted_ids and vm.id not in wanted_ids:
            continue
        if not allowed(vm.owner_id):
            continue
        if call.get("name") and vm.name != call.get("name"):
            continue
        if state and state.lower() != "present" and vm.state.lower() != state.lower():
            continue
        if call.get("hostid") and vm.host_id != call.get("hostid"):
            continue
        if call.get("zoneid") and call.get("zoneid") != cloud.vm_zone(vm)["id"]:
            continue
        if call.get("serviceofferingid") and vm.service_offering_id != call.get("serviceofferingid"):
            continue
        if call.get("affinitygroupid") and call.get("affinitygroupid") not in vm.affinity_group_ids:
            continue
        if call.get("networkid") and vm.network_id != call.get("networkid"):
            continue
        if call.get("keypair") and vm.keypair != call.get("keypair"):
            continue
        if call.get("keyword") and call.get("keyword").lower() not in vm.name.lower():
            continue
        if tags and not all(
            any(t["key"] == want.get("key") and t["value"] == want.get("value") for t in cloud.tags.get(vm.id, []))
            for want in tags
        ):
            continue
        out.append(vm)
    total = len(out)
    if total == 0:
        return {}
    if call.get("retrieveonlyresourcecount"):
        return {"count": total}
    page = apis.paginate(out, call.values, cloud.cloud_opts["page_size_max"])
    return RawList(total, "virtualmachine", [cloud.vm_json(vm, details) for vm in page])


def _vm(call: Call, param: str = "id") -> Any:
    vm = call.cloud.get_vm(call.get(param), param)
    call.cloud.check_access(vm.owner_id, call.cloud.vm_ref(vm))
    return vm


@handler("stopVirtualMachine")
def stop_virtual_machine(call: Call) -> dict[str, Any]:
    return call.job(call.cloud.stop_vm(_vm(call), forced=bool(call.get("forced"))))


@handler("startVirtualMachine")
def start_virtual_machine(call: Call) -> dict[str, Any]:
    vm = _vm(call)
    hostid = call.get("hostid")
    if hostid and hostid not in call.cloud.hosts:
        raise call.cloud.invalid_uuid("hostid", hostid)
    return call.job(call.cloud.start_vm(vm, hostid=hostid, considerlasthost=call.get("considerlasthost", True)))


@handler("rebootVirtualMachine")
def reboot_virtual_machine(call: Call) -> dict[str, Any]:
    return call.job(call.cloud.reboot_vm(_vm(call)))


def _details_map(call: Call) -> dict[str, str]:
    merged: dict[str, str] = {}
    for row in call.get("details", []) or []:
        merged.update(row)
    return merged


@handler("changeServiceForVirtualMachine")
def change_service_for_virtual_machine(call: Call) -> dict[str, Any]:
    vm = _vm(call)
    offering = call.cloud.get_service_offering(call.get("serviceofferingid"))
    call.cloud.change_service(vm, offering, _details_map(call))
    return {"virtualmachine": call.cloud.vm_view(vm)}


@handler("scaleVirtualMachine")
def scale_virtual_machine(call: Call) -> dict[str, Any]:
    vm = _vm(call)
    offering = call.cloud.get_service_offering(call.get("serviceofferingid"))
    return call.job(call.cloud.scale_vm(vm, offering, _details_map(call)))


@handler("updateVMAffinityGroup")
def update_vm_affinity_group(call: Call) -> dict[str, Any]:
    vm = _vm(call)
    ids = call.get("affinitygroupids")
    if ids is not None:
        for group_id in ids:
            if group_id not in call.cloud.affinity_groups:
                raise call.cloud.invalid_uuid("affinitygroupids", group_id)
    call.cloud.check_affinity_acl(vm, ids or [])
    return call.job(call.cloud.update_affinity(vm, ids, call.get("affinitygroupnames")))


# --- volumes ------------------------------------------------------------------------------


@handler("listVolumes")
def list_volumes(call: Call) -> dict[str, Any]:
    cloud = call.cloud
    wanted_ids = set(call.get("ids") or ([call.get("id")] if call.get("id") else []))
    out = []
    allowed = cloud.list_scope(call.values)
    for volume in cloud.volumes.values():
        if wanted_ids and volume.id not in wanted_ids:
            continue
        if not allowed(cloud.vms[volume.vm_id].owner_id):
            continue
        if call.get("virtualmachineid") and volume.vm_id != call.get("virtualmachineid"):
            continue
        if call.get("type") and volume.type.lower() != call.get("type").lower():
            continue
        if call.get("name") and volume.name != call.get("name"):
            continue
        if call.get("diskofferingid") and volume.disk_offering_id != call.get("diskofferingid"):
            continue
        if call.get("state") and volume.state.lower() != call.get("state").lower():
            continue
        if call.get("hostid") and cloud.vms[volume.vm_id].host_id != call.get("hostid"):
            continue
        if call.get("keyword") and call.get("keyword").lower() not in volume.name.lower():
            continue
        out.append(volume)
    total = len(out)
    if total == 0:
        return {}
    page = apis.paginate(out, call.values, cloud.cloud_opts["page_size_max"])
    return page_body(total, "volume", [cloud.volume_view(v) for v in page])


@handler("resizeVolume")
def resize_volume(call: Call) -> dict[str, Any]:
    volume = call.cloud.get_volume(call.get("id"))
    call.cloud.check_access(call.cloud.vms[volume.vm_id].owner_id, f"Volume {volume.id}")
    offering = call.cloud.get_disk_offering(call.get("diskofferingid")) if call.get("diskofferingid") else None
    size = call.get("size")
    return call.job(call.cloud.resize_volume(volume, size, bool(call.get("shrinkok")), offering))
