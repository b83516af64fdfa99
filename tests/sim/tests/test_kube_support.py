"""The checks of the Kubernetes test machinery itself (kubekit.py's ``KubeEnv``, built by the
``kube_env`` fixture): TLS files, kubeconfig, authentication, the call log.
"""

from __future__ import annotations

import copy
import json
import ssl
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from cks_sim.tls import make_tls
from kubekit import CLUSTER_ID, CONTROL, KubeEnv

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
