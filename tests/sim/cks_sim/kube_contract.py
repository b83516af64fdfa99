"""What one concern of ``KubeWorld`` calls on another, declared for the type checker.

Every concern mixin (kube_queries, kube_nodes, ...) derives from ``KubeConcern``:
the state (``kube_state.KubeState``, which holds the ``kube_store.ObjectStore``) beneath it, and
the signatures below, which exist only while type checking. At run time each name resolves to its
one definition in the concern module named above it, through ``KubeWorld``'s bases; mypy checks
each definition against its declaration here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from .kube_hidden import Workload
from .kube_state import KubeState


class KubeConcern(KubeState):
    """The base of every concern mixin but the storage's."""

    if TYPE_CHECKING:
        # kube_queries.py
        def node_ready_status(self, name: str) -> str:
            ...

        # kube_nodes.py
        def refresh_node_leases(self) -> None:
            ...

        # kube_workloads.py
        def _pods_of(self, wl: Workload) -> list[dict[str, Any]]:
            ...

        def _reconcile_all(self) -> None:
            ...

        def _after_change(self) -> None:
            ...

        # kube_pods.py
        def _pods_on(self, node: str) -> list[dict[str, Any]]:
            ...

        def _place(self, pod: dict[str, Any], node: Optional[str]) -> None:
            ...

        def _schedule_start(self, pod: dict[str, Any]) -> None:
            ...

        def _set_pod_ready(self, pod: dict[str, Any], ready: bool) -> None:
            ...

        def _restart_pod(self, pod: dict[str, Any], ready_node: bool) -> None:
            ...

        def _begin_termination(self, pod: dict[str, Any], grace: Optional[int]) -> None:
            ...

        def _remove_pod(self, key: tuple[str, str], uid: str) -> None:
            ...
