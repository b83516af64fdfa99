"""SelfSubjectAccessReview (authorization.k8s.io/v1) answered from the sim's RBAC (rbac.py).

Follows ``registry/authorization/selfsubjectaccessreview.REST.Create`` (201 with the spec
echoed and a status), ``ValidateSelfSubjectAccessReviewSpec`` (exactly one of resource and
non-resource attributes), ``system:basic-user`` (every authenticated user may create one) and
the RBAC authorizer's reasons; system:masters is allowed by the privileged-group authorizer.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from cks_sim.harness import SimHandle
from simkit import small_spec

RULES = [
    {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"], "namespace": "kube-system",
     "resourceNames": ["etcd-a", "etcd-b"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
    {"nonResourceURLs": ["/readyz"], "verbs": ["get"]},
]


def api_for(handle: SimHandle, tmp_path: Any, token: str | None) -> k8s.AuthorizationV1Api:
    with open(handle.env["kubeconfig"], encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    if token is not None:
        config["users"][0]["user"] = {"token": token}
    path = tmp_path / f"kc-{token}.yaml"
    path.write_text(yaml.safe_dump(config))
    return k8s.AuthorizationV1Api(k8s_config.new_client_from_config(str(path)))


def review(api: k8s.AuthorizationV1Api, **attributes: Any) -> Any:
    key = "non_resource_attributes" if "path" in attributes else "resource_attributes"
    kind = k8s.V1NonResourceAttributes if key == "non_resource_attributes" else k8s.V1ResourceAttributes
    body = k8s.V1SelfSubjectAccessReview(spec=k8s.V1SelfSubjectAccessReviewSpec(**{key: kind(**attributes)}))
    return api.create_self_subject_access_review(body).status


@pytest.fixture
def roller(sim_factory: Any) -> SimHandle:
    return sim_factory(spec=small_spec(kube={"users": [{"name": "roller", "token": "roller-token", "rules": RULES}]}))


def test_a_restricted_user_learns_exactly_its_rules(roller: SimHandle, tmp_path: Any) -> None:
    api = api_for(roller, tmp_path, "roller-token")
    allowed = review(api, verb="create", resource="pods", subresource="exec", namespace="kube-system", name="etcd-a")
    assert allowed.allowed is True
    assert allowed.reason == ('RBAC: allowed by RoleBinding "cks-sim:roller/kube-system" of Role "cks-sim:roller" '
                              'to User "roller"')
    # By name only: another pod, any pod, or another namespace is not allowed.
    assert review(api, verb="create", resource="pods", subresource="exec", namespace="kube-system",
                  name="kube-apiserver-a").allowed is False
    assert review(api, verb="create", resource="pods", subresource="exec", namespace="kube-system").allowed is False
    assert review(api, verb="create", resource="pods", subresource="exec", namespace="default",
                  name="etcd-a").allowed is False
    assert review(api, verb="list", resource="nodes").allowed is True
    assert review(api, verb="patch", resource="nodes").allowed is False
    assert review(api, verb="get", path="/readyz").allowed is True
    assert review(api, verb="get", path="/livez").allowed is False


def test_the_admin_identity_is_allowed_everything(roller: SimHandle, tmp_path: Any) -> None:
    api = api_for(roller, tmp_path, None)
    status = review(api, verb="create", resource="pods", subresource="exec", namespace="kube-system")
    assert status.allowed is True and status.reason is None


def test_a_review_needs_exactly_one_kind_of_attributes(roller: SimHandle, tmp_path: Any) -> None:
    api = api_for(roller, tmp_path, "roller-token")
    with pytest.raises(k8s.ApiException) as invalid:
        api.create_self_subject_access_review(k8s.V1SelfSubjectAccessReview(spec=k8s.V1SelfSubjectAccessReviewSpec()))
    assert invalid.value.status == 422
    status = json.loads(invalid.value.body)
    assert status["reason"] == "Invalid"
    assert "exactly one of nonResourceAttributes or resourceAttributes must be specified" in status["message"]
