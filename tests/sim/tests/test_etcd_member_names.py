"""External etcd members are named as CKS names them: with the cluster name's case.

Follows ``KubernetesClusterActionWorker.getEtcdNodeNameForCluster`` (apache/cloudstack,
plugins/integrations/kubernetes-service): the prefix is ``kubernetesCluster.getName()`` as it is
(only characters outside [a-zA-Z0-9-] are stripped) + "-etcd", cut to 40, and
``KubernetesClusterStartWorker.getEtcdNodeHostnames`` adds "-<index>-<hex>"; the etcd node's
member takes that hostname. Node names (``getKubernetesClusterNodeNamePrefix``) are lowercased.
"""

from __future__ import annotations

from simkit import small_spec


def test_external_etcd_members_keep_the_cluster_name_case(sim_factory):
    raw = small_spec()
    raw["clusters"][0].update(name="ProdCaps", etcd_nodes=3, control_nodes=1, workers=1)
    handle = sim_factory(spec=raw, etcd=True)
    members = handle.env["etcd"]["members"]
    assert len(members) == 3
    for member in members:
        assert member["name"].startswith("ProdCaps-etcd-"), member
    etcd_vms = sorted(vm["name"] for vm in handle.node_vms("etcd"))
    assert sorted(m["name"] for m in members) == etcd_vms
