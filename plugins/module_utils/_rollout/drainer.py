# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Drain one Kubernetes node the way ``kubectl drain`` does, through the Eviction API.

The pod filters follow kubectl's chain in its order (skip-deleted, DaemonSet, mirror, local
storage, unreplicated): any pod that blocks the drain aborts it before a single eviction is
sent. Selected pods are evicted concurrently; a 429 (a PodDisruptionBudget that does not allow
the eviction yet) is retried after an interval until the deadline, a 500 (more than one PDB)
fails at once, and an accepted eviction only counts once the pod is gone by UID.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, DeadlineExceeded, StepFailed
from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import EvictionAnswer, PodList, PodsApi
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.drain import (
    DrainOptions,
    DrainReport,
    classify_pod,
    field_of,
    pdbs_for_pod,
    pod_key,
    pod_uid,
    still_terminating,
)


def _eviction_kind(result: EvictionAnswer) -> str:
    """kube.evict's answer's outcome as evicted | blocked | multiple_pdbs | gone | failed."""
    outcome = str(result.outcome)
    return outcome if outcome in ("evicted", "blocked", "multiple_pdbs", "gone") else "failed"


@dataclass
class _PodState:
    pod: dict[str, Any]
    key: str
    uid: Optional[str]
    outcome: str = "pending"  # pending | gone | failed
    last_answer: str = ""
    blocked_by: str = ""
    error: str = ""
    first_refused: Optional[float] = None  # when a budget first refused its eviction
    let_through: Optional[float] = None  # when its eviction was accepted after refusals (or it went)


class DaemonSets:
    """Whether a DaemonSet exists, read once per batch: every node of a batch runs the same
    DaemonSets (kube-proxy, the CNI), and kubectl's filter needs only that they exist."""

    def __init__(self, kube: PodsApi) -> None:
        self.kube = kube
        self._known: dict[tuple[str, str], bool] = {}
        self._mutex = threading.Lock()

    def exists(self, namespace: str, name: str) -> bool:
        with self._mutex:
            if (namespace, name) not in self._known:
                self._known[(namespace, name)] = self.kube.read_daemonset(namespace, name) is not None  # None: 404
            return self._known[(namespace, name)]


class Drainer:
    """Evicts the pods of one node. ``kube`` is the collection's KubeClient (dict answers).
    ``daemonsets``: the batch's shared answers (else this drain's own)."""

    def __init__(self, kube: PodsApi, options: Optional[DrainOptions] = None,
                 daemonsets: Optional[DaemonSets] = None) -> None:
        self.kube = kube
        self.options = options or DrainOptions()
        self.daemonsets = daemonsets or DaemonSets(kube)
        #: Told of each refused eviction (the pod, the PDB, the answer): the node's Events.
        self.on_blocked: Optional[Callable[[dict[str, Any], str, str], None]] = None

    # -- selection ---------------------------------------------------------------------------

    def _daemonset_exists(self, namespace: str, name: str) -> bool:
        return self.daemonsets.exists(namespace, name)

    def select(self, node: str, pods: list[dict[str, Any]], report: DrainReport) -> list[dict[str, Any]]:
        """The pods to evict; raises StepFailed listing every blocking pod by reason."""
        blocked: dict[str, list[str]] = {}
        chosen = []
        now = time.time()
        for pod in pods:
            verdict = classify_pod(pod, self.options, self._daemonset_exists, now=now)
            if verdict.action == "block":
                blocked.setdefault(verdict.reason, []).append(pod_key(pod))
            elif verdict.action == "skip":
                report.skipped.append({"pod": pod_key(pod), "why": verdict.reason})
            else:
                if verdict.warning:
                    report.warnings.append(verdict.warning)
                chosen.append(pod)
        if blocked:
            text = "; ".join(f"{reason}: {', '.join(sorted(keys))}" for reason, keys in blocked.items())
            raise StepFailed(node, "drain", f"cannot drain, nothing was evicted: {text}",
                             blocking_pods={reason: sorted(keys) for reason, keys in blocked.items()})
        return chosen

    # -- eviction ----------------------------------------------------------------------------

    def _gone(self, state: _PodState, node_down: bool = False) -> bool:
        meta = field_of(state.pod, "metadata") or {}
        current = self.kube.read_pod(str(meta.get("namespace", "")), str(meta.get("name", "")))
        # A StatefulSet brings the pod back under the same name: only a new UID proves it left.
        if current is None or pod_uid(current) != state.uid:
            return True
        # No kubelet runs on a stopped VM to finish the deletion; once the pod is marked for
        # deletion its controller has already replaced it (as Cluster API does for such nodes).
        return node_down and bool(field_of(field_of(current, "metadata"), "deletionTimestamp", "deletion_timestamp"))

    def _evict_one(self, state: _PodState, deadline: Any, stop: threading.Event, node_down: bool) -> None:
        meta = field_of(state.pod, "metadata") or {}
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        try:
            while not stop.is_set():
                result = self.kube.evict(namespace, name, self.options.grace_period)
                kind = _eviction_kind(result)
                message = str(result.message or "")
                if kind in ("gone", "evicted") and state.first_refused is not None:
                    state.let_through = time.time()
                if kind == "gone":
                    state.outcome = "gone"
                    return
                if kind == "evicted":
                    state.last_answer = "eviction accepted, the pod is still terminating"
                    # One watch of the node's pods then waits for all of them (drain's _await_gone).
                    state.outcome = "terminating"
                    return
                state.last_answer = message or f"HTTP {result.status}"
                if kind == "blocked":
                    state.blocked_by = result.pdb or _pdb_from_message(message) or state.blocked_by
                    state.first_refused = state.first_refused or time.time()
                    if self.on_blocked is not None:
                        self.on_blocked(state.pod, state.blocked_by, message)
                    if deadline.remaining() <= 0:
                        state.outcome, state.error = "failed", f"eviction still refused at the deadline: {message}"
                        return
                    if stop.wait(min(self.options.eviction_retry_interval, max(0.0, deadline.remaining()))):
                        return
                    if self._gone(state):
                        state.outcome, state.let_through = "gone", time.time()
                        return
                    continue
                # 500 (several PDBs select the pod) and anything else: retrying will not help.
                state.outcome, state.error = "failed", state.last_answer
                stop.set()
                return
        except CksError as exc:
            state.outcome, state.error = "failed", exc.msg
            stop.set()
        except Exception as exc:  # a thread must always report back, whatever broke
            state.outcome, state.error = "failed", f"{type(exc).__name__}: {exc}"
            stop.set()

    def drain(self, node: str, deadline: Any, node_down: bool = False) -> DrainReport:
        """Evict the node's pods; ``node_down``: its VM is not running (no kubelet to finish deletions)."""
        report = DrainReport(node=node, started=time.time())
        listed = self.kube.list_pods_at(node)
        chosen = self.select(node, listed.items, report)
        states = [_PodState(pod=p, key=pod_key(p), uid=pod_uid(p)) for p in chosen]
        stop = threading.Event()
        threads = [
            threading.Thread(target=self._evict_one, args=(s, deadline, stop, node_down), name=f"evict-{s.key}",
                             daemon=True)
            for s in states
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if not stop.is_set():
            self._await_gone(node, [s for s in states if s.outcome == "terminating"], deadline, node_down, listed)
        report.ended = time.time()
        report.evicted = [s.key for s in states if s.outcome == "gone"]
        report.budget_waits = [budget_wait(s, report.started) for s in states
                               if s.first_refused is not None and s.let_through is not None]
        left = [s for s in states if s.outcome != "gone"]
        if left:
            raise self._failure(node, left, report)
        return report

    def _await_gone(self, node: str, waiting: list[_PodState], deadline: Any, node_down: bool,
                    listed: Optional[PodList] = None) -> None:
        """Until every evicted pod is gone by UID: one watch of the node's pods, not a read per pod
        per poll. It follows on from the drain's own list (``listed``): the evictions came after
        it, so their deletions are events of that watch, and no second list is needed."""
        if not waiting:
            return
        left = {"states": waiting}

        def all_gone(pods: dict[str, dict[str, Any]]) -> bool:
            left["states"] = [s for s in waiting if still_terminating(s.uid, s.key, pods, node_down)]
            return not left["states"]

        try:
            self.kube.await_pods(node, all_gone, deadline, self.options.poll_interval,
                                 what=f"the pods evicted from {node} to terminate", since=listed)
        except DeadlineExceeded:
            for state in left["states"]:
                state.outcome, state.error = "failed", "evicted but still terminating at the deadline"
        except CksError as exc:
            for state in left["states"]:
                state.outcome, state.error = "failed", exc.msg
        for state in waiting:
            if state.outcome == "terminating" and state not in left["states"]:
                state.outcome = "gone"

    def _failure(self, node: str, left: list[_PodState], report: DrainReport) -> StepFailed:
        pdbs: list[dict[str, Any]] = []
        if any(not s.blocked_by for s in left):
            try:
                pdbs = self.kube.list_pdbs()
            except CksError:
                pdbs = []
        pending = []
        parts = []
        for state in sorted(left, key=lambda s: s.key):
            namespace = (field_of(state.pod, "metadata") or {}).get("namespace")
            blockers = []
            if state.blocked_by:
                blockers = [state.blocked_by if "/" in state.blocked_by else f"{namespace}/{state.blocked_by}"]
            else:
                blockers = pdbs_for_pod(state.pod, pdbs)
            pending.append({"pod": state.key, "pdb": blockers, "answer": state.error or state.last_answer})
            by = f" (PodDisruptionBudget {', '.join(blockers)})" if blockers else ""
            parts.append(f"{state.key}{by}: {state.error or state.last_answer or 'not evicted'}")
        return StepFailed(node, "drain", f"pods still on the node: {'; '.join(parts)}",
                          pods_left=pending, evicted=report.evicted)


def budget_wait(state: _PodState, drain_started: float) -> dict[str, Any]:
    """How long a budget held a pod's eviction back: for the report and its timeline picture."""
    namespace = (field_of(state.pod, "metadata") or {}).get("namespace")
    pdb = state.blocked_by if not state.blocked_by or "/" in state.blocked_by else f"{namespace}/{state.blocked_by}"
    first, through = float(state.first_refused or 0.0), float(state.let_through or 0.0)
    return {"pod": state.key, "pdb": pdb, "after": round(max(0.0, first - drain_started), 3),
            "seconds": round(max(0.0, through - first), 3)}


def _pdb_from_message(message: str) -> str:
    """The PDB name from a 429 cause: "The disruption budget <pdb> needs N healthy pods ..."."""
    marker = "disruption budget "
    index = message.find(marker)
    if index < 0:
        return ""
    rest = message[index + len(marker):].split()
    return rest[0] if rest else ""
