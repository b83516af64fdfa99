# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The type and default of each option of a batch (and of the plan), written once.

``cks_node_cycle``'s argument spec is made from this table; the batch's option classes
(``CycleOptions``, ``ValidationOptions``) and the service that reads the module's parameters take
their defaults from it; and a unit test holds the module's documentation, the rollout role's
defaults (``rollout_<name>``) and its argument specs to it. A default changed here is changed
everywhere, or a test says where it was not.
"""

from __future__ import annotations

from typing import Any

#: Option name: its AnsibleModule spec (``type``, and ``default`` when it has one).
BATCH_OPTIONS: dict[str, dict[str, Any]] = {
    "batch_timeout": {"type": "float", "default": 1800.0},
    "job_timeout": {"type": "float", "default": 900.0},
    "delete_emptydir_data": {"type": "bool", "default": True},
    "force": {"type": "bool", "default": False},
    "grace_period": {"type": "int"},
    "eviction_retry_interval": {"type": "float", "default": 5.0},
    "poll_interval": {"type": "float", "default": 0.5},
    "validate_count": {"type": "int", "default": 1},
    "validate_interval": {"type": "float", "default": 10.0},
    "validate_timeout": {"type": "float", "default": 300.0},
    "exclude_from_load_balancers": {"type": "bool", "default": False},
    # The exclusion label goes on before the drain, so the service controller has the whole drain
    # to take the node out of the load balancers; this covers a drain that was over at once.
    "exclude_delay": {"type": "float", "default": 10.0},
    "put_back_on_refusal": {"type": "bool", "default": True},
    "live_scale": {"type": "str", "choices": ["never", "auto"], "default": "never"},
    "live_scale_image": {"type": "str", "default": "busybox:1.36.1"},
    "live_scale_timeout": {"type": "float", "default": 120.0},
    "max_unavailable": {"type": "int"},
}


#: Which nodes a rollout restarts: the ones with work left (out of date, down, left cordoned), those
#: and the ones ``select`` names, or every node (a restart with no change, as kured does it).
RESTART_OUTDATED, RESTART_SELECTED, RESTART_ALL = "outdated", "selected", "all"

#: The plan's options (cks_node_outdated, and cks_node_settings with plan=true), as BATCH_OPTIONS.
PLAN_OPTIONS: dict[str, dict[str, Any]] = {
    "restart": {"type": "str", "default": RESTART_OUTDATED,
                "choices": [RESTART_OUTDATED, RESTART_SELECTED, RESTART_ALL]},
}


def plan_argument_specs() -> dict[str, dict[str, Any]]:
    """The AnsibleModule specs of the plan's options (copies)."""
    return {name: dict(spec, choices=list(spec["choices"])) for name, spec in PLAN_OPTIONS.items()}


def default_of(name: str) -> Any:
    """The default of the batch option ``name``."""
    return BATCH_OPTIONS[name]["default"]


def argument_specs(*names: str) -> dict[str, dict[str, Any]]:
    """The AnsibleModule specs of these batch options (copies: a caller may add to them)."""
    return {name: dict(BATCH_OPTIONS[name]) for name in names}
