"""The seed's rules on what is refused before anything changes: stored settings judged again, the lock,
wrongly typed variables, a direct cycle of too many workers.

Each failed before its fix, through the real module or playbook against cks-sim, invariants checked
after each; test_seed_rules_{refusals,order,node_cycle,release}.py group the seed's rules by behaviour.
"""

from __future__ import annotations

import time
from typing import Any, Iterator

import pytest
from helpers import ClusterSim, run_module, running_sim

from ansible_collections.cloudstack.cks.plugins.module_utils._state import record as records

pytestmark = pytest.mark.timeout(900)


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


# -- stored settings are judged again when a rollout starts ------------------------------------------

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
                                              **sim.connection_args()})
    assert stored["changed"] is True, stored
    since = time.time()

    run = sim.rollout(rollout_max_unavailable=1)

    assert run.rc != 0, run.output
    assert "node_offerings.worker=" in run.stdout and "disk offering strictness" in run.stdout, run.output
    assert [e for e in sim.timeline() if e["event"] in ("cordoned", "stop_requested") and e["t"] >= since] == []
    assert sim.lease() is None or not (sim.lease().get("spec") or {}).get("holderIdentity")
    assert sim.invariants() == []


# -- the lock refusal names the playbook that cancels ------------------------------------------------

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


# -- a wrongly typed variable fails naming it and the type expected ----------------------------------

@pytest.fixture(scope="module")
def typed_sim(module_rollout_sim: Any) -> Any:
    return module_rollout_sim("faults_small.yml", etcd=False)


@pytest.mark.parametrize("variables, expected", [
    ({"rollout_max_unavailable": "two"}, ["rollout_max_unavailable='two': must be an int"]),
    ({"rollout_canary": "maybe"}, ["rollout_canary='maybe': must be a bool (true or false)"]),
    ({"rollout_batch_timeout": "soon", "rollout_pause_seconds": 1.5},
     ["rollout_batch_timeout='soon': must be a float", "rollout_pause_seconds=1.5: must be an int"]),
    ({"rollout_node_offerings": 5}, ["rollout_node_offerings=5: must be a mapping of node type", "got a number"]),
])
def test_a_wrongly_typed_variable_names_itself_and_the_type_and_changes_nothing(
        typed_sim: Any, variables: dict[str, Any], expected: list[str]) -> None:
    sim = typed_sim
    before = {k: v for k, v in sim.state().items() if k not in ("time", "faults")}
    since = sim.admin("GET", "/state")["time"]

    run = sim.rollout(**variables)

    assert run.rc != 0, run.output
    for text in expected:
        assert text in run.stdout, run.output
    # Not the role's whole argument spec: no other variable's description, no spec dump.
    assert "argument_spec_data" not in run.output and "Seconds one batch may take" not in run.output, run.output
    assert "_AnsibleTagged" not in run.output
    calls = sim.admin("GET", f"/calls?since={since}")
    calls = calls.get("calls", calls) if isinstance(calls, dict) else calls
    assert [c for c in calls if c.get("api") == "cloudstack"] == [], calls  # refused before any call
    assert {k: v for k, v in sim.state().items() if k not in ("time", "faults")} == before
    assert sim.invariants() == []


def test_a_secret_of_the_wrong_type_is_never_shown() -> None:
    from ansible_collections.cloudstack.cks.plugins.filter.variable_types import options_of, type_errors

    options = dict(options_of("plan"))
    options["rollout_api_secret"] = dict(options["rollout_api_secret"], type="int")  # a type a text secret fails
    errors = type_errors({"rollout_api_secret": "s3cr3t-value"}, options)
    assert errors == ["rollout_api_secret=(hidden): must be an int (a whole number such as 2)"]


# -- a direct cks_node_cycle call clamps max_unavailable as the role does ----------------------------

def test_a_direct_cycle_of_every_worker_is_clamped_to_workers_minus_one_and_refused_before_the_drain(
        cycle_sim: Any) -> None:
    from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings
    from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import Lock, Record, RecordStore

    sim = cycle_sim("small.yml")
    workers = sim.names("worker")
    assert len(workers) >= 2, workers
    RecordStore(sim.kube).write(Record(settings=Settings(worker=TypeSettings(sim.offering_id("cks-large"), None, None))
                                       .to_dict()), None)
    Lock(sim.kube, holder_identity="run-c", duration_seconds=300).acquire()
    args = dict(sim.connection_args(), cluster=sim.env["cluster_name"], poll_interval=0.05, batch_timeout=120,
                nodes=workers, max_unavailable=len(workers) + 3, lock_holder="run-c")

    result = run_module("cks_node_cycle", args)

    # The role would plan min(max_unavailable, workers - 1): every worker at once is refused.
    assert result.get("failed") is True, result
    assert f"{len(workers)} workers at once" in result["msg"] and f"at most {len(workers) - 1}" in result["msg"], result["msg"]
    assert [c for c in sim.calls() if c.get("command") == "stopVirtualMachine"] == []
    assert not any(sim.view().node(w).unschedulable for w in workers)
    assert sim.invariants() == []
