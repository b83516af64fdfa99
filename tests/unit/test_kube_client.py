"""Pure parts of the Kubernetes client: options, kubeconfig parsing, eviction answers, errors,
and the Ansible glue (argument specs match their doc fragments, env fallbacks, run()).

Real requests through kubernetes 37.x (and 35.x) are in tests/integration/test_clients_kube.py.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import yaml
from fakes import FakeCloudStack

from ansible_collections.cloudstack.cks.plugins.doc_fragments import cloudstack as cs_doc
from ansible_collections.cloudstack.cks.plugins.doc_fragments import kubernetes as kube_doc
from ansible_collections.cloudstack.cks.plugins.module_utils import ansible_module as am
from ansible_collections.cloudstack.cks.plugins.module_utils._clients import kube, kube_answers, kube_http, kube_options
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CloudStackError, InvalidInput, KubernetesError

KUBECONFIG = {
    "apiVersion": "v1", "kind": "Config", "current-context": "c",
    "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:6443"}}],
    "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    "users": [{"name": "u", "user": {"token": "tok-123"}}],
}


def test_kube_options_from_params() -> None:
    o = kube_options.KubeOptions.from_params({"kubeconfig": "/x", "validate_certs": "false", "request_timeout": "3"})
    assert (o.kubeconfig, o.validate_certs, o.request_timeout, o.context) == ("/x", False, 3.0, None)
    assert kube_options.KubeOptions.from_params({}).request_timeout == kube_options.DEFAULT_REQUEST_TIMEOUT
    assert "tok-123" not in repr(kube_options.KubeOptions(kubeconfig=KUBECONFIG))
    with pytest.raises(InvalidInput):
        kube_options.KubeOptions.from_params({"request_timeout": 0})


def test_parse_kubeconfig_path_dict_and_text(tmp_path: Any) -> None:
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(KUBECONFIG))
    assert kube_options.parse_kubeconfig(str(path)) == (str(path), None)
    assert kube_options.parse_kubeconfig(KUBECONFIG) == (None, KUBECONFIG)
    assert kube_options.parse_kubeconfig(yaml.safe_dump(KUBECONFIG)) == (None, KUBECONFIG)
    with pytest.raises(InvalidInput, match="no such file"):
        kube_options.parse_kubeconfig(str(tmp_path / "missing"))
    with pytest.raises(InvalidInput) as info:
        kube_options.parse_kubeconfig("a: b\nc: d\n")
    assert "a: b" not in info.value.msg  # inline content is never echoed


DISRUPTION = {"kind": "Status", "code": 429, "reason": "TooManyRequests",
              "message": "Cannot evict pod as it would violate the pod's disruption budget.",
              "details": {"causes": [{"reason": "DisruptionBudget",
                                      "message": "The disruption budget web needs 3 healthy pods and has 3 currently"}]}}


@pytest.mark.parametrize("code, status, outcome, pdb", [
    (201, {"kind": "Status", "status": "Success"}, "evicted", None),
    (404, {"reason": "NotFound", "message": 'pods "web-1" not found'}, "gone", None),
    (429, DISRUPTION, "blocked", "web"),
    (429, {"reason": "TooManyRequests", "message": "too many requests"}, "blocked", None),
    (500, {"message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."},
     "multiple_pdbs", None),
    (403, {"reason": "Forbidden", "message": "forbidden"}, "failed", None),
])
def test_eviction_answers(code: int, status: dict, outcome: str, pdb: str | None) -> None:
    result = kube_answers.eviction_result(code, status)
    assert (result.outcome, result.pdb, result.status) == (outcome, pdb, code)
    assert result.ok is (outcome in ("evicted", "gone"))


def test_blocked_eviction_message_is_the_pdb_cause() -> None:
    assert "disruption budget web needs 3" in kube_answers.eviction_result(429, DISRUPTION).message


def test_status_error_uses_the_status_message_and_reason() -> None:
    body = {"kind": "Status", "reason": "Conflict",
            "message": 'Operation cannot be fulfilled on leases "x": the object has been modified'}
    err = kube_http._status_error("replace lease kube-system/x", 409, body)
    assert (err.status, err.reason) == (409, "Conflict")
    assert err.msg.startswith("Kubernetes replace lease kube-system/x failed (HTTP 409 Conflict): Operation cannot")
    other = kube_http._status_error("x", 500, None)
    assert (other.status, other.reason) == (500, None) and "no message" in other.msg


def test_scrub_removes_key_material() -> None:
    blob = "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NBUUVB"
    assert blob not in kube.scrub_secrets(f"bad data {blob} here")


def test_fetch_kubeconfig_reads_configdata() -> None:
    cloud = FakeCloudStack(calls={"getKubernetesClusterConfig": {
        "clusterconfig": {"id": "c1", "name": "demo", "configdata": yaml.safe_dump(KUBECONFIG)}}})
    assert kube_options.fetch_kubeconfig(cloud, "c1") == KUBECONFIG
    assert cloud.asked == [("getKubernetesClusterConfig", {"id": "c1"})] and cloud.targets == ["c1"]
    with pytest.raises(CloudStackError, match="no stored kubeconfig"):
        kube_options.fetch_kubeconfig(FakeCloudStack(calls={"getKubernetesClusterConfig": {"clusterconfig": {"id": "c1"}}}), "c1")


def test_connect_needs_a_kubeconfig_or_a_cluster() -> None:
    with pytest.raises(InvalidInput, match="kubeconfig"):
        kube.KubeClient.connect(kube_options.KubeOptions())


def test_connect_keeps_embedded_certificates_private_and_removes_them(tmp_path: Any) -> None:
    config = json.loads(json.dumps(KUBECONFIG))
    config["clusters"][0]["cluster"]["certificate-authority-data"] = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="
    client = kube.KubeClient.connect(kube_options.KubeOptions(kubeconfig=config, validate_certs=True))
    ca = client.api_client.configuration.ssl_ca_cert
    temp_dir = os.path.dirname(ca)
    assert os.stat(temp_dir).st_mode & 0o777 == 0o700
    assert os.stat(ca).st_mode & 0o777 == 0o600
    retries = client.api_client.configuration.retries
    assert (retries.total, retries.status) == (0, 0)
    client.close()
    assert not os.path.exists(temp_dir)
    # The client library caches temp files by content: a second client must get a live file.
    again = kube.KubeClient.connect(kube_options.KubeOptions(kubeconfig=config))
    assert os.path.exists(again.api_client.configuration.ssl_ca_cert)
    again.close()


def test_overrides_win_over_the_kubeconfig(tmp_path: Any) -> None:
    config = json.loads(json.dumps(KUBECONFIG))
    config["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    client = kube.KubeClient.connect(kube_options.KubeOptions(kubeconfig=config, validate_certs=True, ca_cert=str(ca)))
    assert client.api_client.configuration.verify_ssl is True
    assert client.api_client.configuration.ssl_ca_cert == str(ca)
    client.close()
    as_written = kube.KubeClient.connect(kube_options.KubeOptions(kubeconfig=config))
    assert as_written.api_client.configuration.verify_ssl is False
    as_written.close()


def test_bad_context_is_a_kubernetes_error() -> None:
    with pytest.raises(KubernetesError, match="load kubeconfig"):
        kube.KubeClient.connect(kube_options.KubeOptions(kubeconfig=KUBECONFIG, context="nope"))


# -- Ansible glue ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("fragment, spec", [(cs_doc, am.cloudstack_argument_spec()),
                                            (kube_doc, am.kubernetes_argument_spec())])
def test_doc_fragments_match_the_argument_specs(fragment: Any, spec: dict) -> None:
    options = yaml.safe_load(fragment.ModuleDocFragment.DOCUMENTATION)["options"]
    assert set(options) == set(spec)
    for name, doc in options.items():
        for key in ("type", "aliases", "choices", "default"):
            assert doc.get(key) == spec[name].get(key), (name, key)


def test_secrets_are_no_log_and_specs_do_not_clash() -> None:
    cs_spec, kube_spec = am.cloudstack_argument_spec(), am.kubernetes_argument_spec()
    assert cs_spec["api_secret"]["no_log"] is True

    def names(spec: dict) -> set[str]:
        return set(spec) | {a for o in spec.values() for a in o.get("aliases", [])}

    assert not names(cs_spec) & names(kube_spec)


def test_env_fallbacks() -> None:
    cs_spec, kube_spec = am.cloudstack_argument_spec(), am.kubernetes_argument_spec()
    env = {name: opt["fallback"][1] for name, opt in {**cs_spec, **kube_spec}.items() if opt.get("fallback", (0, []))[1]}
    assert env == {
        "api_url": ["CLOUDSTACK_ENDPOINT"], "api_key": ["CLOUDSTACK_KEY"], "api_secret": ["CLOUDSTACK_SECRET"],
        "api_http_method": ["CLOUDSTACK_METHOD"], "api_timeout": ["CLOUDSTACK_TIMEOUT"],
        "api_verify_ssl_cert": ["CLOUDSTACK_VERIFY"], "kubeconfig": ["K8S_AUTH_KUBECONFIG"],
        "context": ["K8S_AUTH_CONTEXT"], "kube_ca_cert": ["K8S_AUTH_SSL_CA_CERT"],
        "kube_host": ["K8S_AUTH_HOST"], "kube_api_key": ["K8S_AUTH_API_KEY"],
    }
    # K8S_AUTH_VERIFY_SSL is read by kube_options itself (tests/unit/test_kube_auth.py).
    assert "fallback" not in kube_spec["kube_validate_certs"]
    assert kube_spec["kube_api_key"]["no_log"] is True


@pytest.mark.parametrize("value, validate", [("true", False), ("yes", False), ("false", True), ("0", True)])
def test_dangerous_no_tls_verify_means_what_it_says(monkeypatch: pytest.MonkeyPatch, value: str, validate: bool) -> None:
    monkeypatch.setenv("CLOUDSTACK_DANGEROUS_NO_TLS_VERIFY", value)
    assert am._validate_certs_from_no_tls_verify() is validate


def test_dangerous_no_tls_verify_unset_or_garbage_is_no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLOUDSTACK_DANGEROUS_NO_TLS_VERIFY", raising=False)
    with pytest.raises(am.AnsibleFallbackNotFound):
        am._validate_certs_from_no_tls_verify()
    monkeypatch.setenv("CLOUDSTACK_DANGEROUS_NO_TLS_VERIFY", "maybe")
    with pytest.raises(am.AnsibleFallbackNotFound):
        am._validate_certs_from_no_tls_verify()


class FakeModule:
    def __init__(self) -> None:
        self.result: dict[str, Any] = {}
        self.no_log_values: set[str] = set()

    def exit_json(self, **kwargs: Any) -> None:
        self.result = {"exit": kwargs}

    def fail_json(self, **kwargs: Any) -> None:
        self.result = {"fail": kwargs}


def test_run_exits_with_the_result() -> None:
    module = FakeModule()
    am.run(module, lambda: {"changed": True, "nodes": ["a"]})
    assert module.result == {"exit": {"changed": True, "nodes": ["a"]}}


def test_run_turns_cks_errors_into_fail_json_with_details() -> None:
    module = FakeModule()

    def fail() -> None:
        raise CloudStackError("stopVirtualMachine", "boom", errorcode=530, target="demo-node-1")

    am.run(module, fail)
    failed = module.result["fail"]
    assert failed["msg"] == "CloudStack stopVirtualMachine on demo-node-1 failed (errorcode 530): boom"
    assert failed["errorcode"] == 530 and failed["command"] == "stopVirtualMachine"


def test_run_reports_unexpected_errors_without_query_strings() -> None:
    module = FakeModule()

    def fail() -> None:
        raise RuntimeError("GET /client/api?apiKey=k&signature=SIG failed")

    am.run(module, fail)
    failed = module.result["fail"]
    assert failed["msg"].startswith("unexpected RuntimeError") and "SIG" not in failed["msg"]
    assert "SIG" not in failed["exception"]


def test_the_transport_retries_nothing_so_that_the_policy_counts_every_retry() -> None:
    import urllib3

    client = kube.KubeClient.connect(kube_options.KubeOptions(kubeconfig=json.loads(json.dumps(KUBECONFIG))))
    retries = client.api_client.configuration.retries
    client.close()
    dropped = urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError())
    for method in ("GET", "POST"):
        with pytest.raises((urllib3.exceptions.MaxRetryError, urllib3.exceptions.ProtocolError)):
            retries.increment(method=method, url="/api/v1/nodes", error=dropped)
