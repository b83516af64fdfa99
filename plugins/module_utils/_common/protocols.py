# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""What the rollout asks of its clients and of the lock, as Protocols: the real clients (``_clients``,
``_state.record.Lock``) and every test fake provide them, and mypy checks both against them."""

from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple, Optional, Protocol

from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline

KubeObject = dict[str, Any]


class ObjectList(NamedTuple):
    """A list of objects (pods, nodes) with the resourceVersion it was read at: a watch follows on from it."""

    items: list[KubeObject]
    version: str


PodList = ObjectList


class RetrySnapshots(Protocol):
    """A client's ``retry_log``: what it sent again after a transient fault, for a batch's or a release's result."""

    def snapshot(self) -> dict[str, Any]:
        ...


class JobTimings(Protocol):
    """The CloudStack client's ``job_times``: what each async command's jobs took, handed from batch to batch."""

    def give_priors(self, priors: Mapping[str, Any]) -> None:
        """What the earlier batches' jobs took: this batch's first polls are aimed by it."""

    def report(self) -> dict[str, Any]:
        ...


class BatchClient(Protocol):
    """What a batch sets and reads on each client it runs with: the batch's deadline (its retries of an
    API that is down wait no longer than the batch may run) and the log of what it sent again."""

    deadline: Optional[Deadline]

    @property
    def retry_log(self) -> RetrySnapshots:
        ...


class CloudStackApi(BatchClient, Protocol):
    """CloudStack's API as ``_clients.cloudstack.CloudStackClient`` speaks it."""

    @property
    def job_times(self) -> JobTimings:
        ...

    @property
    def job_results(self) -> Mapping[tuple[str, str], Any]:
        """The object each async job on a VM or volume ended with, by (command, instance id)."""

    def call(self, command: str, target: Optional[str] = None, deadline: Optional[Deadline] = None,
             **params: Any) -> dict[str, Any]:
        ...

    def list(self, command: str, target: Optional[str] = None, deadline: Optional[Deadline] = None,
             **params: Any) -> list[dict[str, Any]]:
        ...

    def run_job(self, command: str, deadline: Deadline, target: Optional[str] = None, **params: Any) -> Any:
        ...

    def run_change(self, command: str, deadline: Deadline, done: Callable[[], bool],
                   instance_id: Optional[str] = None, target: Optional[str] = None, **params: Any) -> str:
        """Carry out one change, riding out a lost answer (``done()`` says whether it is as asked)."""


class EvictionAnswer(Protocol):
    """What the Eviction API said about one pod (``_clients.kube_answers.EvictionResult``): ``outcome``
    evicted, blocked (429, ``pdb`` naming the budget when the server said), multiple_pdbs, gone or failed."""

    outcome: str
    status: int
    message: str
    pdb: Optional[str]


class NodesApi(Protocol):
    """The nodes of a cluster's Kubernetes API."""

    def list_nodes(self) -> list[KubeObject]:
        ...

    def list_nodes_at(self) -> ObjectList:
        """Every node and the resourceVersion of the list (a watch of them can follow on from it)."""

    def read_node(self, name: str) -> KubeObject:
        ...

    def patch_node(self, name: str, patch: dict[str, Any]) -> KubeObject:
        ...

    def patch_node_checked(self, name: str, build: Callable[[KubeObject], Optional[dict[str, Any]]],
                           node: Optional[KubeObject] = None, attempts: int = ...) -> Optional[KubeObject]:
        ...

    def await_node(self, name: str, check: Callable[[Optional[KubeObject]], Any], deadline: Deadline,
                   interval: float, what: str, since: Optional[Mapping[str, Any]] = None) -> Any:
        """The first truthy ``check(node)``, by watch where the server watches; DeadlineExceeded.
        ``since``: the node as a write answered, for the watch to follow on from."""


class NodeWaits(Protocol):
    """What a node's cycle waits on its node through: the client itself (a watch per wait), or the
    batch's one watch of every node (``_clients.node_watch.NodeWatch``)."""

    def await_node(self, name: str, check: Callable[[Optional[KubeObject]], Any], deadline: Deadline,
                   interval: float, what: str, since: Optional[Mapping[str, Any]] = None) -> Any:
        ...


class PodsApi(Protocol):
    """The pods, budgets and evictions a drain works with."""

    def list_pods(self, node_name: str) -> list[KubeObject]:
        ...

    def list_pods_at(self, node_name: str) -> PodList:
        ...

    def list_all_pods(self) -> list[KubeObject]:
        ...

    def list_labelled_pods(self, namespace: str, selector: str) -> list[KubeObject]:
        ...

    def read_pod(self, namespace: str, name: str) -> Optional[KubeObject]:
        ...

    def evict(self, namespace: str, name: str, grace_seconds: Optional[int] = None) -> EvictionAnswer:
        ...

    def list_pdbs(self) -> list[KubeObject]:
        ...

    def read_daemonset(self, namespace: str, name: str) -> Optional[KubeObject]:
        ...

    def await_pods(self, node_name: str, check: Callable[[dict[str, KubeObject]], Any], deadline: Deadline,
                   interval: float, what: str, since: Optional[PodList] = None) -> Any:
        """The first truthy ``check(pods on the node by "namespace/name")``; DeadlineExceeded.
        ``since``: the drain's own list, for the watch to follow on from."""


class StateApi(Protocol):
    """The Lease and the ConfigMap the rollout keeps its lock and record in."""

    def get_lease(self, namespace: str, name: str) -> Optional[KubeObject]:
        ...

    def create_lease(self, namespace: str, body: dict[str, Any]) -> KubeObject:
        ...

    def replace_lease(self, namespace: str, name: str, body: dict[str, Any]) -> KubeObject:
        ...

    def patch_lease(self, namespace: str, name: str, patch: dict[str, Any]) -> KubeObject:
        ...

    def get_configmap(self, namespace: str, name: str) -> Optional[KubeObject]:
        ...

    def create_configmap(self, namespace: str, body: dict[str, Any]) -> KubeObject:
        ...

    def replace_configmap(self, namespace: str, name: str, body: dict[str, Any]) -> KubeObject:
        ...


class KubernetesApi(NodesApi, PodsApi, StateApi, BatchClient, Protocol):
    """A cluster's Kubernetes API as ``_clients.kube.KubeClient`` speaks it."""

    def raw_get(self, path: str, query: Optional[Mapping[str, str]] = None) -> tuple[int, str]:
        ...


class LeaseSeen(Protocol):
    """The lease as the lock last read it (``_state.record.LockInfo``)."""

    @property
    def renew_time(self) -> Optional[str]:
        ...

    @property
    def duration_seconds(self) -> int:
        ...


class RolloutLock(Protocol):
    """The rollout lock as a batch holds it: renewed while it runs, ``LockHeld`` once it is lost; the
    release names its lease and holder, and until when it stays held, when it cannot give it back."""

    duration_seconds: int

    @property
    def namespace(self) -> str:
        ...

    @property
    def name(self) -> str:
        ...

    @property
    def holder_identity(self) -> str:
        ...

    @property
    def last_seen(self) -> Optional[LeaseSeen]:
        ...

    def renew(self) -> Any:
        ...

    def renew_at_batch_start(self) -> Any:
        """``renew`` from the lease read when the batch's module run began (``LockHeld`` if lost)."""

    def release(self) -> bool:
        ...
