"""The rolling play's argument check (the role's entry point main) runs once for each batch, on the
values the batch reads (its first node's), and refuses a wrong one before the batch touches a node,
as Ansible's own check on each node of the batch did. A value the plan's checks cannot see: a group
variable of rollout_nodes, the group the plan adds the nodes to."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import rollout_helpers as rh

pytestmark = pytest.mark.timeout(900)


def test_a_wrong_variable_of_the_batch_nodes_is_refused_once_before_any_node_is_touched(tmp_path: Path) -> None:
    inventory = str(tmp_path / "inventory.yml")
    with open(inventory, "w", encoding="utf-8") as fh:
        fh.write("all:\n  children:\n    rollout_nodes:\n      vars:\n        rollout_validate_count: not-a-number\n")
    with rh.running_rollout_sim("rollout_pools.yml", max_unavailable={"worker": 2}) as sim:
        workers = sorted(rh.names(sim, "worker"))
        since = time.time()
        run = rh.run_playbook(sim, "rollout.yml", rh.rollout_vars(
            sim, rollout_node_offerings={"worker": "cks-large"}, rollout_max_unavailable=2), args=("-i", inventory))
        assert run.rc != 0, run.explain()
        assert "Validation of arguments failed" in run.stdout, run.explain()
        assert "rollout_validate_count" in run.stdout, run.explain()
        # Once for the batch of two: one refusal, not one per node.
        assert run.stdout.count("fatal: [") == 1, run.explain()
        items = sim.timeline(since)
        assert not [i for i in items if i.get("node") in workers and i.get("event") in ("annotated", "cordoned")], items
