"""cks_node_outdated's result shaping (pure: a view, a record and a lock in, a dict out)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.drain import DrainOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.outdated_report import DrainCheck, daemonset_owners
from ansible_collections.cloudstack.cks.plugins.module_utils._services.outdated import outdated_report
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.outdated_report import EtcdHealth
from ansible_collections.cloudstack.cks.plugins.module_utils._services.outdated import read_etcd_health
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions import settings as plans
from ansible_collections.cloudstack.cks.plugins.module_utils._state import record as records
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.request import SettingsRequest
from ansible_collections.cloudstack.cks.plugins.module_utils._state.settings_store import settings_data
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput

from factories import ClusterFactory, ag, so


def recorded(settings: plans.Settings, max_unavailable: int | None = None) -> records.Record:
    return records.Record(settings=settings_data(settings, max_unavailable), last_error="drain failed",
                          resource_version="7")


def lock(holder: str, expired: bool = False) -> records.LockInfo:
    return records.LockInfo(holder=holder, acquire_time="2026-12-02T16:00:00.000000Z",
                            renew_time="2026-12-02T16:00:00.000000Z", duration_seconds=600, transitions=0,
                            resource_version="3", expired=expired)


def test_before_first_use_the_initial_settings_are_reported_and_nothing_differs() -> None:
    factory = ClusterFactory(groups={"worker": ["spread"]})
    result = outdated_report(factory.view(), None, None)
    assert result["settings_recorded"] is False
    assert result["settings"]["worker"]["affinity_groups"] == ["spread"]
    assert result["plan"] == [] and result["serial"] == [] and result["out_of_date"] == []
    assert result["max_unavailable"] == 1 and result["lock_holder"] is None and result["last_error"] is None
    json.dumps(result)  # what a module returns must be JSON


def test_node_records_carry_state_readiness_boot_id_annotation_and_foreign_cordon() -> None:
    factory = ClusterFactory(workers=3)
    factory.cordon_for_rollout(factory.w(1))
    factory.set(factory.w(2), unschedulable=True)
    factory.stop(factory.w(3))
    nodes = {n["name"]: n for n in outdated_report(factory.view(), None, None)["nodes"]}
    w1, w2, w3 = (nodes[factory.w(i)] for i in (1, 2, 3))
    assert w1["annotated"] and w1["rollout_boot_id"] == w1["boot_id"] and not w1["cordoned_by_others"]
    assert w2["cordoned_by_others"] and not w2["annotated"]
    assert w3["vm_state"] == "Stopped" and w3["ready"] is False
    assert w1["dedication_groups"] == ["dedicated"]
    # The default NIC's address: what an operator's per-node hook needs to reach the node.
    assert w1["ip_address"] and w1["ip_address"].startswith("10.1.1.")


def test_stored_max_unavailable_is_the_default_and_the_option_wins() -> None:
    factory = ClusterFactory(workers=5)
    view = factory.view()
    settings = plans.initial_settings(view).with_changes(offerings={"worker": so("large")})
    stored = outdated_report(view, recorded(settings, 10), None)
    assert stored["max_unavailable"] == 10 and stored["worker_batch_size"] == 4 and stored["serial"] == [4, 1]
    given = outdated_report(view, recorded(settings, 10), None, max_unavailable=2)
    assert given["serial"] == [2, 2, 1]
    with pytest.raises(InvalidInput):
        outdated_report(view, None, None, max_unavailable=0)


def test_lock_holder_only_while_held_and_last_error_from_the_record() -> None:
    view = ClusterFactory().view()
    settings = plans.initial_settings(view)
    assert outdated_report(view, recorded(settings), lock("run-1"))["lock_holder"] == "run-1"
    gone = outdated_report(view, recorded(settings), lock("run-1", expired=True))
    assert gone["lock_holder"] is None and gone["lock"]["expired"] is True
    assert gone["last_error"] == "drain failed"


def test_unrollable_types_are_reported_ready_for_the_last_error() -> None:
    factory = ClusterFactory(control=1, workers=2)
    view = factory.view()
    settings = plans.initial_settings(view).with_changes(offerings={"control": so("large"), "worker": so("large")})
    result = outdated_report(view, recorded(settings), None)
    assert list(result["unrollable"]) == ["control"]
    assert result["unrollable_error"] == result["unrollable"]["control"]
    assert "skipped" not in result  # Ansible would read a truthy "skipped" as a skipped task
    assert result["node_types"]["control"]["can_lose_a_node"] is False
    assert {b["node_type"] for b in result["plan"]} == {"worker"}


def test_select_picks_records_or_names_and_limits_only_the_batches() -> None:
    factory = ClusterFactory(workers=4)
    view = factory.view()
    settings = plans.initial_settings(view).with_changes(offerings={"worker": so("large"), "control": so("large")})
    record = recorded(settings, 3)
    by_records = outdated_report(view, record, None, select="[?node_type=='worker'] | [1:3]")
    assert by_records["selected"] == [factory.w(2).lower(), factory.w(3).lower()]
    assert by_records["hosts"] == by_records["selected"]
    assert by_records["workernodesoutofdate"] == 4 and by_records["controlnodesoutofdate"] == 3
    by_names = outdated_report(view, record, None, select=f"[?name=='{factory.c(1).lower()}'].name")
    assert by_names["hosts"] == [factory.c(1).lower()]
    assert outdated_report(view, record, None, select="[?node_type=='nothing']")["plan"] == []


@pytest.mark.parametrize("expression, why", [("[?", "not a valid JMESPath"), ("length(@)", "not int"),
                                             ("[].vm_state", "'Running'")])
def test_bad_select_expressions_are_refused(expression: str, why: str) -> None:
    view = ClusterFactory().view()
    with pytest.raises(InvalidInput) as err:
        outdated_report(view, None, None, select=expression)
    assert err.value.parameter == "select" and why in err.value.msg


def test_reasons_name_groups_and_leave_dedication_out() -> None:
    factory = ClusterFactory(workers=1, groups={"worker": ["spread"]})
    view = factory.view()
    settings = plans.initial_settings(view).with_changes(affinity_groups={"worker": [ag("soft")]})
    (node,) = [n for n in outdated_report(view, recorded(settings), None)["nodes"] if n["node_type"] == "worker"]
    (reason,) = node["reasons"]
    assert reason["from"] == [{"id": ag("spread"), "name": "spread"}]
    assert reason["to"] == [{"id": ag("soft"), "name": "soft"}]


# -- the dry run: settings given with the call, canary, the drain check -----------------------------

def test_given_settings_are_judged_as_a_rollout_would_store_them() -> None:
    factory = ClusterFactory(workers=3)
    view = factory.view()
    changes = SettingsRequest.from_params({"node_offerings": {"worker": "cks-large"},
                                           "node_root_disk_sizes": {"control": 30}})
    result = outdated_report(view, None, None, changes=changes)
    assert result["settings_given"] is True and result["settings_recorded"] is False
    assert result["workernodesoutofdate"] == 3 and result["controlnodesoutofdate"] == 3
    assert result["settings"]["worker"]["offering"] == "cks-large"
    work = {w["name"]: w["why"] for w in result["work"]}
    assert work[factory.w(1).lower()] == "offering cks-medium -> cks-large"
    assert work[factory.c(1).lower()] == "root disk 20 GB -> 30 GB"
    # Nothing given: the stored (here: initial) settings, as before.
    assert outdated_report(view, None, None)["settings_given"] is False


def test_given_settings_a_rollout_would_refuse_are_refused_naming_the_parameter() -> None:
    view = ClusterFactory(workers=2).view()
    with pytest.raises(InvalidInput) as err:
        outdated_report(view, None, None, changes=SettingsRequest.from_params(
            {"node_root_disk_sizes": {"worker": 10}}))
    assert err.value.parameter == "node_root_disk_sizes.worker" and "shrink" in err.value.msg
    with pytest.raises(InvalidInput) as err:
        outdated_report(view, None, None, changes=SettingsRequest.from_params({"node_offerings": {"worker": "nope"}}))
    assert err.value.parameter == "node_offerings.worker"


def test_given_settings_laid_over_the_stored_ones_keep_the_other_types() -> None:
    factory = ClusterFactory(workers=2)
    view = factory.view()
    stored = plans.initial_settings(view).with_changes(offerings={"control": so("large")})
    result = outdated_report(view, recorded(stored), None,
                             changes=SettingsRequest.from_params({"node_offerings": {"worker": "cks-large"}}))
    assert result["controlnodesoutofdate"] == 3 and result["workernodesoutofdate"] == 2


def test_canary_marks_the_first_worker_batch() -> None:
    factory = ClusterFactory(workers=5)
    view = factory.view()
    settings = plans.initial_settings(view).with_changes(offerings={"worker": so("large")})
    result = outdated_report(view, recorded(settings), None, max_unavailable=3, canary=True)
    assert result["serial"] == [1, 3, 1] and result["canary"] is True
    assert [b["canary"] for b in result["plan"]] == [True, False, False]


def test_not_selected_lists_the_left_out_nodes_that_stay_out_of_date() -> None:
    factory = ClusterFactory(workers=4)
    view = factory.view()
    settings = plans.initial_settings(view).with_changes(offerings={"worker": so("large")})
    result = outdated_report(view, recorded(settings), None, select="[?node_type=='worker'] | [0:2]")
    assert result["hosts"] == [factory.w(1).lower(), factory.w(2).lower()]
    assert result["not_selected"] == [factory.w(3).lower(), factory.w(4).lower()]
    assert result["workernodesoutofdate"] == 4
    assert outdated_report(view, recorded(settings), None)["not_selected"] == []


def k8s_pod(name: str, node: str, app: str, owner: str = "ReplicaSet", empty_dir: bool = False) -> dict:
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": {"app": app},
                         "ownerReferences": [{"kind": owner, "name": f"{app}-x", "controller": True}]},
            "spec": {"nodeName": node, "volumes": [{"name": "s", "emptyDir": {}}] if empty_dir else []},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def k8s_pdb(name: str, allowed: int) -> dict:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"selector": {"matchLabels": {"app": name}}},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 2, "desiredHealthy": 2 + allowed}}


def test_drain_check_names_blocking_budgets_per_batch_and_node_in_plan_order() -> None:
    factory = ClusterFactory(workers=3)
    view = factory.view()
    w1, w2, w3 = (factory.w(i).lower() for i in (1, 2, 3))
    settings = plans.initial_settings(view).with_changes(offerings={"worker": so("large")})
    pods = [k8s_pod("web-1", w1, "web"), k8s_pod("web-2", w3, "web"), k8s_pod("api-1", w2, "api"),
            k8s_pod("cache-1", w2, "cache", empty_dir=True), k8s_pod("kube-proxy-a", w1, "proxy", owner="DaemonSet")]
    check = DrainCheck(pods=pods, pdbs=[k8s_pdb("web", 0), k8s_pdb("api", 1)],
                       daemonsets=frozenset({("default", "proxy-x")}))
    result = outdated_report(view, recorded(settings), None, max_unavailable=1, drain_check=check)
    found = {(b["batch"], b["node"]): b for b in result["drain_blockers"]}
    assert list(found) == [(1, w1), (2, w2), (3, w3)]
    assert found[(1, w1)]["pdbs"][0]["pdb"] == "default/web" and found[(1, w1)]["pdbs"][0]["pods"] == ["default/web-1"]
    assert found[(2, w2)]["pdbs"] == [] and found[(2, w2)]["pods"][0]["pods"] == ["default/cache-1"]
    assert found[(3, w3)]["node_type"] == "worker"
    json.dumps(result)
    # With delete_emptydir_data the cache pod no longer stops w2's drain; api allows one disruption.
    check = DrainCheck(pods=pods, pdbs=check.pdbs, daemonsets=check.daemonsets,
                       options=DrainOptions(delete_emptydir_data=True))
    nodes = [b["node"] for b in outdated_report(view, recorded(settings), None, drain_check=check)["drain_blockers"]]
    assert nodes == [w1, w3]


def test_drain_check_skips_etcd_nodes_and_is_absent_without_it() -> None:
    factory = ClusterFactory(control=3, workers=2, etcd=3)
    view = factory.view()
    settings = plans.initial_settings(view).with_changes(offerings={"etcd": so("large")})
    check = DrainCheck(pods=[], pdbs=[])
    assert outdated_report(view, recorded(settings), None, drain_check=check)["drain_blockers"] == []
    assert "drain_blockers" not in outdated_report(view, recorded(settings), None)


def test_daemonset_owners_are_the_ones_to_look_up_once() -> None:
    pods = [k8s_pod("a", "n", "a", owner="DaemonSet"), k8s_pod("b", "m", "a", owner="DaemonSet"),
            k8s_pod("c", "n", "c")]
    assert daemonset_owners(pods) == [("default", "a-x")]


def test_etcd_health_orders_the_plan_and_is_reported() -> None:
    factory = ClusterFactory(control=3, workers=1)
    view = factory.view()
    settings = plans.initial_settings(view).with_changes(offerings={"control": so("large")})
    health = EtcdHealth(down=(factory.c(2),), message="2 of 3 voting members healthy; 2 needed")
    result = outdated_report(view, recorded(settings), None, etcd_health=health)
    assert [b["nodes"] for b in result["plan"]] == [[factory.c(2)], [factory.c(1)], [factory.c(3)]]
    assert result["etcd"] == {"asked": True, "down": [factory.c(2)], "message": health.message, "error": None}
    unasked = outdated_report(view, recorded(settings), None, etcd_health=EtcdHealth(error="refused"))
    assert [b["nodes"] for b in unasked["plan"]] == [[factory.c(1)], [factory.c(2)], [factory.c(3)]]
    assert unasked["etcd"]["asked"] is False and unasked["etcd"]["error"] == "refused"
    assert "etcd" not in outdated_report(view, recorded(settings), None)


def test_etcd_options_that_could_never_reach_etcd_are_refused_not_reported() -> None:
    with pytest.raises(InvalidInput) as info:
        read_etcd_health({"etcd_endpoints": ["etcd-1:2379"]})
    assert "http://" in info.value.msg
    assert read_etcd_health({"etcd_endpoints": []}) is None


# -- placement and work left ------------------------------------------------------------------------

def test_a_strict_group_too_few_hosts_can_hold_is_reported_and_a_key_without_hosts_is_named() -> None:
    from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.placement import HostRoom, PlacementReads

    factory = ClusterFactory(workers=3)
    view = factory.view()
    changes = SettingsRequest.from_params({"node_affinity_groups": {"worker": ["spread"]}})
    host = {"state": "Up", "resourcestate": "Enabled", "cpunumber": 64, "cpuspeed": 2000, "memorytotal": 1 << 40}
    two = PlacementReads(tuple(HostRoom.from_listed(dict(host, id=f"h{i}", name=f"h{i}")) for i in (1, 2)))
    result = outdated_report(view, None, None, changes=changes, placement=(two, []))
    (misfit,) = result["would_not_be_placed"]
    assert (misfit["group"], misfit["members"], misfit["hosts"]) == ("spread", 3, 2)
    assert result["placement_error"] and "affinity group spread" in result["placement_error"]
    # A key that cannot list hosts: nothing judged, the note says so.
    unread = outdated_report(view, None, None, changes=changes, placement=(None, ["hosts not listed"]))
    assert unread["would_not_be_placed"] == [] and unread["placement_error"] is None
    assert unread["not_checked"] == ["hosts not listed"]


def test_a_stopped_node_is_work_left_though_nothing_is_out_of_date() -> None:
    factory = ClusterFactory(workers=2)
    factory.stop(factory.w(2))
    result = outdated_report(factory.view(), None, None)
    assert result["out_of_date"] == []
    assert [e["node"] for e in result["work_left"]] == [factory.w(2).lower()]
