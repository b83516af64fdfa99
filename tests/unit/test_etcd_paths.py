"""How etcd is checked per node type, and the refusal before the lock (pure)."""

from __future__ import annotations

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.etcd_paths import (
    CANNOT,
    ENDPOINTS,
    EXEC,
    NOT_NEEDED,
    POD,
    ExecAccess,
    PodAccess,
    etcd_check_paths,
    etcd_check_refusal,
)


def test_stacked_without_endpoints_is_exec_when_allowed_and_cannot_when_denied() -> None:
    assert etcd_check_paths(False, False, ExecAccess(True)) == {"etcd": NOT_NEEDED, "control": EXEC, "worker": NOT_NEEDED}
    assert etcd_check_paths(False, False, None)["control"] == EXEC  # not asked: nothing planned needs it
    denied = ExecAccess(False, ("etcd-c1", "etcd-c2"))
    paths = etcd_check_paths(False, False, denied)
    assert paths["control"] == CANNOT
    refusal = etcd_check_refusal(paths, ["control", "worker"], False, denied)
    assert refusal is not None and "may not exec into etcd-c1, etcd-c2" in refusal
    assert "grant pods/exec on the etcd pods (docs/rbac.yml), or give etcd_endpoints" in refusal
    # Only workers planned: the denied exec is no reason to refuse.
    assert etcd_check_refusal(paths, ["worker"], False, denied) is None


def test_given_endpoints_take_precedence_over_exec() -> None:
    assert etcd_check_paths(False, True, ExecAccess(False))["control"] == ENDPOINTS
    assert etcd_check_paths(True, True, None) == {"etcd": ENDPOINTS, "control": NOT_NEEDED, "worker": NOT_NEEDED}


def test_external_etcd_nodes_are_checked_by_a_pod_on_a_control_node() -> None:
    paths = etcd_check_paths(True, False, None, PodAccess(True, node="ext-control-1"))
    assert paths == {"etcd": "a short-lived pod on ext-control-1 through the Kubernetes API",
                     "control": NOT_NEEDED, "worker": NOT_NEEDED}
    assert etcd_check_paths(True, False, None)["etcd"] == POD.format(node="a control node")  # not asked
    assert etcd_check_refusal(paths, ["etcd", "control", "worker"], True, None) is None


def test_external_etcd_without_pod_access_is_refused_with_the_verbs_and_the_endpoints_option() -> None:
    denied = PodAccess(False, ("create pods", "get pods/log"))
    paths = etcd_check_paths(True, False, None, denied)
    assert paths["etcd"] == CANNOT
    refusal = etcd_check_refusal(paths, ["etcd"], True, None, denied)
    assert refusal is not None and "may not create pods, get pods/log in kube-system" in refusal
    assert "docs/rbac.yml" in refusal and "http://<etcd node address>:2379" in refusal
    assert etcd_check_refusal(paths, ["control", "worker"], True, None, denied) is None
    no_node = PodAccess(False, (), "no control node can run the etcd check pod")
    refusal = etcd_check_refusal(etcd_check_paths(True, False, None, no_node), ["etcd"], True, None, no_node)
    assert refusal is not None and "no control node can run the etcd check pod" in refusal
