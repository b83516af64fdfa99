"""A rolling restart's round (``_decisions.restart_round``): a rerun of ``rollout_restart`` after a
killed or failed run restarts only the nodes not booted since the round began; a new round (after one
that finished, or of another scope) restarts every node again."""

from __future__ import annotations

import json

from factories import ClusterFactory, so

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.order import plan
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.restart_round import (
    RestartRound,
    already_restarted,
    new_round,
    restart_scope,
    resumed_round,
    round_ends,
    round_to_store,
    round_words,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import initial_settings
from ansible_collections.cloudstack.cks.plugins.module_utils._services.outdated import outdated_report
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import Record


def names_in_batches(p: object) -> list[str]:
    return [n for b in p.batches for n in b.nodes]  # type: ignore[attr-defined]


def test_scope_is_all_or_the_selected_names_and_none_for_outdated() -> None:
    assert restart_scope("all", None) == "all"
    assert restart_scope("all", ["b", "a"]) == "all"  # all restarts every node, whatever select restricts
    assert restart_scope("selected", ["W-2", "w-1"]) == "selected:w-1,w-2"
    assert restart_scope("outdated", ["w-1"]) is None
    assert restart_scope("selected", None) is None


def test_a_new_round_records_every_kubernetes_nodes_boot_id() -> None:
    f = ClusterFactory(control=1, workers=2, etcd=1)
    begun = new_round("all", f.view().nodes, "2026-12-07T13:00:00Z", "run-1")
    assert sorted(begun.boot_ids) == sorted([f.c(1), f.w(1), f.w(2)])  # the etcd node has no Kubernetes node
    assert begun.boot_ids[f.w(1)] == f"boot-{f.w(1)}-1"
    assert RestartRound.from_dict(json.loads(json.dumps(begun.to_dict()))) == begun


def test_nodes_booted_since_the_round_began_are_not_restarted_again() -> None:
    f = ClusterFactory(control=3, workers=4)
    begun = new_round("all", f.view().nodes, "t0", "run-killed")
    # The killed run restarted the control nodes and the first two workers.
    f.reboot(f.c(1), f.c(2), f.c(3), f.w(1), f.w(2))
    view = f.view()
    done = already_restarted(resumed_round(begun.to_dict(), "all"), view.nodes)
    assert done == tuple(sorted([f.c(1), f.c(2), f.c(3), f.w(1), f.w(2)]))
    p = plan(view, initial_settings(view), 2, restart="all", restarted=done)
    assert names_in_batches(p) == [f.w(3), f.w(4)]
    assert p.restarted == done and p.to_dict()["restarted"] == list(done)
    # Without the round the same rerun restarts every node again.
    assert len(names_in_batches(plan(view, initial_settings(view), 2, restart="all"))) == 7


def test_a_node_left_mid_cycle_is_finished_whatever_the_round_says() -> None:
    f = ClusterFactory(control=3, workers=3)
    begun = new_round("all", f.view().nodes, "t0", "run-killed")
    # Killed after it cordoned w1 (not yet stopped: same boot ID), and after w2 came back (new boot
    # ID, still annotated and cordoned).
    f.cordon_for_rollout(f.w(1), f.w(2))
    f.reboot(f.w(2))
    view = f.view()
    done = already_restarted(begun, view.nodes)
    assert done == (f.w(2),)
    p = plan(view, initial_settings(view), 1, restart="all", restarted=done)
    assert f.w(1) in names_in_batches(p) and f.w(2) not in names_in_batches(p)
    assert p.to_release == (f.w(2),)  # back: uncordoned, not restarted again
    # A node the round restarted that has work of its own (a change) is still planned for it.
    changed = initial_settings(view).with_changes(offerings={"worker": so("large")})
    assert f.w(3) in names_in_batches(plan(view, changed, 1, restart="all", restarted=(f.w(3),)))


def test_a_stopped_node_or_one_added_since_is_still_to_restart() -> None:
    f = ClusterFactory(control=1, workers=2)
    begun = new_round("all", f.view().nodes, "t0", None)
    f.stop(f.w(1))  # the same boot ID until it boots again
    f.add_external_worker("demo-node-added")
    assert already_restarted(begun, f.view().nodes) == ()
    # A node that reported no boot ID when the round began: its first one is a fresh boot.
    blank = RestartRound("all", {f.w(2): ""})
    assert already_restarted(blank, f.view().nodes) == (f.w(2),)


def test_only_a_round_of_the_same_scope_is_resumed() -> None:
    f = ClusterFactory(control=1, workers=3)
    stored = new_round("selected:" + f.w(1), f.view().nodes, "t0", "run-1").to_dict()
    assert resumed_round(stored, "selected:" + f.w(1)) is not None
    assert resumed_round(stored, "all") is None
    assert resumed_round(stored, None) is None
    assert resumed_round(None, "all") is None
    assert resumed_round({"scope": "all", "boot_ids": "not a mapping"}, "all") is None
    # What is written once the lock is held: a new round, never over a resumed one; none for outdated.
    # (the plan's restart_round, as outdated_report words it)
    assert round_to_store({"scope": "all", "resumed": False}, f.view().nodes, "t1", "run-2") is not None
    assert round_to_store({"scope": "all", "resumed": True}, f.view().nodes, "t1", "run-2") is None
    assert round_to_store(None, f.view().nodes, "t1", "run-2") is None


def test_the_round_ends_only_when_a_rollout_of_its_scope_ran_every_batch() -> None:
    stored = {"scope": "all", "boot_ids": {"w1": "b1"}}
    assert round_ends(stored, "all", "done")
    assert not round_ends(stored, "all", "failed at batch 2 of 4")
    assert not round_ends(stored, "all", "cancelled before batch 2 of 4")
    assert not round_ends(stored, None, "done")  # an outdated rollout leaves the restart alone
    assert not round_ends(stored, "selected:w1", "done")
    assert not round_ends(None, "all", "done")


def test_words_say_new_or_resumed_and_what_is_not_restarted_again() -> None:
    assert round_words(None, None, ()) is None
    assert round_words("all", None, ()) == "restart all: a new round (every node of it restarted)"
    resumed = RestartRound("all", {}, started="2026-12-07T13:00:00Z", run_id="run-killed")
    assert round_words("all", resumed, ["w1", "w2"]) == (
        "restart all: resumes the round begun 2026-12-07T13:00:00Z by run-killed; restarted since it began, "
        "not again: w1, w2")


def test_the_plan_report_resumes_the_recorded_round() -> None:
    f = ClusterFactory(control=3, workers=2)
    record = Record(restart_round=new_round("all", f.view().nodes, "t0", "run-killed").to_dict())
    f.reboot(f.c(1), f.c(2), f.c(3))
    view = f.view()
    report = outdated_report(view, record, None, restart="all")
    assert report["hosts"] == [f.w(1), f.w(2)]
    assert report["restart_round"]["resumed"] and report["restart_round"]["restarted"] == sorted([f.c(1), f.c(2), f.c(3)])
    assert "resumes the round" in report["restart_round"]["words"]
    # Outdated has no round; a different scope starts a new one and restarts every node of it.
    assert outdated_report(view, record, None)["restart_round"] is None
    fresh = outdated_report(view, record, None, restart="selected", select=f"[?name=='{f.c(1)}']")
    assert fresh["hosts"] == [f.c(1)] and not fresh["restart_round"]["resumed"]


def test_the_record_keeps_the_round_as_json() -> None:
    stored = {"scope": "all", "boot_ids": {"w1": "b1"}, "started": "t0", "run_id": "run-1"}
    data = Record(restart_round=stored).to_data()
    assert json.loads(data["restartRound"]) == stored
    assert Record.from_configmap({"data": data}).restart_round == stored
    assert "restartRound" not in Record().to_data()
    assert Record.from_configmap({"data": {}}).restart_round is None
