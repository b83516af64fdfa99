"""VMs and power in cks-sim's CloudStack world: stop, start (planned by ``placement``), reboot,
an admin's forced state, the VM state changes with the timeline and the unavailability
invariant, and the node model told when a cluster VM powers on or off. A mixin over
``cloud_state.CloudState``: methods only."""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from . import cloud_live_scale, placement
from .cloud_entities import VM, Job, iso
from .cloud_errors import CS_CLOUD_RUNTIME, CloudError, param_error
from .cloud_jobs import CloudJobs
from .cloud_views import CloudViews


class CloudPower(CloudJobs, CloudViews):
    """stopVirtualMachine, startVirtualMachine, rebootVirtualMachine and the VM state machine."""

    def stop_vm(self, vm: VM, command: str = "stopVirtualMachine", forced: bool = False) -> Job:
        job = self.new_job(command, "VirtualMachine", vm.id)
        self._timeline(vm, "stop_requested", forced=forced)

        def body(job: Job, done: Callable[[], None]) -> None:
            # VirtualMachineManagerImpl.advanceStop returns at once for a Stopped VM, and for an
            # Error one ("Stopped called on ... but the state is Error"): the job succeeds and
            # the VM stays in Error.
            if vm.state in ("Stopped", "Error"):
                self._complete(job, {"virtualmachine": self.vm_view(vm)})
                return done()
            fault = self._job_fault(command, vm)
            previous = vm.state
            self._set_state(vm, "Stopping")

            def finish() -> None:
                if fault is not None:
                    self._set_state(vm, previous if previous != "Stopping" else "Running")
                    self._fail_from_fault(job, fault)
                else:
                    self._power_off(vm)
                    self._complete(job, {"virtualmachine": self.vm_view(vm)})
                done()

            self.sim.scheduler.schedule(self.sim.delay("stop"), finish)

        return self._run_vm_job(vm, job, body)

    def _power_off(self, vm: VM) -> None:
        vm.host_id = None
        vm.stopped_at = time.monotonic()
        self._set_state(vm, "Stopped")
        self._timeline(vm, "stopped")
        if vm.cluster_id:
            self.sim.vm_powered_off(vm.cluster_id, vm.name)

    def start_vm(self, vm: VM, command: str = "startVirtualMachine", hostid: Optional[str] = None,
                 considerlasthost: bool = True) -> Job:
        job = self.new_job(command, "VirtualMachine", vm.id)
        self._timeline(vm, "start_requested")

        def body(job: Job, done: Callable[[], None]) -> None:
            if vm.state == "Running" and command == "startVirtualMachine":
                # UserVmManagerImpl.startVirtualMachine refuses before anything else (an
                # InvalidParameterValueException, 431 through ApiAsyncJobDispatcher).
                raise param_error(f"The virtual machine {vm.id} ({vm.name}) is already running")
            if vm.state == "Running":
                self._complete(job, {"virtualmachine": self.vm_view(vm)})
                return done()
            if vm.state == "Error":
                raise CloudError(530, f"Unable to start {self.vm_ref(vm)}: it is in Error state", CS_CLOUD_RUNTIME)
            capacity = self.sim.faults.take("start_capacity", vm=vm.name)
            # The plan is made when the start job begins; the host is claimed only when the VM is up.
            # Two starts that overlap both plan against the same picture, so two members of one strict
            # anti-affinity group can land on one host (apache/cloudstack issue 9110).
            host = None if capacity else self._place(vm, considerlasthost, hostid)
            self._timeline(vm, "start_began", job=job.id, host=host.name if host else None)
            if host is None:
                # VirtualMachineManagerImpl.orchestrateStart: InsufficientServerCapacityException with
                # areAffinityGroupsAssociated (any group); StartVMCmd.execute appends the hint to it.
                text = f"Unable to create a deployment for {self.vm_ref(vm)}"
                if vm.affinity_group_ids:
                    text += ", Please check the affinity groups provided, there may not be sufficient capacity to follow them"

                def refuse() -> None:
                    self._fail(job, 533, text)
                    self._timeline(vm, "start_ended", job=job.id, ok=False, errorcode=533)
                    done()

                self.sim.scheduler.schedule(self.sim.delay("start") / 10, refuse)
                return
            fault = self._job_fault(command, vm)
            self._set_state(vm, "Starting")

            def finish() -> None:
                if fault is not None:
                    self._set_state(vm, "Stopped")
                    self._fail_from_fault(job, fault)
                    self._timeline(vm, "start_ended", job=job.id, ok=False, errorcode=int(fault.get("code", 530)))
                else:
                    vm.host_id = vm.last_host_id = host.id
                    cloud_live_scale.record_domain(self, vm, host, self.cloud_opts["version"])
                    self._set_state(vm, "Running")
                    self._timeline(vm, "started", host=host.name)
                    self._timeline(vm, "start_ended", job=job.id, ok=True, host=host.name)
                    placement.record_broken_affinity(self.world, vm)
                    self._powered_on(vm)
                    self._complete(job, {"virtualmachine": self.vm_view(vm)})
                done()

            self.sim.scheduler.schedule(self.sim.delay("start"), finish)

        return self._run_vm_job(vm, job, body)

    def reboot_vm(self, vm: VM) -> Job:
        job = self.new_job("rebootVirtualMachine", "VirtualMachine", vm.id)

        def body(job: Job, done: Callable[[], None]) -> None:
            if vm.state != "Running":
                raise CloudError(530, f"Unable to reboot {self.vm_ref(vm)}: it is not Running", CS_CLOUD_RUNTIME)
            self._timeline(vm, "reboot_requested")
            if vm.cluster_id:
                self.sim.vm_powered_off(vm.cluster_id, vm.name)

            def finish() -> None:
                self._powered_on(vm)
                self._complete(job, {"virtualmachine": self.vm_view(vm)})
                done()

            self.sim.scheduler.schedule(self.sim.delay("start"), finish)

        return self._run_vm_job(vm, job, body)

    def set_vm_state(self, vm: VM, state: str) -> None:
        """Admin action: force a state (e.g. Error), as a hypervisor crash would."""
        if state not in ("Running", "Stopped", "Error"):
            raise ValueError("state must be Running, Stopped or Error")
        if state == "Running" and vm.state != "Running":
            host = self._place(vm, True)
            if host is None:
                raise ValueError(f"no host can take {vm.name}")
            vm.host_id = vm.last_host_id = host.id
            cloud_live_scale.record_domain(self, vm, host, self.cloud_opts["version"])
            self._set_state(vm, "Running")
            self._powered_on(vm)
        elif state in ("Stopped", "Error") and vm.state != state:
            was_on = vm.state in ("Running", "Stopping", "Starting")
            vm.host_id = None
            vm.stopped_at = time.monotonic()
            self._set_state(vm, state)
            if was_on and vm.cluster_id:
                self.sim.vm_powered_off(vm.cluster_id, vm.name)

    def _set_state(self, vm: VM, state: str) -> None:
        vm.state = state
        vm.lastupdated = iso(time.time())
        if vm.cluster_id and vm.node_type:
            self._check_unavailable(vm)

    def _timeline(self, vm: VM, event: str, **fields: Any) -> None:
        if vm.cluster_id:
            self.sim.timeline.add(node=vm.name.lower(), event=event, vm=vm.name, cluster=vm.cluster_id, **fields)

    def _check_unavailable(self, vm: VM) -> None:
        key = (vm.cluster_id or "", vm.node_type or "")
        down = self._down.setdefault(key, set())
        before = len(down)
        if vm.state == "Running" and not vm.in_service:
            vm.in_service = True  # a scale-up's VM ran: from now on it is a node like the others
        if vm.state == "Running" or not vm.in_service:
            down.discard(vm.name)
        else:
            down.add(vm.name)
        limit = self.max_unavailable.get(vm.node_type or "", 1)
        if len(down) > limit and len(down) > before:
            self.sim.invariants.add(kind="too_many_unavailable", cluster=vm.cluster_id, node_type=vm.node_type,
                                    down=sorted(n.lower() for n in down), limit=limit)

    def _powered_on(self, vm: VM) -> None:
        """Tell the node model a cluster VM booted, with the cpu and memory of its current offering."""
        if vm.cluster_id:
            cpu, memory = self.vm_cpu_memory(vm)
            self.sim.vm_powered_on(vm.cluster_id, vm.name, cpu, memory)
