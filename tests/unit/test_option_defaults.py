"""Each batch option's type and default is written once (module_utils/_common/option_defaults.py):
cks_node_cycle's argument spec is made from it, and its documentation, the option classes and the
rollout role (defaults/main.yml, meta/argument_specs.yml: rollout_<name>) are held to it here."""

from __future__ import annotations

import os
from typing import Any

import pytest
import yaml

from ansible_collections.cloudstack.cks.plugins.module_utils._common.option_defaults import BATCH_OPTIONS, PLAN_OPTIONS
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.drain import DrainOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.options import CycleOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.validation import ValidationOptions
from ansible_collections.cloudstack.cks.plugins.modules import cks_node_cycle, cks_node_outdated, cks_node_settings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLE = os.path.join(ROOT, "roles", "rollout")
DOC = yaml.safe_load(cks_node_cycle.DOCUMENTATION)["options"]
SPEC = cks_node_cycle.argument_spec()
with open(os.path.join(ROLE, "defaults", "main.yml"), encoding="utf-8") as _fh:
    ROLE_DEFAULTS = yaml.safe_load(_fh)
with open(os.path.join(ROLE, "meta", "argument_specs.yml"), encoding="utf-8") as _fh:
    ROLE_SPECS = yaml.safe_load(_fh)["argument_specs"]

#: Role variables whose default differs from the module's on purpose: -1 is the role's "not given"
#: (each pod's own grace period), and a rollout takes one worker at a time unless told otherwise.
ROLE_OWN = {"grace_period": -1, "max_unavailable": 1}
#: Batch options the role does not offer (the module's default is what a rollout uses).
NOT_IN_ROLE = {"job_timeout"}


@pytest.mark.parametrize("name", sorted(BATCH_OPTIONS))
def test_the_module_takes_each_option_from_the_table_and_documents_it_so(name: str) -> None:
    table = BATCH_OPTIONS[name]
    assert SPEC[name] == table
    assert DOC[name]["type"] == table["type"]
    assert DOC[name].get("default") == table.get("default"), name


@pytest.mark.parametrize("name", sorted(set(BATCH_OPTIONS) - NOT_IN_ROLE))
def test_the_role_defaults_to_the_tables_default(name: str) -> None:
    variable = f"rollout_{name}"
    expected: Any = ROLE_OWN.get(name, BATCH_OPTIONS[name].get("default"))
    assert ROLE_DEFAULTS[variable] == expected, variable
    for entry, spec in ROLE_SPECS.items():
        option = spec["options"].get(variable)
        if option is not None:
            assert option.get("default") == expected, (entry, variable)


@pytest.mark.parametrize("module", [cks_node_outdated, cks_node_settings], ids=lambda m: m.__name__.rsplit(".", 1)[1])
@pytest.mark.parametrize("name", sorted(PLAN_OPTIONS))
def test_the_planning_modules_take_each_plan_option_from_the_table(module: Any, name: str) -> None:
    table = PLAN_OPTIONS[name]
    assert module.argument_spec()[name] == table
    doc = yaml.safe_load(module.DOCUMENTATION)["options"][name]
    assert (doc["type"], doc.get("default"), doc.get("choices")) == (table["type"], table["default"], table["choices"])


@pytest.mark.parametrize("name", sorted(PLAN_OPTIONS))
def test_the_role_offers_each_plan_option_with_the_tables_default_and_choices(name: str) -> None:
    variable = f"rollout_{name}"
    assert ROLE_DEFAULTS[variable] == PLAN_OPTIONS[name]["default"]
    offered = [spec["options"][variable] for spec in ROLE_SPECS.values() if variable in spec["options"]]
    assert offered, f"no entry point of the role takes {variable}"
    for option in offered:
        assert (option["type"], option.get("default"), option.get("choices")) == (
            PLAN_OPTIONS[name]["type"], PLAN_OPTIONS[name]["default"], PLAN_OPTIONS[name]["choices"])


def test_the_option_classes_default_to_the_table() -> None:
    cycle, drain, validation = CycleOptions(), DrainOptions(), ValidationOptions()
    assert (cycle.batch_timeout, cycle.job_timeout, cycle.poll_interval, cycle.exclude_delay) == tuple(
        BATCH_OPTIONS[n]["default"] for n in ("batch_timeout", "job_timeout", "poll_interval", "exclude_delay"))
    assert (cycle.exclude_from_load_balancers, cycle.put_back_on_refusal) == (
        BATCH_OPTIONS["exclude_from_load_balancers"]["default"], BATCH_OPTIONS["put_back_on_refusal"]["default"])
    # DrainOptions alone keeps kubectl drain's own default for emptyDir pods (off); the module's is CKS's (on).
    assert (drain.force, drain.eviction_retry_interval, drain.poll_interval) == tuple(
        BATCH_OPTIONS[n]["default"] for n in ("force", "eviction_retry_interval", "poll_interval"))
    assert (validation.count, validation.interval, validation.timeout) == tuple(
        BATCH_OPTIONS[n]["default"] for n in ("validate_count", "validate_interval", "validate_timeout"))


def test_no_entry_point_of_the_role_writes_an_option_of_another_again() -> None:
    """An option two entry points share is written once (a YAML anchor) and read the same by both."""
    with open(os.path.join(ROLE, "meta", "argument_specs.yml"), encoding="utf-8") as fh:
        text = fh.read()
    names = [line.split(":")[0].strip() for line in text.splitlines()
             if line.startswith("      rollout_") and not line.rstrip().endswith(("*" + line.split(":")[0].strip()))]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
