# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Planning's own cost per node, without the simulator, Ansible or the network: the view built from
generated API answers (tests/unit/factories.py), the plan, Ansible's scrub of the result
(remove_values with three secrets) and its JSON, timed in CPU seconds, so a loaded machine
changes the numbers little. The target: the cost per node from 1,000 to 3,000 nodes within 1.2x of
the cost from 100 to 1,000.

    .venv/bin/python bench/planning_inprocess.py
"""

from __future__ import annotations

import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "tests", "unit"), os.path.join(ROOT, ".venv", "collections")]

from ansible.module_utils.common.parameters import remove_values  # noqa: E402
from factories import ClusterFactory, loader_for  # noqa: E402

from ansible_collections.cloudstack.cks.plugins.module_utils._common.memory import no_cycle_collection  # noqa: E402
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.request import SettingsRequest  # noqa: E402
from ansible_collections.cloudstack.cks.plugins.module_utils._services.outdated import outdated_report  # noqa: E402

SECRETS = ["s" * 40, "k" * 1700, "t" * 900]  # an API secret, a client key, a token


def cost(nodes: int) -> float:
    """CPU seconds to plan a cluster of 3 control nodes and ``nodes - 3`` out-of-date workers."""
    loader, _cloud, _kube = loader_for(ClusterFactory(control=3, workers=nodes - 3))
    started = time.process_time()
    # As cks_node_outdated does it (services/outdated.node_outdated).
    with no_cycle_collection():
        view = loader.load("demo")
        result = outdated_report(view, None, None, max_unavailable=10,
                                 changes=SettingsRequest.from_params({"node_root_disk_sizes": {"worker": 99}}))
    json.dumps(remove_values(result, SECRETS))
    return time.process_time() - started


def main() -> None:
    sizes = (100, 1000, 3000)
    best = {n: min(cost(n) for _ in range(3)) for n in sizes}
    first = (best[1000] - best[100]) / 900
    second = (best[3000] - best[1000]) / 2000
    for n in sizes:
        print(f"{n} nodes: {best[n] * 1000:.0f} ms CPU ({best[n] * 1000 / n:.3f} ms per node)")
    print(f"marginal: {first * 1000:.3f} then {second * 1000:.3f} ms per node = {second / first:.2f}x (target <= 1.2x)")


if __name__ == "__main__":
    main()
