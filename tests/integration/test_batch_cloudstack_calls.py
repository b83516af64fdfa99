"""What one batch costs the CloudStack management server, command by command (each call is load on it).

Each batch is one run of cks_node_cycle, so its reads are paid once per batch: the cluster
(listKubernetesClusters), its kubeconfig (getKubernetesClusterConfig, no kubeconfig given, as the
rollout role runs it), the batch's VMs, and only what the batch's changes need besides - the ROOT
volume when a root disk or offering change needs it, the key's account when a group change needs
to know who the key is, the owner's headroom when a change grows it. The catalog is the plan's,
passed in: never listed by a batch. Counted from cks-sim's call log, through ansible-playbook.

tests/sim/examples/tenants.yml: the spec's root admin key rolls ``alice-k8s``, which the user
``alice`` owns (2 workers on cks-medium).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

import pytest
from helpers import ClusterSim, load_raw_spec, run_module, running_sim

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings
from ansible_collections.cloudstack.cks.plugins.module_utils._model.loader import Catalog

pytestmark = pytest.mark.timeout(600)

CLUSTER = "alice-k8s"
JOBS = ("stopVirtualMachine", "startVirtualMachine", "resizeVolume", "updateVMAffinityGroup")
# Every read a batch makes once per run; the changes and their polls come on top.
READS = ("listKubernetesClusters", "getKubernetesClusterConfig", "listVirtualMachines", "listVolumes",
         "listAccounts", "listProjects")
CATALOG = ("listServiceOfferings", "listDiskOfferings", "listAffinityGroups")


def catalog_of(sim: ClusterSim) -> dict[str, Any]:
    """The catalog as the plan hands it to the batches (read here, before the batch is counted)."""
    cloud = sim.cloud
    return Catalog.listed(cloud.list("listServiceOfferings"), cloud.list("listDiskOfferings"),
                          cloud.list("listAffinityGroups", listall=True)).to_dict()


def workers(sim: ClusterSim) -> dict[str, dict[str, Any]]:
    cluster = next(c for c in sim.state()["cloud"]["clusters"] if c["name"] == CLUSTER)
    return {vm["name"].lower(): vm for vm in cluster["vms"] if "-node-" in vm["name"].lower()}


def one_batch(sim: ClusterSim, node: str, settings: Settings, catalog: dict[str, Any]) -> tuple[dict[str, Any], Counter]:
    """cks_node_cycle for one node, as the role runs it; its result and its CloudStack calls per command."""
    args = sim.connection_args(CLUSTER)
    args.pop("kubeconfig")  # fetched with getKubernetesClusterConfig, as in a rollout
    args.update(cluster=CLUSTER, nodes=[node], settings=settings.to_dict(), catalog=catalog,
                poll_interval=0.05, eviction_retry_interval=0.05, batch_timeout=300, validate_count=0)
    since = sim.state()["time"]
    result = run_module("cks_node_cycle", args)
    calls = Counter(c["command"] for c in sim.calls(since) if c.get("api") == "cloudstack")
    return result, calls


def offering_id(catalog: dict[str, Any], name: str) -> str:
    return next(o["id"] for o in catalog["service_offerings"] if o["name"] == name)


def group_id(catalog: dict[str, Any], name: str) -> str:
    return next(g["id"] for g in catalog["affinity_groups"] if g["name"] == name)


def test_a_batch_reads_only_what_its_changes_need() -> None:
    with running_sim("tenants.yml") as sim:
        catalog = catalog_of(sim)
        first, second = sorted(workers(sim))

        # A larger offering: the ROOT volume for the storage fit, the owner's headroom for the growth.
        # Asked of the owner (alice) by name: the admin key's own account is not read first.
        larger = Settings(worker=TypeSettings(offering_id=offering_id(catalog, "cks-large")))
        result, calls = one_batch(sim, first, larger, catalog)
        assert not result.get("failed"), result.get("msg")
        assert [n["outcome"] for n in result["nodes"]] == ["done"]
        assert workers(sim)[first]["offering"] == "cks-large"
        assert {c: calls[c] for c in READS} == {
            "listKubernetesClusters": 1, "getKubernetesClusterConfig": 1, "listVirtualMachines": 1,
            "listVolumes": 1, "listAccounts": 1, "listProjects": 0}, dict(calls)
        assert {c: calls[c] for c in CATALOG} == dict.fromkeys(CATALOG, 0)
        assert (calls["stopVirtualMachine"], calls["changeServiceForVirtualMachine"], calls["startVirtualMachine"]) == (1, 1, 1)
        volumes = [c["params"] for c in sim.calls() if c.get("command") == "listVolumes"]
        # Only the batch's VM's volume (listVolumes virtualmachineid), not the owner's.
        assert volumes and volumes[-1].get("virtualmachineid") == workers(sim)[first]["id"], volumes[-1]
        jobs = sum(calls[c] for c in JOBS)
        assert calls["queryAsyncJobResult"] >= jobs  # each job polled until it ended
        # Reads, changes and polls: nothing else.
        assert set(calls) <= set(READS) | {"stopVirtualMachine", "changeServiceForVirtualMachine",
                                           "startVirtualMachine", "queryAsyncJobResult"}, dict(calls)

        # A change of groups alone: no volume, no headroom; the key's own account says which
        # groups it may send (root admin: the VM's owner's). alice-spread is a strict host
        # anti-affinity group: the zone's hosts, the group's VMs and what is dedicated to the node's
        # ExplicitDedication group are read once, for the placement check before the cordon.
        spread = Settings(worker=TypeSettings(affinity_group_ids=(group_id(catalog, "alice-spread"),)))
        result, calls = one_batch(sim, second, spread, catalog)
        assert not result.get("failed"), result.get("msg")
        assert [n["outcome"] for n in result["nodes"]] == ["done"]
        assert {c: calls[c] for c in READS} == {
            "listKubernetesClusters": 1, "getKubernetesClusterConfig": 1, "listVirtualMachines": 2,
            "listVolumes": 0, "listAccounts": 1, "listProjects": 0}, dict(calls)
        assert calls["listHosts"] == 1, dict(calls)
        # The catalog is not listed again: the one listAffinityGroups is the node's own groups.
        assert {c: calls[c] for c in CATALOG} == dict(dict.fromkeys(CATALOG, 0), listAffinityGroups=1)
        groups = [c["params"] for c in sim.calls() if c.get("command") == "listAffinityGroups"]
        assert groups[-1].get("virtualmachineid") == workers(sim)[second]["id"], groups[-1]
        assert calls["updateVMAffinityGroup"] == 1 and calls["changeServiceForVirtualMachine"] == 0
        assert "alice-spread" in workers(sim)[second]["affinity_groups"]
        answer = sim.admin("GET", "/invariants")
        assert (answer.get("violations", []) if isinstance(answer, dict) else answer) == []


def test_an_offering_change_still_reads_the_root_volume_and_refuses_a_storage_misfit_before_the_cordon(
        cycle_sim: Callable[..., ClusterSim]) -> None:
    # The volume is skipped only where no change needs it: an offering change needs its pool, as
    # changeServiceForVirtualMachine refuses, once the VM is stopped, a local-storage offering for a
    # ROOT volume on shared storage (VirtualMachineManagerImpl.checkIfNewOfferingStorageScopeMatchesStoragePool).
    raw = load_raw_spec("small.yml")
    raw["storage_pools"] = [{"name": "ceph", "scope": "shared"}, {"name": "local-1", "scope": "local"}]
    raw["service_offerings"].append({"name": "local-large", "cpu": 4, "memory": 8192, "storagetype": "local"})
    raw["clusters"][0]["storage_pool"] = "ceph"
    sim = cycle_sim(raw)
    node = sim.names("worker")[0]
    settings = Settings(worker=TypeSettings(offering_id=sim.offering_id("local-large")))
    since = max((c.get("t", 0) for c in sim.calls()), default=0)
    result = run_module("cks_node_cycle", {
        "api_url": sim.env["cloudstack_endpoint"], "api_key": sim.env["cloudstack_key"],
        "api_secret": sim.env["cloudstack_secret"], "kubeconfig": sim.env["kubeconfig"],
        "cluster": sim.env["cluster_name"], "nodes": [node], "settings": settings.to_dict(),
        "poll_interval": 0.05, "batch_timeout": 120})
    assert result.get("failed") is True
    assert "storage" in result["msg"] and "local" in result["msg"], result["msg"]
    calls = [c for c in sim.calls() if c.get("api") == "cloudstack" and c.get("t", 0) > since]
    assert [c["command"] for c in calls].count("listVolumes") == 1
    assert not [c for c in calls if c["command"] in ("stopVirtualMachine", "changeServiceForVirtualMachine")]
    after = sim.view().node(node)
    assert after.vm_state == "Running" and not after.unschedulable and not after.annotated
