"""The fixtures of the integration tests (the classes they give are in in_process_sims.py, the
subprocess sim and module runs in helpers.py). Add fixtures here; nothing else belongs here.

``cycle_sim(spec="small.yml", etcd=True)`` -> ``ClusterSim``: an in-process cks-sim (its HTTP APIs on
loopback, real etcd members) with the collection's REAL clients for it, for node cycle and release
tests. ``rollout_sim(spec="small.yml", etcd=True, time_scale=0.01, **top_level)`` -> ``RolloutSim``:
the same, running the whole playbooks/rollout.yml through ansible-playbook; ``module_rollout_sim`` is
it shared by the tests of one module. Every sim is stopped after its test (or module).
"""

from __future__ import annotations

import logging
from typing import Callable, Iterator

import pytest

from helpers import ClusterSim
from in_process_sims import RolloutSim, cycle_sims, rollout_sims

# The sim's werkzeug servers log every request: keep test output readable.
logging.getLogger("werkzeug").setLevel(logging.ERROR)


@pytest.fixture
def cycle_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., ClusterSim]]:
    """A factory: ``cycle_sim(spec="small.yml", etcd=True)`` -> ClusterSim."""
    yield from cycle_sims(tmp_path_factory)


@pytest.fixture
def rollout_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., RolloutSim]]:
    """A factory: ``rollout_sim(spec="small.yml", etcd=True, time_scale=0.01, **top_level)`` -> RolloutSim."""
    yield from rollout_sims(tmp_path_factory)


@pytest.fixture(scope="module")
def module_rollout_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., RolloutSim]]:
    """``rollout_sim`` shared by the tests of one module (for tests that must leave the sim unchanged)."""
    yield from rollout_sims(tmp_path_factory)
