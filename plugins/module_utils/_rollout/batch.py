# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Restart the nodes of one batch with their type's settings.

Per batch: a preflight (nothing changes unless every other node is up and etcd keeps its
quorum), then each node of the batch on its own thread: annotate its boot ID, cordon, (exclude
from load balancers,) drain, (wait for the load balancers,) stop, change (offering, root disk,
affinity groups), start, verify (Ready with a NEW boot ID, the VM no longer differs, etcd
healthy), uncordon (taking the rollout's marks off, see ``_decisions.marks``). One deadline covers the
whole batch. Then, once every node is done, the cluster is validated (``_rollout.validation``) in the same
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

import threading
import time
from functools import partial
from typing import Any, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.autoscaler import hold_nodes
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.node_watch import NodeWatch
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.placement import read_placement
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.retry import retry_report
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, StepFailed
from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import CloudStackApi, KubernetesApi, NodeWaits, RolloutLock
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.api_servers import (
    API_SERVER_NAMESPACE,
    API_SERVER_SELECTOR,
    api_server_problems,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.autoscaler import PASSING_OPERATIONS, added_nodes, cks_wait_line
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.health import batch_is_safe, release_plan
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.marks import Marks, release_marks
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node import seconds_left
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.placement import placement_refusals, start_one_by_one
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.states import ROLLOUT_STATES
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import CONTROL, ETCD, ClusterView, Node
from ansible_collections.cloudstack.cks.plugins.module_utils._model.loader import ClusterLoader
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.drainer import DaemonSets
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.etcd_check import EtcdCheck
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.marks import return_to_service
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.node_cycle import NodeCycle
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.options import CycleOptions, NodeEventSink
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.results import BatchResult
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.start_gates import StartGates
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.steps import PHASE_ALL, PHASE_CORDON, PHASE_RESTART, PHASE_UNCORDON
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.stop_check import check_before_stop
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.validation import ClusterReader, validate


class BatchCycle:
    """One batch: ``run()`` returns a BatchResult (``raise_for_failure`` turns a failure into an error).

    ``cloud``: CloudStackClient; ``kube``: KubeClient; ``loader``: ClusterLoader; ``cluster``: the
    cluster's id or name; ``settings``: plan.Settings; ``etcd_check``: see ``EtcdCheck``, needed
    for control nodes with stacked etcd and for etcd nodes; ``lock``: anything with ``renew()``
    raising LockHeld when the rollout no longer holds the lock.
    """

    def __init__(self, cloud: CloudStackApi, kube: KubernetesApi, loader: ClusterLoader, cluster: str, settings: Settings,
                 nodes: Sequence[str], options: Optional[CycleOptions] = None,
                 etcd_check: Optional[EtcdCheck] = None, lock: Optional[RolloutLock] = None,
                 project_id: Optional[str] = None, validate_etcd_always: bool = True,
                 node_events: Optional[NodeEventSink] = None, autoscaler: Optional[Mapping[str, Any]] = None) -> None:
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
        # etcd options given: the validation asks etcd after every batch, as it always did.
        self.validate_etcd_always = validate_etcd_always
        self.daemonsets = DaemonSets(kube)
        # Replaced by the batch's one watch of its nodes while its node threads run.
        self.node_waits: NodeWaits = kube
        # Set per batch from its nodes' strict groups (see ``StartGates``).
        self.start_gates = StartGates()
        #: Where the node cycles write their Events (``_clients/node_events.NodeEvents``); None: none.
        self.node_events = node_events
        #: The plan's ``autoscaler`` (``_decisions/autoscaler.autoscaler_of`` and the nodes the plan knew).
        self.autoscaler = autoscaler

    def run(self) -> BatchResult:
        phase = self.options.phase
        result = BatchResult(nodes=list(self.names), check_mode=self.options.check_mode, started=time.time(),
                             phase=phase)
        deadline = Deadline(seconds_left(self.options.batch_timeout, self.options.batch_started, result.started))
        # The clients' retries (through an API server or management server that is down) wait no
        # longer than the batch may run, and as long.
        self.kube.deadline = deadline
        self.cloud.deadline = deadline
        try:
            if not self.names:
                return result
            if self.lock is not None and not self.options.check_mode:
                self.lock.renew_at_batch_start()
            if phase == PHASE_RESTART and deadline.expired():
                raise StepFailed(", ".join(self.names), "preflight",
                                 f"the batch deadline ({self.options.batch_timeout:g}s from the batch's start) passed "
                                 "before its restart phase (the before_drain hooks took that long): nothing was "
                                 "drained or stopped")
            notes: list[str] = []
            view = self.load_when_free(deadline, notes)
            dropped = self.follow_the_autoscaler(view, result, notes)
            if not self.names:
                result.preflight = {"notes": notes, "dropped": dropped}
                return result
            members = [view.node(name) for name in self.names]
            if phase in (PHASE_ALL, PHASE_CORDON):
                result.uncordoned = self.return_nodes_that_are_back(view)
            if phase != PHASE_UNCORDON:
                # Again before the restart phase drains: the before_drain hooks ran since the cordon
                # phase's preflight, maybe for minutes, and another node may have gone down meanwhile.
                result.preflight = self.preflight(view, members)
            if notes:
                result.preflight.update(notes=notes, dropped=dropped)
            self.start_gates = StartGates(start_one_by_one(view, self.settings, members))
            cycles = [NodeCycle(self, view, node, deadline) for node in members]
            if self.options.check_mode:
                result.results = [c.would_run() for c in cycles]
                return result
            threads = [threading.Thread(target=c.run, name=f"cycle-{c.node.name}", daemon=True) for c in cycles]
            renewer = _LockRenewer(self.lock)
            failures: list[StepFailed] = []
            renewer.start()
            watch = None
            try:
                watch = self.watch_nodes(view, cycles, deadline)
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                result.results = [c.result for c in cycles]
                failures = [c.failure for c in cycles if c.failure is not None]
                if (phase in (PHASE_ALL, PHASE_UNCORDON) and not failures and not renewer.error
                        and self.options.validation.enabled):
                    # Still under the renewer: validation may outlast a third of the lock.
                    # Through the API (no etcd options), etcd is asked after a batch that took one of
                    # its members down; a worker batch cannot have cost it its quorum.
                    asks_etcd = self.validate_etcd_always or any(
                        n.node_type == ETCD or (n.node_type == CONTROL and not view.external_etcd) for n in members)
                    # The watch's nodes only once it shows every node's last write: a node the cycle
                    # wrote nothing to proves nothing about how far the watch is, so then it lists.
                    written = {c.node.name: c.written_version or "" for c in cycles if c.node.is_kubernetes_node}
                    watched = None
                    if watch is not None and all(written.values()):
                        watched = partial(watch.nodes_after, written)
                    result.validation = validate(ClusterReader(self.kube, self.etcd_check if asks_etcd else None,
                                                               watched), self.options.validation)
            finally:
                renewer.stop()
                if watch is not None:
                    watch.stop()
                    self.node_waits = self.kube
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
            result.retries = retry_report(("cloudstack", self.cloud.retry_log), ("kubernetes", self.kube.retry_log))
            result.jobs = self.cloud.job_times.report()
            self.kube.deadline = None
            self.cloud.deadline = None
        return result

    def watch_nodes(self, view: ClusterView, cycles: list[NodeCycle], deadline: Deadline) -> Optional[NodeWatch]:
        """One watch of the nodes for the whole batch (its nodes' returns, then the validation), from
        the view's own list: started only where something will wait on it."""
        if self.options.phase not in (PHASE_ALL, PHASE_RESTART) or not any(c.node.is_kubernetes_node for c in cycles):
            return None
        watch = NodeWatch.for_batch(self.kube, deadline, view.k8s_objects, view.k8s_version,
                                    self.options.poll_interval)
        if watch is not None:
            self.node_waits = watch
        return watch

    def return_nodes_that_are_back(self, view: ClusterView) -> list[dict[str, str]]:
        """Uncordon the nodes a stopped rollout left cordoned that are back since (or never went down).

        A rerun must do this before it drains anything: the pods this batch evicts need those
        nodes, and with them still cordoned a PodDisruptionBudget can block the drain for good.
        """
        back = [(name, why) for name, why in release_plan(view)[0] if name not in self.names]
        marks = release_marks(view, [name for name, _why in back])[0]
        if not self.options.check_mode:
            for name, _why in back:
                return_to_service(self.kube, name, marks.get(name, Marks()), True)
        return [{"node": name, "why": why} for name, why in back]

    # -- the cluster autoscaler ---------------------------------------------------------------

    def load_when_free(self, deadline: Deadline, notes: list[str]) -> ClusterView:
        """The cluster, once no CKS operation that passes (the autoscaler's Scaling, RemovingNodes)
        holds it: waited out within the batch deadline, never started under. Still held at the
        deadline, the preflight refuses the batch."""
        view = self.loader.load(self.cluster, self.project_id, detail_for=self.names)
        if self.options.phase not in (PHASE_ALL, PHASE_CORDON) or view.state not in PASSING_OPERATIONS:
            return view
        began, state = time.monotonic(), view.state
        while view.state in PASSING_OPERATIONS and not deadline.expired():
            time.sleep(max(0.0, min(self.options.poll_interval, deadline.remaining())))
            view = self.loader.load(self.cluster, self.project_id, detail_for=self.names)
        notes.append(cks_wait_line(state, time.monotonic() - began, self.options.batch_timeout))
        return view

    def follow_the_autoscaler(self, view: ClusterView, result: BatchResult, notes: list[str]) -> list[str]:
        """After a CKS operation: the batch's nodes gone from the cluster are dropped with a line (and
        returned), and the nodes the autoscaler added since the plan are marked scale-down-disabled
        like the plan's."""
        gone = [name for name in self.names if view.find_node(name) is None]
        if gone:
            notes.append(f"dropped from the plan, no longer in the cluster (removed by a CKS operation): {', '.join(gone)}")
            self.names = [name for name in self.names if name not in gone]
            result.nodes = list(self.names)
        autoscaler = self.autoscaler or {}
        if not autoscaler.get("on") or "known_nodes" not in autoscaler:
            return gone
        added = added_nodes(autoscaler["known_nodes"], [n.name for n in view.nodes if n.is_kubernetes_node])
        marked = hold_nodes(self.kube, added, self.options.check_mode) if added else []
        if marked:
            # Said once, by the batch that first sees them: later batches find them marked.
            notes.append(f"nodes the cluster autoscaler added during the rollout, marked scale-down-disabled "
                         f"(rolled after the planned batches if out of date): {', '.join(marked)}")
        return gone

    # -- preflight --------------------------------------------------------------------------

    def preflight(self, view: ClusterView, members: list[Node]) -> dict[str, Any]:
        """Refuse the batch, before anything changes, unless it can go down safely now."""
        where = ", ".join(self.names)
        problems: list[str] = []
        if view.state not in ROLLOUT_STATES:
            problems.append(f"cluster {view.name} is {view.state}: another CKS operation holds it")
        ok, found = batch_is_safe(view, self.names, self.options.max_unavailable)
        problems.extend(found)
        checks: dict[str, Any] = {"cluster_state": view.state}
        # Before any cordon: what CloudStack would refuse only once a VM is stopped would leave
        # the node drained and down (the headroom is read again: earlier batches spent some).
        refusals, notes = check_before_stop(self.cloud, view, self.settings, members)
        checks["stop_refusals"] = [r.to_dict() for r in refusals]
        if notes:
            checks["not_checked"] = notes
        problems.extend(r.message for r in refusals)
        # Again for placement: a host may have gone into Maintenance, or filled up, since the plan.
        hosts, placement_notes = read_placement(self.cloud, view, self.settings, members)
        misfits = placement_refusals(view, self.settings, members, hosts) if hosts is not None else []
        checks["placement_refusals"] = [r.to_dict() for r in misfits]
        if placement_notes:
            checks["not_checked"] = list(notes) + placement_notes
        problems.extend(r.message for r in misfits)
        quorum_members = [n for n in members if n.node_type == ETCD
                          or (n.node_type == CONTROL and not view.external_etcd)]
        healthy_view = not problems
        if quorum_members and healthy_view:
            # A member already down is lost already; only running members are taken down.
            going = [n.name for n in quorum_members]
            if self.etcd_check is None:
                problems.append(f"{where}: an etcd member, and no etcd check is configured "
                                "(etcd_endpoints) to prove the others keep a quorum")
            else:
                healthy, message = self.etcd_check(without=going,
                                                   addresses={n.name: n.ip_address for n in quorum_members})
                checks["etcd_quorum"] = message
                if not healthy:
                    problems.append(f"etcd would lose its quorum without {', '.join(going)}: {message}")
        # The seed's "etcd must report ready" holds for every control node too: with external etcd
        # a control node is no member, but the API server it leaves behind must still reach etcd.
        if (quorum_members or any(n.node_type == CONTROL for n in members)) and healthy_view:
            status, text = self.kube.raw_get("/readyz/etcd")
            checks["readyz_etcd"] = status
            if status != 200:
                problems.append(f"the Kubernetes API reports etcd not ready (/readyz/etcd HTTP {status}: "
                                f"{text.strip()[:200]})")
        if view.external_etcd and any(n.node_type == CONTROL for n in members) and healthy_view:
            pods = self.kube.list_labelled_pods(API_SERVER_NAMESPACE, API_SERVER_SELECTOR)
            serving = api_server_problems(view, self.names, pods)
            checks["api_server_elsewhere"] = not serving
            problems.extend(serving)
        if problems:
            raise StepFailed(where, "preflight", "; ".join(problems), problems=problems)
        checks["ok"] = True
        return checks


class _LockRenewer:
    """Keeps the rollout lock renewed while a batch runs (a batch may outlast the lease)."""

    def __init__(self, lock: Optional[RolloutLock]) -> None:
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
        lock = self.lock
        if lock is None:  # start() runs no thread without one
            return
        period = max(1.0, float(lock.duration_seconds) / 3)
        while not self._stop.wait(period):
            try:
                lock.renew()
            except CksError as exc:
                self.error = exc.msg
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
