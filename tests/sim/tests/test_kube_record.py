"""CKS_SIM_KUBE_RECORD: every Kubernetes request the sim answers, one JSON line each, for make sim-diff."""

from __future__ import annotations

import json
from typing import Any

from kubekit import WORKERS, KubeEnv


def test_requests_recorded_with_query_and_body_shape_not_values(
        kube_env: KubeEnv, tmp_path: Any, monkeypatch: Any) -> None:
    path = tmp_path / "recording.jsonl"
    monkeypatch.setenv("CKS_SIM_KUBE_RECORD", str(path))
    kube_env.raw("GET", "/api/v1/pods", headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    kube_env.raw("PATCH", f"/api/v1/nodes/{WORKERS[0]}", {"metadata": {"annotations": {"secret-ish": "s3cr3t"}}},
                 headers={"Content-Type": "application/merge-patch+json"})
    kube_env.raw("GET", "/api/v1/nodes/no-such-node?pretty=true")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(l["method"], l["path"], l["status"]) for l in lines] == [
        ("GET", "/api/v1/pods", 200), ("PATCH", f"/api/v1/nodes/{WORKERS[0]}", 200),
        ("GET", "/api/v1/nodes/no-such-node", 404)]
    assert lines[0]["table"] is True and lines[0]["body"] is None
    # The body's keys and types, never its values: a token or a Secret's data stays out of the file.
    assert lines[1]["body"] == {"metadata": {"annotations": {"secret-ish": "str"}}}
    assert lines[1]["content_type"] == "application/merge-patch+json"
    assert "s3cr3t" not in path.read_text()
    assert lines[2]["query"] == {"pretty": ["true"]}


def test_nothing_recorded_without_the_variable(kube_env: KubeEnv, tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.delenv("CKS_SIM_KUBE_RECORD", raising=False)
    empty = tmp_path / "cwd"
    empty.mkdir()
    monkeypatch.chdir(empty)
    kube_env.raw("GET", "/api/v1/nodes")
    assert list(empty.iterdir()) == []


def test_request_kinds_of_a_recording() -> None:
    # make sim-diff's reduction (tests/sim_diff/kinds.py): names and versions out, what the server
    # dispatches on in: the query's keys, dryRun's value, a patch's content type, a Table.
    import os
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from sim_diff.kinds import kind_of, recorded_kinds, template

    assert template("/api/v1/namespaces/kube-system/pods/etcd-x/exec") == "/api/v1/namespaces/{namespace}/pods/{name}/exec"
    assert template("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases") == \
        "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    assert template("/api/v1/namespaces/default") == "/api/v1/namespaces/{name}"
    assert template("/readyz/etcd") == "/readyz/etcd"
    assert kind_of("GET", "/api/v1/pods", {"fieldSelector": ["spec.nodeName=a"], "limit": ["500"]}) == \
        "GET /api/v1/pods?fieldSelector&limit"
    assert kind_of("POST", "/api/v1/namespaces/d/pods/p/eviction", {"dryRun": ["All"]}) == \
        "POST /api/v1/namespaces/{namespace}/pods/{name}/eviction?dryRun=All"
    assert kind_of("PATCH", "/api/v1/nodes/n", None, "application/json-patch+json") == \
        "PATCH /api/v1/nodes/{name} [application/json-patch+json]"
    assert kind_of("GET", "/api/v1/nodes", None, None, table=True) == "GET /api/v1/nodes [Table]"
    lines = [json.dumps({"method": "GET", "path": f"/api/v1/nodes/{n}", "status": s, "body": None})
             for n, s in (("a", 200), ("b", 404), ("c", 200))]
    assert recorded_kinds(lines) == {"GET /api/v1/nodes/{name}": {"count": 3, "statuses": [200, 404], "body": None}}
