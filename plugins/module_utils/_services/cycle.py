# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The service behind cks_node_cycle (mode=cycle): one batch as the module's options say."""

from __future__ import annotations

import time
from typing import Any, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd import client_from_options
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd_pod import quorum_client
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.node_events import NodeEvents
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.playbook import ControllerWatch
from ansible_collections.cloudstack.cks.plugins.module_utils._common.background import side_by_side
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, InvalidInput, StepFailed
from ansible_collections.cloudstack.cks.plugins.module_utils._common.option_defaults import default_of
from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import CloudStackApi
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.drain import DrainOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node import needs_root_volume, seconds_left
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.scale_path import LIVE_SCALE_CHOICES
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings
from ansible_collections.cloudstack.cks.plugins.module_utils._model.loader import ClusterLoader
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.batch import BatchCycle
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.etcd_check import EtcdCheck, etcd_check_from
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.options import (
    DEFAULT_BATCH_TIMEOUT,
    DEFAULT_EVICTION_RETRY_INTERVAL,
    DEFAULT_EXCLUDE_DELAY,
    DEFAULT_JOB_TIMEOUT,
    DEFAULT_POLL_INTERVAL,
    CycleOptions,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.state import Rollout
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.steps import PHASE_ALL, PHASE_CORDON, PHASES
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.validation import DEFAULT_COUNT as DEFAULT_VALIDATE_COUNT
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.validation import DEFAULT_INTERVAL as DEFAULT_VALIDATE_INTERVAL
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.validation import DEFAULT_TIMEOUT as DEFAULT_VALIDATE_TIMEOUT
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.validation import ValidationOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._services.orphan import batch_note, orphan_release
from ansible_collections.cloudstack.cks.plugins.module_utils._services.session import ClusterSession
from ansible_collections.cloudstack.cks.plugins.module_utils._state.held import held_lock
from ansible_collections.cloudstack.cks.plugins.module_utils._state.settings_store import stored_max_unavailable


def settings_from(given: Optional[dict[str, Any]], record: Any) -> Settings:
    """The settings passed in, else the ones stored in the rollout record."""
    if given:
        return Settings.from_dict(given)
    if record is None or not record.settings:
        raise InvalidInput("settings", None, "not given, and the cluster has no stored settings yet "
                                             "(store them with cloudstack.cks.cks_node_settings first)")
    return Settings.from_dict(record.settings)


def etcd_check_for(params: Mapping[str, Any], kube: Any = None, external_etcd: bool = False) -> Optional[EtcdCheck]:
    """The explicit etcd endpoints when given, else etcdctl through ``kube``: in the etcd pods
    (stacked), or in a short-lived pod on a control node (external etcd nodes)."""
    client = quorum_client(params, kube, external_etcd=external_etcd)
    return etcd_check_from(client) if client is not None else None


def external_etcd(session: ClusterSession) -> bool:
    """Whether the cluster has external etcd nodes, as its CloudStack entry says (read once per session)."""
    try:
        return int(session.entry().get("etcdnodes") or 0) > 0
    except (TypeError, ValueError):
        return False


def max_unavailable_of(params: Mapping[str, Any], record: Any) -> int:
    """The workers a batch may take down: the option, else the one the rollout stored, else 1 (the
    seed's default). The preflight clamps it as the plan does, so a direct call of the module
    cannot take down more workers than a rollout would."""
    given = params.get("max_unavailable")
    if given is not None:
        if isinstance(given, bool) or int(given) < 1:
            raise InvalidInput("max_unavailable", given, "must be at least 1 (the workers a batch may take down)")
        return int(given)
    return stored_max_unavailable(record) or 1


def cycle_options(params: Mapping[str, Any], check_mode: bool, max_unavailable: Optional[int] = None,
                  batch_started: Optional[float] = None) -> CycleOptions:
    drain = DrainOptions(
        delete_emptydir_data=bool(params.get("delete_emptydir_data", default_of("delete_emptydir_data"))),
        force=bool(params.get("force")),
        grace_period=params.get("grace_period"),
        eviction_retry_interval=float(params.get("eviction_retry_interval") or DEFAULT_EVICTION_RETRY_INTERVAL),
        poll_interval=float(params.get("poll_interval") or DEFAULT_POLL_INTERVAL),
    )
    return CycleOptions(
        batch_timeout=float(params.get("batch_timeout") or DEFAULT_BATCH_TIMEOUT),
        job_timeout=float(params.get("job_timeout") or DEFAULT_JOB_TIMEOUT),
        poll_interval=float(params.get("poll_interval") or DEFAULT_POLL_INTERVAL),
        drain=drain,
        check_mode=check_mode,
        validation=validation_options(params),
        exclude_from_load_balancers=bool(params.get("exclude_from_load_balancers")),
        exclude_delay=_number(params, "exclude_delay", DEFAULT_EXCLUDE_DELAY, minimum=0.0),
        phase=phase_of(params),
        batch_started=batch_started,
        max_unavailable=max_unavailable,
        put_back_on_refusal=params.get("put_back_on_refusal") is not False,
        live_scale=_live_scale(params),
        live_scale_image=str(params.get("live_scale_image") or default_of("live_scale_image")),
        live_scale_timeout=_number(params, "live_scale_timeout", default_of("live_scale_timeout"), minimum=1.0),
    )


def _live_scale(params: Mapping[str, Any]) -> str:
    mode = str(params.get("live_scale") or default_of("live_scale"))
    if mode not in LIVE_SCALE_CHOICES:
        raise InvalidInput("live_scale", mode, f"must be one of {', '.join(LIVE_SCALE_CHOICES)}")
    return mode


def phase_of(params: Mapping[str, Any]) -> str:
    phase = str(params.get("phase") or PHASE_ALL)
    if phase not in PHASES:
        raise InvalidInput("phase", phase, f"must be one of {', '.join(PHASES)}")
    return phase


def _number(params: Mapping[str, Any], name: str, default: float, minimum: float) -> float:
    value = params.get(name)
    value = default if value is None else float(value)
    if value < minimum:
        raise InvalidInput(name, value, f"must be {minimum:g} or more")
    return value


def validation_options(params: Mapping[str, Any]) -> ValidationOptions:
    """validate_count (0: off), validate_interval, validate_timeout, checked."""
    count = params.get("validate_count")
    count = DEFAULT_VALIDATE_COUNT if count is None else int(count)
    if count < 0:
        raise InvalidInput("validate_count", count, "must be 0 (no validation) or more")
    return ValidationOptions(
        count=count,
        interval=_number(params, "validate_interval", DEFAULT_VALIDATE_INTERVAL, minimum=0.0),
        timeout=_number(params, "validate_timeout", DEFAULT_VALIDATE_TIMEOUT, minimum=0.0),
    )


def give_job_seconds(cloud: CloudStackApi, given: Any) -> None:
    """What the earlier batches' jobs took (the rollout's ``job_seconds``): this batch's first polls wait that long."""
    if not given:
        return
    if not isinstance(given, Mapping):
        raise InvalidInput("rollout.job_seconds", given, "must map a CloudStack command to the seconds its jobs took")
    try:
        cloud.job_times.give_priors(given)
    except (TypeError, ValueError) as exc:
        raise InvalidInput("rollout.job_seconds", given, f"each value must be a number of seconds, 0 or more ({exc})")


def node_cycle(session: ClusterSession, params: Mapping[str, Any], check_mode: bool = False) -> dict[str, Any]:
    """Run one batch as the module's parameters say, and return the rollout object (option ``rollout``)
    with this run recorded in it: also when the batch fails, in the StepFailed's details."""
    rollout = Rollout.from_dict(params.get("rollout"))
    nodes = [str(n) for n in params.get("nodes") or []]
    phase = phase_of(params)
    holder = params.get("lock_holder") or rollout.run_id or None
    started = rollout.batch_started(nodes, phase)
    written: dict[str, str] = {}
    try:
        answer = _run_batch(session, params, check_mode, rollout, holder, started, written)
    except CksError as exc:
        run = dict(exc.details, msg=exc.msg)
        rollout.record_run(nodes, phase, run, lock_version=written.get("version"))
        exc.details["rollout"] = rollout.to_dict()
        raise
    rollout.record_run(nodes, phase, answer, lock_version=answer.get("lock_version"))
    answer["rollout"] = rollout.to_dict()
    return answer


def _run_batch(session: ClusterSession, params: Mapping[str, Any], check_mode: bool, rollout: Rollout,
               holder: Optional[str], batch_started: Optional[float], written: dict[str, str]) -> dict[str, Any]:
    cloud = session.cloud
    give_job_seconds(cloud, rollout.job_seconds)
    nodes = [str(n) for n in params.get("nodes") or []]
    # The batch's VMs are listed by the management server while the Kubernetes client is made (its
    # kubeconfig fetched with getKubernetesClusterConfig) and the record read from the API server:
    # no answer waits for another, so the run pays the longer of the two, not their sum. The
    # CloudStack client is shared, as the batch's node threads share it: cs keeps no state of a
    # request on the client (it signs and sends each through one requests.Session), and the one
    # setting ours writes before each request, the timeout, is the same for both here (no batch
    # deadline yet).
    entry = session.entry()
    loader = ClusterLoader(cloud, None, session.catalog, fresh_entry=entry)
    _read, (kube, record) = side_by_side(lambda: loader.read_batch_vms(entry, nodes),
                                         lambda: (session.kube, session.store.read()), name="kube-connect")
    loader.kube = kube
    settings = settings_from(params.get("settings"), record)
    # A cancel stops the rollout before a batch starts; a batch in progress finishes its phases.
    if record is not None and record.cancel and phase_of(params) in (PHASE_ALL, PHASE_CORDON):
        raise StepFailed(", ".join(nodes) or "-", "preflight",
                         "the rollout was cancelled (the record's cancel flag is set): no further batch starts",
                         cancelled=True)
    external = external_etcd(session)
    lock = held_lock(kube, holder, rollout.lock_version or None)
    controller = ControllerWatch()
    if lock is not None and not check_mode:
        # Who works this batch, written into the Lease at the batch's start: a rollout whose controller
        # is gone is taken over at once on this host only once this run is gone too.
        lock.batch_run = batch_note(nodes, phase_of(params))
        if controller.gone():
            # Forked or started just as the controller was killed: nothing of the batch has begun.
            return orphan_release(session, params, rollout, lock, nodes, None)
    # The batch's ROOT volumes are read only when one of its nodes' changes needs them.
    loader.root_volume_needed = lambda node: needs_root_volume(node, settings[node.node_type])
    events = NodeEvents(kube, run=holder)
    batch = BatchCycle(cloud, kube, loader, str(params["cluster"]), settings, nodes,
                       options=cycle_options(params, check_mode, max_unavailable_of(params, record), batch_started),
                       etcd_check=etcd_check_for(params, kube, external_etcd=external),
                       validate_etcd_always=client_from_options(params) is not None,
                       lock=lock, project_id=params.get("project_id"),
                       node_events=events, autoscaler=rollout.plan.get("autoscaler"))
    try:
        result = batch.run()
    finally:
        # The steps only queued their Events: the ones still queued go out before the module returns,
        # for a bounded time (what the batch's deadline has left, see NodeEvents.flush).
        events.flush(seconds_left(batch.options.batch_timeout, batch.options.batch_started, time.time()))
    if lock is not None and lock.written_version:
        written["version"] = lock.written_version
    if lock is not None and not check_mode and controller.gone():
        # The playbook was killed (an AWX cancel SIGKILLs its process group; this run lives on in its
        # worker's own session): the batch is at its safe point now, so this run releases the rollout
        # itself rather than leave the lock to expire.
        return orphan_release(session, params, rollout, lock, nodes, result)
    result.raise_for_failure()
    answer = dict(result.to_dict(), changed=result.changed)
    if not check_mode:
        answer["node_events"] = events.report()
    if events.warnings():
        answer["warnings"] = events.warnings()  # the run's warnings (ansible_module.run)
    if lock is not None and lock.written_version:
        answer["lock_version"] = lock.written_version  # the next batch renews from it in one write
    return answer
