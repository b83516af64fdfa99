# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The CloudStack API over the ``cs`` library.

``cs`` signs and sends one request; this module adds what a rollout needs on top: list calls
paged to the end, async jobs awaited against a deadline, retries of read-only calls on transient
faults, one error type with the command, CloudStack's error code and text, and a per-command call
count. Connection settings are those of ngine_io.cloudstack (``cloudstack_options.py``).
Retries follow the one policy of ``retry.py``; a change whose answer was lost is settled by reading
what it would have changed (``run_change``), never sent twice blindly.

No message built here carries the API secret or a request signature: errors from the transport
are rewritten without the request's query string.
"""

from __future__ import annotations

import re
import sys
import time
from collections import Counter
from typing import Any, Callable, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.cloudstack_answers import (
    INTERNAL_ERROR,
    FinalAnswer,
    InternalError,
    int_or_none,
    is_idempotent,
    is_transient_status,
    parse_cloudstack_time,
    reached_server,
    redact,
    retry_after,
    transport_reason,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.cloudstack_options import CloudStackOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.job_waits import JobTimes, JobWait
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.pacing import ApiPacer, ChangeThrottled
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.retry import RetryLog, RetryPolicy, Throttled, Transient
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.tls_failures import handshake_cut
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CloudStackError, DeadlineExceeded
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.api_pace import is_rate_limited, limit_wait
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.job_polls import (
    PollSchedule,
    job_seconds,
    next_bracket,
    pause_before_poll,
)

# cs's package init imports aiohttp (for its async client) and pygments (for its command line's
# colours) whenever they are installed, and kubernetes 37 installs aiohttp. A module run uses
# neither, and they are about a fifth of its start-up (90 of some 800 modules, python -X
# importtime): hidden while cs loads, so its own ``except ImportError`` skips them. A process that
# imported them already keeps them; one that imports them later gets them as usual.
_NOT_FOR_CS = [name for name in ("aiohttp", "pygments") if name not in sys.modules]
for _name in _NOT_FOR_CS:
    sys.modules[_name] = None  # type: ignore[assignment]
try:
    import cs
    import requests

    HAS_CS = True
    CS_IMPORT_ERROR: Optional[str] = None
except ImportError as exc:  # pragma: no cover - exercised only without the library
    HAS_CS = False
    CS_IMPORT_ERROR = str(exc)
finally:
    for _name in _NOT_FOR_CS:
        if sys.modules.get(_name) is None:
            del sys.modules[_name]

PAGE_SIZE = 500
# BaseListCmd.getPageSize refuses a pagesize above default.page.size (it does not cap it).
_PAGE_LIMIT = re.compile(r"Page size can't exceed max allowed page size value: (\d+)")

JOB_PENDING, JOB_SUCCEEDED, JOB_FAILED, JOB_CANCELLED = 0, 1, 2, 3

# The command class each async change runs as (the ``cmd`` of its job; the admin variants end in
# ByAdmin, which the substring still matches): StopVMCmd, StartVMCmd, ResizeVolumeCmd,
# UpdateVMAffinityGroupCmd in api/src/main/java/org/apache/cloudstack/api/command/user/.
JOB_CLASSES = {
    "stopVirtualMachine": "StopVMCmd",
    "startVirtualMachine": "StartVMCmd",
    "resizeVolume": "ResizeVolumeCmd",
    "updateVMAffinityGroup": "UpdateVMAffinityGroupCmd",
}
# How much earlier than our clock a management server may date a job it created for us.
JOB_CLOCK_SKEW = 120.0


def page_size_limit(error: CloudStackError) -> Optional[int]:
    """The cloud's default.page.size when ``error`` is its refusal of a larger pagesize, else None."""
    found = _PAGE_LIMIT.search(str(error.errortext or "")) if error.errorcode == 431 else None
    limit = int(found.group(1)) if found else 0
    return limit if limit > 0 else None


def list_key(response: Mapping[str, Any]) -> Optional[str]:
    """The key of the items in a list response: its one list value (``count`` sits next to it)."""
    keys = [k for k, v in response.items() if isinstance(v, list)]
    if len(keys) > 1:
        raise ValueError(f"more than one list in the response: {', '.join(sorted(keys))}")
    return keys[0] if keys else None


def job_object(jobresult: Any) -> Any:
    """The object a finished job produced: the one dict under ``jobresult``, else ``jobresult`` whole."""
    if isinstance(jobresult, dict) and len(jobresult) == 1:
        [value] = jobresult.values()
        if isinstance(value, dict):
            return value
    return jobresult


class AnswerLost(CloudStackError):
    """A command was sent and its answer lost (no answer, a proxy's 5xx, or CloudStack's own
    INTERNAL_ERROR): CloudStack may or may not have carried it out. ``run_change`` settles it by
    reading what the command would change; ``cause`` is what the retry log says came back,
    ``answer`` CloudStack's own text when it answered."""

    def __init__(self, command: str, errortext: str, errorcode: Optional[int] = None, target: Optional[str] = None,
                 cause: str = "answer lost", answer: Optional[str] = None) -> None:
        super().__init__(command, errortext, errorcode=errorcode, target=target)
        self.cause = cause
        self.answer = answer


class CloudStackClient:
    """One connection to the CloudStack API. ``calls`` counts HTTP requests per command,
    ``retry_log`` what was sent again after a transient fault."""

    def __init__(self, options: CloudStackOptions, session: Any = None) -> None:
        if not HAS_CS:
            raise CloudStackError("connect", f"the cs Python library is required: {CS_IMPORT_ERROR}")
        self.options = options
        self.calls: Counter[str] = Counter()
        self.retry_log = RetryLog()
        #: What each command's jobs took and how many polls they cost (the job poll schedule learns from it).
        self.job_times = JobTimes()
        #: The object each change's job ended with, by (command, instance): a start's VM and a
        #: resize's volume are what the verify would read again (StartVMCmd.execute answers the
        #: started VM's UserVmResponse, ResizeVolumeCmd.execute the resized VolumeResponse).
        self.job_results: dict[tuple[str, str], Any] = {}
        self.policy = RetryPolicy(attempts=max(1, int(options.retries) + 1))
        #: One pace for all calls of this client (every thread of a batch): given, or learnt from refusals.
        self.pacer = ApiPacer(options.api_rate)
        # cs's own retries and job polling stay off: retries are decided here per command,
        # and job polls are bounded by our deadlines.
        self._cs = cs.CloudStack(
            endpoint=options.api_url,
            key=options.api_key,
            secret=options.api_secret,
            timeout=options.api_timeout,
            method=options.api_http_method,
            verify=options.api_verify_ssl_cert if options.validate_certs else None,
            dangerous_no_tls_verify=not options.validate_certs,
            retry=0,
            fetch_result=False,
            session=session,
        )
        self._sleep = time.sleep
        #: The page size lists ask for: lowered once to what a cloud's default.page.size allows.
        self.page_size = PAGE_SIZE
        #: The batch's deadline while a batch runs: requests given none retry an outage until it.
        self.deadline: Optional[Deadline] = None

    # -- public calls -------------------------------------------------------------------------

    def call(self, command: str, target: Optional[str] = None, deadline: Optional[Deadline] = None,
             **params: Any) -> dict[str, Any]:
        """A synchronous command; returns its response dict (the value under ``<command>response``)."""
        return self._request(command, params, target=target, deadline=deadline)

    def list(self, command: str, target: Optional[str] = None, deadline: Optional[Deadline] = None,
             **params: Any) -> list[dict[str, Any]]:
        """All items of a list command, paged ``pagesize=500`` (or the cloud's lower limit, learnt
        from its refusal) until ``count`` items are read."""
        page_size = int(params.pop("pagesize", self.page_size))
        params.pop("page", None)
        items: list[dict[str, Any]] = []
        seen: set[str] = set()
        page = 1
        while True:
            try:
                response = self._request(command, dict(params, page=page, pagesize=page_size),
                                         target=target, deadline=deadline)
            except CloudStackError as exc:
                limit = page_size_limit(exc)
                if limit is None or limit >= page_size:
                    raise
                # Pages of the old size do not line up with the new ones: read again from the first.
                self.page_size = page_size = limit
                items, seen, page = [], set(), 1
                continue
            try:
                key = list_key(response)
            except ValueError as exc:
                raise CloudStackError(command, f"unexpected response: {exc}", target=target)
            batch = response.get(key, []) if key else []
            for item in batch:
                # Items created or removed between pages shift the pages: keep each id once.
                ident = item.get("id") if isinstance(item, dict) else None
                if ident is not None:
                    if ident in seen:
                        continue
                    seen.add(ident)
                items.append(item)
            count = int_or_none(response.get("count"))
            if not batch:
                return items
            if count is not None:
                # Trust count over the page length: a server may cap pagesize below ours.
                if len(items) >= count:
                    return items
            elif len(batch) < page_size:
                return items
            page += 1

    def run_job(self, command: str, deadline: Deadline, target: Optional[str] = None,
                **params: Any) -> Any:
        """Submit an async command and wait for its job; returns the object under ``jobresult``.

        The submit is never sent twice here: if its answer is lost, CloudStack may or may not have
        started the job, so ``AnswerLost`` says so (``run_change`` settles that by reading the
        state). Polls of queryAsyncJobResult are retried like any read. The job keeps running in
        CloudStack when the deadline passes; ``DeadlineExceeded`` names the command and the job id.
        """
        submitted_at = time.monotonic()
        submitted = self._request(command, params, target=target, deadline=deadline)
        jobid = submitted.get("jobid")
        if not jobid:
            raise CloudStackError(command, "answered without a jobid; it is not an async command here",
                                  target=target)
        return self.await_job(command, str(jobid), deadline, target=target, submitted_at=submitted_at)

    def await_job(self, command: str, jobid: str, deadline: Deadline, target: Optional[str] = None,
                  submitted_at: Optional[float] = None) -> Any:
        """Poll job ``jobid`` of ``command`` until it ends; its object, or ``CloudStackError``.

        The polls follow ``_decisions.job_polls``: the first about when this command's jobs end (the
        bracket learned from the jobs before), a job running late backing off; ``job_times`` keeps
        what it took and cost, and what the next job of the command is aimed by.
        """
        # A job found pending after a lost answer started before this wait: how long it took is not
        # known, so it is polled on the schedule but teaches the schedule nothing.
        job = self._poll_job(command, jobid, deadline, target, time.monotonic() if submitted_at is None else submitted_at,
                             learn=submitted_at is not None)
        status = int(job["jobstatus"])
        resultcode = int(job.get("jobresultcode") or 0)
        result = job.get("jobresult")
        if status == JOB_SUCCEEDED and resultcode == 0:
            return job_object(result)
        errortext = result.get("errortext") if isinstance(result, dict) else None
        if status == JOB_CANCELLED:
            errortext = errortext or "the job was cancelled"
        code = resultcode or (result.get("errorcode") if isinstance(result, dict) else None)
        raise CloudStackError(command, f"job {jobid}: {errortext or 'failed without an error text'}",
                              errorcode=int(code) if code else None, target=target)

    def _poll_job(self, command: str, jobid: str, deadline: Deadline, target: Optional[str],
                  since: float, learn: bool = True) -> dict[str, Any]:
        """queryAsyncJobResult on ``_decisions.job_polls``' schedule until the job ends (one last poll
        at the deadline, then ``DeadlineExceeded``); the wait and what it taught go into ``job_times``."""
        schedule = PollSchedule(interval=self.options.poll_interval)
        bracket = self.job_times.bracket(command)
        polls, running_at, aimed = 0, None, None
        while True:
            pause = pause_before_poll(schedule, polls, time.monotonic() - since, bracket, deadline.remaining())
            self._sleep(pause)
            # The time the poll is sent: what it saw held then (give or take its round trip), and
            # the next job is aimed by it.
            asked = time.monotonic() - since
            if aimed is None:
                aimed = asked
            job = self._request("queryAsyncJobResult", {"jobid": jobid}, target=target, deadline=deadline)
            polls += 1
            if int(job.get("jobstatus", JOB_PENDING)) != JOB_PENDING:
                created, completed = parse_cloudstack_time(job.get("created")), parse_cloudstack_time(job.get("completed"))
                cloud = completed - created if created is not None and completed is not None else None
                self.job_times.record(
                    JobWait(command, jobid, target, polls, job_seconds(asked, running_at, cloud), aimed, running_at),
                    next_bracket(schedule, bracket, asked, running_at, cloud) if learn else None)
                return job
            running_at = asked
            if deadline.remaining() <= 0:
                self.job_times.record(JobWait(command, jobid, target, polls, asked, aimed, running_at))
                what = f"CloudStack {command} job {jobid}" + (f" on {target}" if target else "")
                raise DeadlineExceeded(
                    f"gave up waiting for {what} after {deadline.elapsed():.1f}s (deadline {deadline.seconds:g}s)",
                    what=what, waited=round(deadline.elapsed(), 1), deadline=deadline.seconds,
                    command=command, jobid=jobid, target=target, polls=polls)

    def run_change(self, command: str, deadline: Deadline, done: Callable[[], bool],
                   instance_id: Optional[str] = None, target: Optional[str] = None, **params: Any) -> str:
        """Carry out one change (a command that writes), riding out a lost answer.

        ``done()`` reads what the command changes (a VM's state or offering, a volume's size, a
        VM's groups) and says whether it is as asked. ``instance_id`` is the VM or volume an async
        command's job runs on (None: a synchronous command, no job to look for). When the answer
        to the command is lost, or CloudStack answers it INTERNAL_ERROR (530: an exception part-way,
        whatever it had done by then stays done), CloudStack is asked instead of sent the command again:

        1. a job of this command on that instance still pending (listAsyncJobs): it is polled;
        2. otherwise, if ``done()``: the command went through (skipped as done);
        3. otherwise it never ran: it is sent again, up to the policy's attempts.

        Returns how it ended: ``sent``, ``polled job <id> after a lost answer``, or ``already done
        after a lost answer``. Refusals (a 4xx, CloudStack's 531-537) and failed jobs (a job ending
        530 too: that is the job's answer) raise as before; a 530 still there after the attempts
        raises with its errorcode, naming the command and node.
        """
        asynchronous = instance_id is not None
        retry = 0
        while True:
            sent_at = time.time()
            try:
                if asynchronous:
                    self.job_results.pop((command, str(instance_id)), None)
                    self.job_results[(command, str(instance_id))] = self.run_job(command, deadline, target=target, **params)
                else:
                    self._request(command, params, target=target, deadline=deadline)
                return "sent" if retry == 0 else f"sent again after {retry} lost answer(s)"
            except ChangeThrottled as refused:
                # Refused before it ran: waited out (not spending the attempts), then read before sending again.
                if refused.settle(self.policy, deadline, done, self.retry_log):
                    return "already done after a rate limit refusal"
            except AnswerLost as lost:
                retry += 1
                if asynchronous:
                    job = self.pending_job(command, str(instance_id), since=sent_at, deadline=deadline)
                    if job is not None:
                        jobid = str(job["jobid"])
                        self.retry_log.reconciled(command, "job still running: polled", lost.cause)
                        self.await_job(command, jobid, deadline, target=target)
                        return f"polled job {jobid} after a lost answer"
                if done():
                    self.retry_log.reconciled(command, "already done: not sent again", lost.cause)
                    return "already done after a lost answer"
                wait = self.policy.delay(retry)
                if not self.policy.may_retry(retry, wait, deadline, 0.0):
                    if lost.answer is not None:
                        # Each answer was read back: the command did not run, so CloudStack's answer is the outcome.
                        raise CloudStackError(command, f"{lost.answer} (answered {retry} time(s), read back after each: "
                                                       f"not carried out)", errorcode=lost.errorcode, target=target) from None
                    raise
                self.retry_log.reconciled(command, "not carried out: sent again", lost.cause)
                self._sleep(wait)

    def pending_job(self, command: str, instance_id: str, since: float,
                    deadline: Optional[Deadline] = None) -> Optional[dict[str, Any]]:
        """The newest pending job of ``command`` on ``instance_id`` (listAsyncJobs), or None.

        listAsyncJobs (ListAsyncJobsCmd, QueryManagerImpl.searchForAsyncJobsInternal) has no
        instance filter; ``keyword`` matches the job's command class (``cmd LIKE %keyword%``), so the
        account's other jobs stay out of the answer and the instance is matched here. Jobs created
        more than ``JOB_CLOCK_SKEW`` seconds before ``since`` are not ours.
        """
        keyword = JOB_CLASSES.get(command)
        params: dict[str, Any] = {"listall": True}
        if keyword:
            params["keyword"] = keyword
        jobs = self.list("listAsyncJobs", target=instance_id, deadline=deadline, **params)
        ours = []
        for job in jobs:
            if str(job.get("jobinstanceid") or "").lower() != instance_id.lower():
                continue
            if keyword and keyword not in str(job.get("cmd") or ""):
                continue
            if int(job.get("jobstatus", JOB_PENDING)) != JOB_PENDING:
                continue
            created = parse_cloudstack_time(job.get("created"))
            if created is not None and created < since - JOB_CLOCK_SKEW:
                continue
            ours.append(job)
        ours.sort(key=lambda j: str(j.get("created") or ""))
        return ours[-1] if ours else None

    # -- one request, with the retry policy ------------------------------------------------------

    def _request(self, command: str, params: Mapping[str, Any], target: Optional[str],
                 deadline: Optional[Deadline]) -> dict[str, Any]:
        deadline = deadline if deadline is not None else self.deadline

        def send() -> dict[str, Any]:
            try:
                return self._send(command, params, deadline)
            except FinalAnswer as failure:
                raise CloudStackError(command, failure.errortext, errorcode=failure.errorcode, target=target)

        if not is_idempotent(command):
            try:
                return send()
            except Throttled as refused:
                raise ChangeThrottled(command, refused.message, refused.retry_after or 0.0, target=target) from None
            except InternalError as fault:
                # CloudStack's own 530 to a write: an exception part-way through, so what it changed
                # is read like a lost answer's; only a read shows whether to send it again.
                raise AnswerLost(command, f"{fault.errortext} (INTERNAL_ERROR: CloudStack may or may not have carried "
                                          f"it out; not sent again blindly: re-read what it changes before sending it again)",
                                 errorcode=INTERNAL_ERROR, target=target, cause=fault.message, answer=fault.errortext) from None
            except Transient as fault:
                if fault.maybe_done:
                    raise AnswerLost(command, f"{fault.message}; CloudStack may or may not have carried it out "
                                              f"(not sent again blindly: re-read what it changes before sending it again)",
                                     target=target)
                # It never reached CloudStack: sending it again cannot do it twice.
                return self._retry(command, send, target, deadline, first=fault)
        return self._retry(command, send, target, deadline)

    def _retry(self, command: str, send: Callable[[], dict[str, Any]], target: Optional[str],
               deadline: Optional[Deadline], first: Optional[Transient] = None) -> dict[str, Any]:
        def on_retry(fault: Transient, wait: float) -> None:
            (self.retry_log.throttled if isinstance(fault, Throttled) else self.retry_log.retried)(command, fault.message, wait)

        def attempt() -> dict[str, Any]:
            nonlocal first
            if first is not None:
                fault, first = first, None
                raise fault
            return send()

        try:
            return self.policy.run(attempt, deadline=deadline, on_retry=on_retry, sleep=self._sleep)
        except Throttled as fault:
            raise ChangeThrottled(command, fault.message, fault.retry_after or 0.0, target).past(deadline, self.policy.budget) from None
        except InternalError as fault:
            # Still 530 after the retries: CloudStack's own text, as a refusal would carry it.
            raise CloudStackError(command, fault.errortext, errorcode=INTERNAL_ERROR, target=target) from None
        except Transient as fault:
            raise CloudStackError(command, fault.message, errorcode=fault.status, target=target)

    def _send(self, command: str, params: Mapping[str, Any], deadline: Optional[Deadline]) -> dict[str, Any]:
        """One HTTP request. Raises ``Transient`` (may retry) or ``FinalAnswer`` (final)."""
        timeout = self.options.api_timeout
        if deadline is not None:
            # At the deadline one last short request still goes out (wait_for's final check);
            # cs takes whole seconds.
            timeout = max(1, min(timeout, int(deadline.remaining() + 0.999)))
        self._cs.timeout = timeout
        pace = self.pacer.before_call(deadline.remaining() if deadline is not None else None)
        if pace > 0:
            self._sleep(pace)
        self.calls[command] += 1
        secret = self.options.api_secret
        try:
            response = getattr(self._cs, command)(**params)
        except cs.CloudStackApiException as exc:
            status = getattr(exc.response, "status_code", None)
            error = exc.error if isinstance(exc.error, dict) else {}
            code = int_or_none(error.get("errorcode")) or status
            text = redact(str(error.get("errortext") or (exc.args[0] if exc.args else "error")), secret)
            if is_rate_limited(status, code, text):
                named = limit_wait(text) if limit_wait(text) is not None else retry_after(exc)
                raise Throttled(f"HTTP {status}: {text}", self.pacer.throttled(named), named)
            if code == INTERNAL_ERROR:
                raise InternalError(text, retry_after=retry_after(exc))
            if is_transient_status(status):
                raise Transient(f"HTTP {status}: {text}", status=code, retry_after=retry_after(exc))
            raise FinalAnswer(text, code)
        except cs.CloudStackException as exc:
            # Not a CloudStack answer (a proxy's HTML page, a truncated body): judge by the status.
            status = getattr(getattr(exc, "response", None), "status_code", None)
            text = redact(" ".join(str(a) for a in exc.args), secret)
            if is_transient_status(status):
                raise Transient(text, status=status, retry_after=retry_after(exc))
            raise FinalAnswer(text, status)
        except requests.exceptions.SSLError as exc:
            if handshake_cut(exc):
                raise Transient(f"the TLS handshake with {redact(self.options.api_url)} was cut off "
                                f"({transport_reason(exc, secret)})", maybe_done=False)
            raise FinalAnswer(
                f"TLS verification of {redact(self.options.api_url)} failed ({transport_reason(exc, secret)}); "
                f"check api_verify_ssl_cert (CLOUDSTACK_VERIFY) names the CA that signed the "
                f"server's certificate, or set validate_certs=false only for a test endpoint",
                None,
            )
        except requests.exceptions.ConnectTimeout as exc:
            raise Transient(f"connecting to {redact(self.options.api_url)} timed out after {timeout}s "
                            f"({transport_reason(exc, secret)})", maybe_done=False)
        except requests.exceptions.Timeout as exc:
            raise Transient(f"no answer from {redact(self.options.api_url)} within {timeout}s "
                            f"({transport_reason(exc, secret)})")
        except requests.exceptions.RequestException as exc:
            raise Transient(f"connection to {redact(self.options.api_url)} failed ({transport_reason(exc, secret)})",
                            maybe_done=not isinstance(exc, requests.exceptions.ConnectionError) or reached_server(exc))
        if not isinstance(response, dict):
            raise FinalAnswer(f"unexpected response type {type(response).__name__}", None)
        if "errortext" in response and "errorcode" in response:
            # Seen from some proxies and old servers: an error body with HTTP 200.
            raise FinalAnswer(redact(str(response["errortext"]), secret), int_or_none(response["errorcode"]))
        return response
