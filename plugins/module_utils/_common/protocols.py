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


class CloudStackApi(Protocol):
    """CloudStack's API as ``_clients.cloudstack.CloudStackClient`` speaks it."""

    def call(self, command: str, target: Optional[str] = None, deadline: Optional[Deadline] = None,
             **params: Any) -> dict[str, Any]:
        ...

    def list(self, command: str, target: Optional[str] = None, deadline: Optional[Deadline] = None,
             **params: Any) -> list[dict[str, Any]]:
        ...

    def run_job(self, command: str, deadline: Deadline, target: Optional[str] = None, **params: Any) -> Any:
        ...


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

    def evict(self, namespace: str, name: str, grace_seconds: Optional[int] = None) -> Any:
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


class KubernetesApi(NodesApi, PodsApi, StateApi, Protocol):
    """A cluster's Kubernetes API as ``_clients.kube.KubeClient`` speaks it."""

    def raw_get(self, path: str, query: Optional[Mapping[str, str]] = None) -> tuple[int, str]:
        ...


class RolloutLock(Protocol):
    """The rollout lock as a batch holds it: renewed while it runs, ``LockHeld`` once it is lost."""

    duration_seconds: int

    def renew(self) -> Any:
        ...

    def renew_at_batch_start(self) -> Any:
        """``renew`` from the lease read when the batch's module run began (``LockHeld`` if lost)."""

    def release(self) -> bool:
        ...
