"""The Kubernetes half of cks-sim on its own, for its tests: one simulated cluster (its own Sim,
KubeWorld and HTTPS server: werkzeug, threaded, TLS with the sim CA) and the REAL ``kubernetes``
client built from the sim's kubeconfig, CA verification on. The ``kube_env`` and ``make_kube_env``
fixtures (conftest.py) build one per test.

Also the checks those tests share: a node's Ready, and that every field the sim sends exists in the
client's model.
"""

from __future__ import annotations

import copy
import json
import threading
from typing import Any, Optional

import kubernetes
from cks_sim import core
from cks_sim.kube import KubeWorld
from cks_sim.kube_api import kubeconfig, make_app
from cks_sim.tls import make_tls, server_ssl_context
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from werkzeug.serving import WSGIRequestHandler, make_server

CLIENT_MAJOR = int(kubernetes.__version__.split(".")[0])
CLUSTER_ID = "c0ffee00-0000-4000-8000-000000000001"

BASE_SPEC: dict[str, Any] = {
    "time_scale": 0.01,
    "seed": 7,
    "timings": {"boot_to_ready": 30, "notready_grace": 40, "pod_termination": 5, "pod_start": 3},
    "clusters": [{"name": "demo", "kubernetes_version": "1.30.4", "control_nodes": 3, "workers": 4,
                  "etcd_nodes": 0, "root_disk_size": 20}],
    "workloads": [
        {"kind": "DaemonSet", "namespace": "kube-system", "name": "kube-proxy"},
        {"kind": "Deployment", "namespace": "kube-system", "name": "coredns", "replicas": 2},
        {"kind": "Deployment", "namespace": "default", "name": "web", "replicas": 4},
        {"kind": "StatefulSet", "namespace": "default", "name": "db", "replicas": 3},
        {"kind": "Deployment", "namespace": "default", "name": "cache", "replicas": 2, "emptyDir": True},
        {"kind": "Pod", "namespace": "default", "name": "loner"},
    ],
    "pdbs": [
        {"namespace": "kube-system", "name": "coredns", "selector": {"app": "coredns"}, "minAvailable": 1},
        {"namespace": "default", "name": "web", "selector": {"app": "web"}, "minAvailable": 3},
        {"namespace": "default", "name": "db", "selector": {"app": "db"}, "maxUnavailable": 1},
    ],
}

CONTROL = [f"demo-control-{i:x}a1" for i in range(3)]
WORKERS = [f"demo-node-{i:x}b2" for i in range(4)]


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass  # the sim's call log records every request already


def node_specs(controls: list[str], workers: list[str]) -> list[dict[str, Any]]:
    nodes = [{"name": n, "node_type": "control", "cpu": 2, "memory_mb": 4096, "vm_running": True} for n in controls]
    nodes += [{"name": n, "node_type": "worker", "cpu": 2, "memory_mb": 4096, "vm_running": True} for n in workers]
    return nodes


class KubeEnv:
    """One simulated cluster behind a real HTTPS server, and clients for it."""

    def __init__(self, tmp_path: Any, spec: dict[str, Any], nodes: list[dict[str, Any]]) -> None:
        self.sim = core.Sim(spec, str(tmp_path))
        self.tls = make_tls(str(tmp_path))
        self.sim.tls = self.tls
        cluster = spec["clusters"][0]
        self.world = KubeWorld(self.sim, CLUSTER_ID, cluster, nodes, spec.get("workloads", []),
                               spec.get("pdbs", []))
        self.sim.kube[CLUSTER_ID] = self.world
        self.sim.faults.on_added.append(self._on_fault)
        self.server = make_server("127.0.0.1", 0, make_app(self.sim), threaded=True,
                                  request_handler=_QuietHandler, ssl_context=server_ssl_context(self.tls))
        self.url = f"https://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()
        self.kubeconfig = kubeconfig(self.sim, CLUSTER_ID, f"{self.url}/clusters/{CLUSTER_ID}")
        self.api_client = k8s_config.new_client_from_config_dict(copy.deepcopy(self.kubeconfig))
        self.core = k8s.CoreV1Api(self.api_client)
        self.coord = k8s.CoordinationV1Api(self.api_client)
        self.policy = k8s.PolicyV1Api(self.api_client)
        self.apps = k8s.AppsV1Api(self.api_client)

    def _on_fault(self, fault: dict[str, Any]) -> None:
        with self.sim.lock:
            self.world.apply_fault(fault)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.api_client.close()
        self.sim.stop()

    # ----- helpers -----

    def power_off(self, name: str) -> None:
        with self.sim.lock:
            self.world.node_powered_off(name)

    def power_on(self, name: str, cpu: int = 2, memory_mb: int = 4096) -> None:
        with self.sim.lock:
            self.world.node_powered_on(name, cpu, memory_mb)

    def raw(self, method: str, path: str, body: Any = None, headers: Optional[dict[str, str]] = None,
            token: Optional[str] = "default", cafile: Optional[str] = None) -> tuple[int, Any]:
        """A request without the kubernetes client (for paths it has no method for)."""
        import requests

        hdrs = dict(headers or {})
        if token == "default":
            token = self.world.token
        if token:
            hdrs["Authorization"] = f"Bearer {token}"
        data = None
        if body is not None:
            data = json.dumps(body)
            hdrs.setdefault("Content-Type", "application/json")
        resp = requests.request(method, f"{self.url}/clusters/{CLUSTER_ID}{path}", data=data, headers=hdrs,
                                verify=cafile or self.tls["ca_cert"], timeout=10)
        try:
            return resp.status_code, resp.json()
        except ValueError:
            return resp.status_code, resp.text

    def raw_json(self, method: str, path: str) -> dict[str, Any]:
        status, body = self.raw(method, path)
        assert status == 200, (status, body)
        return body


def node_ready(node: Any) -> str:
    return next(c.status for c in node.status.conditions if c.type == "Ready")


def _inner(type_name: str) -> tuple[str, str]:
    """('list'|'dict'|'', element type) for both model generations' type strings.

    37.x writes ``List[X]`` / ``Dict[str, X]``; 35.x writes ``list[X]`` / ``dict(str, X)``.
    """
    low = type_name[:5].lower()
    if low == "list[":
        return "list", type_name[5:-1]
    if low in ("dict[", "dict("):
        return "dict", type_name[5:-1].split(",", 1)[1].strip()
    return "", type_name


def assert_known_fields(data: Any, type_name: str, path: str = "$", _top: bool = True) -> None:
    """Every JSON field the sim sends must exist in the client's model (a real server's would).

    kubernetes 37.x drops unknown fields silently in ``from_dict`` but validates types strictly,
    35.x checks required fields; this walks the generated models' openapi_types so an invented
    field fails a test, then deserializes the document the way the client does.
    """
    from kubernetes.client import models

    if data is None:
        return
    container, inner = _inner(type_name)
    if container == "list":
        assert isinstance(data, list), f"{path}: expected a list for {type_name}"
        for i, item in enumerate(data):
            assert_known_fields(item, inner, f"{path}[{i}]", False)
    elif container == "dict":
        assert isinstance(data, dict), f"{path}: expected an object for {type_name}"
        for key, value in data.items():
            assert_known_fields(value, inner, f"{path}.{key}", False)
    else:
        klass = getattr(models, type_name, None)
        if klass is not None and hasattr(klass, "attribute_map") and isinstance(data, dict):
            by_json = {v: k for k, v in klass.attribute_map.items()}
            unknown = set(data) - set(by_json)
            assert not unknown, f"{path}: fields {sorted(unknown)} are not in {type_name}"
            for key, value in data.items():
                assert_known_fields(value, klass.openapi_types[by_json[key]], f"{path}.{key}", False)
    if _top:
        # Types and required fields, checked by the client's own deserializer.
        k8s.ApiClient()._ApiClient__deserialize(data, type_name)


def merge_patch_kwargs() -> dict[str, Any]:
    """``_content_type`` for a JSON merge patch; kubernetes <= 35 has no such argument."""
    return {"_content_type": "application/merge-patch+json"} if CLIENT_MAJOR >= 36 else {}
