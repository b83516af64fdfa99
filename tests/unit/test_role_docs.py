"""The rollout role's variables are documented everywhere an operator looks: each default in
defaults/main.yml is an option of the role's argument specs with the same default, and a row of the
variable table of the rollout guide (docs/docsite/rst/rollout.rst); each option of the argument
specs is in that table too."""

from __future__ import annotations

import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLE = os.path.join(ROOT, "roles", "rollout")


def _load(*parts: str) -> dict:
    with open(os.path.join(*parts), encoding="utf-8") as fh:
        return yaml.safe_load(fh)


DEFAULTS = _load(ROLE, "defaults", "main.yml")
SPECS = _load(ROLE, "meta", "argument_specs.yml")["argument_specs"]
GUIDE_PATH = os.path.join(ROOT, "docs", "docsite", "rst", "rollout.rst")
with open(GUIDE_PATH, encoding="utf-8") as _fh:
    GUIDE = _fh.read()
# The variables named in the first column of the guide's variable table (an RST grid table: a
# cell's text may go on over several lines, each starting with "| ").
TABLE = {name for row in re.findall(r"^\|([^|]*)\|", GUIDE, re.M) for name in re.findall(r"``(rollout_\w+)``", row)}
OPTIONS = {name: option for spec in SPECS.values() for name, option in spec["options"].items()}


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_each_default_is_an_option_with_that_default_and_a_readme_row(name: str) -> None:
    assert name in OPTIONS, f"{name} is not in meta/argument_specs.yml"
    for entry, spec in SPECS.items():
        option = spec["options"].get(name)
        if option is not None and not option.get("required"):
            assert option.get("default") == DEFAULTS[name], (entry, name)
    assert name in TABLE, f"{name} has no row in the variable table of {GUIDE_PATH}"


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_each_option_is_in_the_readme_table(name: str) -> None:
    assert name in TABLE, f"{name} has no row in the variable table of {GUIDE_PATH}"


@pytest.mark.parametrize("name", ["rollout_canary", "rollout_pause_seconds", "rollout_select"])
def test_the_batch_shaping_options_are_validated_by_the_plan(name: str) -> None:
    assert name in SPECS["plan"]["options"]


def _cycle_task(tasks: list, name_start: str) -> dict:
    """The cks_node_cycle task whose name starts with ``name_start``, looked for in blocks too."""
    for task in tasks:
        found = _cycle_task(task["block"], name_start) if "block" in task else None
        if found is not None:
            return found
        if str(task.get("name", "")).startswith(name_start) and "cloudstack.cks.cks_node_cycle" in task:
            return task["cloudstack.cks.cks_node_cycle"]
    return None


def test_a_batch_in_phases_runs_with_the_options_of_a_batch_in_one_run() -> None:
    # hooked.yml's phases repeat main.yml's batch task: an option added to one must reach the other.
    whole = _cycle_task(_load(ROLE, "tasks", "main.yml"), "Batch ")
    phase = _cycle_task(_load(ROLE, "tasks", "phase.yml"), "Batch ")
    assert whole is not None and phase is not None
    assert {k: v for k, v in phase.items() if k not in ("phase", "batch_started")} == whole
