"""The rollout's least-privilege Kubernetes access as the tests give it to cks-sim: the rules of
docs/rbac.yml for the ServiceAccount's bearer token (spec ``kube.users``), and the environment AWX's
"OpenShift or Kubernetes API Bearer Token" credential injects for such a token."""

from __future__ import annotations

import os
from typing import Any

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RBAC_YML = os.path.join(ROOT, "docs", "rbac.yml")
TOKEN = "rollout-sa-token-5c1b2f0e9a7d4e3b"
USER = "system:serviceaccount:kube-system:cloudstack-cks-rollout"


def documented_rules() -> list[dict[str, Any]]:
    """docs/rbac.yml as the sim's rules: ClusterRole rules cluster-wide, Role rules in their namespace."""
    with open(RBAC_YML, encoding="utf-8") as fh:
        documents = yaml.safe_load(fh)["items"]
    rules: list[dict[str, Any]] = []
    for doc in documents:
        if doc["kind"] == "ClusterRole":
            rules += [dict(r) for r in doc["rules"]]
        elif doc["kind"] == "Role":
            rules += [dict(r, namespace=doc["metadata"]["namespace"]) for r in doc["rules"]]
    bindings = {(d["kind"], d["roleRef"]["name"]) for d in documents if d["kind"].endswith("Binding")}
    assert bindings == {("ClusterRoleBinding", "cloudstack-cks-rollout"), ("RoleBinding", "cloudstack-cks-rollout")}
    return rules


def awx_bearer_env(host: str, token: str, verify_ssl: bool, ca_cert_path: str = "") -> dict[str, str]:
    """What AWX's injector sets for the credential's host, bearer_token, verify_ssl and ssl_ca_cert."""
    env = {"K8S_AUTH_HOST": host, "K8S_AUTH_API_KEY": token}
    if verify_ssl and ca_cert_path:
        env.update(K8S_AUTH_VERIFY_SSL="True", K8S_AUTH_SSL_CA_CERT=ca_cert_path)
    else:
        env["K8S_AUTH_VERIFY_SSL"] = "False"
    return env
