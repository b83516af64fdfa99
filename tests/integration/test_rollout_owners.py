"""Keys of every kind, and what CloudStack would refuse only once a node is stopped.

tests/sim/examples/tenants.yml: a root admin (``root-key``), a domain admin of the domain
``tenants`` (``ops-key``), the user ``alice`` (``alice-key``) who owns ``alice-k8s`` (1 control
node, 2 workers on cks-medium, 20 GB root disks) and is a member of the project ``platform``,
which owns ``platform-k8s``. CKS put the owner's ExplicitDedication group on every node.

A refusal CloudStack makes once the VM is stopped (531 for a group the key may not send, 535 past
a limit) would leave a node drained and down: each is judged before the lock for the plan, and
again before each batch's cordon, and nothing is touched.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from in_process_sims import RolloutSim

pytestmark = pytest.mark.timeout(900)

# What the timeline records when the rollout touches a node itself.
NODE_EVENTS = {"annotated", "cordoned", "uncordoned", "stop_requested", "stopped", "offering_changed",
               "volume_resized", "affinity_updated", "start_requested", "started"}

CHANGES = {"offering_changed", "volume_resized", "affinity_updated"}


def key_env(sim: RolloutSim, apikey: str) -> dict[str, str]:
    key = next(k for k in sim.env["keys"] if k["apikey"] == apikey)
    return {"CLOUDSTACK_KEY": key["apikey"], "CLOUDSTACK_SECRET": key["secretkey"]}


def vms_of(sim: RolloutSim, cluster: str) -> dict[str, dict[str, Any]]:
    found = next(c for c in sim.state()["cloud"]["clusters"] if c["name"] == cluster)
    return {vm["name"].lower(): vm for vm in found["vms"]}


def workers_of(sim: RolloutSim, cluster: str) -> list[str]:
    return sorted(n for n in vms_of(sim, cluster) if "-node-" in n)


def touched(sim: RolloutSim, since: float) -> list[dict[str, Any]]:
    return [i for i in sim.timeline() if i.get("t", 0) >= since and i.get("event") in NODE_EVENTS]


def mutating(sim: RolloutSim, since: float) -> list[str]:
    return [c["command"] for c in sim.calls() if c.get("api") == "cloudstack" and c.get("t", since) >= since
            and not c["command"].startswith(("list", "query", "get"))]


def test_a_domain_admin_rolls_offering_and_disk_of_another_accounts_cluster(rollout_sim: Any) -> None:
    sim = rollout_sim("tenants.yml")
    # A shared 2-core machine under load can take several minutes for this one rollout.
    run = sim.rollout(env=key_env(sim, "ops-key"), timeout=840, rollout_node_offerings={"worker": "cks-large"},
                      rollout_node_root_disk_sizes={"worker": 30})
    assert run.rc == 0, run.output
    vms = vms_of(sim, "alice-k8s")
    for worker in workers_of(sim, "alice-k8s"):
        assert vms[worker]["offering"] == "cks-large", vms[worker]
        assert vms[worker]["state"] == "Running"
    sim.assert_converged()


def test_a_domain_admin_group_change_is_refused_before_the_lock_naming_the_key_that_can(rollout_sim: Any) -> None:
    sim = rollout_sim("tenants.yml")
    since = time.time()
    # tenants-soft is a domain-level group the domain admin may use; the dedication group CKS put
    # on every node is alice's, and updateVMAffinityGroup must send it again.
    run = sim.rollout(env=key_env(sim, "ops-key"), rollout_node_offerings={"worker": "cks-large"},
                      rollout_node_affinity_groups={"worker": ["tenants-soft"]})
    assert run.rc != 0, run.output
    out = run.stdout
    assert "Refused before the lock (nothing changed)" in out, run.output
    assert "would send affinity group dedicated-alice (CKS's ExplicitDedication group" in out, run.output
    assert "531" in out and "a root admin key (or a key of account alice) can make this change" in out, run.output
    for worker in workers_of(sim, "alice-k8s"):
        assert worker in out, run.output
    assert touched(sim, since) == []
    assert mutating(sim, since) == []
    assert sim.lease() is None or not (sim.lease().get("spec") or {}).get("holderIdentity")

    # The key that can: a root admin's rolls the same change.
    again = sim.rollout(rollout_node_offerings={"worker": "cks-large"},
                        rollout_node_affinity_groups={"worker": ["alice-spread"]})
    assert again.rc == 0, again.output
    vms = vms_of(sim, "alice-k8s")
    for worker in workers_of(sim, "alice-k8s"):
        assert set(vms[worker]["affinity_groups"]) == {"dedicated-alice", "alice-spread"}, vms[worker]
    sim.assert_converged()


def test_a_root_admin_naming_a_group_of_another_account_is_refused_before_the_lock(rollout_sim: Any) -> None:
    sim = rollout_sim("tenants.yml")
    since = time.time()
    run = sim.rollout(rollout_node_affinity_groups={"worker": ["bob-spread"]})
    assert run.rc != 0, run.output
    assert "Refused before the lock" in run.stdout and "bob-spread belongs to account bob" in run.stdout, run.output
    assert "choose affinity groups of account alice" in run.stdout, run.output
    assert touched(sim, since) == [] and mutating(sim, since) == []


def test_a_user_key_rolls_its_own_cluster(rollout_sim: Any) -> None:
    sim = rollout_sim("tenants.yml")
    run = sim.rollout(env=key_env(sim, "alice-key"), rollout_node_offerings={"worker": "cks-large"},
                      rollout_node_affinity_groups={"worker": ["alice-spread", "tenants-soft"]})
    assert run.rc == 0, run.output
    vms = vms_of(sim, "alice-k8s")
    for worker in workers_of(sim, "alice-k8s"):
        assert vms[worker]["offering"] == "cks-large"
        assert set(vms[worker]["affinity_groups"]) == {"dedicated-alice", "alice-spread", "tenants-soft"}
    sim.assert_converged()


def test_a_project_cluster_rolls_with_its_project_id(rollout_sim: Any) -> None:
    sim = rollout_sim("tenants.yml")
    cluster = next(c for c in sim.env["clusters"] if c["name"] == "platform-k8s")
    project = next(p for p in sim.cloud.list("listProjects", listall=True) if p["name"] == "platform")
    etcd = cluster.get("etcd") or {}
    variables: dict[str, Any] = {"rollout_cluster": "platform-k8s", "rollout_project_id": project["id"],
                                 "rollout_node_offerings": {"worker": "cks-large"},
                                 "rollout_node_root_disk_sizes": {"worker": 25}}
    if etcd.get("members"):
        variables.update(rollout_etcd_endpoints=[m["client_url"] for m in etcd["members"]],
                         rollout_etcd_ca_cert=etcd["ca_cert"], rollout_etcd_client_cert=etcd["client_cert"],
                         rollout_etcd_client_key=etcd["client_key"])
    env = dict(key_env(sim, "alice-key"), K8S_AUTH_KUBECONFIG=cluster["kubeconfig"])
    # Without its project the cluster is not even listed to the key: a clear refusal.
    lost = sim.rollout(env=env, **dict(variables, rollout_project_id=""))
    assert lost.rc != 0 and "no CKS cluster with this id or name is visible" in lost.stdout, lost.output

    run = sim.rollout(env=env, **variables)
    assert run.rc == 0, run.output
    vms = vms_of(sim, "platform-k8s")
    worker = next(n for n in vms if "-node-" in n)
    assert (vms[worker]["offering"], vms[worker]["root_gb"], vms[worker]["state"]) == ("cks-large", 25, "Running")


def _alice_limited(cpu: int) -> dict[str, Any]:
    from helpers import load_raw_spec

    raw = load_raw_spec("tenants.yml")
    for account in raw["accounts"]:
        if account["name"] == "alice":
            account["limits"] = dict(account["limits"], cpu=cpu)
    return raw


def test_a_cpu_limit_refuses_the_rollout_before_the_lock_naming_node_rule_and_change(rollout_sim: Any) -> None:
    # alice-k8s has 3 nodes of 2 cores: 6 used, 8 allowed. Two workers to 4 cores need 4 more:
    # the first fits, the second would pass the limit and CloudStack would answer 535 once stopped.
    sim = rollout_sim(_alice_limited(8))
    since = time.time()
    # The dry run says so too.
    dry = sim.rollout(env=key_env(sim, "ops-key"), args=("--check",), rollout_node_offerings={"worker": "cks-large"})
    assert dry.rc != 0 and "past its cpu limit" in dry.stdout, dry.output
    run = sim.rollout(env=key_env(sim, "ops-key"), rollout_node_offerings={"worker": "cks-large"})
    assert run.rc != 0, run.output
    second = workers_of(sim, "alice-k8s")[1]
    assert "Refused before the lock" in run.stdout, run.output
    assert f"{second} (node_offerings.worker)" in run.stdout, run.output
    assert "past its cpu limit" in run.stdout and "raise the cpu limit of account alice by at least 2" in run.stdout
    assert touched(sim, since) == [] and mutating(sim, since) == []


def test_a_batch_past_the_cpu_limit_stops_before_its_cordon(cycle_sim: Any) -> None:
    # The limit spent between the plan and the batch (6 of 6 cores): the batch's own check,
    # right before its cordon, refuses it; the node is not cordoned, drained or stopped.
    sim = cycle_sim(_alice_limited(6))
    from ansible_collections.cloudstack.cks.plugins.module_utils._clients.cloudstack import CloudStackClient
    from ansible_collections.cloudstack.cks.plugins.module_utils._clients.cloudstack_options import CloudStackOptions
    from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings
    from ansible_collections.cloudstack.cks.plugins.module_utils._model.loader import ClusterLoader

    entry = next(c for c in sim.env["clusters"] if c["name"] == "alice-k8s")
    sim.cluster_id = entry["id"]
    sim.cloud = CloudStackClient(CloudStackOptions(api_url=sim.env["cloudstack_endpoint"], **{
        "api_key": "alice-key", "api_secret": "alice-secret", "poll_interval": 0.02}))
    sim.loader = ClusterLoader(sim.cloud, sim.kube)
    worker = sim.names("worker")[0]
    large = sim.offering_id("cks-large")
    settings = Settings(worker=TypeSettings(offering_id=large))
    since = time.time()
    result = sim.cycle([worker], settings)
    assert result.error is not None and result.error.step == "preflight", result.error
    assert "past its cpu limit" in result.error.msg and worker in result.error.msg, result.error.msg
    events = [i for i in sim.timeline() if i.get("node") == worker and i.get("event") in NODE_EVENTS]
    assert events == [], events
    node = sim.kube.read_node(worker)
    assert not (node.get("spec") or {}).get("unschedulable")
    assert time.time() - since < 60
