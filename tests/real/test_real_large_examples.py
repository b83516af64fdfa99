"""The example specs of many nodes or many clusters served on the real backend, as an operator starts
them (``cks-sim serve --kube real --spec tests/sim/examples/<spec>``): ``large.yml``'s 1,003 nodes and
``page-size-100.yml``'s 253 all Ready (their kubelets' leases renewed within the node lifecycle
controller's grace), ``fleet.yml``'s and ``inventory.yml``'s twelve clusters each on a control plane
of its own serving the pinned release with budgets the disruption controller computed (and
``inventory.yml``'s stopped cluster without an API). The checks are test_real_examples.py's; a file of
their own so that ``make real`` (one worker per file) runs them beside it."""

from __future__ import annotations

import pytest
from helpers import start_sim
from in_process_sims import RolloutSim
from real_cluster import LARGE, served_and_checked

pytestmark = pytest.mark.timeout(900)


@pytest.mark.parametrize("spec", LARGE)
def test_a_large_example_serves_real_clusters_with_every_node_ready(
        spec: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    with start_sim(spec, in_process=False, kube_backend="real", state_dir=str(tmp_path_factory.mktemp("served")),
                   handle=RolloutSim, ready_timeout=600) as sim:
        served_and_checked(sim, spec)
