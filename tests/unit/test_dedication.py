# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Hosts dedicated to another account or domain are no room (``_decisions.dedication`` and its use in
``_decisions.placement``), from raw dicts as listDedicated{Hosts,Clusters,Pods,Zones} return them."""

from __future__ import annotations

from typing import Any, Optional

import pytest
from placement_factories import THREE, host, reads, spread, view

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.dedication import (
    DedicatedResource,
    closed_zone,
    covering,
    dedication_note,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.placement import PlacementReads, placement_refusals


def dedicated(kind: str, rid: str, name: str, account: Optional[str] = "other", domain: str = "d-other",
              domain_name: str = "tenants") -> DedicatedResource:
    raw: dict[str, Any] = {"id": f"ded-{rid}", f"{kind.lower()}id": rid, f"{kind.lower()}name": name,
                           "domainid": domain, "domainname": domain_name, "affinitygroupid": "g-x"}
    if account is not None:
        raw.update(accountid=f"a-{account}", accountname=account)
    return DedicatedResource.from_listed(kind, raw)


def with_dedicated(base: PlacementReads, *found: DedicatedResource) -> PlacementReads:
    return PlacementReads(base.hosts, base.members, base.dedications, tuple(found))


def test_listed_dedications_name_their_owner() -> None:
    assert dedicated("Host", "h3", "kvm-3").owner == "account other of domain tenants"
    assert dedicated("Pod", "p-1", "pod-1", account=None).owner == "domain tenants"
    found = dedicated("Cluster", "cl-1", "rack-b")
    expected = ("Cluster", "cl-1", "rack-b", "g-x", "cluster rack-b")
    assert (found.kind, found.id, found.name, found.group_id, found.label) == expected


@pytest.mark.parametrize(("found", "expected"), [
    (dedicated("Host", "h1", "kvm-1"), "Host"),
    (dedicated("Cluster", "cl-1", "rack"), "Cluster"),
    (dedicated("Pod", "p-1", "pod-1"), "Pod"),
    (dedicated("Host", "h9", "kvm-9"), None),
    (dedicated("Cluster", "cl-9", "rack-9"), None),
    (dedicated("Zone", "z-1", "zone-1"), None),  # a zone's dedication is judged apart (closed_zone)
])
def test_a_host_is_covered_by_its_own_its_clusters_or_its_pods_dedication(
        found: DedicatedResource, expected: Optional[str]) -> None:
    hit = covering("h1", "cl-1", "p-1", [found])
    assert (hit.kind if hit else None) == expected


def test_the_narrowest_dedication_names_the_host() -> None:
    pod, own = dedicated("Pod", "p-1", "pod-1"), dedicated("Host", "h1", "kvm-1", account="third")
    assert covering("h1", "cl-1", "p-1", [pod, own]) == own


@pytest.mark.parametrize(("found", "closed", "noted"), [
    (dedicated("Zone", "z-1", "zone-1"), True, False),  # another account
    (dedicated("Zone", "z-1", "zone-1", account="admin", domain="d"), False, False),  # the owner itself
    (dedicated("Zone", "z-1", "zone-1", account="admin", domain="d-other"), True, False),  # same name, other domain
    (dedicated("Zone", "z-1", "zone-1", account=None, domain="d"), False, False),  # the owner's domain
    (dedicated("Zone", "z-1", "zone-1", account=None, domain="d-top"), False, True),  # maybe above it: named
    (dedicated("Zone", "z-2", "zone-2"), False, False),  # another zone
])
def test_a_zone_dedicated_to_another_account_is_closed(found: DedicatedResource, closed: bool, noted: bool) -> None:
    zone, note = closed_zone("z-1", [found], "admin", "d")
    assert (zone is not None, note is not None) == (closed, noted)
    if note is not None:
        assert "zone zone-1 is dedicated to domain tenants" in note and "not checked" in note


def test_a_host_dedicated_to_another_account_is_not_counted_and_is_named_with_its_owner() -> None:
    v = view(workers=3, groups=())
    found = placement_refusals(v, spread(), list(v.nodes), with_dedicated(reads(*THREE), dedicated("Host", "h3", "kvm-3")))
    assert len(found) == 1
    refusal = found[0]
    assert refusal.hosts == 2 and "only 2 Up and Enabled hosts" in refusal.why
    assert "host h3 (dedicated to account other of domain tenants)" in refusal.why
    assert "checkForNonDedicatedResources" in refusal.why
    assert "release the dedication of host kvm-3" in refusal.change


def test_a_dedicated_cluster_takes_its_hosts_out_and_says_through_what() -> None:
    hosts = (host("h1"), host("h2", cluster="cl-2"), host("h3", cluster="cl-2"))
    v = view(workers=2, groups=())
    found = placement_refusals(v, spread(), list(v.nodes),
                               with_dedicated(reads(*hosts), dedicated("Cluster", "cl-2", "rack-b", account=None)))
    assert [r.hosts for r in found] == [1]
    assert "host h2 (dedicated to domain tenants with its cluster rack-b)" in found[0].why
    assert found[0].change.count("cluster rack-b") == 1


def test_without_dedications_or_with_room_left_nothing_is_refused() -> None:
    v = view(workers=2, groups=())
    assert placement_refusals(v, spread(), list(v.nodes), with_dedicated(reads(*THREE), dedicated("Host", "h3", "k"))) == []
    # Not listed (None): counted as today.
    assert placement_refusals(view(workers=3, groups=()), spread(), list(view(workers=3, groups=()).nodes),
                              reads(*THREE)) == []


def test_nodes_of_a_dedication_group_are_placed_by_their_group_not_by_the_avoid_list() -> None:
    # The nodes carry dedicated-admin: ExplicitDedicationProcessor, not checkForNonDedicatedResources.
    v = view(workers=3)
    found = placement_refusals(v, spread(), list(v.nodes), with_dedicated(reads(*THREE), dedicated("Host", "h3", "k")))
    assert found == []


def test_a_zone_closed_to_the_owner_refuses_the_group_naming_the_zone_and_its_owner() -> None:
    v = view(workers=2, groups=())
    found = placement_refusals(v, spread(), list(v.nodes), with_dedicated(reads(*THREE), dedicated("Zone", "z-1", "zone-1")))
    assert len(found) == 1
    assert found[0].why.startswith("zone zone-1 is dedicated to account other of domain tenants")
    assert "releaseDedicatedZone" in found[0].change


def test_the_note_when_dedications_cannot_be_listed_says_what_was_counted() -> None:
    note = dedication_note("HTTP 432")
    assert "HTTP 432" in note and "counted as room" in note
