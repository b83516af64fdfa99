"""A node's hook steps as the rollout role records them (``_decisions/hook_steps.py`` and the
``rollout_hook_step`` filter): begun as failed, ended ok or failed with the task that failed, and a
hooked batch's merge reading them like the module's own steps."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.cloudstack.cks.plugins.filter.rollout_batch import rollout_batch
from ansible_collections.cloudstack.cks.plugins.filter.rollout_batch_hook_steps import rollout_batch_hook_steps
from ansible_collections.cloudstack.cks.plugins.filter.rollout_hook_due import rollout_hook_due
from ansible_collections.cloudstack.cks.plugins.filter.rollout_hook_failed import rollout_hook_failed
from ansible_collections.cloudstack.cks.plugins.filter.rollout_hook_node import rollout_hook_node
from ansible_collections.cloudstack.cks.plugins.filter.rollout_hook_step import rollout_hook_step
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.hook_steps import (
    UNFINISHED,
    HookStepError,
    batch_hook_steps,
    hook_begun,
    hook_due,
    hook_ended,
    hook_failed,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.phases import merge_phases

PATH = "/srv/hooks/lb-out.yml"


def test_a_begun_hook_is_failed_until_it_ends() -> None:
    steps = hook_begun([], "w1", "before_drain", PATH, now=100.0)
    assert steps == [{"node": "w1", "name": "hook_before_drain", "started": 100.0, "ended": None,
                      "outcome": "failed", "detail": f"{PATH}: {UNFINISHED}"}]


def test_an_ended_hook_is_ok_with_its_file_as_detail() -> None:
    steps = hook_ended(hook_begun([], "w1", "after_verify", PATH, now=100.0), "ok", PATH, now=104.5)
    assert steps == [{"node": "w1", "name": "hook_after_verify", "started": 100.0, "ended": 104.5,
                      "outcome": "ok", "detail": PATH}]


def test_a_failed_hook_names_its_task_and_error() -> None:
    begun = hook_begun([], "w1", "before_drain", PATH, now=1.0)
    ended = hook_ended(begun, "failed", PATH, now=2.0, failed_task="Take the node out of HAProxy",
                       error="connection refused")
    assert ended[-1]["outcome"] == "failed"
    assert ended[-1]["detail"] == f'{PATH}: task "Take the node out of HAProxy": connection refused'
    assert hook_ended(begun, "failed", PATH, now=2.0)[-1]["detail"] == f'{PATH}: task "?": failed'


def test_only_the_last_step_ends_and_the_earlier_ones_are_kept() -> None:
    first = hook_ended(hook_begun([], "w1", "before_drain", PATH, now=1.0), "ok", PATH, now=2.0)
    both = hook_ended(hook_begun(first, "w1", "after_verify", "/srv/hooks/lb-in.yml", now=10.0), "ok",
                      "/srv/hooks/lb-in.yml", now=11.0)
    assert [(s["name"], s["ended"], s["detail"]) for s in both] == [
        ("hook_before_drain", 2.0, PATH), ("hook_after_verify", 11.0, "/srv/hooks/lb-in.yml")]
    assert first[0]["ended"] == 2.0  # the input is not changed in place


@pytest.mark.parametrize("steps, outcome, why", [
    ([], "ok", "no hook step was begun"),
    ([{"name": "hook_before_drain", "started": 1.0, "ended": 2.0, "outcome": "ok", "detail": PATH}], "ok",
     "no hook step was begun"),
    ([{"name": "hook_before_drain", "started": 1.0, "ended": None, "outcome": "failed", "detail": ""}], "done",
     "outcome must be one of ok, failed"),
])
def test_an_end_without_a_begun_step_or_with_another_outcome_is_refused(steps: list, outcome: str, why: str) -> None:
    with pytest.raises(HookStepError, match=why):
        hook_ended(steps, outcome, PATH, now=3.0)


def test_the_filter_reads_the_clock_and_turns_a_wrong_call_into_a_filter_error() -> None:
    begun = rollout_hook_step([], PATH, node="w2", hook="before_drain")
    ended = rollout_hook_step(begun, PATH, outcome="ok")
    assert begun[0]["started"] <= ended[0]["ended"]
    with pytest.raises(AnsibleFilterError, match="rollout_hook_step: a hook step begins with node and hook"):
        rollout_hook_step([], PATH, node="w2")
    with pytest.raises(AnsibleFilterError, match="rollout_hook_step: no hook step was begun"):
        rollout_hook_step([], PATH, outcome="failed")


def test_a_hooked_batch_merges_the_recorded_hooks_between_the_phases() -> None:
    hooks = hook_ended(hook_begun([], "w1", "before_drain", PATH, now=5.0), "failed", PATH, now=6.0,
                       failed_task="drain the LB", error="timeout")
    cordon = {"batch": ["w1"], "phase": "cordon", "started": 1.0, "ended": 2.0, "changed": True, "failed": False,
              "uncordoned": [], "validation": None,
              "nodes": [{"name": "w1", "node_type": "worker", "outcome": "cordoned", "changes": {}, "error": None,
                         "cordoned_by_others": False, "started": 1.0, "ended": 2.0,
                         "steps": [{"name": "cordon", "started": 1.0, "ended": 2.0, "outcome": "ok", "detail": ""}]}]}
    merged = merge_phases([cordon], hooks)
    node = merged["nodes"][0]
    assert [s["name"] for s in node["steps"]] == ["cordon", "hook_before_drain"]
    assert "node" not in node["steps"][1]
    assert merged["failed_nodes"] == ["w1"]
    assert "hook_before_drain failed" in merged["msg"] and 'task "drain the LB": timeout' in merged["msg"]


# -- what the role asks by name: the batch, the hook due, the hook's node, a failed hook ---------------

HOOKS = {"before_drain": "/srv/hooks/lb-out.yml", "after_verify": "/srv/hooks/lb-in.yml"}
RESTART_RUN = [{"name": "w1", "outcome": "restarted"}, {"name": "w2", "outcome": "failed"}]


@pytest.mark.parametrize("phase, hooks, node, stopped, due", [
    ("cordon", HOOKS, "w1", False, "before_drain"),
    ("cordon", HOOKS, "w1", True, ""),  # a failed cordon run or hook stops the batch
    ("cordon", dict(HOOKS, before_drain=""), "w1", False, ""),
    ("restart", HOOKS, "w1", False, "after_verify"),
    ("restart", HOOKS, "w1", True, "after_verify"),  # w2 failed: w1 is back all the same
    ("restart", HOOKS, "w2", True, ""),  # not restarted
    ("restart", HOOKS, "w3", False, ""),  # not in the run
    ("restart", dict(HOOKS, after_verify=""), "w1", False, ""),
    ("uncordon", HOOKS, "w1", False, ""),
])
def test_the_hook_due_after_a_phase(phase: str, hooks: dict, node: str, stopped: bool, due: str) -> None:
    assert hook_due(phase, hooks, node, RESTART_RUN, stopped) == due
    state = {"hooks": hooks}
    assert rollout_hook_due(state, phase, node, cycle={"nodes": RESTART_RUN}, stopped=stopped) == due


def test_the_restart_hook_is_not_due_when_the_phase_did_not_run() -> None:
    assert rollout_hook_due({"hooks": HOOKS}, "restart", "w1") == ""


def test_a_hook_is_told_its_nodes_record_in_the_plan() -> None:
    plan = {"nodes": [{"name": "w1", "node_type": "worker", "vm_name": "vm-w1", "vm_id": "id-1", "ip_address": "10.0.0.1"},
                      {"name": "c1", "node_type": "control"}]}
    told = rollout_hook_node(plan, "w1", "before_drain", batch="2", batch_nodes=["w1", "w2"], batch_type="worker",
                             cluster="prod", run_id="r-1")
    assert told == {"name": "w1", "node_type": "worker", "vm_name": "vm-w1", "vm_id": "id-1", "ip_address": "10.0.0.1",
                    "hook": "before_drain", "batch": 2, "batch_nodes": ["w1", "w2"], "cluster": "prod", "run_id": "r-1"}
    unlisted = rollout_hook_node(plan, "w9", "after_verify", batch=1, batch_nodes=["w9"], batch_type="worker")
    assert (unlisted["node_type"], unlisted["vm_name"], unlisted["vm_id"], unlisted["ip_address"]) == (
        "worker", None, None, None)


def test_a_batchs_hook_steps_are_gathered_node_by_node_and_a_failed_one_stops_it() -> None:
    w1 = hook_ended(hook_begun([], "w1", "before_drain", PATH, now=1.0), "ok", PATH, now=2.0)
    w2 = hook_begun([], "w2", "before_drain", PATH, now=1.5)  # did not finish
    hostvars = {"w1": {"rollout_hook_steps": w1}, "w2": {"rollout_hook_steps": w2}, "w3": {}}
    steps = rollout_batch_hook_steps(hostvars, ["w1", "w2", "w3"])
    assert [(s["node"], s["outcome"]) for s in steps] == [("w1", "ok"), ("w2", "failed")]
    assert rollout_hook_failed(steps) is True
    assert rollout_hook_failed(rollout_batch_hook_steps(hostvars, ["w1", "w3"])) is False
    assert batch_hook_steps([]) == [] and hook_failed([]) is False


def test_the_batch_of_the_play_is_found_in_the_plan() -> None:
    state = {"plan": {"plan": [{"node_type": "control", "nodes": ["c1"]},
                               {"node_type": "worker", "nodes": ["w1", "w2"]}]},
             "hooks": {"before_drain": "", "after_verify": ""}}
    assert rollout_batch(state, ["w1", "w2"]) == {"number": 2, "node_type": "worker", "hooked": False}
    assert rollout_batch(dict(state, hooks=HOOKS), ["c1"]) == {"number": 1, "node_type": "control", "hooked": True}
    with pytest.raises(AnsibleFilterError, match=r"the nodes \['w2'\] are no batch of the plan"):
        rollout_batch(state, ["w2"])
    with pytest.raises(AnsibleFilterError, match="rollout_batch: rollout="):
        rollout_batch({"version": 99}, ["c1"])
