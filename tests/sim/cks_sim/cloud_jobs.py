"""Async jobs of cks-sim's CloudStack world: a job's life (pending, succeeded, failed, cancelled
by a management server restart), the VM work queue that runs one job per VM at a time, the
job faults of the fault plan, and the quick jobs that belong to no VM. A mixin over
``cloud_state.CloudState``: methods only."""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable, Optional

from .cloud_entities import VM, Job
from .cloud_errors import CloudError
from .cloud_state import CloudState


class CloudJobs(CloudState):
    """asyncJob records and the per-VM work queue (AsyncJobManagerImpl, VmWorkJobDispatcher)."""

    def new_job(self, cmd: str, instance_type: Optional[str], instance_id: Optional[str]) -> Job:
        now = time.monotonic()
        job = Job(self.ids.uuid(), cmd, instance_type, instance_id, time.time(), now + self.sim.delay("job_poll_min"),
                  caller_id=self.caller.id)
        self.jobs[job.id] = job
        return job

    def _complete(self, job: Job, result: dict[str, Any]) -> None:
        if job.cancelled:
            return
        job.status, job.result_code, job.result, job.completed = 1, 0, result, time.time()

    def _fail(self, job: Job, code: int, text: str) -> None:
        if job.cancelled:
            return
        job.status, job.result_code, job.completed = 2, code, time.time()
        job.result = {"uuidList": [], "errorcode": code, "errortext": text}

    def cancel_jobs_of_dead_server(self) -> list[str]:
        """AsyncJobManagerImpl.cleanupLeftOverJobs when a management server (re)starts: every job
        it was running is FAILED with INTERNAL_ERROR (530) and the plain text "job cancelled
        because of management server restart or shutdown", which ApiSerializerHelper cannot
        read back, so queryAsyncJobResult shows no jobresult. Queued VM work is dropped; what
        the hypervisor was already doing (a stop, a start) still ends as it would."""
        cancelled = []
        for job in self.jobs.values():
            if job.status == 0:
                job.status, job.result_code, job.completed = 2, 530, time.time()
                job.result = None
                job.cancelled = True
                cancelled.append(job.id)
        for vm in self.vms.values():
            vm.queue = deque((job, body) for job, body in vm.queue if not job.cancelled)
        return cancelled

    def _run_vm_job(self, vm: VM, job: Job, body: Callable[[Job, Callable[[], None]], None]) -> Job:
        """Queue ``body`` behind the VM's running job, as CloudStack's VM work queue does."""
        vm.queue.append((job, body))
        if vm.active_job is None:
            self._next_vm_job(vm)
        return job

    def _next_vm_job(self, vm: VM) -> None:
        if not vm.queue:
            vm.active_job = None
            return
        job, body = vm.queue.popleft()
        if job.cancelled:
            return self._next_vm_job(vm)
        vm.active_job = job

        def done() -> None:
            vm.active_job = None
            self._next_vm_job(vm)

        try:
            body(job, done)
        except CloudError as err:
            self._fail(job, err.code, err.text)
            done()

    def _job_fault(self, command: str, vm: VM) -> Optional[dict[str, Any]]:
        return self.sim.faults.take("job_failure", command=command, vm=vm.name)

    def _fail_from_fault(self, job: Job, fault: dict[str, Any]) -> None:
        self._fail(job, int(fault.get("code", 530)), str(fault.get("errortext", f"Job {job.cmd} failed (cks-sim fault)")))

    def _quick_job(self, cmd: str, work: Callable[[], dict[str, Any]]) -> Job:
        job = self.new_job(cmd, None, None)

        def finish() -> None:
            try:
                self._complete(job, work())
            except CloudError as err:
                self._fail(job, err.code, err.text)

        self.sim.scheduler.schedule(self.sim.delay("affinity") / 10, finish)
        return job
