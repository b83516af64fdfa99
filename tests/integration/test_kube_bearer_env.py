"""The Kubernetes connection AWX's built-in "OpenShift or Kubernetes API Bearer Token" credential
injects (awx/main/models/credential/injectors.py, ``kubernetes_bearer_token``): K8S_AUTH_HOST,
K8S_AUTH_API_KEY, K8S_AUTH_VERIFY_SSL and, when its CA field is filled, K8S_AUTH_SSL_CA_CERT.

The status playbook runs against cks-sim with only those variables for Kubernetes (no kubeconfig,
none fetched from CloudStack), as the least-privilege ServiceAccount of docs/rbac.yml. AWX sets
K8S_AUTH_VERIFY_SSL=False when the CA field is empty, even with "Verify SSL" ticked: the modules
then still verify (and fail closed against the simulator's private CA), saying why.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import yaml
from helpers import run_module
from kube_access import TOKEN, USER, awx_bearer_env, documented_rules

pytestmark = pytest.mark.timeout(600)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STATUS = os.path.join(ROOT, "playbooks", "status.yml")
NOT_FROM_THE_KUBECONFIG = ("K8S_AUTH_KUBECONFIG", "K8S_AUTH_SSL_CA_CERT")


@pytest.fixture(scope="module")
def sim(module_rollout_sim: Any) -> Any:
    handle = module_rollout_sim("faults_small.yml", etcd=False,
                                kube={"users": [{"name": USER, "token": TOKEN, "rules": documented_rules()}]})
    with open(handle.env["kubeconfig"], encoding="utf-8") as fh:
        handle.kube_host = yaml.safe_load(fh)["clusters"][0]["cluster"]["server"]
    return handle


def _status(sim: Any, env: dict[str, str]) -> tuple[Any, list[dict[str, Any]]]:
    since = sim.admin("GET", "/state")["time"]
    # The harness's own kubeconfig and CA go, unless the credential sets them itself.
    run = sim.rollout(env=env, drop_env=tuple(n for n in NOT_FROM_THE_KUBECONFIG if n not in env), playbook=STATUS)
    calls = sim.admin("GET", f"/calls?since={since}")
    return run, calls.get("calls", calls) if isinstance(calls, dict) else calls


def _kube_users(calls: list[dict[str, Any]]) -> set[str]:
    return {c.get("user") for c in calls if c.get("api") == "kubernetes"}


def test_the_bearer_token_credential_with_a_ca_reads_the_cluster_as_the_service_account(sim: Any) -> None:
    run, calls = _status(sim, awx_bearer_env(sim.kube_host, TOKEN, True, sim.env["kube_ca"]))
    assert run.rc == 0, run.output
    assert f"Cluster {sim.env['cluster_name']}: CKS state Running" in run.stdout
    assert _kube_users(calls) == {USER}
    # Nothing was fetched from CloudStack: the credential is the connection.
    assert "getKubernetesClusterConfig" not in {c.get("command") for c in calls}
    assert "K8S_AUTH_VERIFY_SSL=False" not in run.stdout + run.stderr
    assert TOKEN not in run.stdout + run.stderr


def test_an_empty_ca_field_does_not_turn_verification_off(sim: Any) -> None:
    # Verify SSL ticked, CA left empty: AWX sends K8S_AUTH_VERIFY_SSL=False and no CA.
    run, calls = _status(sim, awx_bearer_env(sim.kube_host, TOKEN, True, ""))
    assert run.rc != 0, run.output
    output = " ".join((run.stdout + run.stderr).split())
    assert "certificate verify failed" in output, run.output
    assert "K8S_AUTH_VERIFY_SSL=False was not taken as a reason to stop verifying" in output, run.output
    assert USER not in _kube_users(calls)
    assert TOKEN not in run.stdout + run.stderr


def test_verification_is_off_only_when_the_option_says_so(sim: Any) -> None:
    # The module option given as false (module_defaults in an operator's play) is honoured.
    env = dict(awx_bearer_env(sim.kube_host, TOKEN, True, ""), CLOUDSTACK_ENDPOINT=sim.env["cloudstack_endpoint"],
               CLOUDSTACK_KEY=sim.env["cloudstack_key"], CLOUDSTACK_SECRET=sim.env["cloudstack_secret"])
    result = run_module("cks_node_outdated", {"cluster": sim.env["cluster_name"], "kube_validate_certs": False}, env=env)
    assert not result["failed"], result
    assert not any("K8S_AUTH_VERIFY_SSL" in w for w in result.get("warnings", []))
    assert result["cluster"]["name"] == sim.env["cluster_name"]


def test_a_host_without_a_token_is_refused_naming_the_token(sim: Any) -> None:
    run, calls = _status(sim, {"K8S_AUTH_HOST": sim.kube_host, "K8S_AUTH_VERIFY_SSL": "True",
                               "K8S_AUTH_SSL_CA_CERT": sim.env["kube_ca"]})
    assert run.rc != 0, run.output
    assert "kube_api_key" in run.stdout + run.stderr
    assert not [c for c in calls if c.get("api") == "kubernetes"]
