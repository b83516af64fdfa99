# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Preflight from the view, release decisions, capacity recount and the outcome."""

from __future__ import annotations

from typing import Callable, Optional

import pytest
from factories import ClusterFactory

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.health import (
    batch_is_safe,
    capacity,
    health_problems,
    outcome,
    preflight_problems,
    release_plan,
)

Setup = Optional[Callable[[ClusterFactory], None]]


def _f(control: int = 3, workers: int = 4, etcd: int = 0) -> ClusterFactory:
    return ClusterFactory(control=control, workers=workers, etcd=etcd)


@pytest.mark.parametrize("shape, setup, batch, max_unavailable, expected", [
    # all healthy
    ((3, 4, 0), None, lambda f: [f.c(1)], None, []),
    ((3, 4, 0), None, lambda f: [f.w(1), f.w(2)], 2, []),
    # every other VM Running
    ((3, 4, 0), lambda f: f.stop(f.w(3)), lambda f: [f.w(1)], None, ["{w3}: VM is Stopped"]),
    # ... but the batch's own stopped node is fine
    ((3, 4, 0), lambda f: f.stop(f.w(1)), lambda f: [f.w(1)], None, []),
    # every other Kubernetes node Ready
    ((3, 4, 0), lambda f: f.set(f.c(2), ready=False), lambda f: [f.c(1)], None,
     ["{c2}: Kubernetes node not Ready"]),
    ((3, 4, 0), lambda f: f.set(f.w(2), k8s=False), lambda f: [f.c(1)], None,
     ["{w2}: no Kubernetes node of this name"]),
    # a stopped etcd VM counts as an other VM
    ((2, 2, 3), lambda f: f.stop(f.e(2)), lambda f: [f.e(1)], None, ["{e2}: VM is Stopped"]),
    # control and etcd one at a time
    ((3, 4, 0), None, lambda f: [f.c(1), f.c(2)], None, ["control nodes go one at a time, not {c1}, {c2} together"]),
    ((2, 2, 3), None, lambda f: [f.e(1), f.c(1)], None, ["batch {c1}, {e1} mixes node types control, etcd"]),
    # workers within the clamp
    ((3, 4, 0), None, lambda f: [f.w(1), f.w(2), f.w(3)], 2, ["3 workers at once ({w1}, {w2}, {w3}); at most 2"]),
    ((3, 2, 0), None, lambda f: [f.w(1), f.w(2)], 5, ["2 workers at once ({w1}, {w2}); at most 1"]),
    # a type that cannot lose a node
    ((1, 2, 0), None, lambda f: [f.c(1)], None, ["{c1}: a single control node with stacked etcd"]),
    ((2, 2, 0), None, lambda f: [f.c(1)], None, ["{c1}: 2 control nodes with stacked etcd"]),
    ((2, 2, 2), None, lambda f: [f.e(1)], None, ["{e1}: 2 etcd nodes"]),
    # with external etcd, another control node must serve the API
    ((2, 2, 3), None, lambda f: [f.c(1)], None, []),
    ((2, 2, 3), lambda f: f.set(f.c(2), ready=False), lambda f: [f.c(1)], None,
     ["{c2}: Kubernetes node not Ready", "no other control node would serve the Kubernetes API while {c1} is down"]),
    ((1, 2, 3), None, lambda f: [f.c(1)], None,
     ["{c1}: a single control node (etcd is external)",
      "no other control node would serve the Kubernetes API while {c1} is down"]),
    # unknown names
    ((1, 1, 0), None, lambda f: ["nope"], None, ["nope: not a node of cluster demo"]),
])
def test_preflight_problems(shape: tuple[int, int, int], setup: Setup, batch: Callable[[ClusterFactory], list[str]],
                            max_unavailable: Optional[int], expected: list[str]) -> None:
    f = _f(*shape)
    if setup:
        setup(f)
    names = {f"c{i}": f.c(i) for i in range(1, shape[0] + 1)}
    names.update({f"w{i}": f.w(i) for i in range(1, shape[1] + 1)})
    names.update({f"e{i}": f.e(i) for i in range(1, shape[2] + 1)})
    problems = preflight_problems(f.view(), batch(f), max_unavailable)
    wanted = [e.format(**names) for e in expected]
    assert len(problems) == len(wanted), problems
    for problem, start in zip(problems, wanted):
        assert problem.startswith(start), (problem, start)


def test_a_not_ready_kubernetes_node_without_a_vm_blocks_the_batch() -> None:
    f = _f()
    f.extra_k8s_nodes.append({"metadata": {"name": "stray"}, "status": {"conditions": []}})
    assert preflight_problems(f.view(), [f.w(1)]) == [
        "stray: Kubernetes node not Ready (no VM of the cluster has this name)"]


def test_batch_is_safe() -> None:
    f = _f()
    assert batch_is_safe(f.view(), [f.w(1)]) == (True, [])
    f.stop(f.w(2))
    ok, problems = batch_is_safe(f.view(), [f.w(1)])
    assert not ok and problems == [f"{f.w(2)}: VM is Stopped"]


# -- release ---------------------------------------------------------------------------------

def test_release_uncordons_only_annotated_nodes_that_are_back() -> None:
    f = _f(control=3, workers=6)
    f.cordon_for_rollout(f.w(1), f.w(2), f.w(3), f.w(4), f.w(5))
    f.reboot(f.w(1))  # back: Ready with a new boot ID
    f.stop(f.w(2))  # still stopped
    f.set(f.w(3), ready=True)  # Ready, but the boot ID is the one from before: stale
    f.reboot(f.w(4))
    f.set(f.w(4), ready=False)  # new boot, not Ready yet
    f.set(f.w(5), k8s=False)  # node object gone
    f.set(f.w(6), unschedulable=True)  # cordoned by someone else
    uncordon, leave = release_plan(f.view())
    assert uncordon == [(f.w(1), "Ready with a new boot ID"),
                        # no stop was ever sent: its Ready with the old boot ID is not stale
                        (f.w(3), "never went down (no stop was sent): back into service")]
    assert leave == [
        (f.w(2), "VM is Stopped"),
        (f.w(4), "Kubernetes node not Ready (Ready=Unknown)"),
    ]
    # w5 has no Kubernetes node (so no annotation to read) and w6 is someone else's: untouched
    assert all(name not in (f.w(5), f.w(6)) for name, _why in leave)


def test_release_is_idempotent_on_its_own_result() -> None:
    f = _f(control=3, workers=2)
    f.cordon_for_rollout(f.w(1))
    f.reboot(f.w(1))
    assert release_plan(f.view())[0] == [(f.w(1), "Ready with a new boot ID")]
    # what release does: uncordon and remove the annotation
    f.set(f.w(1), annotation=None, unschedulable=False)
    assert release_plan(f.view()) == ([], [])


def test_release_uncordons_a_back_node_someone_uncordoned_already() -> None:
    f = _f(control=3, workers=2)
    f.cordon_for_rollout(f.w(1))
    f.reboot(f.w(1))
    f.set(f.w(1), unschedulable=False)
    assert release_plan(f.view())[0] == [(f.w(1), "Ready with a new boot ID")]  # the annotation still has to go


# -- capacity and outcome --------------------------------------------------------------------

def test_capacity_is_recounted_from_the_vms_offerings() -> None:
    f = _f(control=1, workers=2, etcd=1)
    f.set(f.w(2), offering="xlarge")
    f.stop(f.w(1))  # a stopped VM still belongs to the cluster
    assert capacity(f.view()) == (2 + 2 + 8 + 2, 4096 + 4096 + 16384 + 4096)


def test_capacity_uses_the_vms_own_numbers() -> None:
    f = _f(control=1, workers=1)
    f.set(f.w(1), cpu=6)  # a custom offering's VM reports its own cpunumber
    assert capacity(f.view())[0] == 2 + 6


@pytest.mark.parametrize("setup, state, problem", [
    (None, "Running", None),
    (lambda f: f.stop(f.w(1)), "Alert", "{w1}: VM is Stopped"),
    (lambda f: f.set(f.c(1), ready=False), "Alert", "{c1}: Kubernetes node not Ready (Ready=Unknown)"),
    (lambda f: f.set(f.w(1), k8s=False), "Alert", "{w1}: no Kubernetes node of this name"),
    (lambda f: f.stop(f.e(1)), "Alert", "{e1}: VM is Stopped"),
    (lambda f: f.set(f.w(1), unschedulable=True), "Running", None),  # cordoned is not unhealthy
])
def test_outcome(setup: Setup, state: str, problem: Optional[str]) -> None:
    f = _f(control=1, workers=2, etcd=1)
    if setup:
        setup(f)
    view = f.view()
    assert outcome(view) == state
    names = {"w1": f.w(1), "c1": f.c(1), "e1": f.e(1)}
    assert health_problems(view) == ([problem.format(**names)] if problem else [])
