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


def _tasks(tasks: list) -> list:
    """Every task of a task file, those in blocks (and their rescue and always) too."""
    found = []
    for task in tasks:
        found.append(task)
        for section in ("block", "rescue", "always"):
            found += _tasks(task.get(section) or [])
    return found


def _role_tasks() -> dict:
    folder = os.path.join(ROLE, "tasks")
    return {name: _tasks(_load(folder, name)) for name in sorted(os.listdir(folder)) if name.endswith(".yml")}


def test_a_batch_runs_cks_node_cycle_from_one_task_in_one_run_and_in_phases() -> None:
    # One argument block for a batch: an option added to it reaches a batch in one run and each
    # phase of a batch with hooks alike, so the two cannot drift apart.
    batch_tasks = {name: [t for t in tasks if t.get("cloudstack.cks.cks_node_cycle", {}).get("nodes")
                          == "{{ rollout_batch_nodes }}"]
                   for name, tasks in _role_tasks().items()}
    assert {name: len(found) for name, found in batch_tasks.items() if found} == {"cycle.yml": 1}
    batch = batch_tasks["cycle.yml"][0]
    assert batch["register"] == "rollout_cycle" and batch["failed_when"] is False
    assert batch["cloudstack.cks.cks_node_cycle"]["phase"] == "{{ rollout_phase }}"
    # main.yml imports it (no include task run per batch: fewer module runs), phase.yml includes it in a loop.
    includes = {name: [t for t in tasks if "cycle.yml" in (t.get("ansible.builtin.include_tasks"),
                                                           t.get("ansible.builtin.import_tasks"))]
                for name, tasks in _role_tasks().items()}
    whole, = includes["main.yml"]
    phase, = includes["phase.yml"]
    assert whole["ansible.builtin.import_tasks"] == "cycle.yml" and phase["ansible.builtin.include_tasks"] == "cycle.yml"
    assert whole["vars"] == {"rollout_phase": "all"} and whole["when"] == "not rollout_hooked"
    # A phase's rollout_phase comes from hooked.yml's loop over the three phases.
    assert "vars" not in phase and phase["when"] == "not hostvars['localhost'].rollout_phase_stop"


REMOVED_STATE = ("rollout_results", "rollout_batches_run", "rollout_lock_version", "rollout_job_seconds",
                 "rollout_failed_cycle", "rollout_phase_runs", "rollout_batch_error", "rollout_cancelled",
                 "merge_phases", "batch_progress")


def test_the_rollout_state_is_one_fact_the_module_runs_carry() -> None:
    """The role keeps the rollout's state in rollout_state and builds none of it in Jinja: every
    cks_node_cycle run of a batch or the release takes it as its one option ``rollout``."""
    texts = {}
    for name in os.listdir(os.path.join(ROLE, "tasks")):
        with open(os.path.join(ROLE, "tasks", name), encoding="utf-8") as fh:
            texts[name] = fh.read()
    found = {name: [word for word in REMOVED_STATE if word in text] for name, text in texts.items()}
    assert not {name: words for name, words in found.items() if words}
    runs = [task["cloudstack.cks.cks_node_cycle"] for tasks in _role_tasks().values() for task in tasks
            if "cloudstack.cks.cks_node_cycle" in task]
    state = "{{ hostvars['localhost'].rollout_state }}"
    # The planning failure's release, before the object exists, is the one that names its last error.
    own = [run for run in runs if run["rollout"] != state]
    assert [sorted(run["rollout"]) for run in own] == [["last_error", "run_id"]]
    assert len(runs) - len(own) == 2  # the batch's run (cycle.yml) and the release (release.yml)
    removed = ("batch_started", "job_seconds", "lock_version", "report", "result", "skipped", "last_error")
    assert not any(key in run for run in runs for key in removed)
