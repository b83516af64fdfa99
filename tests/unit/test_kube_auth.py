"""The Kubernetes connection from AWX's "OpenShift or Kubernetes API Bearer Token" credential
(K8S_AUTH_HOST, K8S_AUTH_API_KEY, K8S_AUTH_VERIFY_SSL, K8S_AUTH_SSL_CA_CERT), and the TLS choice:
an environment K8S_AUTH_VERIFY_SSL=False never turns verification off by itself.

AWX's injector (awx/main/models/credential/injectors.py, ``kubernetes_bearer_token``) sets
K8S_AUTH_VERIFY_SSL='False' whenever ``ssl_ca_cert`` is missing, even with ``verify_ssl`` ticked,
and sets K8S_AUTH_SSL_CA_CERT only together with 'True'.
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils import ansible_module as am
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube_auth import BearerTarget, choose_tls

TOKEN = "sa-token-7f3a9c"


@pytest.mark.parametrize("explicit, env, validate", [
    (True, "False", True), (False, "True", False), (False, None, False),   # the option as given wins
    (None, "True", True), (None, "yes", True),
    (None, None, None), (None, "", None), (None, "  ", None),              # not set: the kubeconfig decides
])
def test_the_option_wins_and_an_environment_true_verifies(explicit: Optional[bool], env: Optional[str],
                                                          validate: Optional[bool]) -> None:
    choice = choose_tls(explicit, env, None)
    assert choice.validate_certs is validate and choice.warning is None


@pytest.mark.parametrize("env", ["False", "false", "0", "no"])
@pytest.mark.parametrize("ca", [None, "/run/awx/ca.pem"])
def test_an_environment_false_still_verifies_and_says_why(env: str, ca: Optional[str]) -> None:
    choice = choose_tls(None, env, ca)
    assert choice.validate_certs is True
    assert choice.warning.startswith("K8S_AUTH_VERIFY_SSL=False was not taken as a reason to stop verifying")
    assert (ca or "the kubeconfig's CA, else the system CAs") in choice.warning
    assert "kube_validate_certs: false" in choice.warning


def test_an_environment_value_that_is_no_boolean_is_refused() -> None:
    with pytest.raises(InvalidInput) as raised:
        choose_tls(None, "sometimes", None)
    assert "K8S_AUTH_VERIFY_SSL" in raised.value.msg and "sometimes" in raised.value.msg


def test_host_and_token_give_a_kubeconfig_with_the_token_and_no_ca_of_its_own() -> None:
    target = BearerTarget.from_params("https://10.1.1.10:6443/", TOKEN)
    config = target.kubeconfig()
    assert config["clusters"][0]["cluster"] == {"server": "https://10.1.1.10:6443"}
    assert config["users"][0]["user"] == {"token": TOKEN}
    assert config["current-context"] == config["contexts"][0]["name"]


@pytest.mark.parametrize("host, token, option", [
    ("", TOKEN, "kube_host"), ("https://h:6443", "", "kube_api_key"), ("h:6443", TOKEN, "kube_host")])
def test_half_a_bearer_connection_is_refused_naming_what_is_missing(host: str, token: str, option: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        BearerTarget.from_params(host, token)
    assert raised.value.msg.startswith(option)
    assert TOKEN not in raised.value.msg


def test_neither_is_no_bearer_connection() -> None:
    assert BearerTarget.from_params(None, "") is None


def _params(**given: Any) -> dict[str, Any]:
    params = {"kubeconfig": None, "context": None, "kube_validate_certs": None, "kube_ca_cert": None,
              "kube_request_timeout": 20.0, "kube_host": None, "kube_api_key": None}
    params.update(given)
    return params


def test_awx_with_a_ca_verifies_against_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("K8S_AUTH_VERIFY_SSL", "True")
    notes: list[str] = []
    options = am.kube_options(_params(kube_host="https://h:6443", kube_api_key=TOKEN, kube_ca_cert="/ca.pem"),
                              notes.append)
    assert options.validate_certs is True and options.ca_cert == "/ca.pem" and notes == []
    assert options.kubeconfig["users"][0]["user"]["token"] == TOKEN


def test_awx_without_a_ca_still_verifies_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("K8S_AUTH_VERIFY_SSL", "False")
    notes: list[str] = []
    options = am.kube_options(_params(kube_host="https://h:6443", kube_api_key=TOKEN), notes.append)
    assert options.validate_certs is True
    assert len(notes) == 1 and "K8S_AUTH_VERIFY_SSL=False" in notes[0] and TOKEN not in notes[0]


def test_the_host_wins_over_a_kubeconfig_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("K8S_AUTH_VERIFY_SSL", raising=False)
    notes: list[str] = []
    options = am.kube_options(_params(kube_host="https://h:6443", kube_api_key=TOKEN, kubeconfig="/k.yaml",
                                      context="other"), notes.append)
    assert options.kubeconfig["clusters"][0]["cluster"]["server"] == "https://h:6443" and options.context is None
    assert notes and "kubeconfig" in notes[0] and "not used" in notes[0]
