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

import copy
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Iterator, Optional

import pytest
import requests
from cs import CloudStack

from cks_sim.server import SimServer
from cks_sim.spec import load_spec, normalize

SIM_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL_SPEC = os.path.join(SIM_DIR, "examples", "small.yml")
CKS_SIM = os.path.join(SIM_DIR, "cks-sim")
TEST_TIME_SCALE = 0.01


def small_spec(**overrides: Any) -> dict[str, Any]:
    """small.yml as a raw dict (before normalisation), with top-level overrides."""
    import yaml

    with open(SMALL_SPEC, encoding="utf-8") as handle:
        raw = yaml.safe_load(handle)
    raw["time_scale"] = TEST_TIME_SCALE
    raw.update(copy.deepcopy(overrides))
    return raw


class SimHandle:
    """A running in-process sim and the ways a test talks to it."""

    def __init__(self, server: SimServer) -> None:
        self.server = server
        self.sim = server.sim
        self.env: dict[str, Any] = server.env

    def cs(self, **kwargs: Any) -> CloudStack:
        options = {"endpoint": self.env["cloudstack_endpoint"], "key": self.env["cloudstack_key"],
                   "secret": self.env["cloudstack_secret"], "poll_interval": 0.02, "job_timeout": 30}
        options.update(kwargs)
        return CloudStack(**options)

    def admin(self, method: str, path: str, body: Optional[dict[str, Any]] = None) -> Any:
        response = requests.request(method, self.env["admin_url"] + path, json=body, timeout=10)
        response.raise_for_status()
        return response.json()

    def cluster(self, cluster_id: Optional[str] = None) -> dict[str, Any]:
        answer = self.cs().listKubernetesClusters(id=cluster_id or self.env["cluster_id"])
        return answer["kubernetescluster"][0]

    def vms(self, **filters: Any) -> list[dict[str, Any]]:
        return self.cs().listVirtualMachines(fetch_list=True, **filters)

    def vm(self, name: str) -> dict[str, Any]:
        return self.cs().listVirtualMachines(name=name)["virtualmachine"][0]

    def node_vms(self, node_type: str) -> list[dict[str, Any]]:
        marker = {"control": "-control-", "worker": "-node-", "etcd": "-etcd-"}[node_type]
        return [vm for vm in self.vms() if marker in vm["name"]]

    def offering(self, name: str) -> dict[str, Any]:
        return self.cs().listServiceOfferings(name=name)["serviceoffering"][0]

    def group(self, name: str) -> dict[str, Any]:
        return self.cs().listAffinityGroups(name=name)["affinitygroup"][0]

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.02) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met within {timeout}s")
            time.sleep(interval)


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


class SimProcess:
    def __init__(self, proc: subprocess.Popen, state_dir: str, env: dict[str, Any]) -> None:
        self.proc = proc
        self.state_dir = state_dir
        self.env = env

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)


def start_process(spec_path: str, state_dir: str, *args: str, timeout: float = 60) -> SimProcess:
    env_path = os.path.join(state_dir, "env.json")
    log = open(os.path.join(state_dir, "cks-sim.log"), "wb")
    proc = subprocess.Popen([sys.executable, CKS_SIM, "serve", "--spec", spec_path, "--state-dir", state_dir, *args],
                            stdout=log, stderr=subprocess.STDOUT)
    log.close()
    deadline = time.monotonic() + timeout
    while not os.path.exists(env_path):
        if proc.poll() is not None:
            with open(os.path.join(state_dir, "cks-sim.log"), encoding="utf-8", errors="replace") as handle:
                raise AssertionError(f"cks-sim exited with {proc.returncode}:\n{handle.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("cks-sim did not write env.json in time")
        time.sleep(0.05)
    with open(env_path, encoding="utf-8") as handle:
        return SimProcess(proc, state_dir, json.load(handle))


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


__all__ = ["SimHandle", "SimProcess", "small_spec", "start_process", "load_spec", "SMALL_SPEC"]
