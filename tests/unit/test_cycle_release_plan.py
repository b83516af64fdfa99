"""release's pure judgement of annotated nodes (``release_plan``) and the last error it records."""

from __future__ import annotations

from typing import Any, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ROLLOUT_ANNOTATION, build_view
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import NO_BOOT_ID, STOP_ANNOTATION
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.health import release_plan
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.release_steps import compose_last_error


def k8s(name: str, boot: str, ready: bool = True, unschedulable: bool = False,
        annotations: Optional[dict[str, str]] = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"unschedulable": unschedulable},
            "status": {"nodeInfo": {"bootID": boot},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "Unknown"}]}}


def view(*nodes: tuple[str, str, dict[str, Any]]) -> Any:
    cluster = {"id": "c1", "name": "demo", "state": "Running",
               "virtualmachines": [{"id": f"vm-{n}", "name": n} for n, _state, _k8s in nodes]}
    vms = [{"id": f"vm-{n}", "name": n, "state": state} for n, state, _k8s in nodes]
    return build_view(cluster, vms, [], [], [], [], [k for _name, _state, k in nodes])


def test_back_with_a_new_boot_id_is_uncordoned() -> None:
    v = view(("demo-node-1", "Running", k8s("demo-node-1", "b2", unschedulable=True,
                                            annotations={ROLLOUT_ANNOTATION: "b1", STOP_ANNOTATION: "t"})))
    uncordon, leave = release_plan(v)
    assert [n for n, _why in uncordon] == ["demo-node-1"] and leave == []


def test_never_went_down_is_uncordoned() -> None:
    v = view(("demo-node-1", "Running", k8s("demo-node-1", "b1", unschedulable=True,
                                            annotations={ROLLOUT_ANNOTATION: "b1"})))
    uncordon, leave = release_plan(v)
    assert uncordon == [("demo-node-1", "never went down (no stop was sent): back into service")]


def test_never_went_down_without_a_boot_id_is_uncordoned() -> None:
    # Cordoned while it reported no boot ID, the drain failed, no stop sent: it never went down.
    v = view(("demo-node-1", "Running", k8s("demo-node-1", "", unschedulable=True,
                                            annotations={ROLLOUT_ANNOTATION: NO_BOOT_ID})))
    uncordon, leave = release_plan(v)
    assert uncordon == [("demo-node-1", "never went down (no stop was sent): back into service")] and leave == []


def test_stopped_by_the_rollout_without_a_boot_id_stays_cordoned() -> None:
    # No boot ID before the stop and none after: nothing proves it restarted.
    v = view(("demo-node-1", "Running", k8s("demo-node-1", "", unschedulable=True,
                                            annotations={ROLLOUT_ANNOTATION: NO_BOOT_ID, STOP_ANNOTATION: "t"})))
    uncordon, leave = release_plan(v)
    assert uncordon == [] and leave == [("demo-node-1", "no boot ID reported")]


def test_a_recorded_boot_id_now_missing_is_not_taken_for_never_went_down() -> None:
    v = view(("demo-node-1", "Running", k8s("demo-node-1", "", unschedulable=True,
                                            annotations={ROLLOUT_ANNOTATION: "b1"})))
    uncordon, leave = release_plan(v)
    assert uncordon == [] and leave == [("demo-node-1", "no boot ID reported")]


def test_stale_ready_after_a_stop_stays_cordoned() -> None:
    v = view(("demo-node-1", "Running", k8s("demo-node-1", "b1", unschedulable=True,
                                            annotations={ROLLOUT_ANNOTATION: "b1", STOP_ANNOTATION: "t"})))
    uncordon, leave = release_plan(v)
    assert uncordon == []
    assert leave[0][0] == "demo-node-1" and "stale Ready" in leave[0][1]


def test_stopped_vm_stays_cordoned() -> None:
    v = view(("demo-node-1", "Stopped", k8s("demo-node-1", "b1", unschedulable=True,
                                            annotations={ROLLOUT_ANNOTATION: "b1", STOP_ANNOTATION: "t"})))
    uncordon, leave = release_plan(v)
    assert uncordon == [] and leave == [("demo-node-1", "VM is Stopped")]


def test_stopped_vm_without_stop_mark_is_not_taken_for_up() -> None:
    v = view(("demo-node-1", "Stopped", k8s("demo-node-1", "b1", unschedulable=True,
                                            annotations={ROLLOUT_ANNOTATION: "b1"})))
    uncordon, _leave = release_plan(v)
    assert uncordon == []


def test_cordoned_by_someone_else_is_never_considered() -> None:
    v = view(("demo-node-1", "Running", k8s("demo-node-1", "b1", unschedulable=True)))
    assert release_plan(v) == ([], [])


def test_last_error_composition() -> None:
    assert compose_last_error(None, [], []) is None
    assert compose_last_error(None, ["control nodes not restarted: x"], []) == "control nodes not restarted: x"
    text = compose_last_error("node a: start failed: 533", None, [("a", "VM is Stopped")])
    assert text == "node a: start failed: 533; left cordoned: a (VM is Stopped)"
