# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The live-or-restart decision of a node and the checks of a live scale (pure)."""

from __future__ import annotations

import dataclasses

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.scale_path import (
    AUTO,
    HEADROOM_LATER,
    LIVE,
    NEVER,
    RESTART,
    GuestView,
    LiveFacts,
    OfferingFacts,
    cpu_count,
    event_words,
    expected_capacity,
    guest_sees,
    headroom_refusal,
    memtotal_kib,
    needs_headroom,
    quantity_kib,
    reports_capacity,
    scale_path,
    with_headroom,
)

M2 = OfferingFacts("m-2", 2, 4096, 2000, custom=False, dynamic_scaling=True)
M4 = OfferingFacts("m-4", 4, 8192, 2000, custom=False, dynamic_scaling=True)
FACTS = LiveFacts(version="4.23.0.0", zone_dynamic_scale=True, vm_dynamically_scalable=True, hypervisor="KVM",
                  vm_state="Running", current=M2, target=M4)
OFFERING = frozenset({"offering"})


def test_live_when_everything_cloudstack_reads_allows_it() -> None:
    decided = scale_path(AUTO, OFFERING, FACTS)
    assert decided.path == LIVE and "m-2 -> m-4" in decided.reason
    assert decided.to_dict() == {"path": LIVE, "reason": decided.reason}


@pytest.mark.parametrize("mode, changes, phased, words", [
    (NEVER, OFFERING, False, "rollout_live_scale is never"),
    (AUTO, frozenset(), False, "nothing to change"),
    (AUTO, frozenset({"offering", "root_disk"}), False, "root disk"),
    (AUTO, frozenset({"root_disk"}), False, "root disk"),
    (AUTO, frozenset({"offering", "affinity_groups"}), False, "affinity groups"),
    (AUTO, OFFERING, True, "hooks"),
])
def test_restart_for_the_change_itself(mode: str, changes: frozenset[str], phased: bool, words: str) -> None:
    decided = scale_path(mode, changes, FACTS, phased=phased)
    assert decided.path == RESTART and words in decided.reason


def test_nothing_read_is_the_restart_path() -> None:
    assert scale_path(AUTO, OFFERING, None).path == RESTART


@pytest.mark.parametrize("change, words", [
    ({"vm_state": "Stopped"}, "the VM is Stopped"),
    ({"current": None}, "could not be read"),
    ({"target": None}, "could not be read"),
    ({"version": None}, "release could not be read"),
    ({"hypervisor": None}, "hypervisor could not be read"),
    ({"hypervisor": "Hyperv"}, "no running VM on Hyperv"),
    ({"target": dataclasses.replace(M4, dynamic_scaling=False)}, "differ in dynamic scaling"),
    ({"current": M4, "target": M2}, "no scale up"),
    ({"target": dataclasses.replace(M4, cpu=1)}, "no scale up"),
    ({"target": dataclasses.replace(M4, speed_mhz=1000)}, "no scale up"),
    ({"target": dataclasses.replace(M2, name="m-2b")}, "same size"),
    ({"version": "4.22.1.0"}, "only on a custom offering"),
    ({"zone_dynamic_scale": None}, "enable.dynamic.scale.vm could not be read"),
    ({"zone_dynamic_scale": False}, "enable.dynamic.scale.vm is false"),
    ({"vm_dynamically_scalable": None}, "dynamically scalable could not be read"),
    ({"vm_dynamically_scalable": False}, "not dynamically scalable"),
])
def test_each_rule_cloudstack_checks_takes_the_restart_path(change: dict, words: str) -> None:
    decided = scale_path(AUTO, OFFERING, dataclasses.replace(FACTS, **change))
    assert decided.path == RESTART and words in decided.reason


def test_before_423_a_custom_offering_scales_live_and_other_hypervisors_need_no_custom() -> None:
    custom = dataclasses.replace(M2, custom=True)
    assert scale_path(AUTO, OFFERING, dataclasses.replace(FACTS, version="4.22.1.0", current=custom)).path == LIVE
    assert scale_path(AUTO, OFFERING, dataclasses.replace(FACTS, version="4.22.1.0", hypervisor="VMware")).path == LIVE
    assert scale_path(AUTO, OFFERING, dataclasses.replace(FACTS, version="garbage")).path == RESTART


def test_expected_capacity_keeps_what_the_kubelet_and_kernel_kept() -> None:
    # 4 GiB offering, 3.9 GiB allocatable before: 100 MiB kept; 4 GiB added, 64 MiB of page structures.
    expected = expected_capacity(M4, 4096, 4096 * 1024 - 102400)
    assert expected.cpu == 4
    assert expected.memory_kib == 8192 * 1024 - 102400 - 4096 * 1024 // 64
    assert "100 MiB kept" in expected.why and "64 MiB of page structures" in expected.why
    ok, why = reports_capacity({"capacity": {"cpu": "4"}, "allocatable": {"memory": f"{8192 * 1024 - 102400}Ki"}}, expected)
    assert ok and why.startswith("4 CPU")
    assert reports_capacity({"capacity": {"cpu": "2"}, "allocatable": {"memory": "9Gi"}}, expected) == (
        False, "reports 2 CPU, not 4")
    ok, why = reports_capacity({"capacity": {"cpu": "4"}, "allocatable": {"memory": "4Gi"}}, expected)
    assert not ok and "less than" in why
    assert not reports_capacity({}, expected)[0]


@pytest.mark.parametrize("text, kib", [("1024Ki", 1024), ("2Mi", 2048), ("1Gi", 1024 ** 2), ("2048", 2),
                                       ("1M", 976), ("", None), (None, None), ("12x", None)])
def test_quantities(text, kib) -> None:
    assert quantity_kib(text) == kib


@pytest.mark.parametrize("text, count", [("4\n", 1), ("0-3\n", 4), ("0", 1), ("0-1,4-5", 4), ("x", None), ("", None),
                                         ("0-1-2", None)])
def test_cpu_counts(text, count) -> None:
    assert cpu_count(text) == count


def test_memtotal_and_headroom() -> None:
    assert memtotal_kib("MemTotal:       8388608 kB\nMemFree: 1 kB\n") == 8388608
    assert memtotal_kib("nothing") is None
    assert headroom_refusal(GuestView(2, 64, 1), M4) is None
    assert "room for 2 vCPUs, not 4" in (headroom_refusal(GuestView(2, 2, 1), M4) or "")
    assert "could not be read" in (headroom_refusal(GuestView(2, None, 1), M4) or "")


def test_guest_sees_the_added_vcpus_and_memory() -> None:
    before = GuestView(2, 64, 4096 * 1024 - 200_000)
    grown = GuestView(4, 64, 8192 * 1024 - 200_000 - 4096 * 1024 // 64)
    assert guest_sees(before, grown, M2, M4)[0]
    ok, why = guest_sees(before, GuestView(2, 64, grown.memory_kib), M2, M4)
    assert not ok and "vCPUs left offline" in why
    ok, why = guest_sees(before, GuestView(4, 64, before.memory_kib), M2, M4)
    assert not ok and "memory left offline" in why
    assert not guest_sees(GuestView(None, None, None), grown, M2, M4)[0]


def test_event_words() -> None:
    status = {"capacity": {"cpu": "8", "memory": f"{int(31.2 * 1024 ** 2)}Ki"}}
    assert event_words("m-8", status) == "scaled to m-8 without a restart; kubelet restarted; capacity now 8 CPU, 31.2 GiB"
    assert event_words("m-8", {}) == "scaled to m-8 without a restart; kubelet restarted; capacity now ? CPU, ? GiB"


def test_the_plan_asks_the_guest_for_headroom_only_for_a_live_path_that_adds_vcpus() -> None:
    live = scale_path(AUTO, OFFERING, FACTS)
    assert needs_headroom(live, FACTS)
    # More memory only, a restart path, or nothing read: the domain's vCPU maximum does not matter.
    memory_only = dataclasses.replace(FACTS, target=dataclasses.replace(M2, name="m-2-big", memory_mb=8192))
    assert not needs_headroom(scale_path(AUTO, OFFERING, memory_only), memory_only)
    assert not needs_headroom(scale_path(AUTO, frozenset({"root_disk"}), FACTS), FACTS)
    assert not needs_headroom(live, None)


def test_a_domain_started_without_headroom_is_the_restart_path_in_the_plan() -> None:
    live = scale_path(AUTO, OFFERING, FACTS)
    # Started under 4.22 on a fixed offering: KVMGuru gave the domain no more vCPUs than it had.
    refused = with_headroom(live, FACTS, GuestView(2, 2, 4000000))
    assert refused.path == RESTART
    assert refused.reason == ("the running domain was started with room for 2 vCPUs, not 4: it must be restarted "
                              "once before it can be scaled live")
    room = with_headroom(live, FACTS, GuestView(2, 64, 4000000))
    assert room.path == LIVE and room.reason.endswith("; the running domain has room for 64 vCPUs")
    # The guest could not be asked (its pod refused): the restart path, never a guess.
    failed = with_headroom(live, FACTS, None, "the pod on the node failed: forbidden")
    assert failed.path == RESTART and "could not be read before the lock: the pod on the node failed" in failed.reason
    # Not asked (a dry run creates no pod): live, and the cycle checks it before the scale.
    later = with_headroom(live, FACTS, None)
    assert later.path == LIVE and later.reason == f"{live.reason}; {HEADROOM_LATER}"
    # A path that needs no headroom is left as it was.
    restart = scale_path(AUTO, frozenset({"root_disk"}), FACTS)
    assert with_headroom(restart, FACTS, GuestView(2, 2, 1)) == restart
