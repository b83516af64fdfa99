"""How etcd is checked per node type, and the refusal before the lock (pure)."""

from __future__ import annotations

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.etcd_paths import (
    CANNOT,
    ENDPOINTS,
    EXEC,
    NOT_NEEDED,
    ExecAccess,
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


def test_external_etcd_nodes_need_endpoints() -> None:
    paths = etcd_check_paths(True, False, None)
    assert paths == {"etcd": CANNOT, "control": NOT_NEEDED, "worker": NOT_NEEDED}
    refusal = etcd_check_refusal(paths, ["etcd"], True, None)
    assert refusal is not None and "http://<etcd node address>:2379" in refusal
    assert etcd_check_refusal(paths, ["control", "worker"], True, None) is None
