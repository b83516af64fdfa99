"""A node's hook steps as the rollout role records them (``_decisions/hook_steps.py`` and the
``rollout_hook_step`` filter): begun as failed, ended ok or failed with the task that failed, and a
hooked batch's merge reading them like the module's own steps."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.cloudstack.cks.plugins.filter.rollout_hook_step import rollout_hook_step
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.hook_steps import (
    UNFINISHED,
    HookStepError,
    hook_begun,
    hook_ended,
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
