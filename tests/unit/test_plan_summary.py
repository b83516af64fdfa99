"""The ``plan_summary`` filter: the plan as shown before the first batch, one line per item - the dry
run's warning, a lock taken over, the counts, each batch and what changes on each node, what would
block its drain, and what is not rolled, not selected, uncordoned without a restart, hooked, paused."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.cloudstack.cks.plugins.filter.plan_summary import FilterModule, plan_summary


def plan(**extra: Any) -> dict[str, Any]:
    return dict({
        "cluster": {"name": "demo", "state": "Running", "id": "c-1"},
        "plan": [{"node_type": "control", "nodes": ["c1"]},
                 {"node_type": "worker", "nodes": ["w1"], "canary": True},
                 {"node_type": "worker", "nodes": ["w2", "w3"], "canary": False}],
        "hosts": ["c1", "w1", "w2", "w3"],
        "to_release": [],
        "work": [{"name": "c1", "why": "offering small -> large"}, {"name": "w1", "why": "root disk 8 -> 16 GB"},
                 {"name": "w2", "why": ""}, {"name": "w3", "why": None}],
        "controlnodesoutofdate": 1, "workernodesoutofdate": 3, "etcdnodesoutofdate": 0,
        "worker_batch_size": 2,
    }, **extra)


HEAD = [
    "Cluster demo (Running): 3 batch(es), 4 node(s) to restart, 0 to uncordon without a restart",
    "Out of date: control 1, worker 3, etcd 0; workers 2 at a time",
    "Batch 1/3 control: c1",
    "  c1: offering small -> large",
    "Batch 2/3 worker (canary): w1",
    "  w1: root disk 8 -> 16 GB",
    "Batch 3/3 worker: w2, w3",
    # No reason recorded (empty or none): nothing to change on the node itself.
    "  w2: no change",
    "  w3: no change",
]


def test_the_counts_then_each_batch_and_what_changes_on_each_node() -> None:
    assert plan_summary(plan()) == HEAD


def test_a_dry_run_says_first_that_nothing_changes() -> None:
    lines = plan_summary(plan(), check_mode=True)
    assert lines[0].startswith("DRY RUN (check mode): nothing is changed - the lock is not taken")
    assert lines[1:] == HEAD


def test_a_canary_plan_says_the_first_worker_goes_alone() -> None:
    assert plan_summary(plan(canary=True))[1] == ("Out of date: control 1, worker 3, etcd 0; workers 2 at a time, "
                                                  "the first one alone (canary)")


def test_a_lock_taken_over_names_the_rollout_that_stopped() -> None:
    lock = {"holder": "me", "taken_over_from": {"holder": "rollout-1", "acquire_time": "2026-01-01T00:00:00Z",
                                                "renew_time": "2026-01-01T00:05:00Z"}}
    assert plan_summary(plan(), check_mode=True, lock=lock)[1] == (
        "The previous rollout rollout-1 stopped without release (took the lock at 2026-01-01T00:00:00Z, last renewed "
        "2026-01-01T00:05:00Z): its lock has expired and this rollout took it over; its work left is resumed")


@pytest.mark.parametrize("lock", [None, {}, {"holder": "me", "taken_over_from": None}])
def test_no_lock_taken_over_no_line(lock: Any) -> None:
    assert plan_summary(plan(), lock=lock) == HEAD


def test_a_dry_run_shows_what_would_block_each_drain_under_its_node() -> None:
    blockers = [{"batch": 3, "node": "w3", "messages": ["pod default/db: PodDisruptionBudget default/db allows 0",
                                                        "pod default/cache: local storage (emptyDir)"]},
                # The same node in another batch number is another plan's: not shown here.
                {"batch": 1, "node": "w3", "messages": ["elsewhere"]}]
    lines = plan_summary(plan(drain_blockers=blockers), check_mode=True)
    assert lines[-3:] == ["  w3: no change", "  w3 drain: pod default/db: PodDisruptionBudget default/db allows 0",
                          "  w3 drain: pod default/cache: local storage (emptyDir)"]
    assert not any("Drains: nothing" in line for line in lines)


def test_a_drain_check_that_found_nothing_says_so_and_none_says_nothing() -> None:
    assert plan_summary(plan(drain_blockers=[]))[-1] == (
        "Drains: nothing in the way now (no PodDisruptionBudget allowing 0 disruptions over pods of a planned node, "
        "no pod the drain would refuse)")
    # No drain check (a real run): no claim about the drains.
    assert plan_summary(plan()) == HEAD


def test_types_not_rolled_nodes_not_selected_and_nodes_only_uncordoned() -> None:
    lines = plan_summary(plan(unrollable={"control": "a single control node", "etcd": "etcd would lose quorum"},
                              not_selected=["w8", "w9"], to_release=["w7"]))
    assert lines[0] == "Cluster demo (Running): 3 batch(es), 4 node(s) to restart, 1 to uncordon without a restart"
    assert lines[len(HEAD):] == [
        "Not rolled, control: a single control node",
        "Not rolled, etcd: etcd would lose quorum",
        "Not selected (rollout_select), still out of date: w8, w9",
        "Uncordoned without a restart (back since a rollout stopped): w7",
    ]


def test_empty_lists_say_nothing() -> None:
    assert plan_summary(plan(unrollable={}, not_selected=[], to_release=[])) == HEAD


@pytest.mark.parametrize("hooks, shown", [
    ({"before_drain": "/h/lb-out.yml", "after_verify": ""}, "before_drain /h/lb-out.yml, after_verify -"),
    ({"before_drain": "", "after_verify": "/h/lb-in.yml"}, "before_drain -, after_verify /h/lb-in.yml"),
    ({"before_drain": "/h/a.yml", "after_verify": "/h/b.yml"}, "before_drain /h/a.yml, after_verify /h/b.yml"),
])
def test_per_node_hooks_are_named(hooks: dict[str, str], shown: str) -> None:
    assert plan_summary(plan(), hooks=hooks)[-1] == (
        f"Per-node hooks: {shown} (each batch in three cks_node_cycle runs around them)")


@pytest.mark.parametrize("hooks", [None, {}, {"before_drain": "", "after_verify": ""}])
def test_no_hooks_no_line(hooks: Any) -> None:
    assert plan_summary(plan(), hooks=hooks) == HEAD


@pytest.mark.parametrize("pause", [5, "5", "5.0"])
def test_the_pause_between_batches_as_the_operator_gave_it(pause: Any) -> None:
    assert plan_summary(plan(), pause_seconds=pause)[-1] == f"Pause between batches: {pause} s"


@pytest.mark.parametrize("pause", [0, "0", -3, None, "soon"])
def test_no_pause_no_line(pause: Any) -> None:
    assert plan_summary(plan(), pause_seconds=pause) == HEAD


def test_no_pause_line_with_a_single_batch() -> None:
    one = plan(plan=[{"node_type": "control", "nodes": ["c1"]}], hosts=["c1"], work=[{"name": "c1", "why": "x"}])
    assert plan_summary(one, pause_seconds=30) == [
        "Cluster demo (Running): 1 batch(es), 1 node(s) to restart, 0 to uncordon without a restart",
        "Out of date: control 1, worker 3, etcd 0; workers 2 at a time",
        "Batch 1/1 control: c1", "  c1: x"]


def test_nothing_to_do() -> None:
    empty = plan(plan=[], hosts=[], work=[], controlnodesoutofdate=0, workernodesoutofdate=0)
    # A pause is no line without a second batch to pause before.
    assert plan_summary(empty, pause_seconds=10) == [
        "Cluster demo (Running): 0 batch(es), 0 node(s) to restart, 0 to uncordon without a restart",
        "Out of date: control 0, worker 0, etcd 0; workers 2 at a time"]


def test_every_line_in_order() -> None:
    lock = {"taken_over_from": {"holder": "old", "acquire_time": "a", "renew_time": "r"}}
    lines = plan_summary(plan(unrollable={"etcd": "why"}, not_selected=["w9"], to_release=["w7"], drain_blockers=[]),
                         check_mode=True, lock=lock, hooks={"before_drain": "/h.yml", "after_verify": ""},
                         pause_seconds=1)
    starts = [line.split(" ")[0] for line in lines]
    assert starts == ["DRY", "The", "Cluster", "Out", "Batch", "", "Batch", "", "Batch", "", "", "Not", "Not",
                      "Uncordoned", "Per-node", "Pause", "Drains:"]


def test_registered() -> None:
    assert FilterModule().filters() == {"plan_summary": plan_summary}


def test_what_the_key_could_not_check_is_named() -> None:
    from ansible_collections.cloudstack.cks.plugins.filter.plan_summary import plan_summary

    note = "this key cannot list the zone's hosts (not available for user): ... was not checked"
    assert f"Not checked: {note}" in plan_summary({"not_checked": [note]})
    assert not [line for line in plan_summary({}) if line.startswith("Not checked")]


def test_live_scale_auto_shows_each_nodes_path_and_why() -> None:
    nodes = [{"name": "c1", "path": {"path": "live", "reason": "small -> large on a running KVM VM"}},
             {"name": "w1", "path": {"path": "restart", "reason": "the root disk changes"}},
             {"name": "w2"}]
    lines = plan_summary(plan(nodes=nodes))
    assert lines[lines.index("  c1: offering small -> large") + 1] == "  c1 path: live (small -> large on a running KVM VM)"
    assert lines[lines.index("  w1: root disk 8 -> 16 GB") + 1] == "  w1 path: restart (the root disk changes)"
    assert not [line for line in lines if line.startswith("  w2 path")]
