"""Fixtures that run the whole cks-sim for a test, in-process or as a subprocess.

In-process (fast, the sim's objects at hand):

    def test_x(sim_factory):
        handle = sim_factory()                       # tests/sim/examples/small.yml, time_scale 0.01
        handle = sim_factory(spec={...}, etcd=True)  # a spec dict (normalised for you), real etcd
        cs = handle.cs()                             # a real `cs.CloudStack` client for it
        handle.admin("POST", "/faults", {"kind": "start_capacity", "count": 1})
        wait_until(lambda: handle.cks_cluster()["state"] == "Alert")  # cks_sim.harness.wait_until

``handle`` is a ``cks_sim.harness.SimHandle`` (its ``server`` and ``sim`` at hand). ``sim`` is
``sim_factory()`` with the defaults. ``sim_process`` starts ``tests/sim/cks-sim serve`` as a
subprocess and yields a ``cks_sim.harness.SimProcess`` (``.env``, ``.proc``, ``.stop()``). Every
sim gets its own tmp state dir and free ports and is stopped after the test.

The Kubernetes half alone (no CloudStack side, a world of 3 control nodes and 4 workers):
``kube_env`` is a ``kubekit.KubeEnv`` (``.core``, ``.coord``, ``.policy``, ``.apps``: the real client's
APIs for it; ``.world``, ``.raw(...)``); ``make_kube_env(spec_changes, nodes)`` builds more.
"""

from __future__ import annotations

import contextlib
import copy
import os
from typing import Any, Callable, Iterator, Optional

import pytest

from cks_sim.harness import InProcessSim, SimHandle, SimProcess
from kubekit import BASE_SPEC, CONTROL, WORKERS, KubeEnv, node_specs
from simkit import SMALL_SPEC, TEST_TIME_SCALE, small_spec


@pytest.fixture
def sim_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., SimHandle]]:
    with contextlib.ExitStack() as started:

        def start(spec: Optional[dict[str, Any]] = None, etcd: bool = False, **overrides: Any) -> SimHandle:
            raw = spec if spec is not None else small_spec(**overrides)
            if spec is not None and overrides:
                raw = dict(spec, **overrides)
            state_dir = str(tmp_path_factory.mktemp("cks-sim"))
            server = started.enter_context(InProcessSim.start(raw, state_dir, etcd=etcd)).server
            return SimHandle(server.env, server)

        yield start


@pytest.fixture
def sim(sim_factory: Callable[..., SimHandle]) -> SimHandle:
    return sim_factory()


@pytest.fixture
def sim_process(tmp_path: Any) -> Iterator[Callable[..., SimProcess]]:
    """A factory: ``sim_process(spec_path=SMALL_SPEC, *extra_args)`` -> SimProcess (stopped after)."""
    with contextlib.ExitStack() as running:
        count = 0

        def start(spec_path: str = SMALL_SPEC, *args: str) -> SimProcess:
            nonlocal count
            state_dir = str(tmp_path / f"state-{count}")
            count += 1
            os.makedirs(state_dir)
            return running.enter_context(SimProcess.start(spec_path, state_dir, "--time-scale", str(TEST_TIME_SCALE),
                                                          *args, ready_timeout=60))

        yield start


# -- the Kubernetes half alone (kubekit.KubeEnv: its own Sim, KubeWorld and HTTPS server) ----------------

@pytest.fixture
def kube_env(tmp_path: Any):
    env = KubeEnv(tmp_path, copy.deepcopy(BASE_SPEC), node_specs(CONTROL, WORKERS))
    yield env
    env.close()


@pytest.fixture
def make_kube_env(tmp_path: Any):
    """Build an env with a modified spec or node list: ``make_kube_env(spec_changes, nodes)``."""
    made: list[KubeEnv] = []

    def build(changes: Optional[dict[str, Any]] = None, nodes: Optional[list[dict[str, Any]]] = None) -> KubeEnv:
        spec = copy.deepcopy(BASE_SPEC)
        spec.update(copy.deepcopy(changes or {}))
        env = KubeEnv(tmp_path / f"env{len(made)}", spec, nodes or node_specs(CONTROL, WORKERS))
        made.append(env)
        return env

    yield build
    for env in made:
        env.close()
