"""cks_node_settings through ansible-playbook against cks-sim (real cs and kubernetes clients)."""

from __future__ import annotations

from typing import Any, Iterator, Optional

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions import settings as plans
from ansible_collections.cloudstack.cks.plugins.module_utils._state import record as records
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.states import BUSY_STATES
from ansible_collections.cloudstack.cks.plugins.module_utils._state.settings_store import stored_max_unavailable, stored_settings

from cks_sim.harness import wait_until
from helpers import ClusterSim, run_module, running_sim

pytestmark = pytest.mark.timeout(600)


# -- helpers ------------------------------------------------------------------------------------

def settings(sim: ClusterSim, cluster: str = "alpha", check: bool = False, diff: bool = False,
             **args: Any) -> dict[str, Any]:
    return run_module("cks_node_settings", dict(sim.connection_args(cluster), cluster=cluster, **args),
                      check=check, diff=diff)


def read_record(sim: ClusterSim, cluster: str = "alpha") -> Optional[records.Record]:
    kube = sim.kube_client(cluster)
    try:
        return records.RecordStore(kube).read()
    finally:
        kube.close()


def read_lock(sim: ClusterSim, cluster: str = "alpha") -> Optional[records.LockInfo]:
    kube = sim.kube_client(cluster)
    try:
        return records.Lock(kube).read()
    finally:
        kube.close()


def hold_lock(sim: ClusterSim, holder: str, cluster: str = "alpha", seconds: int = 600) -> None:
    kube = sim.kube_client(cluster)
    try:
        records.Lock(kube, holder_identity=holder, duration_seconds=seconds).acquire()
    finally:
        kube.close()


def ids(sim: ClusterSim) -> dict[str, str]:
    """Offering and group names -> ids, as CloudStack lists them."""
    cloud = sim.cloud
    found = {o["name"]: o["id"] for o in cloud.list("listServiceOfferings")}
    found.update({g["name"]: g["id"] for g in cloud.list("listAffinityGroups", listall=True)})
    return found


def vm_offerings(sim: ClusterSim, cluster: str = "alpha") -> dict[str, str]:
    cl = next(c for c in sim.state()["cloud"]["clusters"] if c["name"] == cluster)
    return {vm["name"]: vm["offering"] for vm in cl["vms"]}


def set_state(sim: ClusterSim, state: str, cluster: str = "alpha") -> None:
    sim.action(action="set_cluster_state", cluster=sim.cluster(cluster)["id"], state=state)


@pytest.fixture
def sim() -> Iterator[ClusterSim]:
    with running_sim("settings.yml") as handle:
        yield handle


@pytest.fixture(scope="module")
def shared_sim() -> Iterator[ClusterSim]:
    """For tests that must change nothing (refusals): one sim for all of them."""
    with running_sim("settings.yml") as handle:
        yield handle


# -- first use, storing only, check mode, diff, idempotence -------------------------------------

def test_first_use_copies_the_cluster_settings_and_shared_groups_and_stores_only(sim: ClusterSim) -> None:
    known = ids(sim)
    vms_before = vm_offerings(sim)
    cloud_before = sim.world()["cloud"]

    result = settings(sim, node_offerings={"worker": "cks-large"})

    assert result["changed"] is True and result["first_use"] is True, result
    before, after = result["previous_settings"], result["settings"]
    # gen 1 -> gen 2: the cluster's one offering copied to every type, the groups each type's
    # nodes share recorded for it (the dedication group left out), the root disk size kept.
    for t in ("control", "worker", "etcd"):
        assert before[t]["offering"] == "cks-medium"
    assert before["control"]["affinity_groups"] == ["control-spread"]
    assert before["worker"]["affinity_groups"] == ["workers-spread"]
    assert before["worker"]["root_disk_size"] == 20
    # Only the worker type changed.
    assert after["worker"]["offering"] == "cks-large" and after["worker"]["offering_id"] == known["cks-large"]
    assert after["control"] == before["control"] and after["etcd"] == before["etcd"]
    assert result["workernodesoutofdate"] == 5 and result["controlnodesoutofdate"] == 0

    stored = stored_settings(read_record(sim))
    assert stored is not None
    assert stored.worker == plans.TypeSettings(known["cks-large"], 20, (known["workers-spread"],))
    assert stored.control == plans.TypeSettings(known["cks-medium"], 20, (known["control-spread"],))
    # rollout=false: the nodes are untouched, and no lock was taken.
    assert vm_offerings(sim) == vms_before
    assert sim.world()["cloud"] == cloud_before
    assert read_lock(sim) is None


def test_the_same_settings_twice_change_nothing_the_second_time(sim: ClusterSim) -> None:
    args = {"node_offerings": {"worker": "cks-large"}, "node_root_disk_sizes": {"worker": 30},
            "node_affinity_groups": {"worker": ["workers-soft", "workers-spread"]}}
    assert settings(sim, **args)["changed"] is True
    version = read_record(sim).resource_version

    again = settings(sim, **{**args, "node_affinity_groups": {"worker": ["workers-spread", "workers-soft"]}})
    assert again["changed"] is False, again
    assert again["first_use"] is False
    assert read_record(sim).resource_version == version

    # max_unavailable is the rollout's (the seed: only with rollout=true): refused here, nothing stored.
    refused = settings(sim, max_unavailable=3)
    assert refused["failed"] is True and "max_unavailable=3" in refused["msg"] and "rollout=true" in refused["msg"]
    assert read_record(sim).resource_version == version


def test_first_use_without_changes_records_the_copied_settings_once(sim: ClusterSim) -> None:
    first = settings(sim)
    assert first["changed"] is True and first["first_use"] is True
    assert first["settings"] == first["previous_settings"]
    assert sum(first[k] for k in ("controlnodesoutofdate", "workernodesoutofdate", "etcdnodesoutofdate")) == 0
    assert settings(sim)["changed"] is False


def test_check_mode_and_diff_show_names_and_write_nothing(sim: ClusterSim) -> None:
    world_before = sim.world()

    result = settings(sim, check=True, diff=True, node_offerings={"control": "cks-large"},
                      node_affinity_groups={"worker": ["workers-soft"]})

    assert result["changed"] is True
    diff = result["diff"]
    assert "nothing recorded yet" in diff["before_header"]
    assert diff["before"]["control"]["offering"] == "cks-medium"
    assert diff["after"]["control"]["offering"] == "cks-large"
    assert diff["before"]["worker"]["affinity_groups"] == ["workers-spread"]
    assert diff["after"]["worker"]["affinity_groups"] == ["workers-soft"]
    assert diff["after"]["worker"]["offering"] == "cks-medium"
    # ansible-playbook --diff printed it.
    assert "cks-large" in result["_stdout"]
    assert read_record(sim) is None
    assert sim.world() == world_before

    # Once stored, the diff compares with the record, and the same request in check mode is no change.
    settings(sim, node_offerings={"control": "cks-large"}, node_affinity_groups={"worker": ["workers-soft"]})
    again = settings(sim, check=True, diff=True, node_offerings={"control": "cks-large"})
    assert again["changed"] is False
    assert again["diff"]["before_header"] == "recorded node settings"
    assert again["diff"]["before"] == again["diff"]["after"]


def test_settings_are_stored_while_stopped_or_alert(sim: ClusterSim) -> None:
    for state in ("Stopped", "Alert", "Created", "Error"):
        set_state(sim, state)
        result = settings(sim, node_root_disk_sizes={"worker": 20 + len(state)})
        assert result["changed"] is True, (state, result)
        assert stored_settings(read_record(sim)).worker.root_disk_gb == 20 + len(state)


# -- refusals: nothing written -------------------------------------------------------------------

REFUSALS = [
    pytest.param({"node_offerings": {"worker": "cks-huge"}}, "node_offerings.worker='cks-huge'",
                 id="unknown-offering"),
    pytest.param({"node_affinity_groups": {"worker": ["no-such-group"]}}, "node_affinity_groups.worker=",
                 id="unknown-group"),
    pytest.param({"node_affinity_groups": {"control": ["control-spread", "dedicated-admin"]}},
                 "dedicated-admin is an ExplicitDedication group", id="dedication-group"),
    pytest.param({"node_offerings": {"workers": "cks-large"}}, "node_offerings.workers", id="not-a-node-type"),
    pytest.param({"node_root_disk_sizes": {"worker": 10}, "rollout": True, "lock_holder": "run-1"},
                 "node_root_disk_sizes.worker=10: would shrink the root disk", id="shrink-with-rollout"),
    pytest.param({"node_offerings": {"worker": "cks-fixed-root"}, "node_root_disk_sizes": {"worker": 30},
                  "rollout": True, "lock_holder": "run-1"},
                 "node_root_disk_sizes.worker=30: the service offering cks-fixed-root fixes the root disk",
                 id="offering-fixes-root-size"),
    pytest.param({"node_offerings": {"worker": "cks-strict"}, "rollout": True, "lock_holder": "run-1"},
                 "node_offerings.worker='cks-strict'", id="strictness-change-with-rollout"),
    pytest.param({"node_root_disk_sizes": {"worker": 0}}, "node_root_disk_sizes.worker=0", id="zero-disk"),
    pytest.param({"max_unavailable": 0}, "max_unavailable=0", id="max-unavailable-0"),
]


@pytest.mark.parametrize("args, message", REFUSALS)
def test_refusals_name_the_parameter_and_value_and_change_nothing(shared_sim: ClusterSim, args: dict[str, Any],
                                                                  message: str) -> None:
    before = shared_sim.world()
    result = settings(shared_sim, **args)
    assert result["failed"] is True
    assert message in result["msg"], result["msg"]
    assert shared_sim.world() == before
    assert read_record(shared_sim) is None
    assert read_lock(shared_sim) is None


def test_a_strict_root_disk_refuses_a_new_size_with_rollout_only(shared_sim: ClusterSim) -> None:
    before = shared_sim.world()
    result = settings(shared_sim, cluster="beta", node_root_disk_sizes={"worker": 60}, rollout=True,
                      lock_holder="run-1")
    assert result["failed"] is True
    assert "node_root_disk_sizes.worker=60" in result["msg"] and "strictly fixed size" in result["msg"]
    assert shared_sim.world() == before
    assert read_record(shared_sim, "beta") is None and read_lock(shared_sim, "beta") is None
    # rollout=false stores it for nodes created later, as createKubernetesCluster accepts it.
    stored = settings(shared_sim, cluster="beta", node_root_disk_sizes={"worker": 60})
    assert stored["changed"] is True, stored
    assert stored_settings(read_record(shared_sim, "beta")).worker.root_disk_gb == 60


@pytest.mark.parametrize("state", sorted(BUSY_STATES))
def test_nothing_is_stored_while_a_cks_operation_runs(shared_sim: ClusterSim, state: str) -> None:
    set_state(shared_sim, state)
    try:
        before = shared_sim.world()
        result = settings(shared_sim, node_offerings={"worker": "cks-large"})
        assert result["failed"] is True
        assert f"cluster alpha is {state}" in result["msg"]
        assert shared_sim.world() == before
        assert read_record(shared_sim) is None
    finally:
        set_state(shared_sim, "Running")


@pytest.mark.parametrize("state", ["Stopped", "Created", "Error"])
def test_a_rollout_starts_only_from_running_or_alert(shared_sim: ClusterSim, state: str) -> None:
    set_state(shared_sim, state)
    try:
        before = shared_sim.world()
        result = settings(shared_sim, node_offerings={"worker": "cks-large"}, rollout=True, lock_holder="run-1")
        assert result["failed"] is True
        assert f"rollout=True: cluster alpha is {state}" in result["msg"]
        assert shared_sim.world() == before
        assert read_record(shared_sim) is None and read_lock(shared_sim) is None
    finally:
        set_state(shared_sim, "Running")


def test_rollout_needs_a_lock_holder(shared_sim: ClusterSim) -> None:
    result = settings(shared_sim, rollout=True)
    assert result["failed"] is True and "lock_holder" in result["msg"]


# -- node types that cannot lose a node ----------------------------------------------------------

@pytest.mark.parametrize("spec, cluster, node_type", [
    ("single-control.yml", "solo", "control"),
    ("two-control.yml", "duo", "control"),
    ("two-etcd.yml", "ext", "etcd"),
])
def test_a_rollout_that_would_make_an_unrollable_type_out_of_date_is_refused(spec: str, cluster: str,
                                                                             node_type: str) -> None:
    with running_sim(spec) as sim:
        before = sim.world()
        result = settings(sim, cluster=cluster, node_offerings={node_type: "cks-large"}, rollout=True,
                          lock_holder="run-1")
        assert result["failed"] is True
        assert f"node_offerings.{node_type}='cks-large'" in result["msg"]
        assert "would make" in result["msg"] and "out of date" in result["msg"]
        assert sim.world() == before
        assert read_record(sim, cluster) is None and read_lock(sim, cluster) is None

        # No-op settings are accepted with rollout=true (and take the lock).
        noop = settings(sim, cluster=cluster, node_offerings={node_type: "cks-medium"}, rollout=True,
                        lock_holder="run-1")
        assert noop["failed"] is False, noop
        assert read_lock(sim, cluster).holder == "run-1"
        # rollout=false stores the change for nodes created later; the workers' type is not affected.
        stored = settings(sim, cluster=cluster, node_offerings={node_type: "cks-large", "worker": "cks-large"},
                          lock_holder="run-1")
        assert stored["changed"] is True, stored


def test_nodes_that_already_differ_do_not_block_a_rollout() -> None:
    with running_sim("single-control.yml") as sim:
        # Store a control offering the node does not have: it differs already.
        assert settings(sim, cluster="solo", node_offerings={"control": "cks-large"})["changed"] is True
        again = settings(sim, cluster="solo", node_offerings={"control": "cks-xlarge"}, rollout=True,
                         lock_holder="run-1")
        assert again["failed"] is False, again.get("msg")
        assert again["controlnodesoutofdate"] == 1
        assert again["settings"]["control"]["offering"] == "cks-xlarge"


def test_stopped_nodes_do_not_block_a_rollout() -> None:
    # Both external etcd nodes stopped: they are down already, so a rollout loses nothing more.
    # (The control nodes keep serving the Kubernetes API, where the record and the lock live.)
    with running_sim("two-etcd.yml") as sim:
        etcd = [vm["name"] for c in sim.state()["cloud"]["clusters"] for vm in c["vms"] if vm["node_type"] == "etcd"]
        refused = settings(sim, cluster="ext", node_root_disk_sizes={"etcd": 30}, rollout=True, lock_holder="run-1")
        assert refused["failed"] is True and "node_root_disk_sizes.etcd=30" in refused["msg"]
        for vm in etcd:
            sim.action(action="stop_vm", vm=vm)
        for vm in etcd:
            _wait_vm_state(sim, vm, "Stopped")
        accepted = settings(sim, cluster="ext", node_root_disk_sizes={"etcd": 30}, rollout=True, lock_holder="run-1")
        assert accepted["failed"] is False, accepted.get("msg")
        assert accepted["etcdnodesoutofdate"] == 2


def _wait_vm_state(sim: ClusterSim, vm_name: str, state: str, timeout: float = 30) -> None:
    wait_until(lambda: any(vm["name"] == vm_name and vm["state"] == state
                           for c in sim.state()["cloud"]["clusters"] for vm in c["vms"]),
               timeout, f"{vm_name} to reach {state}", interval=0.05)


# -- the lock --------------------------------------------------------------------------------------

def test_refused_while_a_rollout_holds_the_lock(sim: ClusterSim) -> None:
    hold_lock(sim, "other-run")
    before = sim.world()
    for args in ({"node_offerings": {"worker": "cks-large"}},
                 {"node_offerings": {"worker": "cks-large"}, "rollout": True, "lock_holder": "run-1"}):
        result = settings(sim, **args)
        assert result["failed"] is True
        assert "other-run" in result["msg"] and "holds the lock" in result["msg"]
        assert sim.world() == before
        assert read_record(sim) is None


def test_rollout_takes_the_lock_then_stores(sim: ClusterSim) -> None:
    known = ids(sim)
    result = settings(sim, node_offerings={"worker": "cks-large"}, rollout=True, lock_holder="run-1",
                      lock_duration=120, max_unavailable=2)
    assert result["changed"] is True and result["rollout"] is True
    assert result["lock"]["holder"] == "run-1" and result["lock"]["held"] is True
    lock = read_lock(sim)
    assert lock.holder == "run-1" and lock.duration_seconds == 120 and lock.held
    record = read_record(sim)
    assert stored_settings(record).worker.offering_id == known["cks-large"]
    assert stored_max_unavailable(record) == 2
    # Nodes are still not touched: the rollout is the role's.
    assert set(vm_offerings(sim).values()) == {"cks-medium"}
    # The same run may call again (it renews); another run is refused.
    assert settings(sim, rollout=True, lock_holder="run-1")["failed"] is False
    other = settings(sim, rollout=True, lock_holder="run-2")
    assert other["failed"] is True and "run-1" in other["msg"]


def test_check_mode_rollout_takes_no_lock(sim: ClusterSim) -> None:
    result = settings(sim, check=True, node_offerings={"worker": "cks-large"}, rollout=True, lock_holder="run-1")
    assert result["changed"] is True
    assert read_lock(sim) is None and read_record(sim) is None


def test_storing_failure_after_the_lock_releases_it_and_keeps_the_error(sim: ClusterSim) -> None:
    # The record does not exist yet: the store is a create, and it fails once.
    sim.fault(kind="kube_error", cluster=sim.cluster()["id"], verb="create", resource="configmaps",
              status=500, count=1, message="etcdserver: request timed out")
    result = settings(sim, node_offerings={"worker": "cks-large"}, rollout=True, lock_holder="run-1")
    assert result["failed"] is True
    assert "storing the node settings failed" in result["msg"] and "lock was released" in result["msg"]
    lock = read_lock(sim)
    assert lock is not None and not lock.held
    record = read_record(sim)
    assert record is not None and "storing the node settings failed" in (record.last_error or "")
    assert stored_settings(record) is None
    # The next try goes through.
    assert settings(sim, node_offerings={"worker": "cks-large"}, rollout=True, lock_holder="run-1")["changed"]


# -- cancel ----------------------------------------------------------------------------------------

def test_cancel_sets_the_flag_of_a_running_rollout(sim: ClusterSim) -> None:
    nothing = settings(sim, cancel_rollout=True)
    assert nothing["changed"] is False and "nothing to cancel" in nothing["msg"]

    assert settings(sim, node_offerings={"worker": "cks-large"}, rollout=True, lock_holder="run-1")["changed"]
    assert read_record(sim).cancel is False
    check = settings(sim, cancel_rollout=True, check=True)
    assert check["changed"] is True and read_record(sim).cancel is False

    cancel = settings(sim, cancel_rollout=True)
    assert cancel["changed"] is True and cancel["cancel_requested"] is True
    assert read_record(sim).cancel is True
    assert settings(sim, cancel_rollout=True)["changed"] is False

    # Given with anything else it is refused.
    mixed = settings(sim, cancel_rollout=True, node_offerings={"worker": "cks-xlarge"})
    assert mixed["failed"] is True and "cancel_rollout" in mixed["msg"]
