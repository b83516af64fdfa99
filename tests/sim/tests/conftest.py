"""Fixtures that run the whole cks-sim for a test, in-process or as a subprocess.

In-process (fast, the sim's objects at hand):

    def test_x(sim_factory):
        handle = sim_factory()                       # tests/sim/examples/small.yml, time_scale 0.01
        handle = sim_factory(spec={...}, etcd=True)  # a spec dict (normalised for you), real etcd
        cs = handle.cs()                             # a real `cs.CloudStack` client for it
        handle.admin("POST", "/faults", {"kind": "start_capacity", "count": 1})
        handle.wait_for(lambda: handle.cluster()["state"] == "Alert")

``sim`` is ``sim_factory()`` with the defaults. ``sim_process`` starts ``tests/sim/cks-sim serve``
as a subprocess and yields a ``SimProcess`` (``.env``, ``.proc``, ``.stop()``). Every sim gets its
own tmp state dir and free ports and is stopped after the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any, Callable, Iterator, Optional

import pytest

from cks_sim.server import SimServer
from cks_sim.spec import normalize
from simkit import SMALL_SPEC, TEST_TIME_SCALE, SimHandle, SimProcess, small_spec, start_process


@pytest.fixture
def sim_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., SimHandle]]:
    started: list[SimServer] = []

    def start(spec: Optional[dict[str, Any]] = None, etcd: bool = False, **overrides: Any) -> SimHandle:
        raw = spec if spec is not None else small_spec(**overrides)
        if spec is not None and overrides:
            raw = dict(spec, **overrides)
        state_dir = str(tmp_path_factory.mktemp("cks-sim"))
        server = SimServer(normalize(raw), state_dir, with_etcd=etcd)
        started.append(server)
        server.start()
        return SimHandle(server)

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def sim(sim_factory: Callable[..., SimHandle]) -> SimHandle:
    return sim_factory()


@pytest.fixture
def sim_process(tmp_path: Any) -> Iterator[Callable[..., SimProcess]]:
    """A factory: ``sim_process(spec_path=SMALL_SPEC, *extra_args)`` -> SimProcess (stopped after)."""
    running: list[SimProcess] = []

    def start(spec_path: str = SMALL_SPEC, *args: str) -> SimProcess:
        state_dir = str(tmp_path / f"state-{len(running)}")
        os.makedirs(state_dir)
        handle = start_process(spec_path, state_dir, "--time-scale", str(TEST_TIME_SCALE), *args)
        running.append(handle)
        return handle

    yield start
    for handle in running:
        if handle.proc.poll() is None:
            handle.proc.send_signal(signal.SIGTERM)
            try:
                handle.proc.wait(30)
            except subprocess.TimeoutExpired:
                handle.proc.kill()
