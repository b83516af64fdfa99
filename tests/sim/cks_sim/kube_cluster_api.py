"""The one small interface the cluster's actors (the kubelets: ``kube_nodes.Kubelets``,
``kube_pods.PodLifecycle``, ``kube_api_pods.ClientPods``, ``kube_control_plane.StaticPods``) are
written against: what they read and write of the API, nothing of its rules.

``kube_store.ObjectStore`` satisfies it for the in-memory API: ``read`` and ``select`` hand out the
stored objects themselves, which an actor changes only to ``put`` them back (a new
resourceVersion, the watchers told). A REST API server satisfies it through a thin adapter over
``real_kube.api.RestApi`` (``real_kube.cluster_api.RestClusterApi``, which changes the object an
actor ``put`` in place to the one stored, as the store leaves it holding the stored one): ``read`` a
GET of the object's path (``kube_resources.RESOURCES`` names each resource's group, version and
plural), 404 as None; ``select`` a GET of the list, with ``fieldSelector=spec.nodeName=`` where an
actor asks for a node's pods; ``put`` a POST when the object has no resourceVersion yet, else a PUT
(and a PUT of ``/status`` for the status a kubelet or controller owns); ``remove`` a DELETE with
``gracePeriodSeconds: 0`` (the kubelet's confirmation that a pod's containers stopped);
``new_meta`` the metadata without uid and resourceVersion, which the API server assigns; ``new_uid``
a uuid4. The actors are also handed ``pods_on(node)``, a node's pods (on REST a list with
``fieldSelector=spec.nodeName=<node>``; in memory the store's ``PodIndex``).
"""

from __future__ import annotations

from typing import Any, Optional, Protocol

Key = tuple[str, str]  # (namespace, name); "" as the namespace of a cluster-scoped object


class ClusterApi(Protocol):
    def read(self, plural: str, namespace: str, name: str) -> Optional[dict[str, Any]]:
        """The object, or None when there is none."""

    def select(self, plural: str, namespace: Optional[str]) -> list[dict[str, Any]]:
        """The objects of a resource (one namespace or all), sorted by namespace and name."""

    def put(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Write ``obj`` (created, or replaced as it was read and changed); the object as stored."""

    def remove(self, plural: str, key: Key) -> Optional[dict[str, Any]]:
        """The object at ``key`` gone at once; the object as it was, or None."""

    def new_uid(self) -> str:
        """A new random uid (a boot ID, a machine ID: what a kubelet makes up itself)."""

    def new_meta(self, name: str, namespace: Optional[str] = None, **extra: Any) -> dict[str, Any]:
        """The metadata of a new object named ``name``."""
