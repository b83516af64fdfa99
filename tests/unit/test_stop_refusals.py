# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The changes CloudStack would refuse once a node is stopped (``_decisions.stop_refusals``), judged
on views built from raw API dicts with owners, as listAffinityGroups, listVolumes and
listServiceOfferings return them."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.stop_refusals import (
    DOMAIN_ADMIN,
    ROOT_ADMIN,
    RULE_GROUP_ACCESS,
    RULE_GROUP_OWNER,
    RULE_LIMIT,
    RULE_OFFERING_STATE,
    RULE_STORAGE,
    USER,
    Caller,
    Headroom,
    needed_reads,
    refusal_error,
    stop_refusals,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ClusterView, build_view

TENANTS = "ROOT/tenants"
OFFERINGS = [
    {"id": "so-medium", "name": "cks-medium", "cpunumber": 2, "memory": 4096, "storagetype": "shared"},
    {"id": "so-large", "name": "cks-large", "cpunumber": 4, "memory": 8192, "storagetype": "shared"},
    {"id": "so-small", "name": "cks-small", "cpunumber": 2, "memory": 2048, "storagetype": "shared"},
    {"id": "so-old", "name": "cks-old", "cpunumber": 4, "memory": 8192, "state": "Inactive"},
    {"id": "so-local", "name": "cks-local", "cpunumber": 4, "memory": 8192, "storagetype": "local"},
    {"id": "so-ssd", "name": "cks-ssd", "cpunumber": 2, "memory": 4096, "storagetags": "ssd"},
    {"id": "so-ssd-fast", "name": "cks-ssd-fast", "cpunumber": 4, "memory": 8192, "storagetags": "ssd,fast"},
    {"id": "so-hdd", "name": "cks-hdd", "cpunumber": 4, "memory": 8192, "storagetags": "hdd"},
    {"id": "so-custom", "name": "cks-custom", "cpunumber": 0, "memory": 0, "iscustomized": True},
]
ALICE = {"account": "alice", "domainid": "d-tenants", "domainpath": TENANTS}
BOB = {"account": "bob", "domainid": "d-tenants", "domainpath": TENANTS}
GROUPS = [
    dict(ALICE, id="g-ded-alice", name="dedicated-alice", type="ExplicitDedication"),
    dict(ALICE, id="g-alice", name="alice-spread", type="host anti-affinity"),
    dict(BOB, id="g-bob", name="bob-spread", type="host anti-affinity"),
    # A domain-level group of the domain tenants, kept by the root admin that made it.
    {"id": "g-domain", "name": "tenants-soft", "type": "non-strict host anti-affinity", "account": "admin",
     "domainid": "d-root", "domainpath": "ROOT"},
    {"id": "g-ded-platform", "name": "dedicated-platform", "type": "ExplicitDedication", "projectid": "p-platform",
     "project": "platform", "domainid": "d-tenants", "domainpath": TENANTS},
    {"id": "g-platform", "name": "platform-spread", "type": "host anti-affinity", "projectid": "p-platform",
     "project": "platform", "domainid": "d-tenants", "domainpath": TENANTS},
]


def view(workers: int = 2, offering: str = "so-medium", groups: Optional[list[str]] = None, project: bool = False,
         storage: Optional[str] = "shared", root_gb: int = 20) -> ClusterView:
    ids = groups if groups is not None else (["g-ded-platform"] if project else ["g-ded-alice"])
    by_id = {g["id"]: g for g in GROUPS}
    embedded, vms, volumes = [], [], []
    for i in range(workers):
        name = f"k8s-node-{i:03x}"
        embedded.append({"id": f"vm-{i}", "name": name})
        vms.append({"id": f"vm-{i}", "name": name, "state": "Running", "serviceofferingid": offering,
                    "affinitygroup": [{"id": g, "name": by_id[g]["name"], "type": by_id[g]["type"]} for g in ids]})
        volume = {"id": f"vol-{i}", "type": "ROOT", "virtualmachineid": f"vm-{i}", "size": root_gb << 30}
        if storage is not None:
            volume["storagetype"] = storage
        volumes.append(volume)
    owner: dict[str, Any] = ({"projectid": "p-platform", "project": "platform", "domainid": "d-tenants"} if project
                             else {"account": "alice", "domainid": "d-tenants"})
    cluster = dict(owner, id="c-1", name="k8s", state="Running", virtualmachines=embedded)
    return build_view(cluster, vms, volumes, OFFERINGS, [], GROUPS, [])


def settings(offering: Optional[str] = None, root_gb: Optional[int] = None,
             groups: Optional[tuple[str, ...]] = None) -> Settings:
    return Settings(worker=TypeSettings(offering_id=offering, root_disk_gb=root_gb, affinity_group_ids=groups))


ROOT = Caller("admin", "d-root", "ROOT", ROOT_ADMIN)
OPS = Caller("ops", "d-tenants", TENANTS, DOMAIN_ADMIN)
ALICE_KEY = Caller("alice", "d-tenants", TENANTS, USER)
# A domain admin of a sub-domain: the domain-level group of its parent domain is listed to it.
SUB_ADMIN = Caller("sub", "d-sub", TENANTS + "/sub", DOMAIN_ADMIN)


def judge(v: ClusterView, s: Settings, caller: Optional[Caller] = None, headroom: Optional[Headroom] = None) -> list[Any]:
    return stop_refusals(v, s, list(v.nodes), caller, headroom)


# -- who the key is and what its owner has left ----------------------------------------------------

@pytest.mark.parametrize(("accounttype", "role"), [("1", ROOT_ADMIN), ("2", DOMAIN_ADMIN), ("4", DOMAIN_ADMIN),
                                                   ("0", USER), (None, USER)])
def test_the_callers_role_is_its_account_type(accounttype: Optional[str], role: str) -> None:
    caller = Caller.from_account({"name": "x", "domainid": "d", "domainpath": "ROOT/x", "accounttype": accounttype})
    assert (caller.account, caller.domain_id, caller.domain_path, caller.role) == ("x", "d", "ROOT/x", role)


@pytest.mark.parametrize(("path", "reached"), [(TENANTS, True), (TENANTS + "/sub", True), ("ROOT", False),
                                               ("ROOT/tenants2", False), ("ROOT/other", False)])
def test_a_domain_admin_reaches_its_domain_tree_only(path: str, reached: bool) -> None:
    assert OPS.reaches_path(path) is reached


def test_headroom_reads_available_values_and_unlimited() -> None:
    room = Headroom.from_entry("account alice", {"cpuavailable": "6", "memoryavailable": "Unlimited",
                                                 "primarystorageavailable": 480})
    assert (room.cpu, room.memory_mb, room.storage_gb) == (6, None, 480)
    assert Headroom.from_entry("p", {}).cpu is None
    assert Headroom.from_entry("p", {"cpuavailable": "n/a"}).cpu is None


def test_reads_are_needed_only_for_group_changes_and_growth() -> None:
    v = view()
    assert needed_reads(v, settings(), v.nodes) == needed_reads(v, settings(offering="so-medium"), v.nodes)
    assert not needed_reads(v, settings(offering="so-medium"), v.nodes).headroom
    assert needed_reads(v, settings(offering="so-large"), v.nodes).headroom
    assert not needed_reads(v, settings(offering="so-small"), v.nodes).headroom  # no growth: memory shrinks
    assert needed_reads(v, settings(root_gb=30), v.nodes).headroom
    assert not needed_reads(v, settings(root_gb=10), v.nodes).headroom  # never shrunk: no change
    assert needed_reads(v, settings(groups=("g-alice",)), v.nodes).caller
    assert not needed_reads(v, settings(groups=()), v.nodes).caller  # dedication only: already as set
    assert not needed_reads(v, settings(offering="so-large"), []).headroom


# -- affinity groups the key may send ----------------------------------------------------------------

def test_a_root_admin_may_send_groups_of_the_vms_account() -> None:
    assert judge(view(), settings(groups=("g-alice",)), ROOT) == []


def test_a_root_admin_naming_another_accounts_group_is_refused_for_every_node() -> None:
    refusals = judge(view(), settings(groups=("g-bob",)), ROOT)
    assert [(r.node, r.rule, r.parameter) for r in refusals] == [
        ("k8s-node-000", RULE_GROUP_OWNER, "node_affinity_groups"),
        ("k8s-node-001", RULE_GROUP_OWNER, "node_affinity_groups")]
    assert "bob-spread belongs to account bob, not to the VM's account alice" in refusals[0].why
    assert refusals[0].change == "choose affinity groups of account alice"


def test_a_root_admin_naming_a_domain_level_group_is_refused_as_the_simulator_does() -> None:
    # AffinityGroupServiceImpl of 4.19/4.20 compares the group's account with the VM's for every group.
    assert [r.rule for r in judge(view(workers=1), settings(groups=("g-domain",)), ROOT)] == [RULE_GROUP_OWNER]


def test_a_root_admin_on_a_project_cluster_may_send_the_projects_groups_only() -> None:
    project = view(workers=1, project=True)
    assert judge(project, settings(groups=("g-platform",)), ROOT) == []
    refused = judge(project, settings(groups=("g-alice",)), ROOT)
    assert [r.rule for r in refused] == [RULE_GROUP_OWNER]
    assert "not to the VM's project p-platform" in refused[0].why


def test_a_domain_admin_cannot_resend_another_accounts_dedication_group() -> None:
    refusals = judge(view(), settings(groups=("g-domain",)), OPS)
    assert [r.rule for r in refusals] == [RULE_GROUP_ACCESS, RULE_GROUP_ACCESS]
    why = refusals[0].why
    assert "dedicated-alice (CKS's ExplicitDedication group, which every node keeps" in why
    assert "531" in why and "account-level group of account alice, not of the key's account ops" in why
    assert refusals[0].change.startswith("a root admin key (or a key of account alice) can make this change")
    assert "leave node_affinity_groups.worker out so the other changes roll" in refusals[0].change


def test_a_domain_admin_may_send_groups_of_a_cluster_without_a_dedication_group() -> None:
    plain = view(groups=[])
    assert judge(plain, settings(groups=("g-domain",)), OPS) == []
    assert [r.rule for r in judge(plain, settings(groups=("g-alice",)), OPS)] == [RULE_GROUP_ACCESS] * 2


def test_a_domain_level_group_of_a_parent_domain_is_usable_below_it() -> None:
    # tenants-soft is listed from ROOT, outside the key's tree: a domain-level group, allowed.
    assert judge(view(groups=[]), settings(groups=("g-domain",)), SUB_ADMIN) == []


def test_a_domain_admin_may_send_a_projects_groups_only_as_a_member() -> None:
    refusals = judge(view(workers=1, project=True), settings(groups=("g-platform",)), OPS)
    assert [r.rule for r in refusals] == [RULE_GROUP_ACCESS]
    assert "a group of project platform, which a domain admin key may send only as a member" in refusals[0].why


def test_a_user_may_send_its_own_its_projects_and_its_domains_groups() -> None:
    assert judge(view(), settings(groups=("g-alice", "g-domain")), ALICE_KEY) == []
    assert judge(view(workers=1, project=True), settings(groups=("g-platform",)), ALICE_KEY) == []
    assert [r.rule for r in judge(view(workers=1), settings(groups=("g-bob",)), ALICE_KEY)] == [RULE_GROUP_ACCESS]


def test_groups_are_not_judged_without_the_caller_or_for_unlisted_groups() -> None:
    assert judge(view(), settings(groups=("g-bob",)), None) == []
    unlisted = view(groups=["g-ded-alice"])
    # A group on the VM that listAffinityGroups did not show has no owner to judge.
    bare = build_view({"id": "c", "name": "k8s", "account": "alice", "domainid": "d-tenants",
                       "virtualmachines": [{"id": "vm-0", "name": "k8s-node-000"}]},
                      [{"id": "vm-0", "name": "k8s-node-000", "state": "Running", "serviceofferingid": "so-medium",
                        "affinitygroup": [{"id": "g-x", "name": "x", "type": "ExplicitDedication"}]}],
                      [], OFFERINGS, [], [], [])
    assert judge(bare, settings(groups=()), OPS) == []
    assert judge(unlisted, settings(groups=("g-alice",)), ALICE_KEY) == []


def test_groups_already_as_set_send_nothing_and_are_not_judged() -> None:
    assert judge(view(groups=["g-ded-alice", "g-alice"]), settings(groups=("g-alice",)), OPS) == []


# -- resource limits ------------------------------------------------------------------------------

def test_the_headroom_is_spent_in_plan_order() -> None:
    refusals = judge(view(workers=3), settings(offering="so-large"), headroom=Headroom("account alice", 4, None, None))
    assert [(r.node, r.rule, r.parameter) for r in refusals] == [("k8s-node-002", RULE_LIMIT, "node_offerings")]
    assert "would take account alice past its cpu limit" in refusals[0].why
    assert "grow it by 6 cores, 4 cores are left" in refusals[0].why and "535" in refusals[0].why
    assert refusals[0].change == ("raise the cpu limit of account alice by at least 2 cores (updateResourceLimit "
                                  "resourcetype=8), or choose a smaller node_offerings.worker")


def test_memory_is_judged_like_cpu() -> None:
    refusals = judge(view(workers=2), settings(offering="so-large"), headroom=Headroom("project platform", None, 4096, None))
    assert [(r.node, r.rule) for r in refusals] == [("k8s-node-001", RULE_LIMIT)]
    assert "past its memory limit" in refusals[0].why and "at least 4096 MiB" in refusals[0].change


def test_a_root_disk_growth_counts_against_primary_storage() -> None:
    refusals = judge(view(workers=2), settings(root_gb=30), headroom=Headroom("account alice", 0, 0, 15))
    assert [(r.node, r.parameter) for r in refusals] == [("k8s-node-001", "node_root_disk_sizes")]
    assert "past its primary storage limit" in refusals[0].why and "by 20 GiB, 15 GiB are left" in refusals[0].why
    assert "resourcetype=10" in refusals[0].change


@pytest.mark.parametrize("headroom", [None, Headroom("account alice", None, None, None)])
def test_unlimited_or_unread_headroom_refuses_nothing(headroom: Optional[Headroom]) -> None:
    assert judge(view(workers=3), settings(offering="so-large", root_gb=500), headroom=headroom) == []


def test_only_growth_counts() -> None:
    none_left = Headroom("account alice", 0, 0, 0)
    assert judge(view(offering="so-large"), settings(offering="so-medium"), headroom=none_left) == []
    assert judge(view(), settings(offering="so-small"), headroom=none_left) == []
    assert judge(view(root_gb=40), settings(root_gb=30), headroom=none_left) == []


def test_exactly_the_headroom_fits() -> None:
    assert judge(view(workers=2), settings(offering="so-large"), headroom=Headroom("a", 4, 8192, 0)) == []


# -- the offering ----------------------------------------------------------------------------------

def test_an_inactive_offering_is_refused() -> None:
    refusals = judge(view(workers=1), settings(offering="so-old"))
    assert [(r.rule, r.parameter) for r in refusals] == [(RULE_OFFERING_STATE, "node_offerings")]
    assert "cks-old is Inactive" in refusals[0].why and refusals[0].change == "choose an active service offering"


def test_an_offering_on_local_storage_does_not_fit_a_root_volume_on_shared_storage() -> None:
    refusals = judge(view(workers=1), settings(offering="so-local"))
    assert [r.rule for r in refusals] == [RULE_STORAGE]
    assert "uses local storage but the root volume is on shared storage" in refusals[0].why
    assert refusals[0].change == "choose an offering with shared storage"
    assert judge(view(workers=1, storage="local"), settings(offering="so-local")) == []
    assert [r.rule for r in judge(view(workers=1, storage="local"), settings(offering="so-large"))] == [RULE_STORAGE]
    # listVolumes without storagetype: the scope is not judged.
    assert judge(view(workers=1, storage=None), settings(offering="so-local")) == []


@pytest.mark.parametrize(("new", "fits"), [("so-ssd-fast", True), ("so-hdd", False), ("so-large", False)])
def test_the_current_storage_tags_must_be_within_the_new_ones(new: str, fits: bool) -> None:
    refusals = judge(view(workers=1, offering="so-ssd"), settings(offering=new))
    assert (refusals == []) is fits
    if not fits:
        assert refusals[0].rule == RULE_STORAGE and "storage tags of its offering cks-ssd (ssd)" in refusals[0].why


def test_no_storage_tags_fit_anything() -> None:
    assert judge(view(workers=1), settings(offering="so-ssd")) == []


def test_a_custom_offering_counts_no_growth() -> None:
    # cks_node_settings refuses a custom offering itself; here it only adds nothing to the count.
    assert judge(view(workers=1), settings(offering="so-custom"), headroom=Headroom("a", 0, 0, 0)) == []


def test_one_refusal_per_node_the_first_rule_it_breaks() -> None:
    refusals = judge(view(workers=1), settings(offering="so-old", groups=("g-bob",)), ROOT, Headroom("a", 0, 0, 0))
    assert [r.rule for r in refusals] == [RULE_OFFERING_STATE]


def test_the_refusal_error_names_every_node() -> None:
    assert refusal_error([]) is None
    refusals = judge(view(workers=2), settings(groups=("g-bob",)), ROOT)
    message = refusal_error(refusals)
    assert message is not None and message.startswith("CloudStack would refuse these changes only once the node is stopped")
    assert "k8s-node-000 (node_affinity_groups.worker)" in message and "k8s-node-001" in message
    assert refusals[0].to_dict()["message"] == refusals[0].message
