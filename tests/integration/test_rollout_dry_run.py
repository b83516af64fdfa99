"""The dry run: ``ansible-playbook playbooks/rollout.yml --check``.

It prints the whole plan - each batch, each node's changes from -> to, the type not rolled and why,
and what would block each drain now (a PodDisruptionBudget allowing 0 disruptions and its pods, pods
two budgets select, pods the drain would refuse) - and changes nothing: CloudStack is only listed
and queried, Kubernetes only read (GET), no lock or record is written, the simulator is unchanged.
The printed plan is the feature here, so this test reads the playbook's output.
"""

from __future__ import annotations

import re
import time

import pytest
import rollout_helpers as rh

pytestmark = pytest.mark.timeout(900)

READS = ("list", "query", "get")


def pods_of(sim: rh.ClusterSim, prefix: str) -> dict[str, str]:
    """The pods whose name starts with ``prefix`` (namespace/name) and the node each runs on."""
    return {f"{p['namespace']}/{p['name']}": p["node"] for p in sim.state()["kube"][sim.env["cluster_id"]]["pods"]
            if p["name"].startswith(prefix)}


def test_check_prints_the_plan_and_drain_blockers_and_changes_nothing() -> None:
    with rh.running_rollout_sim("rollout_dry_run.yml") as sim:
        (control,) = rh.names(sim, "control")
        workers = sorted(rh.names(sim, "worker"))
        web, api, cache, debug = (pods_of(sim, p) for p in ("web-", "api-", "cache-", "debug"))
        assert len(web) == 2 and set(web.values()) <= set(workers)
        before = sim.world()
        since = time.time()

        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(
            sim, rollout_node_offerings={"worker": "cks-large"}, rollout_node_root_disk_sizes={"worker": 30},
            rollout_max_unavailable=2, rollout_canary=True, rollout_delete_emptydir_data=False),
            args=("--check",))
        assert run.rc == 0, run.explain()
        out = run.stdout

        # Nothing changed: reads only, on both APIs; the world as it was; no lock, record or report.
        calls = sim.calls(since=since)
        cloudstack = [c for c in calls if c.get("api") == "cloudstack"]
        kubernetes = [c for c in calls if c.get("api") == "kubernetes"]
        assert cloudstack and kubernetes
        assert [c["command"] for c in cloudstack if not c["command"].lower().startswith(READS)] == []
        assert [(c["verb"], c["path"]) for c in kubernetes if c["verb"] not in ("get", "list")] == []
        assert rh.mutating_calls(sim, since) == []
        assert sim.world() == before
        record = rh.ClusterRecord(sim)
        assert record.data() == {} and record.lease() == {}
        assert run.report is None
        assert sim.timeline(since) == []
        # The drain check's reads are bounded: the pods and the budgets listed once each.
        listed = [c["resource"] for c in kubernetes if c["verb"] == "list"]
        assert listed.count("pods") == 1 and listed.count("poddisruptionbudgets") == 1

        # The plan: the canary alone, then the workers 2 at a time (min(2, 4 - 1)), in name order.
        assert "DRY RUN (check mode)" in out
        assert f"Batch 1/3 worker (canary): {workers[0]}" in out
        assert f"Batch 2/3 worker: {workers[1]}, {workers[2]}" in out
        assert f"Batch 3/3 worker: {workers[3]}" in out
        for worker in workers:
            assert f"{worker}: offering cks-medium -> cks-large; root disk 20 GB -> 30 GB" in out
        # The type that is not rolled, and why.
        assert re.search(rf"Not rolled, control: .*{control} \(offering cks-large -> cks-medium\).*single control node",
                         out), out

        # Every pod of web is named under its node, with the budget that allows no disruption.
        for pod, node in web.items():
            assert re.search(rf"{node} drain: PodDisruptionBudget default/web allows 0 disruptions "
                             rf"\(2 healthy, 2 needed\): pods [^\n]*{pod}", out), (pod, node)
        for pod, node in api.items():
            assert re.search(rf"{node} drain: pod {pod} is selected by 2 PodDisruptionBudgets "
                             r"\(default/api, default/front\)", out), (pod, node)
        ((cache_pod, cache_node),) = cache.items()
        assert re.search(rf"{cache_node} drain: stops before any eviction: pods with local storage "
                         rf"\(use delete_emptydir_data=true to override\): {cache_pod}", out), out
        ((debug_pod, debug_node),) = debug.items()
        assert re.search(rf"{debug_node} drain: stops before any eviction: pods that declare no controller "
                         rf"\(use force=true to override\): {debug_pod}", out), out
        assert "Dry run of dry: the plan above is what a rollout would do now. Nothing was changed" in out
        rh.assert_no_invariant_broken(sim)


def test_check_refuses_what_the_rollout_would_refuse_and_changes_nothing() -> None:
    with rh.running_rollout_sim("rollout_dry_run.yml") as sim:
        before = sim.world()
        since = time.time()
        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(
            sim, rollout_node_root_disk_sizes={"worker": 10}), args=("--check",))
        assert run.rc != 0, run.explain()
        assert "node_root_disk_sizes.worker" in run.stdout and "shrink" in run.stdout, run.explain()
        assert rh.mutating_calls(sim, since) == []
        assert sim.world() == before
