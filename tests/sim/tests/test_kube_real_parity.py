"""Where cks-sim's Kubernetes API answered otherwise than kube-apiserver v1.35.4 (found by make sim-diff,
tests/sim_diff), each held here to what the real one answers, with the Kubernetes code that decides it."""

from __future__ import annotations

from typing import Any

from kubekit import CONTROL, WORKERS, KubeEnv

LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
MERGE = {"Content-Type": "application/merge-patch+json"}


def _lease(rv: Any = None, renew: str = "2026-01-01T00:00:00.000000Z") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "lock", "namespace": "kube-system"}
    if rv:
        meta["resourceVersion"] = rv
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 60, "renewTime": renew}}


def test_an_update_that_changes_nothing_keeps_the_resource_version(kube_env: KubeEnv) -> None:
    # etcd3 store GuaranteedUpdate: the same bytes are not written again; no new version, no event.
    status, created = kube_env.raw("POST", LEASES, _lease())
    assert status == 201
    rv = created["metadata"]["resourceVersion"]
    status, same = kube_env.raw("PUT", f"{LEASES}/lock", _lease(rv))
    assert status == 200 and same["metadata"]["resourceVersion"] == rv
    status, moved = kube_env.raw("PUT", f"{LEASES}/lock", _lease(rv, renew="2026-01-01T00:00:05.000000Z"))
    assert status == 200 and moved["metadata"]["resourceVersion"] != rv
    status, stale = kube_env.raw("PUT", f"{LEASES}/lock", _lease(rv))
    assert status == 409 and stale["reason"] == "Conflict"


def test_a_lease_update_needs_a_resource_version(kube_env: KubeEnv) -> None:
    # pkg/registry/coordination/lease/strategy.go AllowUnconditionalUpdate() false: rest.BeforeUpdate
    # refuses an update without metadata.resourceVersion (422), where a ConfigMap's goes through.
    assert kube_env.raw("POST", LEASES, _lease())[0] == 201
    status, body = kube_env.raw("PUT", f"{LEASES}/lock", _lease())
    assert status == 422 and body["reason"] == "Invalid"
    assert body["details"] == {"name": "lock", "kind": "leases", "group": "coordination.k8s.io", "causes": [
        {"reason": "FieldValueInvalid", "message": "Invalid value: 0: must be specified for an update",
         "field": "metadata.resourceVersion"}]}
    # A patch is applied to the stored object, its version included: no precondition needed.
    status, patched = kube_env.raw("PATCH", f"{LEASES}/lock", {"spec": {"holderIdentity": "b"}}, headers=MERGE)
    assert status == 200 and patched["spec"]["holderIdentity"] == "b"


def test_validation_errors_name_the_kind(kube_env: KubeEnv) -> None:
    # errors.NewInvalid(qualifiedKind, ...): StatusDetails.Kind is the Kind, not the resource.
    status, body = kube_env.raw("POST", "/api/v1/namespaces/default/pods",
                                {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "empty"},
                                 "spec": {"containers": []}})
    assert status == 422 and body["details"]["kind"] == "Pod"
    status, body = kube_env.raw("PUT", f"{LEASES}/x", _lease("1"))
    assert status == 404 and body["details"]["kind"] == "leases"  # NotFound names the resource


def test_an_unknown_taint_effect_as_validate_node_update_reports_it(kube_env: KubeEnv) -> None:
    # ValidateNode validates taints under the path "metadata.taints" with field.NotSupported; an
    # update lists each cause twice (what kube-apiserver v1.35.4 answers).
    status, body = kube_env.raw("PATCH", f"/api/v1/nodes/{WORKERS[0]}",
                                {"spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}}, headers=MERGE)
    assert status == 422 and body["details"]["kind"] == "Node"
    cause = {"reason": "FieldValueNotSupported", "field": "metadata.taints[0].effect",
             "message": 'Unsupported value: "Sometimes": supported values: "NoSchedule", "PreferNoSchedule", '
                        '"NoExecute"'}
    assert body["details"]["causes"] == [cause, cause]


def test_delete_answers(kube_env: KubeEnv) -> None:
    # The delete handler's Status has no code; a failed precondition is the store's Conflict,
    # whose details name the Kind (checkPreconditions).
    path = "/api/v1/namespaces/kube-system/configmaps"
    status, created = kube_env.raw("POST", path, {"metadata": {"name": "state"}, "data": {"a": "1"}})
    assert status == 201
    stale = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"resourceVersion": "1"}}
    status, body = kube_env.raw("DELETE", f"{path}/state", stale)
    assert status == 409 and body["details"] == {"name": "state", "kind": "ConfigMap"}
    status, body = kube_env.raw("DELETE", f"{path}/state", {"apiVersion": "v1", "kind": "DeleteOptions"})
    assert status == 200 and body["status"] == "Success" and "code" not in body
    assert body["details"]["kind"] == "configmaps" and body["details"]["uid"] == created["metadata"]["uid"]


def test_a_cordon_is_answered_before_the_controller_taints_the_node(kube_env: KubeEnv) -> None:
    # The node lifecycle controller mirrors spec.unschedulable into a taint in its own write
    # (doNoScheduleTaintingPass): a write based on the cordon's answer meets 409, so a client
    # that computes a taint list from that answer must read again (patch_node_checked does).
    path = f"/api/v1/nodes/{WORKERS[1]}"
    status, cordoned = kube_env.raw("PATCH", path, {"spec": {"unschedulable": True}}, headers=MERGE)
    assert status == 200 and not cordoned["spec"].get("taints")
    stale = {"metadata": {"resourceVersion": cordoned["metadata"]["resourceVersion"], "labels": {"a": "b"}}}
    status, body = kube_env.raw("PATCH", path, stale, headers=MERGE)
    assert status == 409 and body["reason"] == "Conflict"
    assert [t["key"] for t in kube_env.raw_json("GET", path)["spec"]["taints"]] == ["node.kubernetes.io/unschedulable"]


def test_access_review_without_attributes(kube_env: KubeEnv) -> None:
    # ValidateSelfSubjectAccessReviewSpec: a nil attributes pointer is printed null; the details name
    # the group and no kind.
    status, body = kube_env.raw("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                                {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {}})
    assert status == 422 and body["details"] == {"group": "authorization.k8s.io", "causes": [
        {"reason": "FieldValueInvalid", "field": "spec.resourceAttributes",
         "message": "Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be "
                    "specified"}]}


def test_an_event_without_reporting_controller(kube_env: KubeEnv) -> None:
    # validation/events.go ValidateEventCreate on the internal Event: ValidateQualifiedName("") gives
    # two causes before the required one; the details name the Kind Event and no group.
    body = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingInstance": "r", "action": "Drain",
            "reason": "Drained", "type": "Normal", "regarding": {"kind": "Node", "name": WORKERS[0]}}
    status, answer = kube_env.raw("POST", "/apis/events.k8s.io/v1/namespaces/default/events", body)
    assert status == 422 and answer["details"]["kind"] == "Event" and "group" not in answer["details"]
    causes = [(c["reason"], c["field"], c["message"][:45]) for c in answer["details"]["causes"]]
    assert causes == [("FieldValueInvalid", "reportingController", 'Invalid value: "": name part must be non-empt'),
                      ("FieldValueInvalid", "reportingController", 'Invalid value: "": name part must consist of '),
                      ("FieldValueRequired", "reportingController", "Required value")]


def test_mirror_pods_have_no_service_account_and_kubeadm_requests(kube_env: KubeEnv) -> None:
    # plugin/pkg/admission/serviceaccount: "a mirror pod may not reference service accounts"; kubeadm's
    # static pods request CPU (and etcd memory), so the API server derives qosClass Burstable.
    pod = kube_env.raw_json("GET", f"/api/v1/namespaces/kube-system/pods/kube-apiserver-{CONTROL[0]}")
    assert "serviceAccountName" not in pod["spec"] and "serviceAccount" not in pod["spec"]
    assert pod["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "250m"}}
    assert pod["status"]["qosClass"] == "Burstable"
