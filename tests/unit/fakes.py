# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""One in-memory fake per client, for the unit tests of pure logic and state handling.

Each provides its Protocol from ``_common/protocols.py`` (``test_fakes.py`` checks the methods and
their parameters against it, so a fake cannot drift from what the real client offers). Behaviour
against a real API is proven on cks-sim by the integration tests, never here.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import threading
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.job_waits import JobTimes
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube_answers import EvictionResult
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.playbook import PlaybookRun
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.retry import RetryLog
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import KubernetesError, LockHeld
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube_watch import object_key
from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import ObjectList, PodList
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline, wait_for

Answer = Union[Exception, Any]


def _answer(value: Answer) -> Any:
    if isinstance(value, Exception):
        raise value
    return value


def _merge(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """A JSON merge patch (RFC 7386): None deletes, dicts merge, anything else replaces."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class FakeKube:
    """A cluster's Kubernetes API in memory (``KubernetesApi``).

    ``nodes``: Node dicts, a function giving them afresh at each list, or an exception that
    ``list_nodes`` raises. ``pods`` are keyed by name;
    an accepted eviction makes its pod vanish after ``reads_until_gone`` reads (``recreate``: it
    comes back under the same name with a new UID, as a StatefulSet's does). ``eviction_answers``
    scripts the answers per pod (then 201). ``daemonsets``: the (namespace, name) that exist (None:
    every DaemonSet asked for exists). ``readyz``: what ``raw_get`` answers, or raises. Leases and
    ConfigMaps follow the API server's resourceVersion rules (409 Conflict, AlreadyExists, 404).
    """

    def __init__(self, nodes: Union[Iterable[dict[str, Any]], Callable[[], Iterable[dict[str, Any]]], Exception] = (), pods: Iterable[dict[str, Any]] = (),
                 pdbs: Iterable[dict[str, Any]] = (), daemonsets: Optional[set[tuple[str, str]]] = None,
                 readyz: Answer = (200, "ok"), eviction_answers: Optional[dict[str, list[EvictionResult]]] = None,
                 reads_until_gone: int = 2, recreate: bool = False) -> None:
        self.nodes_error = nodes if isinstance(nodes, Exception) else None
        # a function: the nodes as it gives them at each list (a factory the test changes meanwhile)
        self.nodes_source = nodes if callable(nodes) else None
        self.nodes: dict[str, dict[str, Any]] = {} if self.nodes_error or self.nodes_source else {
            n["metadata"]["name"]: copy.deepcopy(n) for n in nodes}  # type: ignore[union-attr]
        self.pods = {p["metadata"]["name"]: p for p in pods}
        self.pdbs = list(pdbs)
        # What a batch sets and reads on its clients (``BatchClient``), as the real client has them.
        self.deadline: Optional[Deadline] = None
        self.retry_log = RetryLog()
        self.daemonsets = daemonsets
        self.readyz = readyz
        self.answers = eviction_answers or {}
        self.reads_until_gone = reads_until_gone
        self.recreate = recreate
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.versions = itertools.count(100)
        # what was asked, for the tests to assert on
        self.node_lists = 0
        self.paths: list[str] = []
        self.patches: list[tuple[str, Optional[dict[str, Any]]]] = []
        self.evictions: list[str] = []
        self.pod_reads: dict[str, int] = {}
        self.writes = 0
        self.lease_patches = 0
        # An identity whose Role grants update on leases but not patch (403).
        self.patch_forbidden = False
        self._mutex = threading.Lock()

    # -- nodes ----------------------------------------------------------------------------------

    def list_nodes(self) -> list[dict[str, Any]]:
        self.node_lists += 1
        if self.nodes_error is not None:
            raise self.nodes_error
        if self.nodes_source is not None:
            self.nodes = {n["metadata"]["name"]: copy.deepcopy(n) for n in self.nodes_source()}
        return [copy.deepcopy(n) for n in self.nodes.values()]

    def list_nodes_at(self) -> ObjectList:
        return ObjectList(self.list_nodes(), str(next(self.versions)))

    def read_node(self, name: str) -> dict[str, Any]:
        if name not in self.nodes:
            raise KubernetesError(f"read node {name}", "not found", status=404, reason="NotFound")
        return copy.deepcopy(self.nodes[name])

    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        node = self.nodes.get(name)
        if node is None:
            raise KubernetesError(f"patch node {name}", "not found", status=404, reason="NotFound")
        self.patches.append((name, copy.deepcopy(patch)))
        _merge(node, patch)
        return copy.deepcopy(node)

    def patch_node_checked(self, name: str, build: Callable[[dict[str, Any]], Optional[dict[str, Any]]],
                           node: Optional[dict[str, Any]] = None, attempts: int = 5) -> Optional[dict[str, Any]]:
        current = node if node is not None else self.read_node(name)
        patch = build(current)
        if patch is None:
            return None
        if name not in self.nodes:
            self.patches.append((name, copy.deepcopy(patch)))
            return patch
        return self.patch_node(name, patch)

    def await_node(self, name: str, check: Callable[[Optional[dict[str, Any]]], Any], deadline: Deadline,
                   interval: float, what: str, since: Optional[Mapping[str, Any]] = None) -> Any:
        """The polling fallback of KubeClient.await_node: a read per round."""
        return wait_for(lambda: check(self.read_node(name) if name in self.nodes else None), deadline,
                        min(interval, 0.01), what=what)

    # -- pods, budgets, evictions -----------------------------------------------------------------

    def await_pods(self, node_name: str, check: Callable[[dict[str, dict[str, Any]]], Any], deadline: Deadline,
                   interval: float, what: str, since: Optional[PodList] = None) -> Any:
        """The polling fallback of KubeClient.await_pods: each pod read afresh per round (read_pod's
        reads_until_gone and recreate apply)."""

        def current() -> dict[str, dict[str, Any]]:
            found = {}
            for pod in self.list_pods(node_name):
                meta = pod["metadata"]
                now = self.read_pod(meta.get("namespace", ""), meta["name"])
                if now is not None:
                    found[object_key(pod)] = now
            return found

        return wait_for(lambda: check(current()), deadline, min(interval, 0.01), what=what)

    def list_pods(self, node_name: str) -> list[dict[str, Any]]:
        return [p for p in self.pods.values() if (p.get("spec") or {}).get("nodeName", node_name) == node_name]

    def list_pods_at(self, node_name: str) -> PodList:
        return PodList(self.list_pods(node_name), "")

    def list_all_pods(self) -> list[dict[str, Any]]:
        return list(self.pods.values())

    def list_labelled_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        """Equality selectors only (``k=v,k2=v2``), as the cycle sends them."""
        wanted = dict(term.split("=", 1) for term in selector.split(",") if term)
        return [p for p in self.pods.values()
                if (p.get("metadata") or {}).get("namespace", namespace) == namespace
                and all(((p.get("metadata") or {}).get("labels") or {}).get(k) == v for k, v in wanted.items())]

    def read_pod(self, namespace: str, name: str) -> Optional[dict[str, Any]]:
        with self._mutex:
            if name not in self.evictions or self.answers.get(name):
                return self.pods.get(name)
            self.pod_reads[name] = self.pod_reads.get(name, 0) + 1
            if self.pod_reads[name] < self.reads_until_gone:
                return self.pods[name]
            if self.recreate:
                return dict(self.pods[name], metadata=dict(self.pods[name]["metadata"], uid="new-uid"))
            return None

    def evict(self, namespace: str, name: str, grace_seconds: Optional[int] = None) -> EvictionResult:
        with self._mutex:
            self.evictions.append(name)
            script = self.answers.get(name) or []
            return script.pop(0) if script else EvictionResult("evicted", 201)

    def list_pdbs(self) -> list[dict[str, Any]]:
        return list(self.pdbs)

    def read_daemonset(self, namespace: str, name: str) -> Optional[dict[str, Any]]:
        if self.daemonsets is not None and (namespace, name) not in self.daemonsets:
            return None
        return {"metadata": {"namespace": namespace, "name": name}}

    # -- leases and configmaps --------------------------------------------------------------------

    def _get(self, kind: str, name: str) -> Optional[dict[str, Any]]:
        obj = self.objects.get((kind, name))
        return copy.deepcopy(obj) if obj else None

    def _create(self, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["name"]
        if (kind, name) in self.objects:
            raise KubernetesError("create", "exists", status=409, reason="AlreadyExists")
        return self._store(kind, name, body)

    def _replace(self, kind: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        if (kind, name) not in self.objects:
            raise KubernetesError("replace", "not found", status=404, reason="NotFound")
        if body["metadata"].get("resourceVersion") != self.objects[(kind, name)]["metadata"]["resourceVersion"]:
            raise KubernetesError("replace", "the object has been modified", status=409, reason="Conflict")
        return self._store(kind, name, body)

    def _store(self, kind: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        self.writes += 1
        obj = copy.deepcopy(body)
        obj["metadata"]["resourceVersion"] = str(next(self.versions))
        self.objects[(kind, name)] = obj
        return copy.deepcopy(obj)

    def get_lease(self, namespace: str, name: str) -> Optional[dict[str, Any]]:
        return self._get("lease", name)

    def create_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._create("lease", body)

    def replace_lease(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._replace("lease", name, body)

    def patch_lease(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A merge patch of the spec; ``metadata.resourceVersion`` a precondition, as the API server has it."""
        self.lease_patches += 1
        current = self.objects.get(("lease", name))
        if current is None:
            raise KubernetesError("patch", "not found", status=404, reason="NotFound")
        if self.patch_forbidden:
            raise KubernetesError("patch", "forbidden", status=403, reason="Forbidden")
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != current["metadata"]["resourceVersion"]:
            raise KubernetesError("patch", "the object has been modified", status=409, reason="Conflict")
        merged = copy.deepcopy(current)
        merged["spec"] = {**merged.get("spec", {}), **(patch.get("spec") or {})}
        notes = (patch.get("metadata") or {}).get("annotations")
        if notes:
            # As a JSON merge patch: null removes the annotation.
            kept = dict(merged["metadata"].get("annotations") or {})
            kept.update(notes)
            merged["metadata"]["annotations"] = {k: v for k, v in kept.items() if v is not None}
        return self._store("lease", name, merged)

    def get_configmap(self, namespace: str, name: str) -> Optional[dict[str, Any]]:
        return self._get("configmap", name)

    def create_configmap(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._create("configmap", body)

    def replace_configmap(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._replace("configmap", name, body)

    # -- raw paths --------------------------------------------------------------------------------

    def raw_get(self, path: str, query: Optional[Mapping[str, str]] = None) -> tuple[int, str]:
        self.paths.append(path)
        return _answer(self.readyz)


class FakeCloudStack:
    """CloudStack's API in memory (``CloudStackApi``): ``lists`` answers each list command (a list, or
    a function of the call's parameters), ``calls`` each synchronous command, ``jobs`` each async one."""

    def __init__(self, lists: Optional[Mapping[str, Any]] = None, calls: Optional[Mapping[str, Any]] = None,
                 jobs: Optional[Mapping[str, Any]] = None) -> None:
        self.lists = dict(lists or {})
        self.answers = dict(calls or {})
        self.jobs = dict(jobs or {})
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.targets: list[Optional[str]] = []  # the ``target`` of each call, in step with ``asked``
        # What a batch sets and reads on its clients (``BatchClient``), as the real client has them.
        self.deadline: Optional[Deadline] = None
        self.retry_log = RetryLog()
        self.job_times = JobTimes()
        self.job_results: dict[tuple[str, str], Any] = {}

    def _answer(self, table: Mapping[str, Any], command: str, params: dict[str, Any], target: Optional[str]) -> Any:
        self.asked.append((command, params))
        self.targets.append(target)
        if command not in table:
            raise AssertionError(f"unexpected CloudStack call {command} {params}")
        value = table[command]
        return _answer(value(params) if callable(value) else value)

    def call(self, command: str, target: Optional[str] = None, deadline: Optional[Deadline] = None,
             **params: Any) -> dict[str, Any]:
        return self._answer(self.answers, command, params, target)

    def list(self, command: str, target: Optional[str] = None, deadline: Optional[Deadline] = None,
             **params: Any) -> list[dict[str, Any]]:
        return self._answer(self.lists, command, params, target)

    def run_job(self, command: str, deadline: Deadline, target: Optional[str] = None, **params: Any) -> Any:
        return self._answer(self.jobs, command, params, target)

    def run_change(self, command: str, deadline: Deadline, done: Callable[[], bool],
                   instance_id: Optional[str] = None, target: Optional[str] = None, **params: Any) -> str:
        """As the real client with every answer arriving: an async command's job (its result kept by
        command and instance), else a synchronous call."""
        if instance_id is not None:
            self.job_results[(command, str(instance_id))] = self.run_job(command, deadline, target=target, **params)
        else:
            self.call(command, target=target, deadline=deadline, **params)
        return "sent"

    def commands(self) -> list[str]:
        return [command for command, _params in self.asked]


class FakeLock:
    """The rollout lock (``RolloutLock``): held until ``lose`` (or ``held=False``); then ``renew`` raises."""

    def __init__(self, held: bool = True, duration_seconds: int = 600) -> None:
        self.held = held
        self.duration_seconds = duration_seconds
        self.renewed = 0
        self.released = 0

    def lose(self) -> None:
        self.held = False

    def renew(self) -> None:
        if not self.held:
            raise LockHeld("the rollout lock is held by run-other")
        self.renewed += 1

    def renew_at_batch_start(self) -> None:
        self.renew()

    def release(self) -> bool:
        was, self.held = self.held, False
        self.released += 1
        return was


class FakeQuorumClient:
    """An etcd quorum client (``_services.quorum.QuorumClient``): answers ``verdict`` (or raises it), and
    keeps what it was asked."""

    def __init__(self, verdict: Answer, *later: Answer) -> None:
        self.verdict = verdict
        self.later = list(later)  # what it answers from the second question on, one each, the last kept
        self.asked: list[tuple[list[str], bool]] = []

    def check(self, going_down: Sequence[str] = (), require_ready: bool = True,
              addresses: Optional[Mapping[str, Optional[str]]] = None) -> Any:
        if self.asked and self.later:
            self.verdict = self.later.pop(0)
        self.asked.append((list(going_down), require_ready))
        return _answer(self.verdict)


class FakePlaybookRunner:
    """Stands in for ``PlaybookRunner``: records each run, and plays one cluster's rollout by writing what
    the real run leaves behind (its report, its failed tasks) as ``script(variables)`` says.

    A script may return a fourth item: more of what the callback keeps (``plan``, ``cancel``), and
    ``cancelled_by`` / ``stopped`` to play a fleet job cancelled during the run (the cancel is then asked
    once, through ``cancel.request``, as the real runner does), ``job_cancelled`` alone for a run that ended
    by itself in the poll the cancel came in."""

    def __init__(self, script: Callable[[dict[str, Any]], tuple[Any, ...]]) -> None:
        self.script = script
        self.runs: list[dict[str, Any]] = []

    def run(self, playbook: str, vars_path: str, log_path: str, failures_path: str, cwd: str,
            timeout: Optional[float] = None, extra_args: Sequence[str] = (), cancel: Any = None,
            env: Optional[dict[str, str]] = None) -> Any:
        with open(vars_path, encoding="utf-8") as fh:
            variables = json.load(fh)
        record = {"playbook": playbook, "vars": variables, "mode": os.stat(vars_path).st_mode & 0o777, "cwd": cwd,
                  "timeout": timeout, "extra_args": list(extra_args), "env": dict(env or {})}
        self.runs.append(record)
        rc, report, failures, *more = self.script(variables)
        extra = dict(more[0]) if more else {}
        cancelled_by = extra.pop("cancelled_by", None)
        stopped = bool(extra.pop("stopped", False))
        job_cancelled = bool(extra.pop("job_cancelled", cancelled_by))
        if cancelled_by and cancel is not None:
            record["cancel_taken"] = cancel.request()
        if report is not None:
            with open(variables["rollout_report_path"], "w", encoding="utf-8") as fh:
                json.dump(report, fh)
        with open(log_path, "w", encoding="utf-8") as fh:
            fh.write("PLAY RECAP\n")
        return PlaybookRun(rc, dict(extra, failures=failures), cancelled_by=cancelled_by, stopped=stopped, job_cancelled=job_cancelled)
