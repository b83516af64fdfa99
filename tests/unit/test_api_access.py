# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Whether the API key may send what the rollout sends, and whether it ends during it
(``_decisions.api_access``), on views built from raw API dicts and listApis / listUserKeys answers."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Optional

import pytest
from placement_factories import GROUPS, OFFERINGS, spread, view

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.api_access import (
    EVERY_NODE,
    ApiAccessReads,
    api_access_error,
    expiry_warning,
    key_entry,
    longest_expected_seconds,
    missing_commands,
    needed_commands,
    parse_date,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ClusterView, build_view

NOW = datetime(2026, 12, 7, 3, 0, tzinfo=timezone.utc)
ALL = frozenset(EVERY_NODE + ("changeServiceForVirtualMachine", "updateVMAffinityGroup", "resizeVolume", "listVolumes"))


def with_root_disks(v: ClusterView) -> ClusterView:
    """The view's two workers with their 20 GB ROOT volumes (listVolumes type=ROOT)."""
    vms = [{"id": n.vm_id, "name": n.name, "state": "Running", "serviceofferingid": "so-medium", "cpunumber": 2,
            "memory": 4096, "affinitygroup": []} for n in v.nodes]
    volumes = [{"id": f"vol-{n.vm_id}", "virtualmachineid": n.vm_id, "type": "ROOT", "size": 20 * 1024 ** 3}
               for n in v.nodes]
    cluster = {"id": "c-1", "name": "k8s", "state": "Running", "account": "admin", "domainid": "d", "zoneid": "z-1",
               "virtualmachines": [{"id": n.vm_id, "name": n.name} for n in v.nodes]}
    return build_view(cluster, vms, volumes, OFFERINGS, [], GROUPS, [])


def allowed(*left_out: str) -> ApiAccessReads:
    return ApiAccessReads(ALL - set(left_out), "rollout")


@pytest.mark.parametrize(("settings", "expected"), [
    (spread(), set(EVERY_NODE) | {"updateVMAffinityGroup"}),
    (Settings(worker=TypeSettings(offering_id="so-large")), set(EVERY_NODE) | {"changeServiceForVirtualMachine"}),
    (Settings(worker=TypeSettings(root_disk_gb=400)), set(EVERY_NODE) | {"resizeVolume", "listVolumes"}),
    (Settings(worker=TypeSettings(offering_id="so-medium")), set(EVERY_NODE)),  # the offering it has: a restart
])
def test_each_change_needs_its_command_besides_what_every_node_cycle_sends(settings: Settings,
                                                                           expected: set[str]) -> None:
    v = with_root_disks(view(workers=2))
    needed = needed_commands(settings, list(v.nodes))
    assert set(needed) == expected
    assert [n.name for n in needed["startVirtualMachine"]] == ["k8s-node-0", "k8s-node-1"]


def test_a_key_without_update_vm_affinity_group_is_refused_naming_the_command_and_node_type() -> None:
    v = view(workers=2)
    missing = missing_commands(spread(), list(v.nodes), allowed("updateVMAffinityGroup"))
    assert [m.to_dict() for m in missing] == [{"command": "updateVMAffinityGroup", "node_types": ["worker"],
                                               "nodes": ["k8s-node-0", "k8s-node-1"]}]
    message = api_access_error(missing, "rollout")
    assert message is not None
    assert message.startswith("the API key pair rollout may not call every command the rollout sends")
    assert "updateVMAffinityGroup (needed by the worker node(s): k8s-node-0, k8s-node-1)" in message
    assert "432" in message and "listUserKeyRules" in message


def test_the_put_back_counts_a_start_is_needed_even_for_a_change_of_groups_only() -> None:
    v = view(workers=1)
    missing = missing_commands(spread(), list(v.nodes), allowed("startVirtualMachine", "listAsyncJobs"))
    assert [m.command for m in missing] == ["listAsyncJobs", "startVirtualMachine"]
    assert api_access_error(missing) is not None and api_access_error(missing, None).startswith("this API key")


def test_a_key_that_may_call_everything_or_could_not_be_asked_is_not_refused() -> None:
    v = view(workers=2)
    assert missing_commands(spread(), list(v.nodes), allowed()) == []
    assert missing_commands(spread(), list(v.nodes), ApiAccessReads(None)) == []
    assert api_access_error([]) is None
    # A command the change does not need may be left out.
    assert missing_commands(spread(), list(v.nodes), allowed("resizeVolume", "changeServiceForVirtualMachine")) == []


@pytest.mark.parametrize(("ends_in", "batches", "warned"), [
    (timedelta(minutes=20), 1, True),
    (timedelta(minutes=29), 1, True),
    (timedelta(minutes=31), 1, False),
    (timedelta(minutes=31), 2, True),
    (timedelta(hours=-1), 1, True),  # already ended: every call would be 401
    (None, 5, False),
])
def test_a_key_ending_within_the_longest_expected_time_is_warned(ends_in: Optional[timedelta], batches: int,
                                                                 warned: bool) -> None:
    end = None if ends_in is None else (NOW + ends_in).strftime("%Y-%m-%dT%H:%M:%S+0000")
    warning = expiry_warning(ApiAccessReads(ALL, "short", end), NOW, batches, 1800.0)
    assert (warning is not None) is warned
    if warning is not None:
        assert warning.startswith(f"API key pair short expires at {end}")
        assert f"{batches} batch(es) x batch_timeout 1800 s" in warning and "401" in warning


def test_an_end_date_in_another_offset_is_named_in_utc_and_an_unreadable_one_is_ignored() -> None:
    warning = expiry_warning(ApiAccessReads(ALL, None, "2026-12-07T00:10:00-0300"), NOW, 1, 1800.0)
    assert warning is not None and warning.startswith("The API key expires at 2026-12-07T03:10:00+0000")
    assert expiry_warning(ApiAccessReads(ALL, None, "soon"), NOW, 1, 1800.0) is None
    assert parse_date("2026-12-07T05:00:00+0000") == datetime(2026, 12, 7, 5, 0, tzinfo=timezone.utc)
    assert longest_expected_seconds(0, 60) == 60  # a plan is at least one batch long


def test_the_key_is_found_by_the_api_key_the_calls_are_signed_with() -> None:
    listed = [{"name": "a", "apikey": "k1"}, {"name": "b", "apikey": "k2", "enddate": "2026-12-08T00:00:00+0000"}]
    assert key_entry(listed, "k2") == listed[1]
    assert key_entry(listed, "k3") is None
