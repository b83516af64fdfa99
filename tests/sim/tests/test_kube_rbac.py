"""RBAC for restricted users (spec ``kube.users``, cks_sim/rbac.py), through the real ``kubernetes`` client."""

from __future__ import annotations

from typing import Any

import json

import pytest
import requests
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from simkit import small_spec

TOKEN = "restricted-token-1234"
USERS = [{"name": "reader", "token": TOKEN, "rules": [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "namespace": "kube-system"},
    {"nonResourceURLs": ["/readyz", "/readyz/*"], "verbs": ["get"]},
]}]


def message(exc: k8s.ApiException) -> str:
    status = json.loads(exc.body)
    assert status["kind"] == "Status" and status["reason"] == "Forbidden"
    return status["message"]


def restricted_api(handle: Any, tmp_path: Any) -> k8s.ApiClient:
    with open(handle.env["kubeconfig"], encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    config["users"][0]["user"] = {"token": TOKEN}
    path = tmp_path / "restricted.yaml"
    path.write_text(yaml.safe_dump(config))
    return k8s_config.new_client_from_config(str(path))


def test_restricted_user_gets_its_rules_and_403_outside(sim_factory: Any, tmp_path: Any) -> None:
    handle = sim_factory(spec=small_spec(kube={"users": USERS}))
    api = restricted_api(handle, tmp_path)
    core = k8s.CoreV1Api(api)
    nodes = core.list_node().items
    assert nodes
    core.read_node(nodes[0].metadata.name)
    with pytest.raises(k8s.ApiException) as denied:
        core.patch_node(nodes[0].metadata.name, {"spec": {"unschedulable": True}})
    assert denied.value.status == 403
    assert 'User "reader" cannot patch resource "nodes" in API group ""' in message(denied.value)
    # Namespaced rule: kube-system only, and only the verbs given.
    with pytest.raises(k8s.ApiException) as other_ns:
        core.read_namespaced_config_map("x", "default")
    assert other_ns.value.status == 403 and 'in the namespace "default"' in message(other_ns.value)
    with pytest.raises(k8s.ApiException) as not_found:
        core.read_namespaced_config_map("missing", "kube-system")
    assert not_found.value.status == 404  # allowed, so the world answers
    with pytest.raises(k8s.ApiException) as pods:
        core.list_pod_for_all_namespaces()
    assert pods.value.status == 403 and "at the cluster scope" in message(pods.value)
    # Non-resource URLs: /readyz given, /livez and /version not.
    server = yaml.safe_load(open(handle.env["kubeconfig"]))["clusters"][0]["cluster"]["server"]

    def get(path: str, token: str = TOKEN) -> requests.Response:
        return requests.get(server + path, headers={"Authorization": f"Bearer {token}"}, verify=handle.env["kube_ca"],
                            timeout=10)

    assert get("/readyz/etcd").status_code == 200
    livez = get("/livez")
    assert livez.status_code == 403 and livez.json()["message"] == 'forbidden: User "reader" cannot get path "/livez"'
    assert get("/version").status_code == 403
    # Discovery is for every authenticated user.
    assert k8s.CoreApi(api).get_api_versions().versions == ["v1"]
    # The admin identity is not restricted; an unknown token is 401 (not 403).
    k8s.CoreV1Api(k8s_config.new_client_from_config(handle.env["kubeconfig"])).patch_node(
        nodes[0].metadata.name, {"metadata": {"labels": {"x": "y"}}})
    assert get("/api/v1/nodes", token="nope").status_code == 401
    logged = handle.admin("GET", "/calls")
    calls = [c for c in (logged["calls"] if isinstance(logged, dict) else logged) if c.get("status") == 403]
    assert calls and all(c.get("user") == "reader" for c in calls)
