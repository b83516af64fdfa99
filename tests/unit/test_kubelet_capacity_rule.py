# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""A node whose kubelet has not seen what its VM has (a live scale whose kubelet restart never
came) is out of date, and its path: the kubelet restart alone under live_scale auto (pure)."""

from __future__ import annotations

import dataclasses
from typing import Optional

import pytest
from factories import ClusterFactory

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.reasons import (
    KUBELET_CAPACITY,
    outdated_reasons,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.scale_path import (
    AUTO,
    LIVE,
    NEVER,
    RESTART,
    OfferingFacts,
    aware_memory_kib,
    expected_capacity,
    kubelet_unaware,
    memory_floor_kib,
    reports_vm_size,
    scale_path,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import TypeSettings
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import build_view

GIB_KI = 1024 * 1024


@pytest.mark.parametrize("cpu, memory, vm_cpu, vm_mb, words", [
    # as booted on its VM's size: aware
    (4, f"{8 * GIB_KI}Ki", 4, 8192, None),
    # a real kernel keeps some: MemTotal of an 8 GiB VM near 7.7 GiB is still aware
    (4, f"{int(7.7 * GIB_KI)}Ki", 4, 8192, None),
    # a small VM's crash kernel and kernel (2 GiB, MemTotal near 1.7 GiB): aware, never restarted for it
    (2, f"{int(1.7 * GIB_KI)}Ki", 2, 2048, None),
    # the floor itself is aware, one KiB under it is not
    (4, f"{aware_memory_kib(8192)}Ki", 4, 8192, None),
    (4, f"{aware_memory_kib(8192) - 1}Ki", 4, 8192, "kubelet reports 5.9 GiB of memory, its VM has 8.0 GiB"),
    # the CPUs the VM gained, the kubelet not
    (2, f"{8 * GIB_KI}Ki", 4, 8192, "kubelet reports 2 CPU, its VM has 4"),
    (2, f"{4 * GIB_KI}Ki", 4, 8192, "kubelet reports 2 CPU, its VM has 4"),  # CPUs named first
    # memory only (a scale that added memory alone)
    (4, f"{4 * GIB_KI}Ki", 4, 8192, "kubelet reports 4.0 GiB of memory, its VM has 8.0 GiB"),
    (4, "4Gi", 4, 8192, "kubelet reports 4.0 GiB of memory, its VM has 8.0 GiB"),
    (4, str(4 * 1024 ** 3), 4, 8192, "kubelet reports 4.0 GiB of memory, its VM has 8.0 GiB"),  # bytes
    # more than the VM has (a VM scaled down by a stop and start, the kubelet not yet posting): not judged
    (8, f"{16 * GIB_KI}Ki", 4, 8192, None),
    # not reported, or not readable: never guessed
    (None, None, 4, 8192, None),
    (None, f"{8 * GIB_KI}Ki", 4, 8192, None),
    (4, None, 4, 8192, None),
    (4, "lots", 4, 8192, None),
    (None, "4Gi", 4, 0, None),  # the VM's memory not listed
])
def test_kubelet_unaware_rule(cpu: Optional[int], memory: Optional[str], vm_cpu: int, vm_mb: int,
                              words: Optional[str]) -> None:
    found = kubelet_unaware(cpu, memory, vm_cpu, vm_mb)
    if words is None:
        assert found is None
    else:
        assert found == f"{words} (a live scale not yet seen by the kubelet)"


def test_the_floor_is_the_live_paths_rule() -> None:
    # One rule: the live path's expected memory and the awareness floor both come from memory_floor_kib.
    whole = 8192 * 1024
    assert aware_memory_kib(8192) == memory_floor_kib(8192, whole // 4, whole) == whole - whole // 4 - whole // 64
    new = OfferingFacts("m-8", 4, 8192, 2000, custom=False, dynamic_scaling=True)
    kept = 4096 * 1024 - 3900 * 1024
    assert expected_capacity(new, 4096, 3900 * 1024).memory_kib == memory_floor_kib(8192, kept, 4096 * 1024)


@pytest.mark.parametrize("status, ok", [
    ({"capacity": {"cpu": "4", "memory": f"{8 * GIB_KI}Ki"}}, True),
    ({"capacity": {"cpu": "2", "memory": f"{8 * GIB_KI}Ki"}}, False),
    ({"capacity": {"cpu": "4", "memory": f"{4 * GIB_KI}Ki"}}, False),
    ({"capacity": {"cpu": "3500m", "memory": f"{8 * GIB_KI}Ki"}}, True),  # not a count: not judged
])
def test_reports_vm_size(status: dict, ok: bool) -> None:
    found, why = reports_vm_size(status, 4, 8192)
    assert found is ok
    assert ("not yet seen by the kubelet" in why) is not ok


def _worker(**kube: Optional[object]):  # type: ignore[no-untyped-def]
    f = ClusterFactory(control=1, workers=1)
    view = f.view()
    node = view.node(f.w(1))
    return view, dataclasses.replace(node, **kube)


@pytest.mark.parametrize("kube, running, kinds", [
    ({"kubelet_cpu": None, "kubelet_memory": None}, True, []),
    ({"kubelet_cpu": 1, "kubelet_memory": None}, True, [KUBELET_CAPACITY]),
    ({"kubelet_cpu": 1, "kubelet_memory": None}, False, []),  # a stopped VM restarts with its kubelet anyway
])
def test_an_unaware_node_is_out_of_date(kube: dict, running: bool, kinds: list) -> None:
    view, node = _worker(**kube)
    node = node if running else dataclasses.replace(node, vm_state="Stopped")
    assert node.cpu > 1
    assert [r.kind for r in outdated_reasons(node, TypeSettings(), view)] == kinds
    # the cycle's verify judges the VM alone
    assert outdated_reasons(node, TypeSettings(), view, kubelet=False) == []


def test_the_reason_in_the_operators_words() -> None:
    view, node = _worker(kubelet_cpu=1)
    [reason] = outdated_reasons(node, TypeSettings(), view)
    words = f"kubelet reports 1 CPU, its VM has {node.cpu} (a live scale not yet seen by the kubelet)"
    assert reason.message == words
    assert reason.to_dict() == {"kind": KUBELET_CAPACITY, "from": None, "to": None, "message": words}


def test_the_view_reads_the_kubelets_capacity() -> None:
    f = ClusterFactory(control=1, workers=1)
    raw = list(f.raw())
    for k in raw[-1]:
        k["status"]["capacity"] = {"cpu": "2", "memory": "4194304Ki"}
    view = build_view(*raw)
    node = view.node(f.w(1))
    assert (node.kubelet_cpu, node.kubelet_memory) == (2, "4194304Ki")


@pytest.mark.parametrize("mode, changes, phased, unaware, path", [
    (AUTO, frozenset(), False, "kubelet reports 2 CPU, its VM has 4", LIVE),
    (AUTO, frozenset(), True, "kubelet reports 2 CPU, its VM has 4", RESTART),
    (NEVER, frozenset(), False, "kubelet reports 2 CPU, its VM has 4", RESTART),
    (AUTO, frozenset(), False, None, RESTART),
    (AUTO, frozenset({"root_disk"}), False, "kubelet reports 2 CPU, its VM has 4", RESTART),
])
def test_the_path_of_an_unaware_node(mode: str, changes: frozenset, phased: bool, unaware: Optional[str],
                                     path: str) -> None:
    decided = scale_path(mode, changes, None, phased=phased, unaware=unaware)
    assert decided.path == path
    if path == LIVE:
        assert decided.reason.endswith(str(unaware)) and "already has its offering" in decided.reason
