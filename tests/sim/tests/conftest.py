"""Fixtures that run the whole cks-sim for a test, in-process or as a subprocess.

In-process (fast, the sim's objects at hand):

    def test_x(sim_factory):
        handle = sim_factory()                       # tests/sim/examples/small.yml, time_scale 0.01
        handle = sim_factory(spec={...}, etcd=True)  # a spec dict (normalised for you), real etcd
        cs = handle.cs()                             # a real `cs.CloudStack` client for it
        handle.admin("POST", "/faults", {"kind": "start_capacity", "count": 1})
        handle.wait_for(lambda: handle.cluster()["state"] == "Alert")

``sim`` is ``sim_factory()`` with the defaults. ``sim_process`` starts ``tests/sim/cks-sim serve``
as a subprocess and yields a ``cks_sim.harness.SimProcess`` (``.env``, ``.proc``, ``.stop()``).
Every sim gets its own tmp state dir and free ports and is stopped after the test.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Iterator, Optional

import pytest

from cks_sim.harness import InProcessSim, SimProcess
from simkit import SMALL_SPEC, TEST_TIME_SCALE, SimHandle, small_spec


@pytest.fixture
def sim_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., SimHandle]]:
    with contextlib.ExitStack() as started:

        def start(spec: Optional[dict[str, Any]] = None, etcd: bool = False, **overrides: Any) -> SimHandle:
            raw = spec if spec is not None else small_spec(**overrides)
            if spec is not None and overrides:
                raw = dict(spec, **overrides)
            state_dir = str(tmp_path_factory.mktemp("cks-sim"))
            return SimHandle(started.enter_context(InProcessSim.start(raw, state_dir, etcd=etcd)).server)

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
