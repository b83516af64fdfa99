# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Restart the nodes of one batch with their type's settings.

Per batch: a preflight (nothing changes unless every other node is up and etcd keeps its
quorum), then each node of the batch on its own thread: annotate its boot ID, cordon, (exclude
from load balancers,) drain, (wait for the load balancers,) stop, change (offering, root disk,
affinity groups), start, verify (Ready with a NEW boot ID, the VM no longer differs, etcd
healthy), uncordon (taking the rollout's marks off, see ``node_marks``). One deadline covers the
whole batch. Then, once every node is done, the cluster is validated (``validation``) in the same
module run: a module run per batch is the rollout's main fixed cost, so validation adds none.

With per-node hooks (the role's ``rollout_hook_before_drain`` / ``rollout_hook_after_verify``) a
batch runs in three phases, each its own module run (``CycleOptions.phase``), so that the operator's
task files run on each node between them: ``cordon`` (preflight, annotate, cordon, label out of the
load balancers), ``restart`` (preflight again, drain, stop, change, start, verify) and ``uncordon``
(re-check each node is back, uncordon, validate). Each later phase finds the node as the earlier
one left it (the annotation says the node is the rollout's, with its boot ID from before), and the
batch deadline counts from the batch's start (``batch_started``). Without hooks the batch is one
run, ``phase=all``: module start-up is the main fixed cost of a batch.

A failure leaves the node as it is: ``release`` judges it afterwards from what the node shows.
So that release can tell a node that never went down from one whose Ready is stale, the cycle
marks a node with ``STOP_ANNOTATION`` just before it sends the stop.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils import node_marks
from ansible_collections.cloudstack.cks.plugins.module_utils import plan as planning
from ansible_collections.cloudstack.cks.plugins.module_utils.cluster import (
    CONTROL,
    ETCD,
    ROLLOUT_ANNOTATION,
    STOP_ANNOTATION,
    UNHEALTHY_TAINTS,
    AffinityGroup,
    ClusterView,
    Node,
)
from ansible_collections.cloudstack.cks.plugins.module_utils.drain import DrainOptions, Drainer
from ansible_collections.cloudstack.cks.plugins.module_utils.etcd import client_from_options
from ansible_collections.cloudstack.cks.plugins.module_utils.errors import (
    CksError,
    CloudStackError,
    DeadlineExceeded,
    InvalidInput,
    StepFailed,
)
from ansible_collections.cloudstack.cks.plugins.module_utils.release import release_plan
from ansible_collections.cloudstack.cks.plugins.module_utils.retry import retry_report
from ansible_collections.cloudstack.cks.plugins.module_utils.validation import (
    DEFAULT_COUNT as DEFAULT_VALIDATE_COUNT,
    DEFAULT_INTERVAL as DEFAULT_VALIDATE_INTERVAL,
    DEFAULT_TIMEOUT as DEFAULT_VALIDATE_TIMEOUT,
    ClusterReader,
    ValidationOptions,
    ValidationResult,
    validate,
)
from ansible_collections.cloudstack.cks.plugins.module_utils.vm_changes import VmChanges, settled
from ansible_collections.cloudstack.cks.plugins.module_utils.waiting import Deadline, wait_for

DEFAULT_BATCH_TIMEOUT = 1800.0
DEFAULT_JOB_TIMEOUT = 900.0
DEFAULT_POLL_INTERVAL = 0.5
# The exclusion label goes on before the drain, so the service controller has the whole drain to
# take the node out of the load balancers; this covers a drain that was over at once.
DEFAULT_EXCLUDE_DELAY = 10.0
# The CKS cluster states a rollout may run in: its own node stops put the cluster in Alert.
ROLLOUT_STATES = ("Running", "Alert")

# The phases of a batch (see the module docstring): one run does it all, or three runs in turn.
PHASE_ALL, PHASE_CORDON, PHASE_RESTART, PHASE_UNCORDON = "all", "cordon", "restart", "uncordon"
PHASES = (PHASE_ALL, PHASE_CORDON, PHASE_RESTART, PHASE_UNCORDON)
#: The steps each phase runs (``all``: every one of them). The restart phase also cordons again a
#: node found uncordoned (a hook undid it), as a resumed node is: those steps show only then.
PHASE_STEPS: dict[str, frozenset[str]] = {
    PHASE_CORDON: frozenset({"annotate", "cordon", "exclude_from_lb"}),
    PHASE_RESTART: frozenset({"drain", "lb_wait", "stop", "change_offering", "resize_root_disk",
                              "update_affinity_groups", "start", "verify"}),
    PHASE_UNCORDON: frozenset({"recheck", "uncordon", "unmark"}),
}
#: A node's outcome when its phase went through: only the last phase (or ``all``) makes it done.
PHASE_OUTCOMES = {PHASE_ALL: "done", PHASE_CORDON: "cordoned", PHASE_RESTART: "restarted", PHASE_UNCORDON: "done"}
# Steps that only read: they change nothing, so they do not make a node "changed".
READ_ONLY_STEPS = frozenset({"verify", "recheck"})

#: ``etcd_check(without=[members], healthy=[members]) -> (ok, message)``: etcd keeps a quorum of
#: healthy voting members without ``without``, every member in ``healthy`` is healthy, and etcd
#: answers a quorum read. Member names are node names.
EtcdCheck = Callable[..., "tuple[bool, str]"]


# ---------------------------------------------------------------------------------------------
# Pure decisions


def _condition(node: dict[str, Any], kind: str) -> dict[str, Any]:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return cond
    return {}


def boot_id_of(node: dict[str, Any]) -> Optional[str]:
    info = (node.get("status") or {}).get("nodeInfo") or {}
    return info.get("bootID") or None


def annotations_of(node: dict[str, Any]) -> dict[str, str]:
    return dict((node.get("metadata") or {}).get("annotations") or {})


def node_is_back(node: dict[str, Any], old_boot_ids: Sequence[Optional[str]]) -> tuple[bool, str]:
    """One read of a Node: restarted and Ready, or why not.

    A Ready condition from before the stop can outlive the VM by the node-monitor grace period,
    so only a boot ID other than every one seen before the stop proves a new boot.
    """
    boot_id = boot_id_of(node)
    old = {b for b in old_boot_ids if b}
    if not boot_id:
        return False, "reports no boot ID"
    if boot_id in old:
        return False, f"still reports boot ID {boot_id} from before the restart"
    ready = _condition(node, "Ready")
    if ready.get("status") != "True":
        return False, f"new boot ID {boot_id}, Ready={ready.get('status', 'missing')} ({ready.get('reason', '')})"
    if ready.get("reason") not in (None, "", "KubeletReady"):
        return False, f"Ready=True but reason {ready.get('reason')}"
    taints = sorted({t.get("key") for t in (node.get("spec") or {}).get("taints") or []} & UNHEALTHY_TAINTS)
    if taints:
        return False, f"Ready but tainted {', '.join(taints)}"
    return True, f"Ready with new boot ID {boot_id}"


def back_for_uncordon(vm_state: str, node: Optional[dict[str, Any]]) -> tuple[bool, str]:
    """The uncordon phase's check, from one read of the Node (None: no Kubernetes node, an external
    etcd VM): still back as the restart phase verified it, or why not.

    The boot ID to compare with is the annotation's, written before the stop, so a stale Ready
    is never taken for a restart. A node someone else cordoned carries no annotation (no boot ID
    was recorded): it only has to be Ready, as it is not uncordoned, only its marks come off.
    """
    if vm_state != "Running":
        return False, f"VM is {vm_state}"
    if node is None:
        return True, "VM Running"
    annotations = annotations_of(node)
    if ROLLOUT_ANNOTATION in annotations:
        return node_is_back(node, [annotations[ROLLOUT_ANNOTATION]])
    if not (node.get("spec") or {}).get("unschedulable"):
        return False, ("carries no rollout annotation and is not cordoned: the cordon and restart phases did not "
                       "run for it (or someone uncordoned it meanwhile)")
    ok, why = node_is_back(node, [])
    return ok, (f"{why} (cordoned by someone else: no boot ID recorded to compare)" if ok else why)


def seconds_left(batch_timeout: float, batch_started: Optional[float], now: float) -> float:
    """What a phase has left of the batch's deadline, counted from the batch's start (None: now)."""
    if batch_started is None:
        return max(0.0, float(batch_timeout))
    return max(0.0, float(batch_timeout) - max(0.0, now - float(batch_started)))


@dataclass(frozen=True)
class CordonDecision:
    """How the cycle treats the node's cordon. ``ours``: the rollout cordoned it (or will)."""

    ours: bool
    annotate: bool  # write the boot-ID annotation
    cordon: bool  # send the cordon patch
    boot_id: Optional[str]  # the boot ID recorded for the node (annotation, or now)
    why: str


def cordon_decision(node: dict[str, Any]) -> CordonDecision:
    annotations = annotations_of(node)
    unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
    if ROLLOUT_ANNOTATION in annotations:
        # A rollout that stopped left it: the node may have restarted since, so the recorded
        # boot ID stays (release compares against it).
        return CordonDecision(True, False, not unschedulable, annotations[ROLLOUT_ANNOTATION],
                              "annotated by a rollout that stopped: resumed")
    if unschedulable:
        return CordonDecision(False, False, False, boot_id_of(node),
                              "cordoned by someone else: not annotated, and left cordoned afterwards")
    return CordonDecision(True, True, True, boot_id_of(node), "annotated and cordoned")


@dataclass(frozen=True)
class Change:
    kind: str  # offering | root_disk | affinity_groups
    from_: Any
    to: Any

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.from_, "to": self.to}


@dataclass(frozen=True)
class ChangePlan:
    offering: Optional[Change] = None  # ids in from_/to
    root_disk: Optional[Change] = None  # GB
    affinity_groups: Optional[Change] = None  # full id lists (dedication groups included)

    @property
    def empty(self) -> bool:
        return not (self.offering or self.root_disk or self.affinity_groups)


def change_plan(node: Node, type_settings: planning.TypeSettings) -> ChangePlan:
    """What the stopped VM needs: only the calls whose setting actually differs.

    CloudStack refuses an offering the VM already has, and a root disk only grows.
    """
    offering = None
    if type_settings.offering_id is not None and node.offering_id != type_settings.offering_id:
        offering = Change("offering", node.offering_id, type_settings.offering_id)
    disk = None
    wanted = type_settings.root_disk_gb
    if wanted is not None and node.root_disk_gb is not None and node.root_disk_gb < wanted:
        disk = Change("root_disk", node.root_disk_gb, wanted)
    groups = None
    target = planning.target_affinity_group_ids(node, type_settings)
    current = tuple(g.id for g in node.affinity_groups)
    if target is not None and frozenset(target) != frozenset(current):
        groups = Change("affinity_groups", current, target)
    return ChangePlan(offering, disk, groups)


def describe_changes(plan: ChangePlan, view: ClusterView) -> dict[str, Any]:
    """The changes in operator words (names next to ids), for the rollout report."""
    out: dict[str, Any] = {}
    if plan.offering:
        out["offering"] = {"from": view.offering_name(plan.offering.from_), "to": view.offering_name(plan.offering.to),
                           "from_id": plan.offering.from_, "to_id": plan.offering.to}
    if plan.root_disk:
        out["root_disk_gb"] = {"from": plan.root_disk.from_, "to": plan.root_disk.to}
    if plan.affinity_groups:
        def names(ids: Sequence[str]) -> list[str]:
            return [(view.group(i).name if view.group(i) else i) for i in ids]  # type: ignore[union-attr]

        out["affinity_groups"] = {"from": names(plan.affinity_groups.from_), "to": names(plan.affinity_groups.to),
                                  "from_ids": list(plan.affinity_groups.from_),
                                  "to_ids": list(plan.affinity_groups.to)}
    return out


def node_with_vm(node: Node, vm: dict[str, Any], root: Optional[dict[str, Any]], view: ClusterView) -> Node:
    """``node`` with the settings re-read from listVirtualMachines / listVolumes."""
    groups = []
    for raw in vm.get("affinitygroup") or []:
        gid = str(raw.get("id"))
        known = view.group(gid)
        groups.append(known or AffinityGroup(id=gid, name=str(raw.get("name", gid)), type=str(raw.get("type", ""))))
    root_gb = node.root_disk_gb
    if root is not None and root.get("size") is not None:
        root_gb = int(root["size"]) >> 30
    return dataclasses.replace(
        node,
        vm_state=str(vm.get("state", node.vm_state)),
        offering_id=vm.get("serviceofferingid") or node.offering_id,
        offering_name=vm.get("serviceofferingname") or node.offering_name,
        root_disk_gb=root_gb,
        affinity_groups=tuple(groups),
    )


# ---------------------------------------------------------------------------------------------
# Results


@dataclass
class StepRecord:
    name: str
    started: float
    ended: Optional[float] = None
    outcome: str = "running"  # ok | skipped | failed | would_run | would_skip
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "started": self.started, "ended": self.ended, "outcome": self.outcome,
                "detail": self.detail}


@dataclass
class NodeResult:
    name: str
    node_type: str
    steps: list[StepRecord] = field(default_factory=list)
    changes: dict[str, Any] = field(default_factory=dict)
    outcome: str = "pending"  # done | failed | would_cycle; cordoned | restarted after those phases
    cordoned_by_others: bool = False
    error: Optional[dict[str, Any]] = None
    started: float = 0.0
    ended: Optional[float] = None

    @property
    def changed(self) -> bool:
        return any(s.outcome == "ok" and s.name not in READ_ONLY_STEPS for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "node_type": self.node_type, "outcome": self.outcome,
                "steps": [s.to_dict() for s in self.steps], "changes": dict(self.changes),
                "cordoned_by_others": self.cordoned_by_others, "error": self.error,
                "started": self.started, "ended": self.ended}


@dataclass
class BatchResult:
    nodes: list[str]
    preflight: dict[str, Any] = field(default_factory=dict)
    results: list[NodeResult] = field(default_factory=list)
    uncordoned: list[dict[str, str]] = field(default_factory=list)  # back from a stopped rollout
    error: Optional[StepFailed] = None
    check_mode: bool = False
    started: float = 0.0
    ended: Optional[float] = None
    validation: Optional[ValidationResult] = None
    phase: str = PHASE_ALL
    retries: dict[str, Any] = field(default_factory=dict)  # what the clients sent again (retry.py)

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def changed(self) -> bool:
        return bool(self.uncordoned and not self.check_mode) or any(r.changed for r in self.results)

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch": list(self.nodes),
            "phase": self.phase,
            "preflight": dict(self.preflight),
            "nodes": [r.to_dict() for r in self.results],
            "failed_nodes": [r.name for r in self.results if r.outcome == "failed"],
            "uncordoned": [dict(u) for u in self.uncordoned],
            "started": self.started,
            "ended": self.ended,
            "check_mode": self.check_mode,
            "validation": self.validation.to_dict() if self.validation is not None else None,
            "retries": dict(self.retries),
        }

    def raise_for_failure(self) -> None:
        """Raise the batch's StepFailed with the whole result as details (for ``fail_json``)."""
        if self.error is not None:
            details = {k: v for k, v in self.error.details.items() if k not in ("node", "step")}
            details.update(self.to_dict())
            details["changed"] = self.changed
            raise StepFailed(self.error.node, self.error.step, _cause(self.error), **details)


def _cause(error: StepFailed) -> str:
    prefix = f"node {error.node}: {error.step} failed: "
    return error.msg[len(prefix):] if error.msg.startswith(prefix) else error.msg


# ---------------------------------------------------------------------------------------------
# Running a batch


@dataclass
class CycleOptions:
    batch_timeout: float = DEFAULT_BATCH_TIMEOUT
    job_timeout: float = DEFAULT_JOB_TIMEOUT  # each async job, cut to what the batch has left
    poll_interval: float = DEFAULT_POLL_INTERVAL
    drain: DrainOptions = field(default_factory=DrainOptions)
    check_mode: bool = False
    validation: ValidationOptions = field(default_factory=ValidationOptions)
    exclude_from_load_balancers: bool = False
    exclude_delay: float = DEFAULT_EXCLUDE_DELAY  # seconds between the drain and the stop
    phase: str = PHASE_ALL
    batch_started: Optional[float] = None  # Unix time the batch's first phase started (None: now)


class BatchCycle:
    """One batch: ``run()`` returns a BatchResult (``raise_for_failure`` turns a failure into an error).

    ``cloud``: CloudStackClient; ``kube``: KubeClient; ``loader``: ClusterLoader; ``cluster``: the
    cluster's id or name; ``settings``: plan.Settings; ``etcd_check``: see ``EtcdCheck``, needed
    for control nodes with stacked etcd and for etcd nodes; ``lock``: anything with ``renew()``
    raising LockHeld when the rollout no longer holds the lock.
    """

    def __init__(self, cloud: Any, kube: Any, loader: Any, cluster: str, settings: planning.Settings,
                 nodes: Sequence[str], options: Optional[CycleOptions] = None,
                 etcd_check: Optional[EtcdCheck] = None, lock: Any = None,
                 project_id: Optional[str] = None) -> None:
        self.cloud = cloud
        self.kube = kube
        self.loader = loader
        self.cluster = cluster
        self.settings = settings
        self.names = [n.lower() for n in nodes]
        self.options = options or CycleOptions()
        self.etcd_check = etcd_check
        self.lock = lock
        self.project_id = project_id

    def run(self) -> BatchResult:
        phase = self.options.phase
        result = BatchResult(nodes=list(self.names), check_mode=self.options.check_mode, started=time.time(),
                             phase=phase)
        deadline = Deadline(seconds_left(self.options.batch_timeout, self.options.batch_started, result.started))
        if hasattr(self.kube, "deadline"):
            # The Kubernetes client's retries wait no longer than the batch may run.
            self.kube.deadline = deadline
        try:
            if not self.names:
                return result
            if self.lock is not None and not self.options.check_mode:
                self.lock.renew()
            if phase == PHASE_RESTART and deadline.expired():
                raise StepFailed(", ".join(self.names), "preflight",
                                 f"the batch deadline ({self.options.batch_timeout:g}s from the batch's start) passed "
                                 "before its restart phase (the before_drain hooks took that long): nothing was "
                                 "drained or stopped")
            view = self.loader.load(self.cluster, self.project_id, detail_for=self.names)
            members = [view.node(name) for name in self.names]
            if phase in (PHASE_ALL, PHASE_CORDON):
                result.uncordoned = self.return_nodes_that_are_back(view)
            if phase != PHASE_UNCORDON:
                # Again before the restart phase drains: the before_drain hooks ran since the cordon
                # phase's preflight, maybe for minutes, and another node may have gone down meanwhile.
                result.preflight = self.preflight(view, members)
            cycles = [NodeCycle(self, view, node, deadline) for node in members]
            if self.options.check_mode:
                result.results = [c.would_run() for c in cycles]
                return result
            threads = [threading.Thread(target=c.run, name=f"cycle-{c.node.name}", daemon=True) for c in cycles]
            renewer = _LockRenewer(self.lock)
            failures: list[StepFailed] = []
            renewer.start()
            try:
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                result.results = [c.result for c in cycles]
                failures = [c.failure for c in cycles if c.failure is not None]
                if (phase in (PHASE_ALL, PHASE_UNCORDON) and not failures and not renewer.error
                        and self.options.validation.enabled):
                    # Still under the renewer: validation may outlast a third of the lock.
                    result.validation = validate(ClusterReader(self.kube, self.etcd_check), self.options.validation)
            finally:
                renewer.stop()
            if renewer.error:
                # Nodes already down are finished rather than abandoned; the next batch will not start.
                result.preflight["lock_renewal"] = renewer.error
            if failures:
                result.error = failures[0] if len(failures) == 1 else StepFailed(
                    ", ".join(f.node for f in failures), "/".join(sorted({f.step for f in failures})),
                    "; ".join(f.msg for f in failures))
            elif renewer.error:
                # The batch finished its nodes, but another rollout may own the cluster now: fail
                # so that no further batch of this one runs.
                result.error = StepFailed(", ".join(self.names), "lock", renewer.error, lock_lost=True)
            elif result.validation is not None and not result.validation.ok:
                # Like a failed batch: the nodes are back, but the next batch must not take more away.
                result.error = StepFailed(", ".join(self.names), "validate", result.validation.message(),
                                          problems=result.validation.last_problems)
        except StepFailed as exc:
            result.error = exc
        except CksError as exc:
            result.error = StepFailed(", ".join(self.names), "preflight" if not result.results else "batch",
                                      exc.msg, **exc.details)
        finally:
            result.ended = time.time()
            result.retries = retry_report(("cloudstack", getattr(self.cloud, "retry_log", None)),
                                          ("kubernetes", getattr(self.kube, "retry_log", None)))
            if hasattr(self.kube, "deadline"):
                self.kube.deadline = None
        return result

    def return_nodes_that_are_back(self, view: ClusterView) -> list[dict[str, str]]:
        """Uncordon the nodes a stopped rollout left cordoned that are back since (or never went down).

        A rerun must do this before it drains anything: the pods this batch evicts need those
        nodes, and with them still cordoned a PodDisruptionBudget can block the drain for good.
        """
        back = [(name, why) for name, why in release_plan(view)[0] if name not in self.names]
        marks = node_marks.release_marks(view, [name for name, _why in back])[0]
        if not self.options.check_mode:
            for name, _why in back:
                node_marks.put_back(self.kube, name, marks.get(name, node_marks.Marks()), True)
        return [{"node": name, "why": why} for name, why in back]

    # -- preflight --------------------------------------------------------------------------

    def preflight(self, view: ClusterView, members: list[Node]) -> dict[str, Any]:
        """Refuse the batch, before anything changes, unless it can go down safely now."""
        where = ", ".join(self.names)
        problems: list[str] = []
        if view.state not in ROLLOUT_STATES:
            problems.append(f"cluster {view.name} is {view.state}: another CKS operation holds it")
        ok, found = planning.batch_is_safe(view, self.names)
        problems.extend(found)
        checks: dict[str, Any] = {"cluster_state": view.state}
        quorum_members = [n for n in members if n.node_type == ETCD
                          or (n.node_type == CONTROL and not view.external_etcd)]
        if quorum_members and not problems:
            # A member already down is lost already; only running members are taken down.
            going = [n.name for n in quorum_members]
            if self.etcd_check is None:
                problems.append(f"{where}: an etcd member, and no etcd check is configured "
                                "(etcd_endpoints) to prove the others keep a quorum")
            else:
                healthy, message = self.etcd_check(without=going)
                checks["etcd_quorum"] = message
                if not healthy:
                    problems.append(f"etcd would lose its quorum without {', '.join(going)}: {message}")
            status, text = self.kube.raw_get("/readyz/etcd")
            checks["readyz_etcd"] = status
            if status != 200:
                problems.append(f"the Kubernetes API reports etcd not ready (/readyz/etcd HTTP {status}: "
                                f"{text.strip()[:200]})")
        if problems:
            raise StepFailed(where, "preflight", "; ".join(problems), problems=problems)
        checks["ok"] = True
        return checks


class _LockRenewer:
    """Keeps the rollout lock renewed while a batch runs (a batch may outlast the lease)."""

    def __init__(self, lock: Any) -> None:
        self.lock = lock
        self.error: Optional[str] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        if self.lock is None:
            return
        self._thread = threading.Thread(target=self._run, name="lock-renewer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        period = max(1.0, float(getattr(self.lock, "duration_seconds", 600)) / 3)
        while not self._stop.wait(period):
            try:
                self.lock.renew()
            except CksError as exc:
                self.error = exc.msg
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


class NodeCycle:
    """The steps of one node of a batch. ``run`` never raises: it fills ``result`` / ``failure``."""

    def __init__(self, batch: BatchCycle, view: ClusterView, node: Node, deadline: Deadline) -> None:
        self.batch = batch
        self.view = view
        self.node = node
        self.deadline = deadline
        self.cloud = batch.cloud
        self.kube = batch.kube
        self.options = batch.options
        self.type_settings = batch.settings[node.node_type]
        self.plan = change_plan(node, self.type_settings)
        self.result = NodeResult(name=node.name, node_type=node.node_type)
        self.result.changes = describe_changes(self.plan, view)
        self.failure: Optional[StepFailed] = None
        self._old_boot_ids: list[Optional[str]] = []
        self._ours = False
        self._lb_ours = False  # the load-balancer exclusion label is the rollout's
        self._last_read: Optional[dict[str, Any]] = None  # the node as verify last read it

    # -- helpers -----------------------------------------------------------------------------

    def _step(self, name: str, fn: Callable[[], str]) -> None:
        record = StepRecord(name=name, started=time.time())
        self.result.steps.append(record)
        try:
            detail = fn()
        except StepFailed as exc:
            record.ended, record.outcome, record.detail = time.time(), "failed", _cause(exc)
            raise
        except CksError as exc:
            record.ended, record.outcome, record.detail = time.time(), "failed", exc.msg
            raise StepFailed(self.node.name, name, exc.msg, **_answer(exc)) from exc
        record.ended, record.outcome, record.detail = time.time(), "ok", detail or ""

    def _skip(self, name: str, why: str) -> None:
        now = time.time()
        self.result.steps.append(StepRecord(name=name, started=now, ended=now, outcome="skipped", detail=why))

    @property
    def _k8s(self) -> bool:
        return self.node.is_kubernetes_node

    @property
    def _needs_etcd(self) -> bool:
        return self.node.node_type == ETCD or (self.node.node_type == CONTROL and not self.view.external_etcd)

    # -- check mode ----------------------------------------------------------------------------

    def would_run(self) -> NodeResult:
        now = time.time()
        steps: list[tuple[str, str, str]] = []
        current: dict[str, Any] = {}
        if self._k8s:
            current = self.kube.read_node(self.node.name)
            decision = cordon_decision(current)
            self.result.cordoned_by_others = not decision.ours
            steps.append(("annotate", "would_run" if decision.annotate else "would_skip", decision.why))
            steps.append(("cordon", "would_run" if decision.cordon else "would_skip", decision.why))
            exclusion = node_marks.exclusion_decision(current)
            if self.options.exclude_from_load_balancers:
                steps.append(("exclude_from_lb", "would_run" if exclusion.label else "would_skip", exclusion.why))
            steps.append(("drain", "would_run", ""))
            if self.options.exclude_from_load_balancers:
                waits = exclusion.ours and self.node.running
                steps.append(("lb_wait", "would_run" if waits else "would_skip",
                              f"{self.options.exclude_delay:g}s" if waits else "nothing to wait for"))
        steps.append(("stop", "would_run" if self.node.running else "would_skip", f"VM is {self.node.vm_state}"))
        for name, change in (("change_offering", self.plan.offering), ("resize_root_disk", self.plan.root_disk),
                             ("update_affinity_groups", self.plan.affinity_groups)):
            steps.append((name, "would_run" if change else "would_skip", "" if change else "already as set"))
        steps.append(("start", "would_run", ""))
        steps.append(("verify", "would_run", ""))
        if self._k8s:
            steps.append(("uncordon", "would_run" if not self.result.cordoned_by_others else "would_skip", ""))
            marks = node_marks.marks_of(current)
            if self.result.cordoned_by_others and (marks.any or self.options.exclude_from_load_balancers):
                steps.append(("unmark", "would_run", "the rollout's marks come off; the node stays cordoned"))
        phase = self.options.phase
        if phase != PHASE_ALL:
            steps = [step for step in steps if step[0] in PHASE_STEPS[phase]]
        if phase == PHASE_UNCORDON:
            steps.insert(0, ("recheck", "would_run", "the node must still be back as the restart phase left it"))
        self.result.steps = [StepRecord(n, now, now, o, d) for n, o, d in steps]
        self.result.outcome = "would_cycle"
        self.result.started = self.result.ended = now
        return self.result

    # -- the cycle ------------------------------------------------------------------------------

    def run(self) -> None:
        self.result.started = time.time()
        phase = self.options.phase
        try:
            if self._k8s and phase in (PHASE_ALL, PHASE_CORDON, PHASE_RESTART):
                self._cordon(resumed=phase == PHASE_RESTART)
            if phase in (PHASE_ALL, PHASE_RESTART):
                if self._k8s:
                    self._drain_and_wait()
                self._change()
                self._verify()
            if phase == PHASE_UNCORDON:
                self._step("recheck", self._recheck)
            if self._k8s and phase in (PHASE_ALL, PHASE_UNCORDON):
                self._uncordon()
            self.result.outcome = PHASE_OUTCOMES[phase]
        except StepFailed as exc:
            self.failure = exc
        except Exception as exc:  # a bug must still end this node's thread with a result
            self.failure = StepFailed(self.node.name, self.result.steps[-1].name if self.result.steps else "cycle",
                                      f"{type(exc).__name__}: {exc}")
        if self.failure is not None:
            self.result.outcome = "failed"
            self.result.error = {"step": self.failure.step, "message": self.failure.msg,
                                 **{k: v for k, v in self.failure.details.items() if k not in ("node", "step")}}
        self.result.ended = time.time()

    def _cordon(self, resumed: bool = False) -> None:
        """Annotate, cordon, label out of the load balancers: what the node needs of it.

        ``resumed`` (the restart phase): the cordon phase did it already, so the node is read to
        learn what it did (its recorded boot ID, whose cordon it is), and only what a hook may have
        undone is done again; steps with nothing to do are not recorded a second time.
        """
        current = self.kube.read_node(self.node.name)
        decision = cordon_decision(current)
        self._ours = decision.ours
        self.result.cordoned_by_others = not decision.ours
        self._old_boot_ids = [decision.boot_id, boot_id_of(current)]
        if decision.annotate:
            self._step("annotate", lambda: self._patch({"metadata": {"annotations": {
                ROLLOUT_ANNOTATION: decision.boot_id or ""}}}, f"boot ID {decision.boot_id}"))
        elif not resumed:
            self._skip("annotate", decision.why)
        if decision.cordon:
            self._step("cordon", lambda: self._patch({"spec": {"unschedulable": True}}, "unschedulable"))
        elif not resumed:
            self._skip("cordon", "already cordoned" if decision.ours else decision.why)
        if self.options.exclude_from_load_balancers:
            self._exclude_from_load_balancers(current, resumed)

    def _drain_and_wait(self) -> None:
        drainer = Drainer(self.kube, self.options.drain)
        self._step("drain", lambda: self._drain(drainer))
        if self.options.exclude_from_load_balancers:
            self._wait_for_load_balancers()

    def _exclude_from_load_balancers(self, current: dict[str, Any], resumed: bool = False) -> None:
        exclusion = node_marks.exclusion_decision(current)
        self._lb_ours = exclusion.ours
        if exclusion.label:
            self._step("exclude_from_lb", lambda: self._patch(
                node_marks.exclusion_patch(), f"labelled {node_marks.LB_EXCLUSION_LABEL}"))
        elif not resumed:
            self._skip("exclude_from_lb", exclusion.why)

    def _recheck(self) -> str:
        """The uncordon phase: one read says the node is still back as the restart phase left it
        (the after_verify hooks ran since); it also says whose cordon it is."""
        current = None
        if self._k8s:
            current = self._last_read = self.kube.read_node(self.node.name)
            self._ours = cordon_decision(current).ours
            self.result.cordoned_by_others = not self._ours
        ok, why = back_for_uncordon(self.node.vm_state, current)
        if not ok:
            raise StepFailed(self.node.name, "recheck", f"not back as the restart phase left it: {why}")
        return why

    def _wait_for_load_balancers(self) -> None:
        """Give the service controller time to drop the node before its VM stops (EKS waits too)."""
        if not self._lb_ours:
            self._skip("lb_wait", "the node was out of load balancers before the rollout")
        elif not self.node.running:
            self._skip("lb_wait", f"VM is {self.node.vm_state}: no traffic to wait for")
        else:
            self._step("lb_wait", self._lb_wait)

    def _lb_wait(self) -> str:
        delay = max(0.0, float(self.options.exclude_delay))
        if self.deadline.remaining() < delay:
            raise StepFailed(self.node.name, "lb_wait", f"the batch deadline leaves {self.deadline.remaining():.0f}s, "
                             f"less than the {delay:g}s to wait for the load balancers")
        time.sleep(delay)
        return f"waited {delay:g}s after the drain for the load balancers to drop the node"

    def _patch(self, patch: dict[str, Any], detail: str) -> str:
        self.kube.patch_node(self.node.name, patch)
        return detail

    def _drain(self, drainer: Drainer) -> str:
        report = drainer.drain(self.node.name, self.deadline, node_down=not self.node.running)
        self.result.changes.setdefault("drain", {})
        self.result.changes["drain"] = {"evicted": report.evicted, "skipped": len(report.skipped)}
        if report.warnings:
            self.result.changes["drain"]["warnings"] = report.warnings
        return f"{len(report.evicted)} pods evicted, {len(report.skipped)} left (DaemonSet and mirror pods)"

    def _change(self) -> None:
        vm_id = self.node.vm_id
        changes = VmChanges(self.cloud, vm_id, target=self.node.vm_name)
        if self.node.vm_state == "Stopped":
            self._skip("stop", "VM already Stopped")
        else:
            self._step("stop", lambda: self._stop(changes))
        if self.plan.offering:
            offering = self.plan.offering
            self._step("change_offering", lambda: settled(
                f"{self.view.offering_name(offering.from_)} -> {self.view.offering_name(offering.to)}",
                changes.change_offering(offering.to, self.deadline)))
        else:
            self._skip("change_offering", "offering already as set")
        if self.plan.root_disk:
            disk = self.plan.root_disk
            if not self.node.root_volume_id:
                raise StepFailed(self.node.name, "resize_root_disk", "no ROOT volume visible to resize")
            volume_id = self.node.root_volume_id
            self._step("resize_root_disk", lambda: settled(
                f"{disk.from_} GB -> {disk.to} GB", changes.resize_root_disk(volume_id, disk.to, self._job_deadline())))
        else:
            self._skip("resize_root_disk", "root disk already large enough")
        if self.plan.affinity_groups:
            groups = self.plan.affinity_groups
            names = self.result.changes.get("affinity_groups", {})
            self._step("update_affinity_groups", lambda: settled(
                f"{names.get('from')} -> {names.get('to')}", changes.set_affinity_groups(groups.to, self._job_deadline())))
        else:
            why = "the type records no groups" if self.type_settings.affinity_group_ids is None else "groups already as set"
            self._skip("update_affinity_groups", why)
        self._step("start", lambda: settled("Running", changes.start(self._job_deadline())))

    def _job_deadline(self) -> Deadline:
        return self.deadline.sub(self.options.job_timeout)

    def _stop(self, changes: VmChanges) -> str:
        if self._k8s and self._ours:
            # Release must know a stop may have happened: then a Ready with the old boot ID is
            # never taken for "it never went down" (it may be the stale one from before the stop).
            self.kube.patch_node(self.node.name, {"metadata": {"annotations": {STOP_ANNOTATION: _now_text()}}})
        try:
            how = changes.stop(self._job_deadline())
        except CloudStackError:
            # A failed job may still have left the VM stopped: its state says.
            if changes.read_vm().get("state") != "Stopped":
                raise
            how = "the VM is Stopped after all"
        return settled("Stopped", how)

    def _read_vm(self) -> dict[str, Any]:
        found = self.cloud.list("listVirtualMachines", id=self.node.vm_id, listall=True)
        if not found:
            raise CloudStackError("listVirtualMachines", "the VM is gone", target=self.node.vm_name)
        return found[0]

    def _read_root(self) -> Optional[dict[str, Any]]:
        volumes = self.cloud.list("listVolumes", virtualmachineid=self.node.vm_id, type="ROOT", listall=True)
        return volumes[0] if volumes else None

    def _verify(self) -> None:
        self._step("verify", self._verify_all)

    def _verify_all(self) -> str:
        parts = []
        if self._k8s:
            last = {"why": ""}

            def back() -> bool:
                self._last_read = self.kube.read_node(self.node.name)
                ok, why = node_is_back(self._last_read, self._old_boot_ids)
                last["why"] = why
                return ok

            try:
                wait_for(back, self.deadline, self.options.poll_interval, what=f"node {self.node.name} to come back")
            except DeadlineExceeded:
                raise StepFailed(self.node.name, "verify", f"not back by the batch deadline: {last['why']}")
            parts.append(last["why"])
        refreshed = node_with_vm(self.node, self._read_vm(), self._read_root(), self.view)
        if refreshed.vm_state != "Running":
            raise StepFailed(self.node.name, "verify", f"VM is {refreshed.vm_state}")
        reasons = planning.outdated_reasons(refreshed, self.type_settings, self.view)
        if reasons:
            raise StepFailed(self.node.name, "verify", "the VM still differs from the settings: "
                             + "; ".join(r.message for r in reasons))
        parts.append("VM matches the settings")
        if self._needs_etcd:
            check = self.batch.etcd_check
            if check is None:
                raise StepFailed(self.node.name, "verify", "no etcd check configured to prove the member is back")
            last_etcd = {"why": ""}

            def etcd_back() -> bool:
                ok, why = check(healthy=[self.node.name])
                last_etcd["why"] = why
                return ok

            try:
                wait_for(etcd_back, self.deadline, self.options.poll_interval, what=f"etcd member {self.node.name}")
            except DeadlineExceeded:
                raise StepFailed(self.node.name, "verify", f"etcd not healthy by the batch deadline: {last_etcd['why']}")
            parts.append(f"etcd healthy: {last_etcd['why']}")
        return "; ".join(parts)

    def _uncordon(self) -> None:
        """Back into service in one write: uncordon, drop the annotations and the rollout's marks.

        The marks come off whatever this run's options are (a stopped run may have left them). A
        node someone else cordoned stays cordoned; only the marks come off it.
        """
        current = self._last_read if self._last_read is not None else self.kube.read_node(self.node.name)
        marks = node_marks.marks_of(current)
        if self._ours:
            self._step("uncordon", lambda: self._return(current, marks, True))
            return
        self._skip("uncordon", "cordoned by someone else before the rollout: left cordoned")
        if marks.any:
            self._step("unmark", lambda: self._return(current, marks, False))

    def _return(self, current: dict[str, Any], marks: node_marks.Marks, uncordon: bool) -> str:
        node_marks.put_back(self.kube, self.node.name, marks, uncordon, node=current)
        done = ["uncordoned, annotation removed"] if uncordon else []
        if marks.any:
            done.append(f"{marks.words()} removed")
        return ", ".join(done)


def _answer(exc: CksError) -> dict[str, Any]:
    """What CloudStack or Kubernetes answered, for the result (no secrets are in these fields)."""
    keep = ("command", "errorcode", "errortext", "target", "action", "status", "reason", "what", "jobid")
    return {k: v for k, v in exc.details.items() if k in keep}


def _now_text() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def etcd_check_from(client: Any) -> EtcdCheck:
    """An ``EtcdCheck`` over ``etcd.EtcdClient``: its quorum verdict, plus named members healthy."""

    def check(without: Sequence[str] = (), healthy: Sequence[str] = ()) -> tuple[bool, str]:
        try:
            verdict = client.check(going_down=list(without))
        except CksError as exc:
            # Unreachable or a name etcd does not know: not proven safe (verify polls again).
            return False, exc.msg
        if not verdict.safe:
            return False, verdict.message
        members = {m.name: m for m in verdict.members}
        missing = [name for name in healthy if name not in members]
        sick = [f"{name} ({members[name].reason or 'unhealthy'})" for name in healthy
                if name in members and not members[name].healthy]
        if missing:
            return False, f"not an etcd member: {', '.join(missing)}; {verdict.message}"
        if sick:
            return False, f"member not healthy yet: {', '.join(sick)}; {verdict.message}"
        return True, verdict.message

    return check


# ---------------------------------------------------------------------------------------------
# The service behind cks_node_cycle (mode=cycle)


def held_lock(kube: Any, holder: Optional[str]) -> Any:
    """The rollout lock as held by ``holder`` (None: no lock is checked), keeping its duration."""
    if not holder:
        return None
    from ansible_collections.cloudstack.cks.plugins.module_utils.record import Lock

    current = Lock(kube, holder_identity=holder).read()
    duration = current.duration_seconds if current is not None and current.duration_seconds > 0 else None
    return Lock(kube, holder_identity=holder, **({"duration_seconds": duration} if duration else {}))


def settings_from(given: Optional[dict[str, Any]], record: Any) -> planning.Settings:
    """The settings passed in, else the ones stored in the rollout record."""
    if given:
        return planning.Settings.from_dict(given)
    if record is None or not record.settings:
        raise InvalidInput("settings", None, "not given, and the cluster has no stored settings yet "
                                             "(store them with cloudstack.cks.cks_node_settings first)")
    return planning.Settings.from_dict(record.settings)


def etcd_check_for(params: dict[str, Any]) -> Optional[EtcdCheck]:
    client = client_from_options(params)
    return etcd_check_from(client) if client is not None else None


def cycle_options(params: dict[str, Any], check_mode: bool) -> CycleOptions:
    drain = DrainOptions(
        delete_emptydir_data=bool(params.get("delete_emptydir_data")),
        force=bool(params.get("force")),
        grace_period=params.get("grace_period"),
        eviction_retry_interval=float(params.get("eviction_retry_interval") or 5.0),
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
        batch_started=None if params.get("batch_started") is None else float(params["batch_started"]),
    )


def phase_of(params: dict[str, Any]) -> str:
    phase = str(params.get("phase") or PHASE_ALL)
    if phase not in PHASES:
        raise InvalidInput("phase", phase, f"must be one of {', '.join(PHASES)}")
    return phase


def _number(params: dict[str, Any], name: str, default: float, minimum: float) -> float:
    value = params.get(name)
    value = default if value is None else float(value)
    if value < minimum:
        raise InvalidInput(name, value, f"must be {minimum:g} or more")
    return value


def validation_options(params: dict[str, Any]) -> ValidationOptions:
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


def node_cycle(params: dict[str, Any], cloud: Any, kube: Any, check_mode: bool = False) -> dict[str, Any]:
    """Run one batch as the module's parameters say; raises StepFailed with the whole result."""
    from ansible_collections.cloudstack.cks.plugins.module_utils.cluster import ClusterLoader
    from ansible_collections.cloudstack.cks.plugins.module_utils.record import RecordStore

    nodes = [str(n) for n in params.get("nodes") or []]
    record = RecordStore(kube).read()
    settings = settings_from(params.get("settings"), record)
    # A cancel stops the rollout before a batch starts; a batch in progress finishes its phases.
    if record is not None and record.cancel and phase_of(params) in (PHASE_ALL, PHASE_CORDON):
        raise StepFailed(", ".join(nodes) or "-", "preflight",
                         "the rollout was cancelled (the record's cancel flag is set): no further batch starts",
                         cancelled=True)
    batch = BatchCycle(cloud, kube, ClusterLoader(cloud, kube), str(params["cluster"]), settings, nodes,
                       options=cycle_options(params, check_mode), etcd_check=etcd_check_for(params),
                       lock=held_lock(kube, params.get("lock_holder")), project_id=params.get("project_id"))
    result = batch.run()
    result.raise_for_failure()
    return dict(result.to_dict(), changed=result.changed)
