"""The rollout's marks on nodes: the pending taint (written as a whole list, others' taints kept),
the load-balancer exclusion (never someone else's label), the one write that puts a node back,
what release takes off which node, the taint_pending service, and the client's read-modify-write."""

from __future__ import annotations

import copy
from typing import Any, Optional

import pytest
from fakes import FakeKube, FakeLock

from ansible_collections.cloudstack.cks.plugins.module_utils._clients import kube as kube_utils
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import KubernetesError, LockHeld
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.marks import (
    LB_EXCLUSION_ANNOTATION,
    LB_EXCLUSION_LABEL,
    PENDING_TAINT_KEY,
    Marks,
    exclusion_decision,
    exclusion_patch,
    has_pending_taint,
    marks_of,
    marks_of_view_node,
    pending_taint_patch,
    release_marks,
    return_patch,
    with_pending_taint,
    without_pending_taint,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ROLLOUT_ANNOTATION, STOP_ANNOTATION, build_view
from ansible_collections.cloudstack.cks.plugins.module_utils._services.session import ClusterSession
from ansible_collections.cloudstack.cks.plugins.module_utils._services.taint import taint_pending

PENDING = {"key": PENDING_TAINT_KEY, "effect": "PreferNoSchedule"}
CONTROL_PLANE = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
CORDON = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "2026-01-01T00:00:00Z"}
THEIRS = {"key": "example.com/gpu", "value": "a100", "effect": "NoSchedule"}


def k8s(name: str = "demo-node-1", taints: Optional[list[dict[str, Any]]] = None,
        labels: Optional[dict[str, str]] = None, annotations: Optional[dict[str, str]] = None,
        unschedulable: bool = False, ready: bool = True, boot: str = "b1", rv: str = "7") -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv, "labels": dict(labels or {}),
                         "annotations": dict(annotations or {})},
            "spec": {"unschedulable": unschedulable, "taints": copy.deepcopy(taints or [])},
            "status": {"nodeInfo": {"bootID": boot},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "Unknown"}]}}


# --- the pending taint ------------------------------------------------------------------------------

def test_adding_keeps_every_other_taint_exactly() -> None:
    taints = [CONTROL_PLANE, CORDON, THEIRS]
    assert with_pending_taint(taints) == [CONTROL_PLANE, CORDON, THEIRS, PENDING]
    assert with_pending_taint(taints + [PENDING]) == taints + [PENDING]  # once only
    assert with_pending_taint([]) == [PENDING]


def test_removing_keeps_every_other_taint_exactly() -> None:
    assert without_pending_taint([CONTROL_PLANE, PENDING, CORDON, THEIRS]) == [CONTROL_PLANE, CORDON, THEIRS]
    assert without_pending_taint([PENDING]) == []
    # Same key, another effect: not ours (someone else's NoSchedule with our key stays).
    other_effect = {"key": PENDING_TAINT_KEY, "effect": "NoSchedule"}
    assert without_pending_taint([other_effect, PENDING]) == [other_effect]
    assert not has_pending_taint(k8s(taints=[other_effect]))


def test_pending_taint_patch() -> None:
    assert pending_taint_patch(k8s(taints=[THEIRS])) == {"spec": {"taints": [THEIRS, PENDING]}}
    assert pending_taint_patch(k8s(taints=[THEIRS, PENDING])) is None
    assert pending_taint_patch({"metadata": {"name": "x"}}) == {"spec": {"taints": [PENDING]}}


# --- the load-balancer exclusion ----------------------------------------------------------------------

@pytest.mark.parametrize("labels,annotations,label,ours,why", [
    ({}, {}, True, True, "labelled"),
    ({LB_EXCLUSION_LABEL: ""}, {}, False, False, "by someone else"),
    ({LB_EXCLUSION_LABEL: "true"}, {LB_EXCLUSION_ANNOTATION: "t"}, False, True, "resumed"),
    ({}, {LB_EXCLUSION_ANNOTATION: "t"}, True, True, "resumed"),  # our label taken off meanwhile: again
], ids=["fresh", "someone else's label", "ours from a stopped run", "ours, label gone"])
def test_exclusion_decision(labels: dict[str, str], annotations: dict[str, str], label: bool, ours: bool,
                            why: str) -> None:
    decision = exclusion_decision(k8s(labels=labels, annotations=annotations))
    assert (decision.label, decision.ours) == (label, ours) and why in decision.why


def test_exclusion_patch_labels_and_marks_it_ours() -> None:
    patch = exclusion_patch(now=0)
    assert patch == {"metadata": {"labels": {LB_EXCLUSION_LABEL: "true"},
                                  "annotations": {LB_EXCLUSION_ANNOTATION: "1970-01-01T00:00:00Z"}}}


def test_marks_of() -> None:
    assert marks_of(k8s()) == Marks() and not Marks().any
    assert marks_of(k8s(taints=[PENDING])) == Marks(pending_taint=True)
    # Someone else's label is not a mark of ours; our annotation is.
    assert marks_of(k8s(labels={LB_EXCLUSION_LABEL: ""})) == Marks()
    assert marks_of(k8s(labels={LB_EXCLUSION_LABEL: "true"}, annotations={LB_EXCLUSION_ANNOTATION: "t"})) == \
        Marks(lb_exclusion=True)
    assert Marks(True, True).words() == "pending taint and load-balancer exclusion"


# --- putting a node back --------------------------------------------------------------------------------

def test_return_patch_uncordon_only_is_the_plain_uncordon() -> None:
    assert return_patch(Marks(), True) == {"spec": {"unschedulable": None},
                                           "metadata": {"annotations": {ROLLOUT_ANNOTATION: None,
                                                                        STOP_ANNOTATION: None}}}
    assert return_patch(Marks(), False) is None


def test_return_patch_with_every_mark() -> None:
    patch = return_patch(Marks(True, True), True, [CORDON, PENDING, THEIRS])
    assert patch == {
        "spec": {"unschedulable": None, "taints": [CORDON, THEIRS]},
        "metadata": {"labels": {LB_EXCLUSION_LABEL: None},
                     "annotations": {ROLLOUT_ANNOTATION: None, STOP_ANNOTATION: None,
                                     LB_EXCLUSION_ANNOTATION: None}},
    }


def test_return_patch_marks_only_leaves_the_cordon() -> None:
    patch = return_patch(Marks(lb_exclusion=True), False)
    assert patch == {"metadata": {"labels": {LB_EXCLUSION_LABEL: None},
                                  "annotations": {LB_EXCLUSION_ANNOTATION: None}}}
    assert return_patch(Marks(pending_taint=True), False, [PENDING]) == {"spec": {"taints": []}}


# --- release -------------------------------------------------------------------------------------------

def view(*nodes: tuple[str, str, dict[str, Any]]) -> Any:
    cluster = {"id": "c1", "name": "demo", "state": "Running",
               "virtualmachines": [{"id": f"vm-{n}", "name": n} for n, _state, _k8s in nodes]}
    vms = [{"id": f"vm-{n}", "name": n, "state": state} for n, state, _k8s in nodes]
    return build_view(cluster, vms, [], [], [], [], [k for _name, _state, k in nodes])


OURS_LB = {"labels": {LB_EXCLUSION_LABEL: "true"}, "annotations": {LB_EXCLUSION_ANNOTATION: "t"}}


def test_view_nodes_carry_labels_and_taints() -> None:
    v = view(("demo-node-1", "Running", k8s("demo-node-1", taints=[PENDING, THEIRS], **OURS_LB)))
    n = v.node("demo-node-1")
    assert n.taint_keys == {PENDING_TAINT_KEY, "example.com/gpu"} and n.labels[LB_EXCLUSION_LABEL] == "true"
    assert marks_of_view_node(n) == Marks(True, True)


def test_release_takes_the_pending_taint_off_every_node() -> None:
    v = view(("demo-node-1", "Running", k8s("demo-node-1", taints=[PENDING])),
             ("demo-node-2", "Stopped", k8s("demo-node-2", taints=[PENDING], ready=False)),
             ("demo-node-3", "Running", k8s("demo-node-3", taints=[PENDING], unschedulable=True,
                                            annotations={ROLLOUT_ANNOTATION: "b1"})),
             ("demo-node-4", "Running", k8s("demo-node-4")))
    remove, kept = release_marks(v, [])
    assert remove == {n: Marks(pending_taint=True) for n in ("demo-node-1", "demo-node-2", "demo-node-3")}
    assert kept == []


def test_release_lb_exclusion_off_nodes_in_service_kept_on_nodes_still_out() -> None:
    annotated = {"annotations": {**OURS_LB["annotations"], ROLLOUT_ANNOTATION: "b1"}, "labels": OURS_LB["labels"]}
    v = view(
        ("demo-node-1", "Running", k8s("demo-node-1", unschedulable=True, boot="b2", **annotated)),  # uncordoned
        ("demo-node-2", "Running", k8s("demo-node-2", unschedulable=True, boot="b1", **annotated)),  # left cordoned
        ("demo-node-3", "Running", k8s("demo-node-3", unschedulable=True, **OURS_LB)),  # someone else's cordon
        ("demo-node-4", "Stopped", k8s("demo-node-4", ready=False, **OURS_LB)),
        ("demo-node-5", "Running", k8s("demo-node-5", ready=False, **OURS_LB)),
        ("demo-node-6", "Running", k8s("demo-node-6", labels={LB_EXCLUSION_LABEL: ""})),  # not ours
    )
    remove, kept = release_marks(v, ["demo-node-1"])
    assert remove == {"demo-node-1": Marks(lb_exclusion=True), "demo-node-3": Marks(lb_exclusion=True)}
    assert dict(kept) == {
        "demo-node-2": "left cordoned by the rollout: out of load balancers until it is back",
        "demo-node-4": "VM is Stopped",
        "demo-node-5": "Kubernetes node not Ready (Ready=Unknown)",
    }


def test_release_an_etcd_vm_has_no_marks() -> None:
    cluster = {"id": "c1", "name": "demo", "state": "Running",
               "virtualmachines": [{"id": "vm-e", "name": "demo-etcd-1-abc", "isetcdnode": True}]}
    v = build_view(cluster, [{"id": "vm-e", "name": "demo-etcd-1-abc", "state": "Running"}], [], [], [], [], [])
    assert release_marks(v, []) == ({}, [])


# --- the client's read-modify-write -----------------------------------------------------------------------

def fake_client(node: dict[str, Any], conflicts: int = 0, status: int = 409,
                reason: str = "Conflict") -> tuple[Any, list[Any]]:
    """A KubeClient whose reads and patches hit an in-memory node; the first ``conflicts`` patches 409."""
    client = kube_utils.KubeClient.__new__(kube_utils.KubeClient)
    log: list[Any] = []
    state = {"node": copy.deepcopy(node), "conflicts": conflicts}

    def read_node(name: str) -> dict[str, Any]:
        log.append(("read", name))
        return copy.deepcopy(state["node"])

    def patch_node(name: str, patch: dict[str, Any]) -> dict[str, Any]:
        log.append(("patch", name, copy.deepcopy(patch)))
        if state["conflicts"]:
            state["conflicts"] -= 1
            # Someone else wrote the node meanwhile: a new taint and a new version.
            state["node"]["spec"]["taints"].append({"key": f"example.com/t{state['conflicts']}",
                                                    "effect": "NoSchedule"})
            state["node"]["metadata"]["resourceVersion"] = str(int(state["node"]["metadata"]["resourceVersion"]) + 1)
            raise KubernetesError(f"patch node {name}", "the object has been modified", status=status, reason=reason)
        state["node"]["spec"]["taints"] = patch["spec"]["taints"]
        return copy.deepcopy(state["node"])

    client.read_node = read_node  # type: ignore[method-assign]
    client.patch_node = patch_node  # type: ignore[method-assign]
    return client, log


def test_checked_patch_uses_the_given_read_and_its_version() -> None:
    node = k8s(taints=[THEIRS], rv="7")
    client, log = fake_client(node)
    client.patch_node_checked("demo-node-1", pending_taint_patch, node=node)
    assert log == [("patch", "demo-node-1", {"spec": {"taints": [THEIRS, PENDING]},
                                             "metadata": {"resourceVersion": "7"}})]


def test_checked_patch_reads_again_after_a_conflict_and_keeps_the_new_taint() -> None:
    node = k8s(taints=[THEIRS], rv="7")
    client, log = fake_client(node, conflicts=2)
    result = client.patch_node_checked("demo-node-1", pending_taint_patch, node=node)
    assert [entry[0] for entry in log] == ["patch", "read", "patch", "read", "patch"]
    assert log[-1][2]["metadata"] == {"resourceVersion": "9"}
    # The taints others added in between survive: the list was computed from the fresh read.
    assert {t["key"] for t in result["spec"]["taints"]} == {"example.com/gpu", "example.com/t1", "example.com/t0",
                                                            PENDING_TAINT_KEY}


def test_checked_patch_gives_up_after_the_attempts_and_never_retries_other_errors() -> None:
    client, log = fake_client(k8s(), conflicts=10)
    with pytest.raises(KubernetesError) as info:
        client.patch_node_checked("demo-node-1", pending_taint_patch, attempts=3)
    assert info.value.status == 409 and [e[0] for e in log].count("patch") == 3
    client, log = fake_client(k8s(), conflicts=1, status=409, reason="AlreadyExists")
    with pytest.raises(KubernetesError):
        client.patch_node_checked("demo-node-1", pending_taint_patch)
    assert [e[0] for e in log] == ["read", "patch"]
    client, log = fake_client(k8s(taints=[PENDING]))
    assert client.patch_node_checked("demo-node-1", pending_taint_patch) is None  # nothing to write
    assert [e[0] for e in log] == ["read"]


# --- mode=taint_pending ------------------------------------------------------------------------------------


def test_taint_pending_one_list_one_write_per_node_lacking_it(monkeypatch: pytest.MonkeyPatch) -> None:
    lock = FakeLock()
    monkeypatch.setattr("ansible_collections.cloudstack.cks.plugins.module_utils._services.taint.held_lock",
                        lambda kube, holder: lock if holder else None)
    kube = FakeKube(nodes=[k8s("demo-node-1", taints=[THEIRS]), k8s("demo-node-2", taints=[PENDING]),
                           k8s("demo-control-1", taints=[CONTROL_PLANE])])
    result = taint_pending(ClusterSession.of({}, None, kube),
                           {"nodes": ["Demo-Node-1", "demo-node-2", "demo-control-1", "demo-etcd-1-abc"],
                            "lock_holder": "run-1"})
    assert result["changed"] and kube.node_lists == 1 and lock.renewed == 1
    assert result["pending_taint"]["tainted"] == ["demo-node-1", "demo-control-1"]
    assert result["pending_taint"]["already_tainted"] == ["demo-node-2"]
    assert result["pending_taint"]["not_kubernetes_nodes"] == ["demo-etcd-1-abc"]
    assert kube.patches == [("demo-node-1", {"spec": {"taints": [THEIRS, PENDING]}}),
                            ("demo-control-1", {"spec": {"taints": [CONTROL_PLANE, PENDING]}})]


def test_taint_pending_check_mode_and_a_lost_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    lock = FakeLock(held=False)
    monkeypatch.setattr("ansible_collections.cloudstack.cks.plugins.module_utils._services.taint.held_lock",
                        lambda kube, holder: lock)
    kube = FakeKube(nodes=[k8s("demo-node-1")])
    result = taint_pending(ClusterSession.of({}, None, kube), {"nodes": ["demo-node-1"], "lock_holder": "run-1"}, check_mode=True)
    assert result["pending_taint"]["tainted"] == ["demo-node-1"] and kube.patches == []
    with pytest.raises(LockHeld):
        taint_pending(ClusterSession.of({}, None, kube), {"nodes": ["demo-node-1"], "lock_holder": "run-1"})
    assert kube.patches == []
