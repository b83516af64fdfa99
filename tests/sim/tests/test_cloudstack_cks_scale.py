"""scaleKubernetesCluster with a larger ``size``: CKS adds worker VMs from what it keeps itself.

KubernetesClusterScaleWorker.scaleUpKubernetesClusterSize (Running → Scaling) calls
KubernetesClusterResourceModifierActionWorker.provisionKubernetesClusterNodeVms, which creates and
starts one worker after the other with createKubernetesNode: the host name
``<prefix>-node-<hex ms>``, the offering getServiceOfferingForNodeTypeOnCluster(WORKER) (the
cluster's workerofferingid, else its service offering), the cluster's single node root disk size
(``rootdisksize``), the affinity groups getMergedAffinityGroupIds(WORKER, ...) (4.22: the account's
ExplicitDedication group alone), and an SSH port-forwarding rule on the next free port from 2222.
It then waits for every node to be Ready (KubernetesClusterUtil.validateKubernetesClusterReadyNodesCount)
and stores the new size (updateKubernetesClusterEntry); the cluster goes back to Running.
"""

from __future__ import annotations

import re

import pytest
from cks_sim.harness import wait_until
from cs import CloudStackApiException
from simkit import small_spec


@pytest.fixture
def scaled(sim_factory):
    raw = small_spec()
    raw["clusters"][0].update(workers=2, node_offerings={"worker": "cks-medium"},
                              affinity_groups={"control": [], "worker": ["workers-soft"], "etcd": []})
    return sim_factory(raw)


def test_a_scale_up_adds_workers_as_cks_creates_them_and_they_join_ready(scaled):
    sim, cs = scaled, scaled.cs()
    cluster = sim.cks_cluster()
    before = {vm["id"] for vm in sim.node_vms("worker")}
    assert len(before) == 2 and int(cluster["size"]) == 2
    # An outside tool moved an existing worker to another offering: CKS does not copy it.
    old = sim.node_vms("worker")[0]
    cs.stopVirtualMachine(id=old["id"], fetch_result=True)
    cs.changeServiceForVirtualMachine(id=old["id"], serviceofferingid=sim.offering("cks-large")["id"])
    cs.startVirtualMachine(id=old["id"], fetch_result=True)
    wait_until(lambda: sim.cks_cluster()["state"] == "Running", timeout=30)

    answer = cs.scaleKubernetesCluster(id=cluster["id"], size=4, fetch_result=True)

    scaled_view = answer["kubernetescluster"]
    assert scaled_view["state"] == "Running" and int(scaled_view["size"]) == 4
    new = [vm for vm in sim.node_vms("worker") if vm["id"] not in before]
    assert len(new) == 2
    prefix = cluster["name"].lower()
    for vm in new:
        assert re.fullmatch(rf"{prefix}-node-[0-9a-f]+", vm["name"]), vm["name"]
        assert vm["state"] == "Running"
        assert vm["serviceofferingname"] == "cks-medium"  # CKS's worker offering, not cks-large
        assert [g["name"] for g in vm.get("affinitygroup") or []] == ["dedicated-admin"]  # no workers-soft
        root = cs.listVolumes(virtualmachineid=vm["id"], type="ROOT")["volume"][0]
        assert int(root["size"]) == 20 * 2**30
        rules = cs.listPortForwardingRules(listall=True).get("portforwardingrule", [])
        assert [int(r["publicport"]) for r in rules if r["virtualmachineid"] == vm["id"]][0] >= 2222
    world = sim.sim.kube[cluster["id"]]
    for vm in new:
        node = world.nodes[vm["name"].lower()]
        assert node.ready == "True" and node.boot_id
    assert {vm["id"] for vm in new} <= {v["id"] for v in sim.cks_cluster()["virtualmachines"]}
    states = [e["state"] for e in sim.admin("GET", "/timeline") if e.get("event") == "cluster_state"]
    assert states[-2:] == ["Scaling", "Running"], states


def test_a_scale_down_is_refused_with_a_simulator_text(scaled):
    cs = scaled.cs()
    with pytest.raises(CloudStackApiException) as caught:
        cs.scaleKubernetesCluster(id=scaled.cks_cluster()["id"], size=1, fetch_result=True)
    assert caught.value.error["errorcode"] == 530
    assert "cks-sim: scaling Kubernetes cluster" in caught.value.error["errortext"]
    assert "not simulated" in caught.value.error["errortext"]
    assert int(scaled.cks_cluster()["size"]) == 2
