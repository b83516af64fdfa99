"""A change CloudStack refuses only once the VM is stopped: the node goes back into service
on what it has, and the batch fails with CloudStack's answer naming the node and the change.

The refusals come from the simulator's fault injection: a synchronous ``changeServiceForVirtualMachine``
answered 535 (``UpgradeVMCmd`` turns a ResourceAllocationException into RESOURCE_ALLOCATION_ERROR),
and a ``resizeVolume`` job ending 432 (``ResizeVolumeCmd``'s UNSUPPORTED_ACTION_ERROR). Also a start
answered 431 "already running", which counts as started."""

from __future__ import annotations

import time
from typing import Any, Callable

import pytest
from helpers import ClusterSim

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CloudStackError
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import STOP_ANNOTATION
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.vm_changes import VmChanges

LIMIT_TEXT = ("Maximum number of resources of type 'cpu' for account name=admin in domain id=1 has been exceeded. "
              "Amount of already allocated resources is : 64, amount of resources requested to be allocated is 2")


def large(sim: ClusterSim, root_disk_gb: Any = None) -> Settings:
    return Settings(worker=TypeSettings(sim.offering_id("cks-large"), root_disk_gb, None))


def steps_of(result: Any) -> dict[str, str]:
    return {s.name: s.outcome for s in result.results[0].steps}


def refuse_offering_change(sim: ClusterSim) -> None:
    sim.fault(kind="cloudstack_error", command="changeServiceForVirtualMachine", code=535, errortext=LIMIT_TEXT,
              count=1)


def test_a_refused_offering_change_puts_the_node_back_and_fails_the_batch(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    node = sim.names("worker")[0]
    before = sim.view().node(node)
    refuse_offering_change(sim)

    result = sim.cycle([node], large(sim))

    error = result.error
    assert error is not None and error.node == node and error.step == "change_offering"
    assert "changeServiceForVirtualMachine" in error.msg and "535" in error.msg and LIMIT_TEXT in error.msg
    assert "stays out of date" in error.msg and "uncordoned" in error.msg
    assert error.details["put_back"] is True and error.details["errorcode"] == 535
    steps = steps_of(result)
    assert steps["stop"] == "ok" and steps["change_offering"] == "failed"
    # The later changes are not tried; the node is started on what it has and returned.
    assert "resize_root_disk" not in steps or steps["resize_root_disk"] == "skipped"
    assert steps["start"] == steps["verify"] == steps["uncordon"] == "ok"
    assert result.results[0].outcome == "failed" and result.results[0].error["errorcode"] == 535
    after = sim.view().node(node)
    assert after.vm_state == "Running" and after.ready and after.boot_id != before.boot_id
    assert not after.unschedulable and not after.annotated and STOP_ANNOTATION not in after.annotations
    assert after.offering_name == "cks-medium"
    assert sim.invariants() == []

    # The next run finds it out of date still and changes it.
    again = sim.cycle([node], large(sim))
    assert again.error is None, again.error
    assert sim.view().node(node).offering_name == "cks-large"


def test_a_refused_resize_job_puts_the_node_back_with_the_change_made_before_it(
        cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    node = sim.names("worker")[0]
    before = sim.view().node(node)
    sim.fault(kind="job_failure", command="resizeVolume", vm=before.vm_name, code=432,
              errortext="Going from existing size of 21474836480 to size of 32212254720 is not allowed", count=1)

    result = sim.cycle([node], large(sim, root_disk_gb=30))

    error = result.error
    assert error is not None and error.step == "resize_root_disk" and "432" in error.msg
    assert "resizeVolume" in error.msg and error.details["put_back"] is True
    steps = steps_of(result)
    assert steps["change_offering"] == "ok" and steps["resize_root_disk"] == "failed"
    assert steps["start"] == steps["verify"] == steps["uncordon"] == "ok"
    after = sim.view().node(node)
    # Started on what it has now: the offering changed before the refusal stays changed.
    assert after.running and after.ready and not after.unschedulable and after.boot_id != before.boot_id
    assert after.offering_name == "cks-large" and after.root_disk_gb == before.root_disk_gb
    assert sim.invariants() == []


def test_with_the_put_back_off_a_refused_change_leaves_the_node_stopped(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    node = sim.names("worker")[0]
    refuse_offering_change(sim)

    result = sim.cycle([node], large(sim), options={"put_back_on_refusal": False})

    assert result.error is not None and result.error.step == "change_offering" and "535" in result.error.msg
    assert "put_back" not in result.error.details
    steps = steps_of(result)
    assert "start" not in steps and "uncordon" not in steps
    after = sim.view().node(node)
    assert after.vm_state == "Stopped" and after.unschedulable and after.annotated


def test_a_put_back_whose_start_fails_leaves_the_node_stopped_and_cordoned(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    node = sim.names("worker")[0]
    refuse_offering_change(sim)
    sim.fault(kind="start_capacity", vm=sim.view().node(node).vm_name, count=1)

    result = sim.cycle([node], large(sim))

    error = result.error
    assert error is not None and error.step == "change_offering" and error.details["put_back"] is False
    assert "535" in error.msg and "putting the node back failed too" in error.msg and "533" in error.msg
    assert steps_of(result)["start"] == "failed"
    after = sim.view().node(node)
    assert after.vm_state == "Stopped" and after.unschedulable and after.annotated
    assert STOP_ANNOTATION in after.annotations
    # The rerun resumes it: started, verified and uncordoned, with the offering it was refused.
    again = sim.cycle([node], large(sim))
    assert again.error is None, again.error
    done = sim.view().node(node)
    assert done.running and done.ready and not done.unschedulable and done.offering_name == "cks-large"


def test_a_control_node_refused_after_the_stop_is_back_with_its_etcd_member(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    node = sim.names("control")[0]
    before = sim.view().node(node)
    refuse_offering_change(sim)

    result = sim.cycle([node], Settings(control=TypeSettings(sim.offering_id("cks-large"), None, None)), etcd=True)

    assert result.error is not None and result.error.step == "change_offering" and result.error.details["put_back"]
    verify = next(s for s in result.results[0].steps if s.name == "verify")
    assert verify.outcome == "ok" and "etcd healthy" in verify.detail
    after = sim.view().node(node)
    assert after.running and after.ready and not after.unschedulable and after.boot_id != before.boot_id
    assert sim.invariants() == []


def wait_for_vm_state(sim: ClusterSim, node: str, state: str) -> None:
    deadline = Deadline(30)
    while sim.view().node(node).vm_state != state:
        assert not deadline.expired(), f"{node} never became {state}"
        time.sleep(0.05)


def test_a_start_answered_already_running_counts_as_started(cycle_sim: Callable[..., ClusterSim]) -> None:
    """Someone else (or an earlier run whose answer was lost) started the VM between the batch's
    read and its start: UserVmManagerImpl.startVirtualMachine answers 431 "... is already running"."""
    sim = cycle_sim("small.yml")
    node = sim.names("worker")[0]
    vm = sim.view().node(node)
    sim.admin("POST", "/actions", {"action": "stop_vm", "vm": vm.vm_name})
    wait_for_vm_state(sim, node, "Stopped")
    sim.admin("POST", "/actions", {"action": "start_vm", "vm": vm.vm_name})
    wait_for_vm_state(sim, node, "Running")

    how = VmChanges(sim.cloud, vm.vm_id, target=vm.vm_name).start(Deadline(30))

    assert how == "already running"
    starts = [c for c in sim.calls() if c.get("api") == "cloudstack" and c.get("command") == "startVirtualMachine"]
    assert len(starts) == 1, starts  # sent once, not again
    assert sim.view().node(node).vm_state == "Running"


def test_a_431_start_of_a_vm_that_is_not_running_still_fails(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    node = sim.names("worker")[0]
    vm = sim.view().node(node)
    sim.fault(kind="cloudstack_error", command="startVirtualMachine", code=431, errortext="Unable to find host",
              count=1)
    sim.admin("POST", "/actions", {"action": "stop_vm", "vm": vm.vm_name})
    wait_for_vm_state(sim, node, "Stopped")

    with pytest.raises(CloudStackError, match="431"):
        VmChanges(sim.cloud, vm.vm_id, target=vm.vm_name).start(Deadline(30))
