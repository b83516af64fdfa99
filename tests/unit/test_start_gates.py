# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The gates that keep the starts of a batch's nodes of one strict group apart (``_rollout.start_gates``)."""

from __future__ import annotations

import threading

from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.start_gates import StartGates


def test_two_nodes_of_one_group_never_hold_the_gate_together() -> None:
    gates = StartGates({"a": ["g"], "b": ["g"]})
    inside: list[str] = []
    overlapped = threading.Event()
    first_in = threading.Event()
    release = threading.Event()

    def start(node: str) -> None:
        with gates.held(node):
            if inside:
                overlapped.set()
            inside.append(node)
            first_in.set()
            release.wait(5)
            inside.remove(node)

    one = threading.Thread(target=start, args=("a",))
    one.start()
    first_in.wait(5)
    two = threading.Thread(target=start, args=("b",))
    two.start()
    two.join(0.2)
    assert two.is_alive() and inside == ["a"]  # b waits while a starts
    release.set()
    one.join(5)
    two.join(5)
    assert not overlapped.is_set() and inside == []


def test_gates_are_taken_in_one_order_and_a_node_without_groups_takes_none() -> None:
    gates = StartGates({"a": ["g2", "g1"], "b": ["g1", "g2"], "c": []})
    assert gates.groups_of("a") == gates.groups_of("b") == ("g1", "g2")
    with gates.held("c") as held:
        assert held == ()
    with gates.held("unknown") as held:
        assert held == ()


def test_the_wait_for_the_planners_turn_is_noted_per_node() -> None:
    gates = StartGates({"a": ["g"], "b": ["g"]})
    held = threading.Event()
    release = threading.Event()

    def first() -> None:
        with gates.held("a"):
            held.set()
            release.wait(5)

    one = threading.Thread(target=first)
    one.start()
    held.wait(5)
    threading.Timer(0.2, release.set).start()
    with gates.held("b"):
        pass  # b's start could go only once a's had ended
    one.join(5)
    assert gates.waited["a"] < gates.waited["b"] and gates.waited["b"] >= 0.1
