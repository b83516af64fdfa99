# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""validate: the refusals at the API, before anything is stored."""

from __future__ import annotations

from typing import Any, Callable, Optional

import pytest
from factories import ClusterFactory, ag, so

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.refusals import Refusal, validate
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import initial_settings

Setup = Optional[Callable[[ClusterFactory], None]]


def refusals(f: ClusterFactory, rollout: bool = True, max_unavailable: Optional[int] = None,
             offerings: Optional[dict] = None, root_disk_sizes: Optional[dict] = None,
             affinity_groups: Optional[dict] = None, current_changes: Optional[dict] = None) -> list[Refusal]:
    view = f.view()
    current = initial_settings(view).with_changes(**(current_changes or {}))
    requested = current.with_changes(offerings=offerings, root_disk_sizes=root_disk_sizes,
                                     affinity_groups=affinity_groups)
    return validate(view, current, requested, rollout, max_unavailable)


def params(found: list[Refusal]) -> list[str]:
    return [r.parameter for r in found]


@pytest.mark.parametrize("value, refused", [(None, False), (1, False), (5, False), (0, True), (-1, True)])
def test_max_unavailable_at_least_one(value: Optional[int], refused: bool) -> None:
    found = refusals(ClusterFactory(), max_unavailable=value)
    assert params(found) == (["max_unavailable"] if refused else [])


def test_no_op_settings_are_accepted() -> None:
    f = ClusterFactory(control=1, workers=1, etcd=2)
    f.set(f.w(1), root_gb=30)
    assert refusals(f) == []
    view = f.view()
    same = initial_settings(view)
    assert validate(view, same, same, True, 1) == []


# -- root disk sizes ---------------------------------------------------------------------------

@pytest.mark.parametrize("setup, size, rollout, expected", [
    (None, 30, True, []),  # grow every node
    (None, 20, True, []),  # the current size
    (None, 10, True, ["node_root_disk_sizes.worker"]),  # would shrink
    (None, 10, False, []),  # stored only, as createKubernetesCluster accepts it
    (None, 0, False, ["node_root_disk_sizes.worker"]),  # never a valid size
    (lambda f: f.set(f.w(2), root_gb=40), 30, True, ["node_root_disk_sizes.worker"]),  # w2 has 40
    (lambda f: f.set(f.w(2), root_gb=40), 40, True, []),
    (lambda f: f.set(f.w(1), root_offering="fixed-50"), 30, True, ["node_root_disk_sizes.worker"]),
    (lambda f: f.set(f.w(1), root_offering="fixed-50"), 30, False, []),
    # ... and rolling w1 off its strict offering onto the type's is a strictness change too
    (lambda f: f.set(f.w(1), offering="strict"), 30, True, ["node_offerings.worker", "node_root_disk_sizes.worker"]),
    # size-only resize of a root disk whose service offering fixes rootdisksize
    (lambda f: f.set(f.w(1), offering="fixed-root", root_offering="compute-only"), 30, True,
     ["node_root_disk_sizes.worker"]),
    (lambda f: f.set(f.w(1), offering="fixed-root", root_offering="compute-only"), 30, False, []),
    # a strict disk already larger than the size: refused as a shrink
    (lambda f: f.set(f.w(1), root_offering="fixed-50", root_gb=50), 30, True, ["node_root_disk_sizes.worker"]),
])
def test_root_disk_refusals(setup: Setup, size: int, rollout: bool, expected: list[str]) -> None:
    f = ClusterFactory(control=3, workers=2)
    if setup:
        setup(f)
    assert params(refusals(f, rollout=rollout, root_disk_sizes={"worker": size})) == expected


def test_shrink_refusal_names_the_nodes_and_the_size_to_give() -> None:
    f = ClusterFactory(control=3, workers=3)
    f.set(f.w(2), root_gb=40)
    f.set(f.w(3), root_gb=35)
    [r] = refusals(f, root_disk_sizes={"worker": 30})
    assert f"{f.w(2)} (40 GB)" in r.why and f"{f.w(3)} (35 GB)" in r.why and f.w(1) not in r.why
    assert "at least 40 GB" in r.change
    assert r.parameter == "node_root_disk_sizes.worker" and r.value == 30


def test_strict_disk_refusal_only_for_nodes_that_need_to_grow() -> None:
    f = ClusterFactory(control=3, workers=2)
    f.set(f.w(1), root_offering="fixed-50", root_gb=50)
    # w1 already has 50 GB, so its strict disk is not resized; w2 grows from 20.
    assert refusals(f, root_disk_sizes={"worker": 50}) == []
    f.set(f.w(2), root_gb=60)
    found = refusals(f, root_disk_sizes={"worker": 55})
    assert [("shrink" in r.why, "strictly fixed size" in r.why) for r in found] == [(True, False), (False, True)]
    assert f.w(2) in found[0].why and f.w(1) not in found[0].why
    assert f.w(1) in found[1].why and f.w(2) not in found[1].why


def test_fixed_root_size_of_the_target_offering_refuses_a_resize() -> None:
    f = ClusterFactory(control=3, workers=2)
    found = refusals(f, offerings={"worker": so("fixed-root")}, root_disk_sizes={"worker": 30})
    assert params(found) == ["node_root_disk_sizes.worker"]
    assert "cks-fixed-root fixes the root disk at 40 GB" in found[0].why


def test_unchanged_root_size_is_not_judged_again() -> None:
    # The recorded size is below w2's disk; passing it again must not count as a shrink.
    f = ClusterFactory(control=3, workers=2)
    f.set(f.w(2), root_gb=40)
    assert refusals(f, root_disk_sizes={"worker": 20}) == []


# -- offerings ---------------------------------------------------------------------------------

@pytest.mark.parametrize("offering, rollout, why", [
    (so("large"), True, None),
    (so("large"), False, None),
    ("so-unknown", False, "not a service offering this account can use"),
    (so("custom"), False, "custom (dynamic) offering"),
    (so("tiny"), False, "1 CPUs and 1024 MB"),
    (so("strict"), True, "disk offering strictness"),  # medium is not strict: changeService refuses
    (so("strict"), False, None),
])
def test_offering_refusals(offering: str, rollout: bool, why: Optional[str]) -> None:
    found = refusals(ClusterFactory(control=3, workers=2), rollout=rollout, offerings={"worker": offering})
    if why is None:
        assert found == []
    else:
        assert params(found) == ["node_offerings.worker"] and why in found[0].why


# -- affinity groups ---------------------------------------------------------------------------

@pytest.mark.parametrize("groups, rollout, why", [
    ([ag("spread")], True, None),
    ([], True, None),
    ([ag("dedicated")], False, "ExplicitDedication"),
    ([ag("spread"), ag("dedicated")], True, "ExplicitDedication"),
    (["ag-nope"], False, "not an affinity group"),
])
def test_affinity_group_refusals(groups: list[str], rollout: bool, why: Optional[str]) -> None:
    found = refusals(ClusterFactory(control=3, workers=2), rollout=rollout, affinity_groups={"worker": groups})
    if why is None:
        assert found == []
    else:
        assert params(found) == ["node_affinity_groups.worker"] and why in found[0].why


def test_same_groups_in_another_order_are_a_no_op() -> None:
    f = ClusterFactory(control=1, workers=2, groups={"control": ["spread", "soft"]})
    assert refusals(f, affinity_groups={"control": [ag("spread"), ag("soft")]}) == []


# -- types that cannot lose a node -------------------------------------------------------------

def _stop_c1(f: ClusterFactory) -> None:
    f.stop(f.c(1))


def _c1_large(f: ClusterFactory) -> None:
    f.set(f.c(1), offering="large")


def _e2_small_disk(f: ClusterFactory) -> None:
    f.set(f.e(2), root_gb=10)


@pytest.mark.parametrize("control, etcd, setup, change, rollout, expected", [
    # a single control node: any change that makes it out of date is refused with rollout
    (1, 0, None, {"offerings": {"control": so("large")}}, True, ["node_offerings.control"]),
    (1, 0, None, {"root_disk_sizes": {"control": 30}}, True, ["node_root_disk_sizes.control"]),
    (1, 0, None, {"affinity_groups": {"control": [ag("spread")]}}, True, ["node_affinity_groups.control"]),
    (1, 0, None, {"offerings": {"control": so("large")}}, False, []),  # stored for later
    (1, 0, None, {"offerings": {"control": so("medium")}}, True, []),  # no-op
    (1, 0, None, {"affinity_groups": {"control": []}}, True, []),  # it has no chosen groups: no-op
    (1, 0, _stop_c1, {"offerings": {"control": so("large")}}, True, []),  # stopped
    (1, 0, _c1_large, {"root_disk_sizes": {"control": 30}}, True, []),  # already differed
    # a 2-node stacked control plane
    (2, 0, None, {"offerings": {"control": so("large")}}, True, ["node_offerings.control"]),
    (2, 0, _stop_c1, {"offerings": {"control": so("large")}}, True, ["node_offerings.control"]),  # c2 runs
    # 3 stacked control nodes can roll
    (3, 0, None, {"offerings": {"control": so("large")}}, True, []),
    # external etcd: 2 control nodes roll, 1 does not
    (2, 3, None, {"offerings": {"control": so("large")}}, True, []),
    (1, 3, None, {"offerings": {"control": so("large")}}, True, ["node_offerings.control"]),
    # etcd nodes: 2 cannot lose one, 3 can
    (2, 2, None, {"offerings": {"etcd": so("large")}}, True, ["node_offerings.etcd"]),
    (2, 2, None, {"root_disk_sizes": {"etcd": 30}}, True, ["node_root_disk_sizes.etcd"]),
    (2, 2, _e2_small_disk, {"root_disk_sizes": {"etcd": 20}}, True, ["node_root_disk_sizes.etcd"]),
    (2, 3, None, {"offerings": {"etcd": so("large")}}, True, []),
    (2, 1, None, {"offerings": {"etcd": so("large")}}, True, ["node_offerings.etcd"]),
    # workers always roll, even one (the seed: "a single control node whose workers still roll")
    (1, 0, None, {"offerings": {"worker": so("large")}}, True, []),
])
def test_settings_a_type_that_cannot_lose_a_node_could_not_roll(
        control: int, etcd: int, setup: Setup, change: dict[str, Any], rollout: bool, expected: list[str]) -> None:
    f = ClusterFactory(control=control, workers=2, etcd=etcd)
    if setup:
        setup(f)
    assert params(refusals(f, rollout=rollout, **change)) == expected


def test_unrollable_refusal_names_the_nodes_and_why() -> None:
    f = ClusterFactory(control=2, workers=2)
    [r] = refusals(f, offerings={"control": so("large")})
    assert f.c(1) in r.why and f.c(2) in r.why
    assert "2 control nodes with stacked etcd" in r.why
    assert "rollout=false" in r.change
    assert r.value == so("large")
    assert r.message.startswith("node_offerings.control='so-large': would make control node")


def test_one_refusal_per_changed_setting() -> None:
    f = ClusterFactory(control=1, workers=2)
    found = refusals(f, offerings={"control": so("large")}, root_disk_sizes={"control": 30})
    assert params(found) == ["node_offerings.control", "node_root_disk_sizes.control"]
    assert found[1].value == 30


def test_refusals_of_several_kinds_are_all_reported() -> None:
    f = ClusterFactory(control=3, workers=2)
    found = refusals(f, max_unavailable=0, offerings={"worker": "so-nope"},
                     root_disk_sizes={"control": 5}, affinity_groups={"etcd": [ag("dedicated")]})
    assert sorted(params(found)) == ["max_unavailable", "node_affinity_groups.etcd", "node_offerings.worker",
                                     "node_root_disk_sizes.control"]
    assert all(r.to_dict()["message"] == r.message for r in found)
