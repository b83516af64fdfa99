"""The phases of a batch (cycle.py, ``phase=cordon|restart|uncordon``): the uncordon phase's check,
the deadline carried from the batch's start, the steps each phase shows in check mode, the
phase's outcome and which options it accepts. Pure: no cloud, no cluster."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ROLLOUT_ANNOTATION
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node import back_for_uncordon, seconds_left
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.node_cycle import ACTIONS, NodeCycle
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.options import CycleOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.results import NodeResult, StepRecord
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.steps import PHASES, PHASE_OUTCOMES, PHASE_STEPS, STEPS, steps_for
from ansible_collections.cloudstack.cks.plugins.module_utils._services.cycle import cycle_options
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput


def k8s_node(boot: Optional[str] = "boot-2", ready: str = "True", unschedulable: bool = True,
             recorded: Optional[str] = "boot-1") -> dict[str, Any]:
    annotations = {ROLLOUT_ANNOTATION: recorded} if recorded is not None else {}
    return {
        "metadata": {"name": "c-node-1", "annotations": annotations},
        "spec": {"unschedulable": unschedulable},
        "status": {"nodeInfo": {"bootID": boot} if boot else {},
                   "conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady"}]},
    }


RECHECK_CASES = [
    ("back: a boot ID other than the annotation's, Ready", "Running", k8s_node(), True, "new boot ID boot-2"),
    ("stale Ready: the boot ID the annotation recorded before the stop", "Running", k8s_node(boot="boot-1"), False,
     "from before the restart"),
    ("went NotReady since verify", "Running", k8s_node(ready="False"), False, "Ready=False"),
    ("VM stopped since verify", "Stopped", k8s_node(), False, "VM is Stopped"),
    ("neither annotated nor cordoned: the earlier phases did not run for it", "Running",
     k8s_node(unschedulable=False, recorded=None), False, "did not run for it"),
    ("cordoned by someone else: Ready is all there is to check", "Running", k8s_node(recorded=None), True,
     "no boot ID recorded"),
    ("cordoned by someone else and not Ready", "Running", k8s_node(recorded=None, ready="Unknown"), False,
     "Ready=Unknown"),
    ("external etcd VM (no Kubernetes node): Running is enough", "Running", None, True, "VM Running"),
    ("external etcd VM stopped", "Stopped", None, False, "VM is Stopped"),
]


@pytest.mark.parametrize("description,vm_state,node,expected,why", RECHECK_CASES, ids=[c[0] for c in RECHECK_CASES])
def test_back_for_uncordon(description: str, vm_state: str, node: Optional[dict[str, Any]], expected: bool,
                           why: str) -> None:
    ok, message = back_for_uncordon(vm_state, node)
    assert ok is expected
    assert why in message


def test_the_deadline_counts_from_the_batch_start() -> None:
    assert seconds_left(1800, None, now=5000.0) == 1800
    assert seconds_left(1800, 1000.0, now=1600.0) == 1200
    assert seconds_left(1800, 1000.0, now=3000.0) == 0  # passed: never negative
    # A start in the future (another clock) gives no more than the whole timeout.
    assert seconds_left(1800, 2000.0, now=1000.0) == 1800


def test_the_phases_split_the_steps_of_a_whole_batch() -> None:
    cordon, restart, uncordon = (PHASE_STEPS[p] for p in ("cordon", "restart", "uncordon"))
    assert not (cordon & restart or restart & uncordon or cordon & uncordon)
    assert {"annotate", "cordon"} <= cordon and {"drain", "stop", "start", "verify"} <= restart
    assert {"recheck", "uncordon"} <= uncordon
    # Only the last phase (or a whole batch) makes a node done.
    assert [PHASE_OUTCOMES[p] for p in PHASES] == ["done", "cordoned", "restarted", "done"]


def test_recheck_is_no_change_of_the_node() -> None:
    result = NodeResult(name="n1", node_type="worker",
                        steps=[StepRecord("recheck", 1.0, 1.1, "ok"), StepRecord("uncordon", 1.1, 1.2, "skipped")])
    assert not result.changed
    result.steps.append(StepRecord("unmark", 1.2, 1.3, "ok"))
    assert result.changed


def test_phase_options() -> None:
    assert cycle_options({}, False).phase == "all" and cycle_options({}, False).batch_started is None
    # The batch's start comes from the rollout object (its cordon run), not from an option.
    options = cycle_options({"phase": "restart"}, False, batch_started=1767000000.5)
    assert (options.phase, options.batch_started) == ("restart", 1767000000.5)
    assert CycleOptions().phase == "all"
    with pytest.raises(InvalidInput) as caught:
        cycle_options({"phase": "drain"}, False)
    assert caught.value.parameter == "phase" and "cordon, restart, uncordon" in caught.value.msg


def test_every_step_of_the_table_has_its_action_and_skip_rule() -> None:
    """The step table (steps.STEPS) and the cycle's actions (node_cycle.ACTIONS) name the same steps,
    each with a callable action and skip rule: no step is dispatched by a name built at run time."""
    assert list(ACTIONS) == [step.name for step in STEPS]
    assert all(callable(a.run) and callable(a.skip) for a in ACTIONS.values())
    assert ACTIONS["stop"].run is NodeCycle._run_stop


@pytest.mark.parametrize("exclude", [True, False])
@pytest.mark.parametrize("phase", PHASES)
def test_load_balancer_steps_run_only_when_the_batch_excludes_nodes_from_load_balancers(phase: str, exclude: bool) -> None:
    names = [step.name for step, _again in steps_for(phase, True, CycleOptions(exclude_from_load_balancers=exclude))]
    expected = {"all": {"exclude_from_lb", "lb_wait"}, "cordon": {"exclude_from_lb"},
                "restart": {"exclude_from_lb", "lb_wait"}, "uncordon": set()}[phase]
    assert set(names) & {"exclude_from_lb", "lb_wait"} == (expected if exclude else set())


def test_an_external_etcd_node_runs_only_the_vm_steps() -> None:
    names = [step.name for step, _again in steps_for("all", False, CycleOptions(exclude_from_load_balancers=True))]
    assert names == ["stop", "change_offering", "resize_root_disk", "update_affinity_groups", "start", "verify"]
