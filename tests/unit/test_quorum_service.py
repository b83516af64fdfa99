"""cks_etcd_quorum's choice of path and its answer (``_services/quorum.py``), over a fake quorum client.

That each path really asks etcd (pods/exec into the sim's etcd pods, the endpoints directly) is
proven by tests/integration/test_cks_etcd_quorum_exec.py and test_cks_etcd_quorum.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from fakes import FakeQuorumClient

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import EtcdError, InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.quorum import Member, quorum_verdict
from ansible_collections.cloudstack.cks.plugins.module_utils._services.quorum import (
    CLUSTER,
    ENDPOINTS,
    KUBECONFIG,
    etcd_quorum,
    quorum_path,
)

MEMBERS = [Member(id=str(i), name=f"c{i}", client_urls=(f"https://10.0.0.{i}:2379",), healthy=True) for i in (1, 2, 3)]


@pytest.mark.parametrize(("params", "path"), [
    ({"etcd_endpoints": ["http://e:2379"], "kubeconfig": "/k", "cluster": "c"}, ENDPOINTS),
    ({"etcd_endpoints": [], "kubeconfig": "/k", "cluster": "c"}, KUBECONFIG),
    ({"kube_host": "https://api:6443", "cluster": "c"}, KUBECONFIG),
    ({"kubeconfig": {"clusters": []}}, KUBECONFIG),
    ({"etcd_endpoints": [], "kubeconfig": None, "cluster": "c"}, CLUSTER),
])
def test_the_endpoints_win_then_a_kubeconfig_then_the_cluster(params: dict[str, Any], path: str) -> None:
    assert quorum_path(params) == path


def test_nothing_to_ask_through_names_every_way_to_give() -> None:
    with pytest.raises(InvalidInput) as refused:
        quorum_path({"etcd_endpoints": [], "kubeconfig": None, "cluster": None, "going_down": ["c1"]})
    assert refused.value.parameter == "etcd_endpoints"
    assert all(word in refused.value.msg for word in ("etcd_endpoints", "cluster", "kubeconfig", "Kubernetes API"))


def test_a_safe_answer_says_how_etcd_was_asked() -> None:
    client = FakeQuorumClient(quorum_verdict(MEMBERS, ["c1"], ready=True))
    result = etcd_quorum(client, {"going_down": ["c1"], "require_ready": False, "fail_when_unsafe": True}, CLUSTER)
    assert client.asked == [(["c1"], False)]
    assert result["safe"] is True and result["changed"] is False and result["checked_through"] == "pods/exec"
    assert (result["healthy_after"], result["tolerates"]) == (2, 0)
    assert etcd_quorum(client, {"going_down": []}, ENDPOINTS)["checked_through"] == "etcd_endpoints"


def test_an_unsafe_answer_fails_with_every_value_unless_told_not_to() -> None:
    unsafe = quorum_verdict(MEMBERS, ["c1", "c2"], ready=True)
    with pytest.raises(EtcdError) as failed:
        etcd_quorum(FakeQuorumClient(unsafe), {"going_down": ["c1", "c2"]}, KUBECONFIG)
    assert failed.value.msg == unsafe.message
    assert failed.value.details["safe"] is False and failed.value.details["tolerates"] == -1
    assert "msg" not in failed.value.details
    reported = etcd_quorum(FakeQuorumClient(unsafe), {"going_down": ["c1", "c2"], "fail_when_unsafe": False}, KUBECONFIG)
    assert reported["safe"] is False and reported["msg"] == unsafe.message


def test_an_etcd_that_cannot_be_asked_fails_as_the_client_says() -> None:
    with pytest.raises(EtcdError, match="no etcd pod could be asked"):
        etcd_quorum(FakeQuorumClient(EtcdError("no etcd pod could be asked through the Kubernetes API: x")),
                    {"going_down": []}, CLUSTER)
