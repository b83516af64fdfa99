# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""cks_etcd_quorum's one call: would etcd keep its quorum without the members going down.

The question is asked the way the options choose, in the order of the rollout's own rule
(``etcd_exec.quorum_client``): the explicit ``etcd_endpoints`` (with their certificates) when
given; else ``etcdctl`` in kubeadm's etcd pods through ``pods/exec``, over the given kubeconfig or
the cluster's own, fetched from CloudStack by the cluster's name. Without any of them there is
nothing to ask, and the refusal names what to give.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Protocol, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import EtcdError, InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.quorum import QuorumVerdict

#: The paths, as RV(checked_through) names them.
ENDPOINTS = "etcd_endpoints"
KUBECONFIG = "kubeconfig"
CLUSTER = "cluster"


class QuorumClient(Protocol):
    """``etcd.EtcdClient`` (the endpoints) and ``etcd_exec.EtcdExecClient`` (pods/exec) alike."""

    def check(self, going_down: Sequence[str] = (), require_ready: bool = True,
              addresses: Optional[Mapping[str, Optional[str]]] = None) -> QuorumVerdict:
        ...


def quorum_path(params: Mapping[str, Any]) -> str:
    """Which way etcd is asked: ``ENDPOINTS``, ``KUBECONFIG`` (no CloudStack call) or ``CLUSTER``."""
    if params.get("etcd_endpoints"):
        return ENDPOINTS
    if params.get("kubeconfig") is not None or params.get("kube_host"):
        return KUBECONFIG
    if params.get("cluster"):
        return CLUSTER
    raise InvalidInput("etcd_endpoints", [], (
        "nothing to ask etcd through: give etcd_endpoints (etcd's client URLs, with their certificates), or the "
        "cluster (cluster and the CloudStack options, or a kubeconfig) to run etcdctl in its etcd pods through the "
        "Kubernetes API"))


def etcd_quorum(client: QuorumClient, params: Mapping[str, Any], path: str) -> dict[str, Any]:
    """The verdict as the module returns it; unsafe fails when ``fail_when_unsafe``, with every value but msg."""
    verdict = client.check(list(params.get("going_down") or []), require_ready=params.get("require_ready") is not False)
    result = dict(verdict.to_dict(), checked_through=ENDPOINTS if path == ENDPOINTS else "pods/exec")
    if not verdict.safe and params.get("fail_when_unsafe") is not False:
        # A rescue or a report sees the members too.
        raise EtcdError(verdict.message, **{key: value for key, value in result.items() if key != "msg"})
    return dict(result, changed=False)
