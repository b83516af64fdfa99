# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Settings (stored as JSON in the record) and the gen 1 -> gen 2 initial settings."""

from __future__ import annotations

import json

import pytest
from factories import ClusterFactory, ag, so
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.reasons import outdated_reasons
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings, initial_settings

type_settings = st.builds(
    TypeSettings,
    offering_id=st.none() | st.text(min_size=1, max_size=8),
    root_disk_gb=st.none() | st.integers(min_value=1, max_value=10_000),
    affinity_group_ids=st.none() | st.lists(st.text(min_size=1, max_size=6), unique=True, max_size=4).map(tuple),
)


@given(st.builds(Settings, control=type_settings, worker=type_settings, etcd=type_settings))
def test_settings_round_trip_through_json(settings: Settings) -> None:
    assert Settings.from_dict(json.loads(json.dumps(settings.to_dict()))) == settings


def test_settings_is_a_mapping_of_node_types() -> None:
    s = Settings(worker=TypeSettings(offering_id="x"))
    assert list(s) == ["etcd", "control", "worker"]
    assert s["worker"].offering_id == "x" and "worker" in s and "gpu" not in s
    assert len(s) == 3
    with pytest.raises(KeyError):
        s["gpu"]  # noqa: B018


def test_to_dict_shape() -> None:
    s = Settings(control=TypeSettings("so-1", 30, ("a", "b")))
    assert s.to_dict()["control"] == {"offering_id": "so-1", "root_disk_gb": 30, "affinity_group_ids": ["a", "b"]}
    assert s.to_dict()["etcd"] == {"offering_id": None, "root_disk_gb": None, "affinity_group_ids": None}


def test_missing_types_read_as_unset() -> None:
    assert Settings.from_dict({"worker": {"offering_id": "x"}}) == Settings(worker=TypeSettings(offering_id="x"))
    assert Settings.from_dict(None) == Settings()
    assert Settings.from_dict({"worker": None}) == Settings()


@pytest.mark.parametrize("data, parameter", [
    ({"gpu": {}}, "settings"),
    ([1, 2], "settings"),
    ({"worker": "x"}, "settings"),
    ({"worker": {"offering_id": 3}}, "settings.offering_id"),
    ({"worker": {"root_disk_gb": "30"}}, "settings.root_disk_gb"),
    ({"worker": {"root_disk_gb": True}}, "settings.root_disk_gb"),
    ({"worker": {"affinity_group_ids": "ag-1"}}, "settings.affinity_group_ids"),
    ({"worker": {"affinity_group_ids": [1]}}, "settings.affinity_group_ids"),
])
def test_corrupt_records_are_refused(data: object, parameter: str) -> None:
    with pytest.raises(InvalidInput) as err:
        Settings.from_dict(data)  # type: ignore[arg-type]
    assert err.value.parameter == parameter


def test_with_changes_lays_changes_over_the_current_settings() -> None:
    current = Settings(control=TypeSettings("so-a", 20, ("g1",)), worker=TypeSettings("so-a", 20, None))
    changed = current.with_changes(offerings={"Worker": "so-b"}, root_disk_sizes={"CONTROL": 40},
                                   affinity_groups={"worker": ["g2", "g2", "g3"], "control": None})
    assert changed.worker == TypeSettings("so-b", 20, ("g2", "g3"))
    assert changed.control == TypeSettings("so-a", 40, None)
    assert changed.etcd == current.etcd
    assert current.worker.offering_id == "so-a"  # unchanged: frozen


@pytest.mark.parametrize("kwargs, parameter", [
    ({"offerings": {"gpu": "x"}}, "node_offerings"),
    ({"root_disk_sizes": {"master": 30}}, "node_root_disk_sizes"),
    ({"affinity_groups": {"": []}}, "node_affinity_groups"),
])
def test_with_changes_refuses_unknown_node_types(kwargs: dict, parameter: str) -> None:
    with pytest.raises(InvalidInput) as err:
        Settings().with_changes(**kwargs)
    assert err.value.parameter == parameter and "control, etcd, worker" in err.value.msg


# -- initial settings (gen 1 -> gen 2) ---------------------------------------------------------


def test_initial_settings_copy_the_cluster_offering_to_each_type() -> None:
    s = initial_settings(ClusterFactory(control=3, workers=2).view())
    assert [s[t].offering_id for t in s] == [so("medium")] * 3
    assert s.control.root_disk_gb == 20 and s.worker.root_disk_gb == 20
    assert s.etcd.root_disk_gb is None  # no etcd nodes: no size to keep


def test_initial_settings_use_per_type_offerings_where_reported() -> None:
    f = ClusterFactory(control=1, workers=2, etcd=3, offering="medium",
                       node_offerings={"worker": "large", "etcd": "xlarge"})
    s = initial_settings(f.view())
    assert (s.control.offering_id, s.worker.offering_id, s.etcd.offering_id) == (so("medium"), so("large"), so("xlarge"))


def test_initial_root_disk_is_the_smallest_so_no_node_is_out_of_date() -> None:
    f = ClusterFactory(control=1, workers=3)
    f.set(f.w(1), root_gb=30)
    f.set(f.w(2), root_gb=25)
    view = f.view()
    s = initial_settings(view)
    assert s.worker.root_disk_gb == 20
    assert all(outdated_reasons(n, s[n.node_type], view) == [] for n in view.nodes)


@pytest.mark.parametrize("groups, expected", [
    ([["spread"], ["spread"], ["spread"]], (ag("spread"),)),
    ([["spread", "soft"], ["soft", "spread"], ["spread", "soft"]], tuple(sorted((ag("spread"), ag("soft"))))),
    ([["spread"], ["spread"], []], None),  # they differ: leave the groups alone
    ([["spread"], ["soft"], ["spread"]], None),
    ([[], [], []], None),  # nothing shared (dedication aside): nothing recorded
])
def test_initial_affinity_groups_are_the_shared_ones(groups: list, expected: object) -> None:
    f = ClusterFactory(control=1, workers=3)
    for i, g in enumerate(groups, start=1):
        f.set(f.w(i), groups=["dedicated"] + g)  # CKS's dedication group on every node
    view = f.view()
    s = initial_settings(view)
    assert s.worker.affinity_group_ids == expected
    assert all(outdated_reasons(n, s[n.node_type], view) == [] for n in view.nodes)


def test_initial_settings_of_a_cluster_whose_nodes_differ_from_its_record() -> None:
    # CloudStack's record says medium, a node was changed outside: it shows as out of date.
    f = ClusterFactory(control=1, workers=2)
    f.set(f.w(2), offering="large")
    view = f.view()
    s = initial_settings(view)
    assert s.worker.offering_id == so("medium")
    assert [r.kind for r in outdated_reasons(view.node(f.w(2)), s.worker, view)] == ["offering"]


def test_initial_settings_without_any_offering() -> None:
    f = ClusterFactory(control=1, workers=1)
    raw = list(f.raw())
    raw[0].pop("serviceofferingid")
    from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import build_view
    assert initial_settings(build_view(*raw)).worker.offering_id is None


# -- names to ids --------------------------------------------------------------------------------

