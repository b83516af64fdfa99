"""The check pod's body and how its answers are read out of the container logs (pure)."""

from __future__ import annotations

import json

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd_pod import (
    CheckPod,
    answer_in_log,
    etcd_image,
    etcd_servers,
)

WARNING = json.dumps({"level": "warn", "msg": "retrying of unary invoker failed"})


def test_the_answer_is_the_line_of_the_questions_shape_beside_etcdctls_warnings() -> None:
    health = [{"endpoint": "http://10.1.0.5:2379", "health": False, "error": "context deadline exceeded"}]
    log = "\n".join([WARNING, json.dumps(health), "Error: unhealthy cluster"])
    assert answer_in_log("endpoint-health", log) == health
    listing = {"header": {"cluster_id": 1}, "members": []}
    assert answer_in_log("member-list", "\n".join([WARNING, json.dumps(listing)])) == listing
    # A warning is a JSON object too, but no member list; nothing at all is no answer.
    assert answer_in_log("member-list", WARNING) is None
    assert answer_in_log("endpoint-status", "") is None


def test_the_pod_runs_one_etcdctl_per_question_on_the_named_node_with_the_local_image() -> None:
    body = CheckPod(node="ext-control-1", image="registry.k8s.io/etcd:3.5.15-0",
                    endpoints=("http://10.1.0.5:2379", "http://10.1.0.6:2379")).body(timeout=5.0)
    spec = body["spec"]
    assert spec["nodeName"] == "ext-control-1" and spec["hostNetwork"] and spec["restartPolicy"] == "Never"
    assert body["metadata"]["generateName"] == "cks-etcd-check-"
    assert [c["name"] for c in spec["containers"]] == ["member-list", "endpoint-health", "endpoint-status"]
    for container in spec["containers"]:
        assert container["imagePullPolicy"] == "Never" and container["command"] == ["etcdctl"]
        assert container["args"][0] == "--endpoints=http://10.1.0.5:2379,http://10.1.0.6:2379"
        assert "--dial-timeout=5s" in container["args"] and container["args"][-2:] == ["-w", "json"]
    assert {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]


def test_image_and_endpoints_are_read_from_the_node_and_the_apiserver_pod() -> None:
    node = {"status": {"images": [{"names": ["registry.k8s.io/etcd@sha256:ab", "registry.k8s.io/etcd:3.5.15-0"]},
                                  {"names": ["registry.k8s.io/pause:3.9"]}]}}
    assert etcd_image(node) == "registry.k8s.io/etcd:3.5.15-0"
    assert etcd_image({"status": {"images": [{"names": ["registry.k8s.io/pause:3.9"]}]}}) is None
    pod = {"spec": {"containers": [{"command": ["kube-apiserver", "--etcd-servers=http://a:2379,http://b:2379"]}]}}
    assert etcd_servers(pod) == ["http://a:2379", "http://b:2379"]
    assert etcd_servers(None) == [] and etcd_servers({"spec": {"containers": [{"args": []}]}}) == []
