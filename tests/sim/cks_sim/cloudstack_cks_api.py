"""The CKS commands of cks-sim's CloudStack API: listing Kubernetes clusters, their config and
the supported versions, and start, stop, scale and upgrade of a cluster (jobs run by
``cloud_cks``)."""

from __future__ import annotations

from typing import Any

from .cloud import CloudError, param_error
from .cloud_cks_nodes import autoscaling_params
from .cloudstack_call import Call, handler


@handler("listKubernetesClusters")
def list_kubernetes_clusters(call: Call) -> dict[str, Any]:
    out = []
    allowed = call.cloud.list_scope(call.values)
    for cluster in call.cloud.clusters.values():
        if not allowed(cluster.owner_id):
            continue
        if call.get("id") and cluster.id != call.get("id"):
            continue
        if call.get("name") and cluster.name != call.get("name"):
            continue
        if call.get("state") and cluster.state != call.get("state"):
            continue
        if call.get("clustertype") and cluster.clustertype != call.get("clustertype"):
            continue
        if call.get("keyword") and call.get("keyword").lower() not in cluster.name.lower():
            continue
        out.append(call.cloud.cluster_view(cluster))
    return call.listing(out)


@handler("getKubernetesClusterConfig")
def get_kubernetes_cluster_config(call: Call) -> dict[str, Any]:
    cluster_id = call.get("id")
    if not cluster_id:
        raise param_error("Invalid Kubernetes cluster ID provided")
    cluster = call.cloud.clusters.get(cluster_id)
    if cluster is None:
        raise param_error(f"Invalid Kubernetes cluster ID provided: {cluster_id}")
    call.cloud.check_access(cluster.owner_id, f"KubernetesCluster {cluster.name}")
    if cluster.state == "Starting":
        raise CloudError(530, f"Setup is in progress for Kubernetes cluster : {cluster.name}, config not available at this moment", 4250)
    provider = call.sim.kubeconfig_provider
    if provider is None:
        raise CloudError(530, f"Kubernetes cluster : {cluster.name} config not available", 4250)
    return {"clusterconfig": {"id": cluster.id, "name": cluster.name, "configdata": provider(cluster.id)}}


@handler("listKubernetesSupportedVersions")
def list_kubernetes_supported_versions(call: Call) -> dict[str, Any]:
    out = []
    for version in call.cloud.versions.values():
        if call.get("id") and version["id"] != call.get("id"):
            continue
        out.append({
            "id": version["id"], "name": version["name"], "semanticversion": version["semanticversion"],
            "zoneid": call.cloud.zone_id, "zonename": call.cloud.zone_name, "state": "Enabled",
            "isostate": "Ready", "isoid": version["id"], "isoname": f"{version['name']}.iso",
            "mincpunumber": 2, "minmemory": 2048, "supportsha": True, "supportsautoscaling": True,
            "arch": "x86_64", "created": call.cloud.zone_view().get("created", ""),
        })
    return call.listing(out)


def _cluster(call: Call) -> Any:
    cluster = call.cloud.get_cluster(call.get("id"))
    call.cloud.check_access(cluster.owner_id, f"KubernetesCluster {cluster.name}")
    return cluster


@handler("startKubernetesCluster")
def start_kubernetes_cluster(call: Call) -> dict[str, Any]:
    return call.job(call.cloud.start_cluster(_cluster(call)))


@handler("stopKubernetesCluster")
def stop_kubernetes_cluster(call: Call) -> dict[str, Any]:
    return call.job(call.cloud.stop_cluster(_cluster(call)))


@handler("scaleKubernetesCluster")
def scale_kubernetes_cluster(call: Call) -> dict[str, Any]:
    cluster = _cluster(call)
    if call.get("nodeids") and (call.get("size") is not None or call.get("serviceofferingid") or call.get("nodeofferings")):
        raise param_error("nodeids can not be passed along with size or serviceofferingid or nodeofferings")
    offering = call.cloud.get_service_offering(call.get("serviceofferingid")) if call.get("serviceofferingid") else None
    node_offerings = {}
    for row in call.get("nodeofferings", []):
        node_type = str(row.get("node", "")).lower()
        if node_type not in ("control", "worker", "etcd"):
            raise param_error(f"Invalid node type {row.get('node')} in nodeofferings")
        node_offerings[node_type] = call.cloud.get_service_offering(str(row.get("offering", "")).lower(), "nodeofferings")
    enabled, minsize, maxsize = autoscaling_params(call)
    node_ids = [str(i) for i in call.get("nodeids") or []]
    call.cloud.validate_autoscaling(cluster, enabled, minsize, maxsize, call.get("size"), node_ids)
    if enabled is not None:
        return call.job(call.cloud.autoscale_cluster(cluster, enabled, minsize, maxsize))
    if node_ids:
        return call.job(call.cloud.remove_cluster_nodes(cluster, [call.cloud.vms[i] for i in node_ids]))
    return call.job(call.cloud.scale_cluster(cluster, offering, node_offerings, call.get("size")))


@handler("upgradeKubernetesCluster")
def upgrade_kubernetes_cluster(call: Call) -> dict[str, Any]:
    return call.job(call.cloud.upgrade_cluster(_cluster(call), call.get("kubernetesversionid")))
