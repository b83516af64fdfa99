# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Out-of-date reasons and the affinity groups a node is given."""

from __future__ import annotations

from typing import Any

import pytest
from factories import ClusterFactory, ag, so

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.reasons import Reason, Ref, outdated_reasons, target_affinity_group_ids
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import TypeSettings


def reasons_of(node_changes: dict[str, Any], ts: TypeSettings) -> list[Reason]:
    f = ClusterFactory(control=1, workers=1)
    f.set(f.w(1), **node_changes)
    view = f.view()
    return outdated_reasons(view.node(f.w(1)), ts, view)


@pytest.mark.parametrize("node, ts, kinds", [
    # nothing set: nothing compared
    ({}, TypeSettings(), []),
    ({"offering": "large"}, TypeSettings(), []),
    # offering
    ({}, TypeSettings(offering_id=so("medium")), []),
    ({}, TypeSettings(offering_id=so("large")), ["offering"]),
    ({"offering": "large"}, TypeSettings(offering_id=so("medium")), ["offering"]),
    # root disk: only smaller is out of date
    ({"root_gb": 20}, TypeSettings(root_disk_gb=20), []),
    ({"root_gb": 20}, TypeSettings(root_disk_gb=21), ["root_disk"]),
    ({"root_gb": 30}, TypeSettings(root_disk_gb=20), []),
    ({"root_gb": None}, TypeSettings(root_disk_gb=50), []),  # no visible volume: not compared
    # affinity groups: dedication groups are neither compared nor needed
    ({"groups": ["dedicated"]}, TypeSettings(affinity_group_ids=()), []),
    ({"groups": []}, TypeSettings(affinity_group_ids=()), []),
    ({"groups": ["dedicated", "spread"]}, TypeSettings(affinity_group_ids=(ag("spread"),)), []),
    ({"groups": ["spread", "dedicated"]}, TypeSettings(affinity_group_ids=(ag("spread"),)), []),
    ({"groups": ["dedicated"]}, TypeSettings(affinity_group_ids=(ag("spread"),)), ["affinity_groups"]),
    ({"groups": ["dedicated", "spread"]}, TypeSettings(affinity_group_ids=()), ["affinity_groups"]),
    ({"groups": ["dedicated", "spread"]}, TypeSettings(affinity_group_ids=(ag("soft"),)), ["affinity_groups"]),
    ({"groups": ["spread", "soft"]}, TypeSettings(affinity_group_ids=(ag("soft"), ag("spread"))), []),
    ({"groups": ["dedicated", "spread"]}, TypeSettings(affinity_group_ids=None), []),  # left alone
    # a recorded dedication group is ignored in the comparison too
    ({"groups": ["spread"]}, TypeSettings(affinity_group_ids=(ag("spread"), ag("dedicated"))), []),
    # all three
    ({"offering": "large", "root_gb": 10, "groups": ["soft"]},
     TypeSettings(so("medium"), 20, (ag("spread"),)), ["offering", "root_disk", "affinity_groups"]),
])
def test_out_of_date_rules(node: dict, ts: TypeSettings, kinds: list[str]) -> None:
    assert [r.kind for r in reasons_of(node, ts)] == kinds


def test_reasons_name_from_and_to() -> None:
    [offering] = reasons_of({}, TypeSettings(offering_id=so("large")))
    assert offering == Reason("offering", Ref(so("medium"), "cks-medium"), Ref(so("large"), "cks-large"))
    assert offering.message == "offering cks-medium -> cks-large"
    assert offering.to_dict() == {"kind": "offering", "from": {"id": so("medium"), "name": "cks-medium"},
                                  "to": {"id": so("large"), "name": "cks-large"},
                                  "message": "offering cks-medium -> cks-large"}
    [disk] = reasons_of({"root_gb": 20}, TypeSettings(root_disk_gb=40))
    assert disk.to_dict()["from"] == 20 and disk.to_dict()["to"] == 40
    assert disk.message == "root disk 20 GB -> 40 GB"
    [groups] = reasons_of({"groups": ["dedicated", "soft"]}, TypeSettings(affinity_group_ids=(ag("spread"),)))
    assert groups.to_dict()["from"] == [{"id": ag("soft"), "name": "soft"}]
    assert groups.to_dict()["to"] == [{"id": ag("spread"), "name": "spread"}]
    assert groups.message == "affinity groups [soft] -> [spread]"


def test_unknown_offering_is_named_by_id() -> None:
    [r] = reasons_of({}, TypeSettings(offering_id="so-gone"))
    assert r.to == Ref("so-gone", "so-gone")


@pytest.mark.parametrize("groups, recorded, expected", [
    (["dedicated", "spread"], None, None),
    (["dedicated", "spread"], (ag("soft"),), (ag("soft"), ag("dedicated"))),
    (["spread"], (ag("soft"),), (ag("soft"),)),
    (["dedicated"], (), (ag("dedicated"),)),
    (["dedicated"], (ag("dedicated"), ag("soft")), (ag("dedicated"), ag("soft"))),
])
def test_target_groups_keep_the_dedication_group(groups: list, recorded: Any, expected: Any) -> None:
    f = ClusterFactory(control=1, workers=1)
    f.set(f.w(1), groups=groups)
    node = f.view().node(f.w(1))
    assert target_affinity_group_ids(node, TypeSettings(affinity_group_ids=recorded)) == expected


def test_a_node_given_its_target_groups_is_up_to_date() -> None:
    f = ClusterFactory(control=1, workers=1)
    f.set(f.w(1), groups=["dedicated", "soft"])
    ts = TypeSettings(affinity_group_ids=(ag("spread"),))
    node = f.view().node(f.w(1))
    target = target_affinity_group_ids(node, ts)
    f.set(f.w(1), groups=[g.removeprefix("ag-") for g in target or ()])
    view = f.view()
    assert outdated_reasons(view.node(f.w(1)), ts, view) == []
