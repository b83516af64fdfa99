# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Whether the deployment planner could place the nodes a change puts into strict groups
(``_decisions.placement``), judged on views and hosts built from raw API dicts as listVirtualMachines,
listHosts and listAffinityGroups return them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Optional

import pytest
from placement_factories import GIB, THREE, host, reads, spread, view

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.placement import (
    Dedication,
    HostRoom,
    Member,
    PlacementReads,
    placement_error,
    placement_needed,
    placement_refusals,
    strict_groups_changed,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings

# -- which groups are judged ------------------------------------------------------------------------


def test_a_new_strict_group_is_judged_with_every_planned_node_in_it() -> None:
    v = view()
    changed = strict_groups_changed(v, spread(), list(v.nodes))
    assert list(changed) == ["g-spread"] and [n.name for n in changed["g-spread"]] == [f"k8s-node-{i}" for i in range(4)]


@pytest.mark.parametrize("group", ["g-soft", "g-ded"])
def test_non_strict_and_dedication_groups_need_no_prediction(group: str) -> None:
    v = view()
    assert not placement_needed(v, spread(group=group), list(v.nodes))


def test_nodes_already_in_the_group_need_one_only_for_a_new_offering() -> None:
    v = view(groups=("g-ded", "g-spread"))
    assert not placement_needed(v, spread(), list(v.nodes))
    assert placement_needed(v, spread(offering="so-large"), list(v.nodes))


def test_settings_without_groups_or_offering_need_none() -> None:
    v = view()
    assert not placement_needed(v, Settings(worker=TypeSettings(root_disk_gb=40)), list(v.nodes))


# -- strict anti-affinity ---------------------------------------------------------------------------

def test_four_members_on_three_hosts_are_refused_naming_group_members_hosts_and_what_to_change() -> None:
    v = view()
    found = placement_refusals(v, spread(), list(v.nodes), reads(*THREE))
    assert len(found) == 1
    refusal = found[0]
    assert (refusal.group, refusal.members, refusal.hosts, refusal.node_type) == ("workers-spread", 4, 3, "worker")
    assert "4 members" in refusal.why and "only 3 Up and Enabled hosts" in refusal.why and "533" in refusal.why
    assert "add at least 1 Up and Enabled host" in refusal.change and "non-strict" in refusal.change
    assert refusal.nodes == tuple(f"k8s-node-{i}" for i in range(4))
    message = placement_error(found)
    assert message is not None and "affinity group workers-spread" in message and "no node was touched" in message


def test_four_members_on_four_hosts_fit() -> None:
    v = view()
    assert placement_refusals(v, spread(), list(v.nodes), reads(*THREE, host("h4"))) == []


@pytest.mark.parametrize(("state", "resource"), [("Up", "Maintenance"), ("Up", "Disabled"), ("Down", "Enabled"),
                                                 ("Disconnected", "Enabled"), ("Up", "PrepareForMaintenance")])
def test_a_host_that_is_not_up_and_enabled_is_not_counted(state: str, resource: str) -> None:
    v = view()
    found = placement_refusals(v, spread(), list(v.nodes), reads(*THREE, host("h4", state=state, resource=resource)))
    assert [r.hosts for r in found] == [3]


def test_a_host_of_another_zone_is_not_counted() -> None:
    v = view()
    assert [r.hosts for r in placement_refusals(v, spread(), list(v.nodes), reads(*THREE, host("h4", zone="z-2")))] == [3]


def test_a_full_host_is_not_counted_and_the_new_offering_is_what_must_fit() -> None:
    v = view()
    full = host("h4", cores=64, used_cores=62)
    assert placement_refusals(v, spread(), list(v.nodes), reads(*THREE, full)) == []  # 2 cores left: cks-medium fits
    found = placement_refusals(v, spread(offering="so-large"), list(v.nodes), reads(*THREE, full))
    assert [r.hosts for r in found] == [3] and "room for cks-large" in found[0].why


def test_memory_counts_as_cpu_does() -> None:
    v = view()
    assert [r.hosts for r in placement_refusals(v, spread(), list(v.nodes),
                                                reads(*THREE, host("h4", memory_gb=8, used_gb=6)))] == [3]


def test_cpu_overprovisioning_gives_room() -> None:
    v = view()
    tight = host("h4", cores=2, used_cores=2)
    assert len(placement_refusals(v, spread(), list(v.nodes), reads(*THREE, tight))) == 1
    over = host("h4", cores=2, used_cores=2, overprovisioned=4 * 2000 * 2)
    assert placement_refusals(v, spread(), list(v.nodes), reads(*THREE, over)) == []


def test_a_nodes_own_allocation_is_freed_on_its_host() -> None:
    # Each host is full but for the node on it: stopped, its room is its own again.
    v = view(workers=3, hosts=["h1", "h2", "h3"])
    full = [host(h, cores=2, memory_gb=4, used_cores=2, used_gb=4) for h in ("h1", "h2", "h3")]
    assert placement_refusals(v, spread(), list(v.nodes), reads(*full)) == []
    assert len(placement_refusals(v, spread(offering="so-large"), list(v.nodes), reads(*full))) == 1


def test_members_already_placed_take_their_hosts() -> None:
    v = view(workers=2)
    other = Member("vm-x", "db-1", "Running", "h1")
    found = placement_refusals(v, spread(), list(v.nodes), reads(host("h1"), host("h2"), members={"g-spread": [other]}))
    assert [(r.members, r.hosts) for r in found] == [(3, 2)]
    assert "1 taken by members already placed" in found[0].why


def test_a_stopped_member_takes_no_host() -> None:
    v = view(workers=2)
    other = Member("vm-x", "db-1", "Stopped", None)
    assert placement_refusals(v, spread(), list(v.nodes),
                              reads(host("h1"), host("h2"), members={"g-spread": [other]})) == []


NOW = datetime(2026, 12, 7, 3, 0, tzinfo=timezone.utc)


def stopped_at(minutes_ago: int) -> Member:
    when = (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%S+0000")
    return Member.from_listed({"id": "vm-x", "name": "db-1", "state": "Stopped", "lastupdated": when})


def recent_reads(*hosts: dict[str, Any], member: Member, now: Optional[datetime] = NOW) -> PlacementReads:
    base = reads(*hosts, members={"g-spread": [member]})
    return PlacementReads(base.hosts, base.members, now=now, release_interval=3600.0)


def test_a_member_stopped_within_the_release_interval_keeps_a_host() -> None:
    v = view(workers=3)
    found = placement_refusals(v, spread(), list(v.nodes), recent_reads(*THREE, member=stopped_at(10)))
    assert [(r.members, r.hosts) for r in found] == [(4, 3)]
    assert "1 of those kept by db-1, stopped less than vm.capacity.release.interval (3600 s) ago" in found[0].why
    assert "add at least 1 Up and Enabled host" in found[0].change
    # One more host: room for the three and the host the stopped member keeps.
    assert placement_refusals(v, spread(), list(v.nodes),
                              recent_reads(*THREE, host("h4"), member=stopped_at(10))) == []


@pytest.mark.parametrize(("member", "now"), [
    (stopped_at(61), NOW),  # released
    (stopped_at(10), None),  # no time of reading: not judged
    (Member("vm-x", "db-1", "Stopped", None, "not a date"), NOW),
    (Member("vm-x", "db-1", "Stopped", None, None), NOW),
])
def test_a_member_stopped_longer_ago_or_of_unknown_time_keeps_none(member: Member, now: Optional[datetime]) -> None:
    v = view(workers=3)
    assert placement_refusals(v, spread(), list(v.nodes), recent_reads(*THREE, member=member, now=now)) == []


def test_nodes_not_planned_but_in_the_group_count_as_placed_members() -> None:
    v = view(workers=3, groups=("g-ded", "g-spread"), hosts=["h1", "h2", "h3"])
    # Only k8s-node-2 gets a larger offering; the other two stay where they are.
    planned = [v.nodes[2]]
    assert placement_refusals(v, spread(offering="so-large"), planned, reads(*THREE)) == []
    found = placement_refusals(v, spread(offering="so-large"), planned, reads(host("h1"), host("h2"), host("h3", cores=2, used_cores=2)))
    assert [(r.members, r.hosts) for r in found] == [(3, 2)]


def test_the_matching_moves_a_node_to_the_one_host_only_it_fits() -> None:
    # k8s-node-0 fits h2 only because its own allocation there is freed; h1 fits either node. A
    # first fit giving h1 to k8s-node-0 would leave k8s-node-1 without a host.
    v = view(workers=2, hosts=["h2", ""], states=["Running", "Stopped"])
    hosts = (host("h1"), host("h2", cores=2, memory_gb=4, used_cores=2, used_gb=4))
    assert placement_refusals(v, spread(), list(v.nodes), reads(*hosts)) == []
    assert len(placement_refusals(v, spread(), list(v.nodes), reads(hosts[1]))) == 1


# -- dedication ---------------------------------------------------------------------------------------

def test_only_hosts_dedicated_to_the_nodes_dedication_group_count() -> None:
    v = view(workers=2)
    dedicated = {"g-ded": Dedication("dedicated-admin", (("Host", "h1"),))}
    found = placement_refusals(v, spread(), list(v.nodes), reads(*THREE, dedications=dedicated))
    assert [r.hosts for r in found] == [1] and "dedicated to dedicated-admin" in found[0].why


@pytest.mark.parametrize(("kind", "rid", "fits"), [
    ("Cluster", "cl-1", True), ("Cluster", "cl-2", False), ("Pod", "p-1", True), ("Zone", "z-1", True),
    ("Zone", "z-9", False),
])
def test_a_dedicated_cluster_pod_or_zone_holds_its_hosts(kind: str, rid: str, fits: bool) -> None:
    v = view(workers=2)
    dedicated = {"g-ded": Dedication("dedicated-admin", ((kind, rid),))}
    assert (placement_refusals(v, spread(), list(v.nodes), reads(*THREE, dedications=dedicated)) == []) is fits


def test_a_dedication_group_with_nothing_dedicated_leaves_the_hosts() -> None:
    v = view(workers=3)
    assert placement_refusals(v, spread(), list(v.nodes),
                              reads(*THREE, dedications={"g-ded": Dedication("dedicated-admin", ())})) == []


def test_dedication_reads_from_list_affinity_groups() -> None:
    raw = {"id": "g-ded", "name": "dedicated-admin",
           "dedicatedresources": [{"resourceid": "h1", "resourcename": "kvm-1", "resourcetype": "Host"}]}
    assert Dedication.from_listed(raw) == Dedication("dedicated-admin", (("Host", "h1"),))


# -- strict affinity ------------------------------------------------------------------------------------

def test_strict_affinity_needs_one_host_with_room_for_all() -> None:
    v = view(workers=4)
    together = spread(group="g-together")
    assert placement_refusals(v, together, list(v.nodes), reads(host("h1", cores=8), host("h2", cores=8))) == []
    found = placement_refusals(v, together, list(v.nodes), reads(host("h1", cores=6), host("h2", cores=6)))
    assert len(found) == 1 and "on one host" in found[0].why and "non-strict host affinity" in found[0].change


def test_strict_affinity_goes_where_placed_members_are() -> None:
    v = view(workers=2)
    other = Member("vm-x", "db-1", "Running", "h2")
    hosts = (host("h1"), host("h2", cores=4, used_cores=2))
    found = placement_refusals(v, spread(group="g-together"), list(v.nodes), reads(*hosts, members={"g-together": [other]}))
    assert len(found) == 1 and "the host its placed members are on" in found[0].why


# -- reads ------------------------------------------------------------------------------------------------

def test_host_room_from_list_hosts_prefers_the_overprovisioned_totals() -> None:
    raw = dict(host("h1", cores=4, memory_gb=8), cpuwithoverprovisioning="16000.0",
               memorywithoverprovisioning=str(16 * GIB))
    room = HostRoom.from_listed(raw)
    assert (room.cpu_mhz, room.memory, room.usable) == (16000, 16 * GIB, True)
    assert HostRoom.from_listed(host("h1", cores=4, memory_gb=8)).cpu_mhz == 8000


def test_a_member_holds_its_host_only_while_it_is_on_one() -> None:
    assert Member.from_listed({"id": "v", "name": "v", "state": "Running", "hostid": "h1"}).holds_host
    assert not Member.from_listed({"id": "v", "name": "v", "state": "Stopped"}).holds_host


def test_no_refusal_no_message() -> None:
    assert placement_error([]) is None


# -- starts one after another ---------------------------------------------------------------------------

def test_nodes_sharing_a_strict_group_start_one_after_another() -> None:
    from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.placement import start_one_by_one

    v = view(workers=3)
    assert start_one_by_one(v, spread(), list(v.nodes)) == {f"k8s-node-{i}": ("g-spread",) for i in range(3)}
    # The group they have now counts as well (its last host is avoided whatever the change).
    v = view(workers=2, groups=("g-ded", "g-together"))
    assert start_one_by_one(v, Settings(worker=TypeSettings(root_disk_gb=40)), list(v.nodes)) == {
        "k8s-node-0": ("g-together",), "k8s-node-1": ("g-together",)}


@pytest.mark.parametrize("group", ["g-soft", "g-ded"])
def test_non_strict_and_dedication_groups_start_together(group: str) -> None:
    from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.placement import start_one_by_one

    v = view(workers=3)
    assert start_one_by_one(v, spread(group=group), list(v.nodes)) == {f"k8s-node-{i}": () for i in range(3)}


def test_a_node_alone_in_its_group_in_the_batch_waits_for_none() -> None:
    from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.placement import start_one_by_one

    v = view(workers=2)
    assert start_one_by_one(v, spread(), [v.nodes[0]]) == {"k8s-node-0": ()}
