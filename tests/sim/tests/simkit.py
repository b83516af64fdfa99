"""Shared helpers of the cks-sim tests: small.yml as a spec dict to modify, and the paths. A plain
module (not conftest.py) so test files import it by a name that no other test folder's conftest
shadows when pytest collects several folders in one run. The handle a test talks to a sim through
is ``cks_sim.harness.SimHandle``; starting and stopping is ``cks_sim.harness``'s too."""

from __future__ import annotations

import copy
from typing import Any

from cks_sim.harness import CKS_SIM, SIM_DIR, SMALL_SPEC

__all__ = ["CKS_SIM", "SIM_DIR", "SMALL_SPEC", "TEST_TIME_SCALE", "small_spec"]

TEST_TIME_SCALE = 0.01


def small_spec(**overrides: Any) -> dict[str, Any]:
    """small.yml as a raw dict (before normalisation), with top-level overrides."""
    import yaml

    with open(SMALL_SPEC, encoding="utf-8") as handle:
        raw = yaml.safe_load(handle)
    raw["time_scale"] = TEST_TIME_SCALE
    raw.update(copy.deepcopy(overrides))
    return raw
