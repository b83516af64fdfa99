"""Fixtures for the Kubernetes half of cks-sim, and the checks of the test machinery itself.

Each test gets its own Sim, KubeWorld and HTTPS server (werkzeug, threaded, TLS with the sim CA)
and talks to it with the REAL ``kubernetes`` client built from the sim's kubeconfig, CA
verification on. Other test_kube_* modules import the fixtures from here.
"""

from __future__ import annotations

import copy
import json
import ssl
import threading
from typing import Any, Callable, Optional

import kubernetes
import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from werkzeug.serving import WSGIRequestHandler, make_server

from cks_sim import core, harness
from cks_sim.kube import KubeWorld
from cks_sim.kube_api import kubeconfig, make_app
from cks_sim.tls import make_tls, server_ssl_context

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


def wait_until(check: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    """The harness's wait with the kube tests' bound and pace (a small world answers fast)."""
    return harness.wait_until(check, timeout, interval=interval)


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


@pytest.fixture
def kube_env(tmp_path: Any):
    env = KubeEnv(tmp_path, copy.deepcopy(BASE_SPEC), node_specs(CONTROL, WORKERS))
    yield env
    env.close()


@pytest.fixture
def make_kube_env(tmp_path: Any):
    """Build an env with a modified spec or node list: ``make_kube_env(spec_changes, nodes)``."""
    made: list[KubeEnv] = []

    def build(changes: Optional[dict[str, Any]] = None, nodes: Optional[list[dict[str, Any]]] = None) -> KubeEnv:
        spec = copy.deepcopy(BASE_SPEC)
        spec.update(copy.deepcopy(changes or {}))
        env = KubeEnv(tmp_path / f"env{len(made)}", spec, nodes or node_specs(CONTROL, WORKERS))
        made.append(env)
        return env

    yield build
    for env in made:
        env.close()


# ---------------------------------------------------------------------------------------------
# The TLS and authentication machinery


def test_tls_files_private_and_server_cert_for_loopback(tmp_path: Any) -> None:
    import os

    from cryptography import x509

    tls = make_tls(str(tmp_path))
    for key in ("ca_cert", "ca_key", "server_cert", "server_key", "client_cert", "client_key"):
        assert os.stat(tls[key]).st_mode & 0o777 == 0o600, key
    with open(tls["server_cert"], "rb") as handle:
        cert = x509.load_pem_x509_certificate(handle.read())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)][:1] == ["127.0.0.1"]
    with open(tls["client_cert"], "rb") as handle:
        client_cert = x509.load_pem_x509_certificate(handle.read())
    subject = client_cert.subject.rfc4514_string()
    assert "CN=kubernetes-admin" in subject and "O=system:masters" in subject
    # A second call reuses the same CA (kubeconfigs already written stay valid).
    assert make_tls(str(tmp_path))["ca_cert"] == tls["ca_cert"]
    with open(tls["ca_cert"], "rb") as handle:
        first = handle.read()
    make_tls(str(tmp_path))
    with open(tls["ca_cert"], "rb") as handle:
        assert handle.read() == first


def test_issue_cert_for_etcd_peers_verifies_against_ca(tmp_path: Any) -> None:
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    from cks_sim.tls import issue_cert

    tls = make_tls(str(tmp_path))
    cert_path, key_path = issue_cert(tls, "demo-control-0a1", ["127.0.0.1", "localhost"], client=True,
                                     server=True, out_dir=str(tmp_path / "etcd"))
    with open(cert_path, "rb") as handle:
        cert = x509.load_pem_x509_certificate(handle.read())
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usages and ExtendedKeyUsageOID.CLIENT_AUTH in usages
    ctx = ssl.create_default_context(cafile=tls["ca_cert"])
    ctx.load_cert_chain(cert_path, key_path)  # the key matches the certificate


def test_kubeconfig_points_at_cluster_prefix_with_inline_ca(kube_env: KubeEnv) -> None:
    cfg = kube_env.kubeconfig
    assert cfg["current-context"] == cfg["contexts"][0]["name"]
    server = cfg["clusters"][0]["cluster"]["server"]
    assert server == f"{kube_env.url}/clusters/{CLUSTER_ID}"
    assert cfg["clusters"][0]["cluster"]["certificate-authority-data"]
    assert "insecure-skip-tls-verify" not in cfg["clusters"][0]["cluster"]


def test_no_credentials_is_401(kube_env: KubeEnv) -> None:
    status, body = kube_env.raw("GET", "/api/v1/nodes", token=None)
    assert status == 401
    assert body["kind"] == "Status" and body["reason"] == "Unauthorized" and body["code"] == 401
    status, _body = kube_env.raw("GET", "/api/v1/nodes", token="not-the-token")
    assert status == 401
    # The client with a kubeconfig lacking credentials gets ApiException 401.
    cfg = copy.deepcopy(kube_env.kubeconfig)
    cfg["users"][0]["user"] = {}
    api = k8s.CoreV1Api(k8s_config.new_client_from_config_dict(cfg))
    with pytest.raises(k8s.ApiException) as info:
        api.list_node()
    assert info.value.status == 401
    assert json.loads(info.value.body)["reason"] == "Unauthorized"
    assert kube_env.sim.calls.list()[-1]["status"] == 401


def test_client_certificate_alone_authenticates(kube_env: KubeEnv) -> None:
    cfg = copy.deepcopy(kube_env.kubeconfig)
    del cfg["users"][0]["user"]["token"]
    api = k8s.CoreV1Api(k8s_config.new_client_from_config_dict(cfg))
    assert len(api.list_node().items) == 7


def test_wrong_ca_fails_tls_verification(kube_env: KubeEnv, tmp_path: Any) -> None:
    import base64

    import urllib3

    other = make_tls(str(tmp_path / "other"))
    cfg = copy.deepcopy(kube_env.kubeconfig)
    with open(other["ca_cert"], "rb") as handle:
        cfg["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(handle.read()).decode()
    api_client = k8s_config.new_client_from_config_dict(cfg)
    api_client.configuration.retries = 0
    api = k8s.CoreV1Api(api_client)
    with pytest.raises((urllib3.exceptions.MaxRetryError, urllib3.exceptions.SSLError, ssl.SSLError)) as info:
        api.list_node()
    assert "CERTIFICATE_VERIFY_FAILED" in str(info.value)


def test_every_request_is_logged_without_secrets(kube_env: KubeEnv) -> None:
    kube_env.core.read_node(CONTROL[0])
    calls = [c for c in kube_env.sim.calls.list() if c["api"] == "kubernetes"]
    last = calls[-1]
    assert (last["verb"], last["resource"], last["name"], last["status"]) == ("get", "nodes", CONTROL[0], 200)
    assert kube_env.world.token not in json.dumps(calls)
