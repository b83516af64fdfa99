# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Quorum arithmetic, which node types can lose a node, and the worker clamp."""

from __future__ import annotations

import pytest
from factories import ClusterFactory
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.order import worker_batch_size
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.quorum import can_lose_a_node, quorum_after, quorum_size, tolerated_failures


@pytest.mark.parametrize("voters, quorum, tolerated", [
    (0, 1, 0), (1, 1, 0), (2, 2, 0), (3, 2, 1), (4, 3, 1), (5, 3, 2), (6, 4, 2), (7, 4, 3),
])
def test_quorum_table(voters: int, quorum: int, tolerated: int) -> None:
    assert quorum_size(voters) == quorum
    assert tolerated_failures(voters) == tolerated


@given(st.integers(min_value=1, max_value=99))
def test_tolerated_failures_leave_a_quorum(voters: int) -> None:
    f = tolerated_failures(voters)
    assert voters - f >= quorum_size(voters)
    assert voters - (f + 1) < quorum_size(voters)


@pytest.mark.parametrize("voters, healthy, down, ok", [
    (3, 3, 1, True), (3, 2, 1, False), (3, 3, 2, False), (5, 5, 2, True), (5, 4, 2, False),
    (2, 2, 1, False), (1, 1, 1, False), (1, 1, 0, True), (4, 4, 1, True), (4, 3, 1, False),
    (3, 1, 2, False),  # more going down than healthy: nothing negative
])
def test_quorum_after(voters: int, healthy: int, down: int, ok: bool) -> None:
    assert quorum_after(voters, healthy, down)[0] is ok


def test_quorum_after_message_shows_the_arithmetic() -> None:
    assert quorum_after(3, 3, 1, ["m2"]) == (True, "2 of 3 voting members healthy without m2; 2 needed")
    assert quorum_after(3, 2, 1, ["m1"]) == (False, "1 of 3 voting members healthy without m1; 2 needed")
    assert quorum_after(3, 3, 0) == (True, "3 of 3 voting members healthy; 2 needed")


@pytest.mark.parametrize("control, workers, etcd, node_type, ok, words", [
    # stacked etcd: the control nodes are the voters
    (1, 2, 0, "control", False, "single control node with stacked etcd"),
    (2, 2, 0, "control", False, "2 voting members need 2 for quorum"),
    (3, 2, 0, "control", True, "quorum 2 of 3 tolerates 1 down"),
    (4, 2, 0, "control", True, "quorum 3 of 4 tolerates 1 down"),
    (5, 2, 0, "control", True, "tolerates 2 down"),
    # external etcd: the control plane only needs another node serving the API
    (1, 2, 3, "control", False, "no other control node would serve the Kubernetes API"),
    (2, 2, 3, "control", True, "another one serves the Kubernetes API"),
    (1, 2, 1, "etcd", False, "single etcd node"),
    (1, 2, 2, "etcd", False, "2 etcd nodes: 2 voting members need 2 for quorum"),
    (1, 2, 3, "etcd", True, "3 etcd nodes: quorum 2 of 3 tolerates 1 down"),
    (1, 2, 4, "etcd", True, "tolerates 1 down"),
    (1, 2, 0, "etcd", True, "no etcd nodes"),
    # workers: the seed's clamp never goes below 1, so even a single worker rolls
    (1, 1, 0, "worker", True, "1 worker: restarted alone"),
    (1, 2, 0, "worker", True, "up to 1 restarted"),
    (1, 5, 0, "worker", True, "up to 4 restarted"),
    (1, 0, 0, "worker", True, "0 workers"),
])
def test_can_lose_a_node(control: int, workers: int, etcd: int, node_type: str, ok: bool, words: str) -> None:
    view = ClusterFactory(control=control, workers=workers, etcd=etcd).view()
    result, why = can_lose_a_node(node_type, view)
    assert result is ok
    assert words in why


def test_can_lose_a_node_is_about_the_shape_not_the_health() -> None:
    f = ClusterFactory(control=3, workers=2)
    f.stop(f.c(1))
    assert can_lose_a_node("control", f.view())[0]  # health is the preflight's job


@pytest.mark.parametrize("max_unavailable, workers, size", [
    (1, 1, 1), (1, 4, 1), (2, 4, 2), (3, 4, 3), (4, 4, 3), (10, 4, 3), (5, 2, 1), (2, 1, 1),
    (1, 0, 1), (100, 101, 100),
])
def test_worker_batch_size_clamp(max_unavailable: int, workers: int, size: int) -> None:
    assert worker_batch_size(max_unavailable, workers) == size


@given(st.integers(min_value=1, max_value=500), st.integers(min_value=0, max_value=500))
def test_clamp_properties(max_unavailable: int, workers: int) -> None:
    size = worker_batch_size(max_unavailable, workers)
    assert size >= 1
    assert size <= max_unavailable
    if workers >= 2:
        assert size <= workers - 1  # always leaves a worker running
