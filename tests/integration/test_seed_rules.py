"""The rollout's rules where they once broke, each through the real module or playbook against cks-sim.

Each test here failed on main before its fix; the simulator's invariants are checked after each.
"""

from __future__ import annotations

import time
from typing import Any, Iterator

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._state import record as records

from helpers import ClusterSim, run_module, running_sim

pytestmark = pytest.mark.timeout(900)

ANNOTATION = "cloudstack.apache.org/rollout-boot-id"


def settings(sim: ClusterSim, cluster: str, **args: Any) -> dict[str, Any]:
    return run_module("cks_node_settings", dict(sim.connection_args(cluster), cluster=cluster, **args))


def read_lock(sim: ClusterSim, cluster: str) -> Any:
    kube = sim.kube_client(cluster)
    try:
        return records.Lock(kube).read()
    finally:
        kube.close()


@pytest.fixture
def settings_sim() -> Iterator[ClusterSim]:
    with running_sim("settings.yml") as handle:
        yield handle


# -- 1. stored settings are judged again when a rollout starts -------------------------------------

@pytest.mark.parametrize("cluster, stored, parameter, why", [
    # beta's root disks come from a strict disk offering: resizeVolume would refuse a new size.
    ("beta", {"node_root_disk_sizes": {"worker": 60}}, "node_root_disk_sizes.worker=60", "strictly fixed size"),
    # alpha's workers are on a non-strict offering: changeServiceForVirtualMachine would refuse the switch.
    ("alpha", {"node_offerings": {"worker": "cks-strict"}}, "node_offerings.worker=", "disk offering strictness"),
    # cks-fixed-root fixes the root disk: a size-only resizeVolume would be refused.
    ("alpha", {"node_offerings": {"worker": "cks-fixed-root"}, "node_root_disk_sizes": {"worker": 30}},
     "node_root_disk_sizes.worker=30", "fixes the root disk"),
])
def test_settings_stored_with_rollout_false_are_judged_when_a_rollout_starts(
        settings_sim: ClusterSim, cluster: str, stored: dict[str, Any], parameter: str, why: str) -> None:
    sim = settings_sim
    assert settings(sim, cluster, **stored)["changed"] is True
    before = sim.world()

    # A rollout that names nothing: the stored values are the target, and judged as if named.
    result = settings(sim, cluster, rollout=True, lock_holder="run-1")

    assert result["failed"] is True, result
    assert parameter in result["msg"] and why in result["msg"], result["msg"]
    assert "stored earlier, not given in this call" in result["msg"], result["msg"]
    assert sim.world() == before
    assert read_lock(sim, cluster) is None
    assert sim.invariants() == []


def test_the_rollout_playbook_refuses_a_stored_clash_before_any_node_goes_down(rollout_sim: Any) -> None:
    sim = rollout_sim("rollout_small.yml")
    stored = run_module("cks_node_settings", {"cluster": sim.env["cluster_name"], "node_offerings": {"worker": "cks-strict"},
                                              **_connection(sim)})
    assert stored["changed"] is True, stored
    since = time.time()

    run = sim.rollout(rollout_max_unavailable=1)

    assert run.rc != 0, run.output
    assert "node_offerings.worker=" in run.stdout and "disk offering strictness" in run.stdout, run.output
    assert [e for e in sim.timeline() if e["event"] in ("cordoned", "stop_requested") and e["t"] >= since] == []
    assert sim.lease() is None or not (sim.lease().get("spec") or {}).get("holderIdentity")
    assert sim.invariants() == []


def _connection(sim: Any) -> dict[str, Any]:
    return {"api_url": sim.env["cloudstack_endpoint"], "api_key": sim.env["cloudstack_key"],
            "api_secret": sim.env["cloudstack_secret"], "kubeconfig": sim.env["kubeconfig"]}


# -- 2. a stopped node goes first of all, whatever its type ----------------------------------------

def stop_vm(sim: Any, name: str, timeout: float = 60) -> None:
    sim.admin("POST", "/actions", {"action": "stop_vm", "vm": name})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = {vm["name"].lower(): vm["state"] for c in sim.state()["cloud"]["clusters"] for vm in c["vms"]}
        if state.get(name.lower()) == "Stopped":
            return
        time.sleep(0.1)
    raise AssertionError(f"{name} did not stop")


def restarts(sim: Any, since: float) -> list[str]:
    """The nodes started again since ``since``, in the order they were started."""
    return [e["node"] for e in sim.timeline() if e["event"] == "start_requested" and e["t"] >= since]


def test_a_stopped_worker_goes_before_an_out_of_date_control_type_and_the_rollout_converges(rollout_sim: Any) -> None:
    sim = rollout_sim("rollout_extetcd.yml")
    worker = sim.names("worker")[0]
    controls = sim.names("control")
    stop_vm(sim, worker)
    since = time.time()

    run = sim.rollout(rollout_node_offerings={"control": "cks-large"})

    assert run.rc == 0, run.output
    batches = [b["nodes"] for b in run.report["batches"]]
    assert batches[0] == [worker], batches
    assert sorted(n for b in batches[1:] for n in b) == controls, batches
    started = [e["node"] for e in sim.timeline() if e["event"] == "started" and e["t"] >= since]
    assert started[0] == worker and sorted(started[1:]) == controls, started
    sim.assert_converged()


# -- 6. release changes only what this rollout set -------------------------------------------------

def test_release_of_a_rollout_whose_lock_was_taken_over_changes_nothing(rollout_sim: Any) -> None:
    sim = rollout_sim("rollout_small.yml")
    worker = sim.names("worker")[0]
    # The rollout that took the lock over after ours expired: it holds the lock, has cordoned a
    # worker (annotated with a boot ID the node no longer has: it is back) and stored its own error.
    records.Lock(sim.kube, holder_identity="run-new", duration_seconds=600).acquire()
    sim.kube.patch_node(worker, {"metadata": {"annotations": {ANNOTATION: "boot-before-run-new"}},
                                 "spec": {"unschedulable": True}})
    store = records.RecordStore(sim.kube)
    store.update(lambda r: (setattr(r, "last_error", "run-new: batch 1 in progress"), setattr(r, "outcome", "Alert")))
    before = store.read()

    result = run_module("cks_node_cycle", {"cluster": sim.env["cluster_name"], "mode": "release",
                                           "lock_holder": "run-old", "rollout": {"last_error": "run-old failed"},
                                           **_connection(sim)})

    assert result["failed"] is False, result
    assert result["changed"] is False
    assert "run-new holds the lock" in result["msg"], result["msg"]
    assert result["release"]["lock_held_by"]["holder"] == "run-new"
    assert result["release"]["uncordoned"] == [] and result["release"]["outcome"] == "unchanged"
    node = sim.kube.read_node(worker)
    assert node["spec"].get("unschedulable") is True
    assert node["metadata"]["annotations"][ANNOTATION] == "boot-before-run-new"
    after = store.read()
    assert (after.last_error, after.outcome) == (before.last_error, before.outcome) == ("run-new: batch 1 in progress", "Alert")
    assert records.Lock(sim.kube).read().holder == "run-new"
    assert sim.invariants() == []


# -- 7. status after a crash tells the truth -------------------------------------------------------

STATUS_PLAYBOOK = __import__("os").path.join(__import__("os").path.dirname(__file__), "..", "..", "playbooks", "status.yml")


def test_status_names_a_rollout_that_stopped_without_release_until_a_release_ran(rollout_sim: Any) -> None:
    from datetime import datetime, timedelta, timezone

    sim = rollout_sim("rollout_small.yml")
    worker = sim.names("worker")[0]
    # A rollout that crashed an hour ago with a worker cordoned: its lock expired long since.
    an_hour_ago = datetime.now(timezone.utc) - timedelta(hours=1)
    records.Lock(sim.kube, holder_identity="run-dead", duration_seconds=60, clock=lambda: an_hour_ago).acquire()
    boot_id = sim.kube.read_node(worker)["status"]["nodeInfo"]["bootID"]
    sim.kube.patch_node(worker, {"metadata": {"annotations": {ANNOTATION: boot_id}}, "spec": {"unschedulable": True}})

    status = sim.rollout(playbook=STATUS_PLAYBOOK)
    assert status.rc == 0, status.output
    assert "A rollout stopped without release: run-dead (since " in status.stdout, status.output
    assert "its lock expired, nobody took it over" in status.stdout and f"nodes it left annotated: {worker}" in status.stdout
    assert "No rollout stopped without release" not in status.stdout

    # The next rollout takes the lock over, rolls the node it left (its boot ID never changed) and releases.
    run = sim.rollout()
    assert run.rc == 0, run.output
    after = sim.rollout(playbook=STATUS_PLAYBOOK)
    assert after.rc == 0, after.output
    assert "No rollout stopped without release" in after.stdout, after.output
    sim.assert_converged()


# -- 4. etcd member names: CKS keeps the cluster name's case -----------------------------------------

def test_external_etcd_of_a_cluster_named_with_capitals_rolls(rollout_sim: Any) -> None:
    from in_process_sims import load_raw_spec

    raw = load_raw_spec("rollout_extetcd.yml")
    raw["clusters"][0]["name"] = "ExtCaps"
    sim = rollout_sim(raw)
    members = [m["name"] for m in sim.env["etcd"]["members"]]
    assert all(m.startswith("ExtCaps-etcd-") for m in members), members

    run = sim.rollout(rollout_node_offerings={"etcd": "cks-large"})

    assert run.rc == 0, run.output
    assert sorted(n for b in run.report["batches"] for n in b["nodes"]) == sorted(m.lower() for m in members)
    sim.assert_converged()


# -- 9. the lock refusal names the playbook that cancels ---------------------------------------------

def test_a_rollout_refused_by_the_lock_names_the_cancel_playbook(settings_sim: ClusterSim) -> None:
    sim = settings_sim
    kube = sim.kube_client("alpha")
    try:
        records.Lock(kube, holder_identity="run-other", duration_seconds=600).acquire()
    finally:
        kube.close()
    before = sim.world()
    result = settings(sim, "alpha", node_offerings={"worker": "cks-large"}, rollout=True, lock_holder="run-1")
    assert result["failed"] is True
    assert "run-other" in result["msg"] and "cloudstack.cks.cancel" in result["msg"], result["msg"]
    assert sim.world() == before
    assert sim.invariants() == []


# -- 5. control nodes with external etcd get the seed's checks -------------------------------------

def test_a_control_batch_with_external_etcd_is_refused_when_readyz_etcd_fails(rollout_sim: Any) -> None:
    sim = rollout_sim("rollout_extetcd.yml")
    since = time.time()
    sim.fault(kind="kube_error", verb="get", path="/readyz/etcd", status=500,
              message="[-]etcd failed: reason withheld\nreadyz check failed")

    run = sim.rollout(rollout_node_offerings={"control": "cks-large"})

    assert run.rc != 0, run.output
    assert "/readyz/etcd HTTP 500" in run.stdout, run.output
    assert [e for e in sim.timeline() if e["event"] in ("cordoned", "stop_requested") and e["t"] >= since] == []
    assert sim.invariants() == []


# -- 3. emptying a type's affinity groups ----------------------------------------------------------

def _spread_workers_without_dedication() -> dict[str, Any]:
    from in_process_sims import load_raw_spec

    raw = load_raw_spec("rollout_small.yml")
    cluster = raw["clusters"][0]
    cluster["dedication_group"] = None
    cluster["affinity_groups"] = {"control": [], "worker": ["workers-spread"], "etcd": []}
    return raw


def test_emptying_the_worker_groups_removes_each_workers_last_group(rollout_sim: Any) -> None:
    sim = rollout_sim(_spread_workers_without_dedication())
    workers = sim.names("worker")
    assert _groups(sim) == {w: ["workers-spread"] for w in workers}

    run = sim.rollout(rollout_node_affinity_groups={"worker": []})

    assert run.rc == 0, run.output
    assert sorted(n for b in run.report["batches"] for n in b["nodes"]) == sorted(workers)
    assert _groups(sim) == {w: [] for w in workers}
    updates = [c for c in sim.calls() if c.get("command") == "updateVMAffinityGroup"]
    assert len(updates) == len(workers) and all(c["params"].get("affinitygroupids") == "" for c in updates), updates
    sim.assert_converged()


def _groups(sim: Any, node_type: str = "worker") -> dict[str, list[str]]:
    return {n.name: sorted(g.name for g in n.affinity_groups) for n in sim.view().nodes_of(node_type)}


# -- 8. the drain's emptyDir default is CKS's ------------------------------------------------------

def _pods(sim: Any, prefix: str) -> dict[str, str]:
    return {f"{p['namespace']}/{p['name']}": p["node"] for p in sim.state()["kube"][sim.env["cluster_id"]]["pods"]
            if p["name"].startswith(prefix)}


def test_the_dry_run_with_the_default_drain_evicts_emptydir_pods_and_names_a_bare_pod(rollout_sim: Any) -> None:
    # KubernetesClusterUpgradeWorker drains each node with `kubectl drain <node> --ignore-daemonsets
    # --delete-emptydir-data` (no --force): emptyDir data goes, a pod without a controller stops the drain.
    sim = rollout_sim("rollout_dry_run.yml")
    ((cache_pod, cache_node),) = _pods(sim, "cache-").items()
    ((debug_pod, debug_node),) = _pods(sim, "debug").items()

    run = sim.rollout(args=("--check",), drop_vars=("rollout_delete_emptydir_data",),
                      rollout_node_offerings={"worker": "cks-large"})

    assert run.rc == 0, run.output
    assert "local storage" not in run.stdout and cache_pod not in run.stdout, run.output
    assert f"{debug_node} drain: stops before any eviction: pods that declare no controller " \
           f"(use force=true to override): {debug_pod}" in run.stdout, run.output
    assert sim.invariants() == []


def test_a_rollout_with_the_default_drain_moves_an_emptydir_pod(rollout_sim: Any) -> None:
    from in_process_sims import load_raw_spec

    raw = load_raw_spec("rollout_small.yml")
    raw["workloads"].append({"kind": "Deployment", "namespace": "default", "name": "cache", "replicas": 1, "emptyDir": True})
    sim = rollout_sim(raw)
    ((cache_pod, cache_node),) = _pods(sim, "cache-").items()

    run = sim.rollout(drop_vars=("rollout_delete_emptydir_data",), rollout_node_offerings={"worker": "cks-large"})

    assert run.rc == 0, run.output
    assert cache_pod not in _pods(sim, "cache-") and len(_pods(sim, "cache-")) == 1
    sim.assert_converged()


# -- 9. after a failed rollout the summary and status lead with its result -------------------------

def test_a_failed_rollout_leads_its_summary_and_status_with_the_failed_batch(rollout_sim: Any) -> None:
    sim = rollout_sim("rollout_small.yml")
    workers = sim.names("worker")
    # One worker's stop fails; the batches before it went through, the cluster is healthy after release.
    sim.fault(kind="job_failure", command="stopVirtualMachine", vm=workers[1], code=530,
              errortext="Unable to stop the VM: the host does not answer", count=1)

    run = sim.rollout(rollout_node_offerings={"worker": "cks-large"})

    assert run.rc != 0, run.output
    failed = next(b["batch"] for b in run.report["batches"] if b["outcome"] == "failed")
    assert run.report["batches"][failed - 1]["nodes"] == [workers[1]]
    assert f"of {sim.env['cluster_name']}: failed at batch {failed} of 3: node {workers[1]}" in run.stdout, run.output
    # The health beside the result is the release's outcome, whatever it is.
    assert f"; cluster health: {run.report['outcome']}" in run.stdout, run.output
    assert run.report["result"] == f"failed at batch {failed} of 3"

    status = sim.rollout(playbook=STATUS_PLAYBOOK)
    assert status.rc == 0, status.output
    line = status.stdout.split("Last rollout: ", 1)[1].splitlines()[0]
    assert line.startswith(f"failed at batch {failed} of 3: node {workers[1]}"), line
    assert f"; cluster health: {run.report['outcome']}" in line, line
    assert sim.invariants() == []
