"""The real tier: the collection's rollouts against a real Kubernetes control plane (kube-apiserver,
kube-controller-manager and kube-scheduler of the release tests/kube-plane pins, built by
``make kube-plane``), cks-sim's cloud beside it and its actors playing the kubelets
(``cks-sim serve --kube real``, tests/sim/cks_sim/real_kube).

Every sim these tests start, in this process or as a ``cks-sim serve`` child, runs on the real
backend: CKS_SIM_KUBE is set here, which both ``InProcessSim.start`` and ``cks-sim serve`` read.
The tests are the integration suite's own where they hold on a real API server unchanged (imported
from tests/integration), and the few written here for what only a real cluster shows. Without the
kube-plane binary every test fails saying to run ``make kube-plane``: the tier never skips.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Callable, Iterator

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
os.environ["CKS_SIM_KUBE"] = "real"

from helpers import ClusterSim  # noqa: E402
from in_process_sims import RolloutSim, cycle_sims, rollout_sims  # noqa: E402

logging.getLogger("werkzeug").setLevel(logging.ERROR)


@pytest.fixture
def cycle_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., ClusterSim]]:
    """``cycle_sim(spec="small.yml", etcd=True)`` -> ClusterSim on a real control plane."""
    yield from cycle_sims(tmp_path_factory)


@pytest.fixture
def rollout_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., RolloutSim]]:
    """``rollout_sim(spec="small.yml", etcd=True, time_scale=0.01, **top_level)`` -> RolloutSim on a real
    control plane."""
    yield from rollout_sims(tmp_path_factory)
