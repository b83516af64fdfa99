"""How `make fault-sweep` arms its faults (``fault_sweep.plan_runs``): every (kind, fault) pair once,
faults that could interfere never in one run. The runs themselves are the sweep's own test."""

from __future__ import annotations

import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fault_sweep  # noqa: E402  (the sweep sets up its own import path)

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.request_kinds import READ, effect  # noqa: E402

# What the demo cluster's rollout first sent in a recording, and what status first sent.
ROLLOUT = ["kubernetes create leases", "kubernetes create configmaps", "kubernetes patch leases",
           "kubernetes get /readyz/etcd", "kubernetes watch nodes", "kubernetes patch nodes", "kubernetes create events",
           "cloudstack stopVirtualMachine", "cloudstack queryAsyncJobResult", "cloudstack changeServiceForVirtualMachine",
           "cloudstack resizeVolume", "cloudstack startVirtualMachine", "kubernetes get /readyz",
           "kubernetes create pods/eviction", "kubernetes get pods", "kubernetes watch pods", "kubernetes patch events",
           "kubernetes update configmaps", "etcd member list"]
STATUS = ["cloudstack listKubernetesClusters", "cloudstack listVirtualMachines", "kubernetes list nodes",
          "kubernetes get leases"]
FIRST = {**{kind: "status" for kind in STATUS}, **{kind: "rollout" for kind in ROLLOUT}}


def test_every_pair_is_armed_exactly_once_and_530_only_on_cloudstack() -> None:
    runs = fault_sweep.plan_runs(FIRST, ["status", "rollout"])
    armed = collections.Counter((kind, run.mode) for run in runs for kind in run.kinds)
    expected = {(kind, mode) for kind in FIRST for mode in ("503", "drop")}
    expected |= {(kind, "530") for kind in FIRST if kind.startswith("cloudstack ")}
    assert set(armed) == expected and set(armed.values()) == {1}
    # Each in the step that first sent it; the steps in the order given.
    assert all(FIRST[kind] == run.step for run in runs for kind in run.kinds)
    assert [run.step for run in runs] == sorted((run.step for run in runs), key=["status", "rollout"].index)


def test_reads_share_a_run_and_never_one_with_a_write() -> None:
    runs = fault_sweep.plan_runs(FIRST, ["status", "rollout"])
    for run in runs:
        reads = [kind for kind in run.kinds if effect(kind) == READ]
        assert not reads or reads == run.kinds, run
    rollout_reads = [run for run in runs if run.step == "rollout" and effect(run.kinds[0]) == READ]
    assert [(run.mode, len(run.kinds)) for run in rollout_reads] == [("503", 7), ("530", 1), ("drop", 7)]


def test_an_event_sent_once_is_never_armed_with_another_write_on_events() -> None:
    runs = fault_sweep.plan_runs(FIRST, ["rollout"])
    for run in runs:
        assert not {"kubernetes create events", "kubernetes patch events"} <= set(run.kinds), run
    writes_503 = [run.kinds for run in runs if run.mode == "503" and effect(run.kinds[0]) != READ]
    # Settled writes on one object (the lease's create and patch) go together: each ends as it would have.
    assert len(writes_503) == 2 and "kubernetes patch events" in writes_503[1]
    assert {"kubernetes create leases", "kubernetes patch leases"} <= set(writes_503[0])
    # Reads and writes of 503 and drop in three runs each, 530's in two: 8 faulted rollouts for 43 pairs.
    assert len(runs) == 8 and sum(len(run.kinds) for run in runs) == 43


def test_a_kind_the_table_lacks_is_a_write_sent_once() -> None:
    runs = fault_sweep.plan_runs({"kubernetes create widgets": "rollout", "kubernetes patch widgets": "rollout",
                                  "kubernetes get pods": "rollout"}, ["rollout"])
    assert [(run.mode, run.kinds) for run in runs] == [
        ("503", ["kubernetes get pods"]), ("503", ["kubernetes create widgets"]), ("503", ["kubernetes patch widgets"]),
        ("drop", ["kubernetes get pods"]), ("drop", ["kubernetes create widgets"]), ("drop", ["kubernetes patch widgets"])]
