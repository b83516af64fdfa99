# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""plan: which nodes, in what order and batches; what is skipped and what is only released."""

from __future__ import annotations

import json

import pytest
from factories import ClusterFactory, ag, so
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import NODE_TYPES
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.order import Plan, plan, serial_list, worker_batch_size
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.quorum import can_lose_a_node
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.reasons import outdated_reasons
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, initial_settings


def everything_to(f: ClusterFactory, offering: str = "large") -> Settings:
    view = f.view()
    return initial_settings(view).with_changes(offerings={t: so(offering) for t in NODE_TYPES})


def batches(p: Plan) -> list[tuple[str, list[str]]]:
    return [(b.node_type, list(b.nodes)) for b in p.batches]


def test_up_to_date_cluster_has_nothing_to_do() -> None:
    f = ClusterFactory()
    p = plan(f.view(), initial_settings(f.view()), 2)
    assert p.batches == () and p.nodes == () and serial_list(p) == []
    assert p.to_dict()["controlnodesoutofdate"] == 0 and p.last_error is None


def test_order_etcd_then_control_one_at_a_time_then_workers_clamped() -> None:
    f = ClusterFactory(control=3, workers=5, etcd=3)
    p = plan(f.view(), everything_to(f), max_unavailable=2)
    assert batches(p) == [
        ("etcd", [f.e(1)]), ("etcd", [f.e(2)]), ("etcd", [f.e(3)]),
        ("control", [f.c(1)]), ("control", [f.c(2)]), ("control", [f.c(3)]),
        ("worker", [f.w(1), f.w(2)]), ("worker", [f.w(3), f.w(4)]), ("worker", [f.w(5)]),
    ]
    assert serial_list(p) == [1, 1, 1, 1, 1, 1, 2, 2, 1]
    assert dict(p.out_of_date) == {"etcd": 3, "control": 3, "worker": 5}
    assert p.worker_batch_size == 2


@pytest.mark.parametrize("workers, max_unavailable, sizes", [
    (4, 1, [1, 1, 1, 1]), (4, 2, [2, 2]), (4, 3, [3, 1]), (4, 10, [3, 1]), (2, 5, [1, 1]),
    (1, 3, [1]),  # a single worker still rolls
])
def test_worker_batches(workers: int, max_unavailable: int, sizes: list[int]) -> None:
    f = ClusterFactory(control=3, workers=workers)
    settings_ = initial_settings(f.view()).with_changes(offerings={"worker": so("large")})
    assert serial_list(plan(f.view(), settings_, max_unavailable)) == sizes


def test_stopped_and_annotated_nodes_go_first_then_by_name() -> None:
    f = ClusterFactory(control=3, workers=5)
    f.stop(f.w(4))
    f.cordon_for_rollout(f.w(3))
    f.stop(f.c(3))
    p = plan(f.view(), everything_to(f), max_unavailable=2)
    # Stopped nodes first of all, each alone, whatever their type (every other batch's preflight
    # needs their VMs Running); then by type, the annotated ones first within theirs.
    assert batches(p) == [
        ("control", [f.c(3)]), ("worker", [f.w(4)]), ("control", [f.c(1)]), ("control", [f.c(2)]),
        ("worker", [f.w(3), f.w(1)]), ("worker", [f.w(2), f.w(5)]),
    ]


def test_a_stopped_worker_goes_before_an_out_of_date_control_type() -> None:
    f = ClusterFactory(control=3, workers=3)
    f.stop(f.w(2))
    p = plan(f.view(), initial_settings(f.view()).with_changes(offerings={"control": so("large")}), 1)
    assert batches(p) == [("worker", [f.w(2)]), ("control", [f.c(1)]), ("control", [f.c(2)]), ("control", [f.c(3)])]


def test_stopped_and_annotated_up_to_date_nodes_are_work_left() -> None:
    # A rollout that stopped after changing a node: it is up to date but stopped, or cordoned.
    f = ClusterFactory(control=3, workers=3)
    f.stop(f.w(2))
    f.cordon_for_rollout(f.w(3))
    p = plan(f.view(), initial_settings(f.view()), max_unavailable=1)
    assert batches(p) == [("worker", [f.w(2)]), ("worker", [f.w(3)])]
    assert dict(p.out_of_date) == {"etcd": 0, "control": 0, "worker": 0}
    why = {n.name: n.why for n in p.nodes}
    assert why == {f.w(2): "VM is Stopped", f.w(3): "still cordoned by a rollout that stopped"}


def test_a_node_that_came_back_is_only_released() -> None:
    f = ClusterFactory(control=3, workers=3)
    f.cordon_for_rollout(f.w(1), f.w(2))
    f.reboot(f.w(1), f.w(2))
    f.set(f.w(2), offering="xlarge")  # back, but still differs: restarted again
    p = plan(f.view(), initial_settings(f.view()).with_changes(offerings={"worker": so("medium")}), 1)
    assert p.to_release == (f.w(1),)
    assert batches(p) == [("worker", [f.w(2)])]
    [w2] = p.nodes
    assert w2.annotated and w2.back and w2.first and w2.why == "offering cks-xlarge -> cks-medium"


def test_a_node_whose_etcd_member_is_down_goes_first_in_its_type() -> None:
    f = ClusterFactory(control=3, workers=2, etcd=3)
    p = plan(f.view(), everything_to(f), 1, etcd_down=[f.c(3).upper(), f.e(2)])
    assert batches(p)[:6] == [("etcd", [f.e(2)]), ("etcd", [f.e(1)]), ("etcd", [f.e(3)]),
                              ("control", [f.c(3)]), ("control", [f.c(1)]), ("control", [f.c(2)])]
    down = {n.name: n for n in p.nodes if n.etcd_down}
    assert sorted(down) == sorted([f.c(3), f.e(2)])
    assert down[f.c(3)].why.endswith("its etcd member is not healthy") and down[f.c(3)].to_dict()["etcd_down"]


def test_a_dead_etcd_member_adds_no_work_and_a_stopped_vm_is_not_called_a_dead_member() -> None:
    f = ClusterFactory(control=3, workers=2)
    f.stop(f.c(1))
    # Up to date: a dead member alone is not the rollout's to fix. Stopped: its VM is the reason.
    p = plan(f.view(), initial_settings(f.view()), 1, etcd_down=[f.c(1), f.c(2)])
    assert batches(p) == [("control", [f.c(1)])]
    [c1] = p.nodes
    assert not c1.etcd_down and c1.why == "VM is Stopped"


def test_annotated_node_that_came_back_goes_first_among_out_of_date_ones() -> None:
    f = ClusterFactory(control=3, workers=3)
    f.cordon_for_rollout(f.w(3))
    f.reboot(f.w(3))
    p = plan(f.view(), everything_to(f), 1)
    assert [b.nodes for b in p.batches if b.node_type == "worker"] == [(f.w(3),), (f.w(1),), (f.w(2),)]


# -- types that cannot lose a node are skipped, the others still roll ---------------------------

def test_single_control_node_is_skipped_and_its_workers_still_roll() -> None:
    f = ClusterFactory(control=1, workers=2)
    p = plan(f.view(), everything_to(f), 1)
    assert batches(p) == [("worker", [f.w(1)]), ("worker", [f.w(2)])]
    assert set(p.skipped) == {"control"}
    assert f.c(1) in p.skipped["control"] and "single control node" in p.skipped["control"]
    assert "offering cks-medium -> cks-large" in p.skipped["control"]
    assert p.out_of_date["control"] == 1  # still counted
    assert p.last_error == p.skipped["control"]


def test_etcd_and_control_both_skipped() -> None:
    f = ClusterFactory(control=1, workers=2, etcd=2)
    p = plan(f.view(), everything_to(f), 1)
    assert list(p.skipped) == ["etcd", "control"]
    assert [b.node_type for b in p.batches] == ["worker", "worker"]
    assert p.last_error is not None
    assert p.last_error.index("etcd nodes not restarted") < p.last_error.index("control nodes not restarted")


def test_two_node_stacked_control_plane_is_skipped() -> None:
    f = ClusterFactory(control=2, workers=2)
    p = plan(f.view(), everything_to(f), 1)
    assert "control" in p.skipped and all(b.node_type == "worker" for b in p.batches)


def test_stopped_node_of_an_unrollable_type_is_still_taken() -> None:
    # It is down already: starting it with its settings loses nothing more.
    f = ClusterFactory(control=1, workers=1)
    f.stop(f.c(1))
    p = plan(f.view(), everything_to(f), 1)
    assert batches(p)[0] == ("control", [f.c(1)])
    assert "control" not in p.skipped


def test_a_type_that_is_up_to_date_is_not_skipped() -> None:
    f = ClusterFactory(control=1, workers=2)
    p = plan(f.view(), initial_settings(f.view()).with_changes(offerings={"worker": so("large")}), 1)
    assert p.skipped == {} and p.last_error is None


# -- selection -----------------------------------------------------------------------------------

def test_selected_restricts_the_batches_not_the_counts() -> None:
    f = ClusterFactory(control=3, workers=4)
    p = plan(f.view(), everything_to(f), 2, selected={f.w(4), f.w(2).upper(), f.c(2)})
    assert batches(p) == [("control", [f.c(2)]), ("worker", [f.w(2), f.w(4)])]
    assert p.out_of_date["worker"] == 4
    # The nodes left out still have work left, and say so.
    assert p.not_selected == (f.c(1), f.c(3), f.w(1), f.w(3))
    assert plan(f.view(), everything_to(f), 2).not_selected == ()


def test_selected_nodes_of_a_type_that_cannot_lose_one_are_still_held() -> None:
    # Selecting the single control node does not make it rollable; it is not "not selected" either.
    f = ClusterFactory(control=1, workers=3)
    p = plan(f.view(), everything_to(f), 2, selected={f.c(1), f.w(1)})
    assert batches(p) == [("worker", [f.w(1)])]
    assert "control" in p.skipped and p.not_selected == (f.w(2), f.w(3))


def test_selected_unknown_nodes_are_refused() -> None:
    f = ClusterFactory(control=1, workers=1)
    with pytest.raises(InvalidInput) as err:
        plan(f.view(), everything_to(f), 1, selected={"nope"})
    assert err.value.parameter == "nodes" and f.w(1) in err.value.msg


def test_max_unavailable_below_one_is_refused() -> None:
    f = ClusterFactory(control=1, workers=1)
    with pytest.raises(InvalidInput):
        plan(f.view(), everything_to(f), 0)


# -- canary: the first worker alone, then the clamped batch size ---------------------------------

def test_canary_rolls_the_first_worker_alone_then_widens_to_the_clamp() -> None:
    f = ClusterFactory(control=3, workers=6)
    p = plan(f.view(), everything_to(f), max_unavailable=2, canary=True)
    assert batches(p)[3:] == [("worker", [f.w(1)]), ("worker", [f.w(2), f.w(3)]), ("worker", [f.w(4), f.w(5)]),
                              ("worker", [f.w(6)])]
    assert [b.canary for b in p.batches] == [False, False, False, True, False, False, False]
    assert serial_list(p) == [1, 1, 1, 1, 2, 2, 1]
    assert p.to_dict()["batches"][3] == {"node_type": "worker", "nodes": [f.w(1)], "canary": True}


def test_canary_leaves_control_and_etcd_alone() -> None:
    f = ClusterFactory(control=3, workers=3, etcd=3)
    p = plan(f.view(), everything_to(f), max_unavailable=5, canary=True)
    assert [b.canary for b in p.batches if b.node_type != "worker"] == [False] * 6
    assert [len(b.nodes) for b in p.batches if b.node_type == "worker"] == [1, 2]


def test_canary_without_workers_to_roll_plans_no_canary() -> None:
    f = ClusterFactory(control=3, workers=3)
    p = plan(f.view(), initial_settings(f.view()).with_changes(offerings={"control": so("large")}), 2, canary=True)
    assert [b.node_type for b in p.batches] == ["control"] * 3
    assert not any(b.canary for b in p.batches)


def test_canary_is_the_first_worker_in_plan_order_stopped_first() -> None:
    # Resuming: a stopped worker is down already, so it goes first, and it is the canary.
    f = ClusterFactory(control=3, workers=4)
    f.stop(f.w(3))
    p = plan(f.view(), everything_to(f), max_unavailable=3, canary=True)
    assert [(list(b.nodes), b.canary) for b in p.batches if b.node_type == "worker"] == [
        ([f.w(3)], True), ([f.w(1), f.w(2), f.w(4)], False)]


def test_canary_is_the_first_selected_worker() -> None:
    f = ClusterFactory(control=3, workers=5)
    p = plan(f.view(), everything_to(f), 2, selected={f.w(2), f.w(4), f.w(5)}, canary=True)
    assert [(list(b.nodes), b.canary) for b in p.batches] == [([f.w(2)], True), ([f.w(4), f.w(5)], False)]


@pytest.mark.parametrize("workers, max_unavailable, sizes", [
    (4, 1, [1, 1, 1, 1]), (4, 2, [1, 2, 1]), (4, 3, [1, 3]), (4, 10, [1, 3]), (2, 5, [1, 1]), (1, 3, [1]),
])
def test_canary_worker_batches(workers: int, max_unavailable: int, sizes: list[int]) -> None:
    f = ClusterFactory(control=3, workers=workers)
    settings_ = initial_settings(f.view()).with_changes(offerings={"worker": so("large")})
    p = plan(f.view(), settings_, max_unavailable, canary=True)
    assert serial_list(p) == sizes
    assert [b.canary for b in p.batches] == [True] + [False] * (len(sizes) - 1)


# -- result ----------------------------------------------------------------------------------

def test_to_dict_is_json_and_carries_the_counts_and_batches() -> None:
    f = ClusterFactory(control=1, workers=3, groups={"worker": ["spread"]})
    f.cordon_for_rollout(f.w(3))
    f.reboot(f.w(3))
    s = initial_settings(f.view()).with_changes(affinity_groups={"worker": [ag("soft")]},
                                                offerings={"control": so("large")})
    d = json.loads(json.dumps(plan(f.view(), s, 5).to_dict()))
    assert d["workernodesoutofdate"] == 3 and d["controlnodesoutofdate"] == 1 and d["etcdnodesoutofdate"] == 0
    assert d["batches"] == [{"node_type": "worker", "nodes": [f.w(3), f.w(1)], "canary": False},
                            {"node_type": "worker", "nodes": [f.w(2)], "canary": False}]
    assert d["serial"] == [2, 1] and d["hosts"] == [f.w(3), f.w(1), f.w(2)]
    assert d["worker_batch_size"] == 2 and d["to_release"] == []
    assert set(d["skipped"]) == {"control"} and d["last_error"] == d["skipped"]["control"]
    w1 = next(n for n in d["nodes"] if n["name"] == f.w(1))
    assert w1["reasons"] == [{"kind": "affinity_groups", "from": [{"id": ag("spread"), "name": "spread"}],
                              "to": [{"id": ag("soft"), "name": "soft"}],
                              "message": "affinity groups [spread] -> [soft]"}]


# -- properties ------------------------------------------------------------------------------

@st.composite
def clusters(draw: st.DrawFn) -> tuple[ClusterFactory, Settings, int]:
    control = draw(st.integers(min_value=1, max_value=5))
    workers = draw(st.integers(min_value=0, max_value=9))
    etcd = draw(st.sampled_from([0, 0, 1, 2, 3, 5]))
    f = ClusterFactory(control=control, workers=workers, etcd=etcd)
    for node in f.nodes:
        node.offering = draw(st.sampled_from(["medium", "medium", "large"]))
        node.root_gb = draw(st.sampled_from([20, 20, 30]))
        node.groups = ["dedicated"] + draw(st.sampled_from([[], [], ["spread"], ["soft"]]))
        if draw(st.integers(0, 5)) == 0:
            f.stop(node.name)
        if node.node_type != "etcd" and draw(st.integers(0, 5)) == 0:
            f.cordon_for_rollout(node.name)
            if draw(st.booleans()):
                f.reboot(node.name)
    wanted = {}
    for t in NODE_TYPES:
        wanted[t] = draw(st.sampled_from([None, so("medium"), so("large")]))
    view = f.view()
    s = initial_settings(view).with_changes(
        offerings={t: o for t, o in wanted.items() if o},
        root_disk_sizes={t: draw(st.sampled_from([20, 25])) for t in NODE_TYPES},
        affinity_groups={t: draw(st.sampled_from([None, [], [ag("spread")]])) for t in NODE_TYPES},
    )
    return f, s, draw(st.integers(min_value=1, max_value=6))


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_plan_properties(case: tuple[ClusterFactory, Settings, int]) -> None:
    f, s, max_unavailable = case
    view = f.view()
    p = plan(view, s, max_unavailable)
    hosts = list(p.hosts)
    # every node with work left is in exactly one batch, unless its type is skipped
    assert len(hosts) == len(set(hosts))
    for node in view.nodes:
        work = bool(outdated_reasons(node, s[node.node_type], view)) or not node.running or (
            node.annotated and not node.back)
        held = node.running and not can_lose_a_node(node.node_type, view)[0]
        assert (node.name in hosts) == (work and not held), node.name
        assert (node.name in p.to_release) == (node.annotated and node.back and not work)
        if work and held:
            assert node.node_type in p.skipped and node.name in p.skipped[node.node_type]
    # nodes whose VM is down first of all, each alone; then etcd before control before worker
    down = [b for b in p.batches if not any(view.node(n).running for n in b.nodes)]
    assert list(p.batches[:len(down)]) == down and all(len(b.nodes) == 1 for b in down)
    up = p.batches[len(down):]
    assert all(view.node(n).running for b in up for n in b.nodes)
    order = [NODE_TYPES.index(b.node_type) for b in up]
    assert order == sorted(order)
    # batch sizes: control and etcd alone, workers within the clamp
    size = worker_batch_size(max_unavailable, len(view.nodes_of("worker")))
    for b in p.batches:
        assert len(b.nodes) >= 1
        assert all(view.node(n).node_type == b.node_type for n in b.nodes)
        if b.node_type == "worker":
            assert len(b.nodes) <= size
        else:
            assert len(b.nodes) == 1
    # only the last worker batch may be short
    worker_sizes = [len(b.nodes) for b in up if b.node_type == "worker"]
    assert all(n == size for n in worker_sizes[:-1])
    # within a type: stopped (hoisted above), then annotated, then by name
    for t in NODE_TYPES:
        of_type = [view.node(n) for n in hosts if view.node(n).node_type == t]
        keys = [(0 if not n.running else 1 if n.annotated else 2, n.name) for n in of_type]
        assert keys == sorted(keys)
    # counts are the out-of-date nodes per type
    for t in NODE_TYPES:
        assert p.out_of_date[t] == sum(1 for n in view.nodes_of(t) if outdated_reasons(n, s[t], view))
    assert serial_list(p) == [len(b.nodes) for b in p.batches]
    assert sum(serial_list(p)) == len(hosts)


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_canary_properties(case: tuple[ClusterFactory, Settings, int]) -> None:
    f, s, max_unavailable = case
    view = f.view()
    plain = plan(view, s, max_unavailable)
    p = plan(view, s, max_unavailable, canary=True)
    # The same nodes in the same order, the same counts and skips: only the batches differ.
    assert p.hosts == plain.hosts and p.nodes == plain.nodes
    assert dict(p.out_of_date) == dict(plain.out_of_date) and dict(p.skipped) == dict(plain.skipped)
    assert [b for b in p.batches if b.node_type != "worker"] == [b for b in plain.batches if b.node_type != "worker"]
    workers = [n for b in plain.batches if b.node_type == "worker" for n in b.nodes]
    worker_batches = [b for b in p.batches if b.node_type == "worker"]
    if not workers:
        assert not any(b.canary for b in p.batches)
        return
    # The first worker alone and marked; then the rest at the clamped size, only the last short.
    assert worker_batches[0].nodes == (workers[0],) and worker_batches[0].canary
    assert [b for b in p.batches if b.canary] == [worker_batches[0]]
    size = worker_batch_size(max_unavailable, len(view.nodes_of("worker")))
    # Stopped workers alone (the first of them the canary), then the running ones at the clamp.
    rest = [w for w in workers[1:] if view.node(w).running]
    stopped = [w for w in workers[1:] if not view.node(w).running]
    assert [list(b.nodes) for b in worker_batches[1:]] == [[w] for w in stopped] + [
        rest[i:i + size] for i in range(0, len(rest), size)]
    assert serial_list(p) == [len(b.nodes) for b in p.batches]


@settings(max_examples=150, deadline=None)
@given(clusters(), st.data())
def test_selection_properties(case: tuple[ClusterFactory, Settings, int], data: st.DataObject) -> None:
    f, s, max_unavailable = case
    view = f.view()
    chosen = set(data.draw(st.lists(st.sampled_from([n.name for n in view.nodes]), unique=True)))
    canary = data.draw(st.booleans())
    full = plan(view, s, max_unavailable, canary=canary)
    p = plan(view, s, max_unavailable, selected=chosen, canary=canary)
    # The same order as the whole plan, restricted to the selection; held nodes stay held.
    assert list(p.hosts) == [h for h in full.hosts if h in chosen]
    assert dict(p.out_of_date) == dict(full.out_of_date) and dict(p.skipped) == dict(full.skipped)
    # The left-out nodes with work are reported, and only they.
    assert sorted(p.not_selected) == sorted(h for h in full.hosts if h not in chosen)
    # The clamp is the whole cluster's (workers - 1), and the canary is the first selected worker.
    size = worker_batch_size(max_unavailable, len(view.nodes_of("worker")))
    assert p.worker_batch_size == size
    worker_batches = [b for b in p.batches if b.node_type == "worker"]
    rest = [b for b in (worker_batches[1:] if canary and worker_batches else worker_batches)
            if any(view.node(n).running for n in b.nodes)]
    if canary and worker_batches:
        assert len(worker_batches[0].nodes) == 1 and worker_batches[0].canary
    assert all(len(b.nodes) <= size for b in rest) and all(len(b.nodes) == size for b in rest[:-1])
    assert all(len(b.nodes) == 1 for b in p.batches if b.node_type != "worker")


def test_restart_all_restarts_every_node_of_an_up_to_date_cluster_in_the_same_order() -> None:
    f = ClusterFactory(control=3, workers=4)
    p = plan(f.view(), initial_settings(f.view()), 2, restart="all")
    assert batches(p) == [("control", [f.c(1)]), ("control", [f.c(2)]), ("control", [f.c(3)]),
                          ("worker", [f.w(1), f.w(2)]), ("worker", [f.w(3), f.w(4)])]
    # Nothing is out of date: each node says why it is restarted all the same.
    assert dict(p.out_of_date) == {"etcd": 0, "control": 0, "worker": 0}
    assert {n.why for n in p.nodes} == {"restart asked, no change"} and all(n.restart for n in p.nodes)
    assert p.to_dict()["nodes"][0]["restart"] is True


def test_restart_all_keeps_the_reasons_and_the_order_of_nodes_with_work_left() -> None:
    f = ClusterFactory(control=3, workers=3)
    f.stop(f.w(3))
    p = plan(f.view(), initial_settings(f.view()).with_changes(offerings={"worker": so("large")}), 1, restart="all")
    assert batches(p)[0] == ("worker", [f.w(3)])
    assert [b[1] for b in batches(p)[1:]] == [[f.c(1)], [f.c(2)], [f.c(3)], [f.w(1)], [f.w(2)]]
    why = {n.name: n.why for n in p.nodes}
    assert why[f.w(1)] == "offering cks-medium -> cks-large" and why[f.c(1)] == "restart asked, no change"
    assert dict(p.out_of_date)["worker"] == 3 and dict(p.out_of_date)["control"] == 0


def test_restart_selected_restarts_the_selected_nodes_with_no_change() -> None:
    f = ClusterFactory(control=3, workers=4)
    up_to_date = initial_settings(f.view())
    p = plan(f.view(), up_to_date, 5, selected=[f.w(2), f.w(4)], restart="selected")
    assert batches(p) == [("worker", [f.w(2), f.w(4)])] and p.not_selected == ()
    # Only the nodes with work left without it, as before.
    assert plan(f.view(), up_to_date, 5, selected=[f.w(2)]).batches == ()
    with pytest.raises(InvalidInput, match="give select too"):
        plan(f.view(), up_to_date, 1, restart="selected")
    with pytest.raises(InvalidInput, match="must be outdated, selected or all"):
        plan(f.view(), up_to_date, 1, restart="everything")


def test_restart_all_still_keeps_a_type_that_cannot_lose_a_node() -> None:
    f = ClusterFactory(control=1, workers=2)
    p = plan(f.view(), initial_settings(f.view()), 1, restart="all")
    assert batches(p) == [("worker", [f.w(1)]), ("worker", [f.w(2)])]
    assert "control nodes not restarted" in p.skipped["control"] and "restart asked, no change" in p.skipped["control"]
