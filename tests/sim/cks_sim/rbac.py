"""RBAC for restricted users of the simulated Kubernetes API (the admin identity may do anything).

A spec may add users with a bearer token and RBAC rules, as a Role/ClusterRole bound to them:

    kube:
      users:
        - name: cks-rollout
          token: "a-token"
          rules:                       # PolicyRules; `namespace` null/absent = cluster-wide
            - {apiGroups: [""], resources: [nodes], verbs: [get, list, patch]}
            - {apiGroups: [coordination.k8s.io], resources: [leases], verbs: [get, create], namespace: kube-system}
            - {nonResourceURLs: [/readyz, /readyz/*], verbs: [get]}

Every authenticated user may read the discovery documents (``/api``, ``/apis``..., the
``system:discovery`` ClusterRole). The health and version paths are NOT given for free (stricter
than a default cluster's ``system:public-info-viewer``), so a test proves the rules name them.
Outside the rules the answer is 403 with the API server's ``Forbidden`` Status wording.
"""

from __future__ import annotations

import fnmatch
import hmac
from dataclasses import dataclass
from typing import Any, Optional

from .kube import ApiError


@dataclass(frozen=True)
class User:
    name: str
    token: str
    rules: tuple[dict[str, Any], ...]


def users_from_spec(spec: dict[str, Any]) -> list[User]:
    users = ((spec.get("kube") or {}).get("users")) or []
    return [User(str(u["name"]), str(u["token"]), tuple(u.get("rules") or ())) for u in users]


def find_user(users: list[User], token: str) -> Optional[User]:
    for user in users:
        if hmac.compare_digest(token.encode(), user.token.encode()):
            return user
    return None


def _has(values: Any, wanted: str) -> bool:
    values = list(values or [])
    return "*" in values or wanted in values


def allows_resource(user: User, verb: str, group: str, resource: str, namespace: Optional[str],
                    name: Optional[str]) -> bool:
    for rule in user.rules:
        if "nonResourceURLs" in rule:
            continue
        if not (_has(rule.get("verbs"), verb) and _has(rule.get("apiGroups"), group)
                and _has(rule.get("resources"), resource)):
            continue
        scope = rule.get("namespace")
        if scope is not None and scope != namespace:
            continue
        names = rule.get("resourceNames")
        if names and name not in names:
            continue
        return True
    return False


def allows_path(user: User, verb: str, path: str) -> bool:
    for rule in user.rules:
        if not _has(rule.get("verbs"), verb):
            continue
        for pattern in rule.get("nonResourceURLs") or ():
            # RBAC: an exact path or a prefix ending in "*".
            if pattern == path or (pattern.endswith("*") and fnmatch.fnmatchcase(path, pattern)):
                return True
    return False


def forbidden_resource(user: User, verb: str, group: str, resource: str, kind: str, namespace: Optional[str],
                       name: Optional[str]) -> ApiError:
    # responsewriters.Forbidden: NewForbidden(GroupResource{group, resource}, name, ...), whose
    # String() is "<resource>.<group>" without the subresource, which only the reason names.
    qualified = resource.split("/")[0] + (f".{group}" if group else "")
    what = f'{qualified} "{name}"' if name else qualified
    where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    message = (f'{what} is forbidden: User "{user.name}" cannot {verb} resource "{resource}" in API group '
               f'"{group}"{where}')
    details: dict[str, Any] = {"group": group, "kind": resource.split("/")[0]}
    if name:
        details["name"] = name
    return ApiError(403, message, "Forbidden", details)


def forbidden_path(user: User, verb: str, path: str) -> ApiError:
    return ApiError(403, f'forbidden: User "{user.name}" cannot {verb} path "{path}"', "Forbidden", {})


# --- SelfSubjectAccessReview (authorization.k8s.io/v1) ---------------------------------------

_RULES_REVIEW_GROUP = "authorization.k8s.io"


def review_needs_no_rule(group: str, plural: str) -> bool:
    """system:basic-user lets every authenticated user create self reviews."""
    return group == _RULES_REVIEW_GROUP and plural == "selfsubjectaccessreviews"


def _binding_reason(user: User, namespace: Optional[str], matched: dict[str, Any]) -> str:
    # The RBAC authorizer's wording (rbac.go, ruleAccumulator); the sim's binding names its user.
    if matched.get("namespace") is not None:
        return (f'RBAC: allowed by RoleBinding "cks-sim:{user.name}/{namespace}" of Role "cks-sim:{user.name}" '
                f'to User "{user.name}"')
    return (f'RBAC: allowed by ClusterRoleBinding "cks-sim:{user.name}" of ClusterRole "cks-sim:{user.name}" '
            f'to User "{user.name}"')


def _matching_rule(user: User, verb: str, group: str, resource: str, namespace: Optional[str],
                   name: Optional[str]) -> Optional[dict[str, Any]]:
    for rule in user.rules:
        single = User(user.name, user.token, (rule,))
        if allows_resource(single, verb, group, resource, namespace, name):
            return rule
    return None


def access_review(user: Optional[User], body: Any) -> dict[str, Any]:
    """The answer to a SelfSubjectAccessReview (``user`` None: the admin, system:masters).

    Validation as ``ValidateSelfSubjectAccessReviewSpec``: exactly one of resourceAttributes
    and nonResourceAttributes (422 otherwise). Allowed answers carry the authorizer's reason;
    system:masters is allowed by the privileged-group authorizer, which gives none.
    """
    spec = body.get("spec") if isinstance(body, dict) else None
    spec = spec if isinstance(spec, dict) else {}
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if (resource is None) == (non_resource is None):
        # The value as Go prints the attributes: a nil pointer is null. The review's error
        # names its group but no kind (kube-apiserver v1.35.4, seen by make sim-diff).
        value = "null" if resource is None else "{...}"
        raise ApiError(422, f'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes: '
                            f'Invalid value: {value}: exactly one of nonResourceAttributes or resourceAttributes '
                            f'must be specified', "Invalid",
                       {"group": _RULES_REVIEW_GROUP, "causes": [
                           {"reason": "FieldValueInvalid", "field": "spec.resourceAttributes",
                            "message": f'Invalid value: {value}: exactly one of nonResourceAttributes or '
                                       f'resourceAttributes must be specified'}]})
    status: dict[str, Any]
    if user is None:
        status = {"allowed": True}
    elif resource is not None:
        label = str(resource.get("resource", ""))
        if resource.get("subresource"):
            label = f"{label}/{resource['subresource']}"
        namespace = resource.get("namespace") or None
        matched = _matching_rule(user, str(resource.get("verb", "")), str(resource.get("group", "")), label,
                                 namespace, resource.get("name") or None)
        status = {"allowed": True, "reason": _binding_reason(user, namespace, matched)} if matched else {"allowed": False}
    else:
        assert non_resource is not None  # exactly one of the two is given (checked above)
        allowed = allows_path(user, str(non_resource.get("verb", "")), str(non_resource.get("path", "")))
        status = {"allowed": True, "reason": _binding_reason(user, None, {})} if allowed else {"allowed": False}
    return {"kind": "SelfSubjectAccessReview", "apiVersion": f"{_RULES_REVIEW_GROUP}/v1",
            "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}
