# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""One place that opens a cluster for a module: its CloudStack client, its Kubernetes client (connected on
first use), its view, its record and its lock. Every service takes a session: ``service(session, params,
check_mode)``."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import CloudStackApi, KubernetesApi
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ClusterView
from ansible_collections.cloudstack.cks.plugins.module_utils._model.loader import Catalog, CatalogCache, ClusterLoader
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import DEFAULT_LOCK_SECONDS, Lock, RecordStore

#: ``lock(holder, duration)``: the cluster's rollout lock as that holder would take it.
LockFactory = Callable[[Optional[str], Optional[int]], Lock]
#: Builds the cluster's Kubernetes client; its argument is the cluster's id (None when a kubeconfig
#: was given, so the cluster need not be looked up first).
KubeConnector = Callable[[Optional[str]], Any]


class ClusterSession:
    """A module run's way into one cluster. ``close`` closes the Kubernetes client if one was made.

    ``cloud``: CloudStackClient; ``connect_kube``: see ``KubeConnector``; ``needs_cluster_id``: the
    Kubernetes client is built from the cluster's own kubeconfig (getKubernetesClusterConfig), which
    needs the cluster's id, so the cluster is looked up before the first Kubernetes call. ``kube``: a
    client made already (a test's, or a caller's); ``diff``: the module runs with --diff; ``entry``:
    the cluster's listKubernetesClusters entry when the caller has it (no lookup then).
    """

    def __init__(self, cloud: CloudStackApi, connect_kube: Optional[KubeConnector], cluster: str,
                 project_id: Optional[str] = None, needs_cluster_id: bool = True, kube: Optional[KubernetesApi] = None,
                 diff: bool = False, entry: Optional[Mapping[str, Any]] = None,
                 catalog: Optional[Catalog] = None) -> None:
        self.cloud = cloud
        #: Every view of this run shares one catalog: given (read by an earlier run of the same
        #: rollout) or listed on first use.
        self.catalog = CatalogCache(catalog)
        self.cluster = cluster
        self.project_id = project_id
        self.diff = diff
        self._connect_kube = connect_kube
        self._needs_cluster_id = needs_cluster_id
        self._kube = kube
        # Given when the caller listed the cluster already (the inventory lists them all at once).
        self._entry: Optional[Mapping[str, Any]] = entry

    @classmethod
    def of(cls, params: Mapping[str, Any], cloud: Any, kube: KubernetesApi) -> ClusterSession:
        """A session over clients made already (``params['cluster']`` and ``project_id`` name the cluster)."""
        return cls(cloud, None, str(params.get("cluster") or ""), params.get("project_id"), kube=kube)

    def entry(self) -> Mapping[str, Any]:
        """The cluster's listKubernetesClusters entry (read once)."""
        if self._entry is None:
            self._entry = ClusterLoader(self.cloud).find(self.cluster, self.project_id)
        return self._entry

    @property
    def kube(self) -> Any:
        if self._kube is None:
            if self._connect_kube is None:
                raise RuntimeError("this session was made without a Kubernetes client or a way to connect one")
            known = self._needs_cluster_id or self._entry is not None
            self._kube = self._connect_kube(str(self.entry()["id"]) if known else None)
        return self._kube

    @property
    def loader(self) -> ClusterLoader:
        kube = self.kube  # first: connecting may read the cluster's entry
        return ClusterLoader(self.cloud, kube, self.catalog, fresh_entry=self._entry)

    def catalog_dict(self) -> Optional[dict[str, Any]]:
        """The catalog this run used, for the next run of the rollout (None if none was read)."""
        return self.catalog.value.to_dict() if self.catalog.value is not None else None

    def view(self) -> ClusterView:
        """The whole cluster as it is now (a few paged list calls)."""
        return self.loader.load_cluster(self.entry())

    @property
    def store(self) -> RecordStore:
        return RecordStore(self.kube)

    def lock(self, holder: Optional[str] = None, duration: Optional[int] = None) -> Lock:
        return Lock(self.kube, holder_identity=holder, duration_seconds=duration or DEFAULT_LOCK_SECONDS)

    def close(self) -> None:
        close = getattr(self._kube, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> ClusterSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
