"""cks_node_settings' request parsing, name resolution and refusal messages (pure logic)."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions import settings as plans
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions import request as svc
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.refusals import Refusal
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput

from factories import ClusterFactory, ag, so


def params(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"node_offerings": None, "node_root_disk_sizes": None, "node_affinity_groups": None,
                            "rollout": False, "max_unavailable": None, "cancel_rollout": False,
                            "lock_holder": None, "lock_duration": None}
    base.update(kw)
    return base


# -- request ------------------------------------------------------------------------------------

def test_types_left_out_or_null_are_dropped() -> None:
    req = svc.SettingsRequest.from_params(params(
        node_offerings={"worker": "cks-large", "control": None},
        node_root_disk_sizes={"Worker": "30"},
        node_affinity_groups={"etcd": "a, b", "control": []}))
    assert dict(req.offerings) == {"worker": "cks-large"}
    assert dict(req.root_disk_sizes) == {"worker": 30}
    # An empty list is kept: it records "no groups" for the type, which is not "leave alone".
    assert dict(req.affinity_groups) == {"etcd": ["a", "b"], "control": []}
    assert req.changes_settings


@pytest.mark.parametrize("option", ["node_offerings", "node_root_disk_sizes", "node_affinity_groups"])
def test_a_key_that_is_not_a_node_type_is_refused_naming_it(option: str) -> None:
    value = {"node_offerings": "x", "node_root_disk_sizes": 30, "node_affinity_groups": ["x"]}[option]
    with pytest.raises(InvalidInput) as err:
        svc.SettingsRequest.from_params(params(**{option: {"workers": value}}))
    assert err.value.parameter == option
    assert err.value.value == "workers"
    assert "'workers'" in err.value.msg and "control, worker, etcd" in err.value.msg


def test_the_same_type_twice_in_other_case_is_refused() -> None:
    with pytest.raises(InvalidInput, match="given twice"):
        svc.SettingsRequest.from_params(params(node_offerings={"worker": "a", "WORKER": "b"}))


@pytest.mark.parametrize("size", [0, -5, "ten", 2.5, True])
def test_root_disk_sizes_must_be_whole_gb_of_at_least_one(size: Any) -> None:
    with pytest.raises(InvalidInput) as err:
        svc.SettingsRequest.from_params(params(node_root_disk_sizes={"worker": size}))
    assert err.value.parameter == "node_root_disk_sizes.worker"


@pytest.mark.parametrize("value", [0, -1, True])
def test_max_unavailable_below_one_is_refused(value: Any) -> None:
    with pytest.raises(InvalidInput) as err:
        svc.SettingsRequest.from_params(params(max_unavailable=value))
    assert err.value.parameter == "max_unavailable"


def test_rollout_needs_a_lock_holder() -> None:
    with pytest.raises(InvalidInput) as err:
        svc.SettingsRequest.from_params(params(rollout=True))
    assert err.value.parameter == "lock_holder"
    assert svc.SettingsRequest.from_params(params(rollout=True, lock_holder="run-1")).rollout


@pytest.mark.parametrize("extra", [{"rollout": True, "lock_holder": "r"}, {"node_offerings": {"worker": "a"}},
                                   {"max_unavailable": 2}])
def test_cancel_is_given_alone(extra: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput) as err:
        svc.SettingsRequest.from_params(params(cancel_rollout=True, **extra))
    assert err.value.parameter == "cancel_rollout"


# -- names -> ids -------------------------------------------------------------------------------

def test_offerings_resolve_by_name_or_id() -> None:
    names = svc.NameResolver(ClusterFactory().view())
    assert names.offering("node_offerings.worker", "cks-large") == so("large")
    assert names.offering("node_offerings.worker", so("xlarge")) == so("xlarge")


def test_unknown_offering_names_the_parameter_and_value_and_lists_the_known() -> None:
    names = svc.NameResolver(ClusterFactory().view())
    with pytest.raises(InvalidInput) as err:
        names.offering("node_offerings.worker", "cks-huge")
    assert err.value.msg.startswith("node_offerings.worker='cks-huge': no service offering")
    assert "cks-large" in err.value.msg


def test_an_ambiguous_offering_name_asks_for_the_id() -> None:
    factory = ClusterFactory()
    raw = list(factory.raw())
    raw[3] = raw[3] + [{"id": "so-large-2", "name": "cks-large", "cpunumber": 4, "memory": 8192}]
    from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import build_view
    names = svc.NameResolver(build_view(*raw))
    with pytest.raises(InvalidInput, match="2 service offerings have this name") as err:
        names.offering("node_offerings.control", "cks-large")
    assert "so-large-2" in err.value.msg and so("large") in err.value.msg


def test_groups_resolve_keep_order_and_drop_repeats() -> None:
    names = svc.NameResolver(ClusterFactory().view())
    assert names.groups("node_affinity_groups.worker", ["soft", ag("spread"), "soft"]) == (ag("soft"), ag("spread"))


def test_dedication_groups_are_refused_by_name() -> None:
    names = svc.NameResolver(ClusterFactory().view())
    with pytest.raises(InvalidInput, match="ExplicitDedication") as err:
        names.groups("node_affinity_groups.worker", ["spread", "dedicated"])
    assert err.value.parameter == "node_affinity_groups.worker"
    assert err.value.value == ["spread", "dedicated"]


def test_unknown_and_ambiguous_groups_are_refused() -> None:
    factory = ClusterFactory()
    factory.listed_groups["twin"] = "host anti-affinity"
    raw = list(factory.raw())
    raw[5] = raw[5] + [{"id": "ag-twin-2", "name": "twin", "type": "host anti-affinity"}]
    from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import build_view
    names = svc.NameResolver(build_view(*raw))
    with pytest.raises(InvalidInput, match="2 affinity groups are named twin"):
        names.groups("node_affinity_groups.worker", ["twin"])
    with pytest.raises(InvalidInput, match="nope: no affinity group") as err:
        names.groups("node_affinity_groups.worker", ["nope"])
    # Dedication groups are not offered as a choice.
    assert "dedicated" not in err.value.msg.split("groups are:")[1]


def test_resolve_lays_changes_over_the_current_settings() -> None:
    view = ClusterFactory(groups={"worker": ["spread"]}).view()
    current = plans.initial_settings(view)
    req = svc.SettingsRequest(offerings={"worker": "cks-large"}, affinity_groups={"worker": ["soft"]})
    new = svc.resolve(view, current, req)
    assert new.worker.offering_id == so("large")
    assert new.worker.affinity_group_ids == (ag("soft"),)
    assert new.worker.root_disk_gb == 20
    assert new.control == current.control and new.etcd == current.etcd


# -- readable results ---------------------------------------------------------------------------

def test_describe_gives_names_next_to_ids() -> None:
    view = ClusterFactory(groups={"worker": ["spread"]}).view()
    described = svc.describe(view, plans.initial_settings(view))
    assert described["worker"] == {"offering": "cks-medium", "offering_id": so("medium"), "root_disk_size": 20,
                                   "affinity_groups": ["spread"], "affinity_group_ids": [ag("spread")]}
    assert described["control"]["affinity_groups"] is None


def test_same_settings_ignores_group_order() -> None:
    a = plans.Settings(worker=plans.TypeSettings("x", 20, ("g1", "g2")))
    b = plans.Settings(worker=plans.TypeSettings("x", 20, ("g2", "g1")))
    assert svc.same_settings(a, b)
    assert not svc.same_settings(a, plans.Settings(worker=plans.TypeSettings("x", 21, ("g1", "g2"))))
    assert not svc.same_settings(a, plans.Settings(worker=plans.TypeSettings("x", 20, None)))


def test_refused_names_every_parameter_with_the_value_given() -> None:
    req = svc.SettingsRequest(offerings={"control": "cks-large"}, root_disk_sizes={"worker": 10})
    refusals = [Refusal("node_offerings.control", so("large"), "would make ...", "add control nodes"),
                Refusal("node_root_disk_sizes.worker", 10, "would shrink", "give at least 20 GB")]
    err = svc.refused(refusals, req)
    assert err.parameter == "node_offerings.control" and err.value == "cks-large"
    assert f"node_offerings.control='cks-large' ('{so('large')}')" in err.msg
    assert "node_root_disk_sizes.worker=10: would shrink" in err.msg
    assert [r["given"] for r in err.details["refusals"]] == ["cks-large", 10]
