"""Leases and ConfigMaps with optimistic concurrency; discovery, health and injected faults."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest
import urllib3
from kubernetes import client as k8s

from kubekit import CLUSTER_ID, WORKERS, KubeEnv, assert_known_fields, merge_patch_kwargs

LOCK = "cloudstack-cks-rollout"


def _micro(moment: datetime.datetime | None = None) -> str:
    moment = moment or datetime.datetime.now(datetime.timezone.utc)
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _lease(holder: str, when: str) -> k8s.V1Lease:
    return k8s.V1Lease(
        metadata=k8s.V1ObjectMeta(name=LOCK, namespace="kube-system"),
        spec=k8s.V1LeaseSpec(holder_identity=holder, lease_duration_seconds=600, acquire_time=when,
                             renew_time=when, lease_transitions=0),
    )


def _status(exc: k8s.ApiException) -> dict[str, Any]:
    body = exc.body.decode() if isinstance(exc.body, bytes) else exc.body
    return json.loads(body)


def test_lease_compare_and_set(kube_env: KubeEnv) -> None:
    coord = kube_env.coord
    created = coord.create_namespaced_lease("kube-system", _lease("run-a", _micro()))
    assert created.metadata.resource_version and created.spec.holder_identity == "run-a"
    with pytest.raises(k8s.ApiException) as info:
        coord.create_namespaced_lease("kube-system", _lease("run-b", _micro()))
    assert info.value.status == 409
    status = _status(info.value)
    assert status["reason"] == "AlreadyExists"
    assert status["details"] == {"name": LOCK, "group": "coordination.k8s.io", "kind": "leases"}

    mine = coord.read_namespaced_lease(LOCK, "kube-system")
    theirs = coord.read_namespaced_lease(LOCK, "kube-system")
    mine.spec.renew_time = _micro()
    renewed = coord.replace_namespaced_lease(LOCK, "kube-system", mine)
    assert int(renewed.metadata.resource_version) > int(theirs.metadata.resource_version)
    theirs.spec.holder_identity = "run-b"
    with pytest.raises(k8s.ApiException) as info:
        coord.replace_namespaced_lease(LOCK, "kube-system", theirs)
    assert info.value.status == 409 and _status(info.value)["reason"] == "Conflict"
    assert "the object has been modified" in _status(info.value)["message"]
    assert coord.read_namespaced_lease(LOCK, "kube-system").spec.holder_identity == "run-a"


def test_lease_microtime_needs_six_digits_and_zone(kube_env: KubeEnv) -> None:
    for bad in ("2026-01-02T03:04:05Z", "2026-01-02T03:04:05.123Z", "2026-01-02T03:04:05.123456"):
        body = kube_env.raw("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": LOCK}, "spec": {"holderIdentity": "x", "renewTime": bad}})
        assert body[0] == 400, bad
        assert body[1]["reason"] == "BadRequest" and bad in body[1]["message"]
    # The client's own serialisation of an aware datetime with microsecond 0 is rejected too.
    zero = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    with pytest.raises(k8s.ApiException) as info:
        kube_env.coord.create_namespaced_lease("kube-system", _lease("x", zero))  # type: ignore[arg-type]
    assert info.value.status == 400
    # An offset is accepted and served back in UTC.
    status, lease = kube_env.raw("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", {
        "metadata": {"name": LOCK}, "spec": {"holderIdentity": "x", "renewTime": "2026-01-02T05:04:05.000001+02:00"}})
    assert status == 201 and lease["spec"]["renewTime"] == "2026-01-02T03:04:05.000001Z"
    assert_known_fields(lease, "V1Lease")
    read = kube_env.coord.read_namespaced_lease(LOCK, "kube-system")
    assert read.spec.renew_time.microsecond == 1


def test_lease_patch_precondition_and_delete_preconditions(kube_env: KubeEnv) -> None:
    coord = kube_env.coord
    lease = coord.create_namespaced_lease("kube-system", _lease("run-a", _micro()))
    stale = lease.metadata.resource_version
    coord.patch_namespaced_lease(LOCK, "kube-system", {"spec": {"renewTime": _micro()}})
    with pytest.raises(k8s.ApiException) as info:
        coord.patch_namespaced_lease(LOCK, "kube-system", {"metadata": {"resourceVersion": stale},
                                                           "spec": {"holderIdentity": "run-b"}})
    assert info.value.status == 409 and _status(info.value)["reason"] == "Conflict"
    # The API server's own words (the rollout's one-write renewal tells a stale version by them).
    assert _status(info.value)["message"] == (
        f'Operation cannot be fulfilled on leases.coordination.k8s.io "{LOCK}": the object has been modified; '
        "please apply your changes to the latest version and try again")
    assert _status(info.value)["details"] == {"name": LOCK, "group": "coordination.k8s.io", "kind": "leases"}
    # Refused as a whole: the holder is unchanged.
    assert coord.read_namespaced_lease(LOCK, "kube-system").spec.holder_identity == "run-a"
    with pytest.raises(k8s.ApiException) as info:
        coord.delete_namespaced_lease(LOCK, "kube-system", body=k8s.V1DeleteOptions(
            preconditions=k8s.V1Preconditions(resource_version=stale)))
    assert info.value.status == 409
    current = coord.read_namespaced_lease(LOCK, "kube-system")
    coord.delete_namespaced_lease(LOCK, "kube-system", body=k8s.V1DeleteOptions(
        preconditions=k8s.V1Preconditions(resource_version=current.metadata.resource_version,
                                          uid=current.metadata.uid)))
    with pytest.raises(k8s.ApiException) as info:
        coord.read_namespaced_lease(LOCK, "kube-system")
    assert info.value.status == 404
    status = _status(info.value)
    assert status == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": f'leases.coordination.k8s.io "{LOCK}" not found', "reason": "NotFound",
                      "details": {"name": LOCK, "group": "coordination.k8s.io", "kind": "leases"}, "code": 404}


def test_configmap_record_compare_and_set(kube_env: KubeEnv) -> None:
    core = kube_env.core
    cm = k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name=LOCK, namespace="kube-system"),
                         data={"settings": json.dumps({"worker": {"offering": "cks-large"}})})
    created = core.create_namespaced_config_map("kube-system", cm)
    with pytest.raises(k8s.ApiException) as info:
        core.create_namespaced_config_map("kube-system", cm)
    assert info.value.status == 409 and _status(info.value)["reason"] == "AlreadyExists"
    first = core.read_namespaced_config_map(LOCK, "kube-system")
    first.data["cancel"] = "true"
    core.replace_namespaced_config_map(LOCK, "kube-system", first)
    created.data["last_error"] = "boom"
    with pytest.raises(k8s.ApiException) as info:
        core.replace_namespaced_config_map(LOCK, "kube-system", created)
    assert info.value.status == 409 and _status(info.value)["reason"] == "Conflict"
    merged = core.patch_namespaced_config_map(LOCK, "kube-system", {"data": {"cancel": None, "k": "v"}},
                                              **merge_patch_kwargs())
    assert merged.data == {"settings": cm.data["settings"], "k": "v"}
    listed = core.list_namespaced_config_map("kube-system")
    assert [c.metadata.name for c in listed.items] == [LOCK]
    with pytest.raises(k8s.ApiException) as info:
        core.create_namespaced_config_map("no-such-ns", k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="x")))
    assert info.value.status == 404
    with pytest.raises(k8s.ApiException) as info:
        core.replace_namespaced_config_map("absent", "kube-system",
                                           k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="absent")))
    assert info.value.status == 404


def test_discovery_documents_and_version(kube_env: KubeEnv) -> None:
    core_resources = kube_env.core.get_api_resources()
    names = {r.name for r in core_resources.resources}
    assert {"nodes", "pods", "pods/eviction", "configmaps", "events", "namespaces"} <= names
    eviction = next(r for r in core_resources.resources if r.name == "pods/eviction")
    assert (eviction.group, eviction.version, eviction.kind) == ("policy", "v1", "Eviction")
    groups = k8s.ApisApi(kube_env.api_client).get_api_versions()
    assert {"apps", "policy", "coordination.k8s.io"} <= {g.name for g in groups.groups}
    assert kube_env.policy.get_api_resources().resources[0].name == "poddisruptionbudgets"
    assert k8s.CoreApi(kube_env.api_client).get_api_versions().versions == ["v1"]
    version = k8s.VersionApi(kube_env.api_client).get_code()
    assert version.git_version == "v1.30.4" and (version.major, version.minor) == ("1", "30")
    for path, model in (("/api/v1", "V1APIResourceList"), ("/apis", "V1APIGroupList"),
                        ("/apis/apps/v1", "V1APIResourceList"), ("/version", "VersionInfo")):
        assert_known_fields(kube_env.raw_json("GET", path), model)


class _EtcdStandIn:
    """Answers ``cluster_ready`` as the etcd manager would; the real one is tested with real etcd."""

    def __init__(self) -> None:
        self.ready = True
        self.asked: list[str] = []

    def cluster_ready(self, cluster_id: str) -> bool:
        self.asked.append(cluster_id)
        return self.ready


def test_readyz_livez_and_etcd_check(kube_env: KubeEnv) -> None:
    assert kube_env.raw("GET", "/readyz") == (200, "ok")
    assert kube_env.raw("GET", "/livez") == (200, "ok")
    status, text = kube_env.raw("GET", "/readyz?verbose")
    assert status == 200 and "[+]etcd ok" in text and text.strip().endswith("readyz check passed")
    etcd = _EtcdStandIn()
    kube_env.sim.etcd = etcd
    try:
        assert kube_env.raw("GET", "/readyz/etcd") == (200, "ok")
        etcd.ready = False
        status, text = kube_env.raw("GET", "/readyz?verbose")
        assert status == 500 and "[-]etcd failed: reason withheld" in text and "[+]ping ok" in text
        assert kube_env.raw("GET", "/readyz/etcd")[0] == 500
        assert kube_env.raw("GET", "/readyz?exclude=etcd&exclude=etcd-readiness")[0] == 200
        assert etcd.asked and set(etcd.asked) == {CLUSTER_ID}
    finally:
        kube_env.sim.etcd = None
    assert kube_env.raw("GET", "/readyz", token=None)[0] == 401


def test_kube_error_fault_answers_status_for_matching_request(kube_env: KubeEnv) -> None:
    kube_env.sim.faults.add({"kind": "kube_error", "verb": "patch", "resource": "nodes", "name": WORKERS[0],
                             "status": 500, "count": 1})
    kube_env.core.read_node(WORKERS[0])  # other verbs pass
    with pytest.raises(k8s.ApiException) as info:
        kube_env.core.patch_node(WORKERS[0], {"spec": {"unschedulable": True}})
    assert info.value.status == 500 and _status(info.value)["kind"] == "Status"
    assert not kube_env.core.read_node(WORKERS[0]).spec.unschedulable
    kube_env.core.patch_node(WORKERS[0], {"spec": {"unschedulable": True}})  # one shot only
    kube_env.sim.faults.add({"kind": "kube_error", "verb": "create", "resource": "pods/eviction", "status": 429,
                             "count": 1})
    pod = kube_env.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={WORKERS[0]}").items[0]
    with pytest.raises(k8s.ApiException) as info:
        kube_env.core.create_namespaced_pod_eviction(pod.metadata.name, pod.metadata.namespace, k8s.V1Eviction(
            metadata=k8s.V1ObjectMeta(name=pod.metadata.name, namespace=pod.metadata.namespace)))
    assert info.value.status == 429


def test_transient_faults_5xx_and_dropped_connection(kube_env: KubeEnv) -> None:
    kube_env.sim.faults.add({"kind": "transient", "api": "kubernetes", "rate": 1.0, "mode": "5xx", "count": 1})
    with pytest.raises(k8s.ApiException) as info:
        kube_env.core.read_node(WORKERS[0])
    assert info.value.status == 503
    kube_env.core.read_node(WORKERS[0])
    kube_env.sim.faults.add({"kind": "transient", "api": "kubernetes", "rate": 1.0, "mode": "drop", "count": 1})
    kube_env.api_client.configuration.retries = 0
    client = k8s.CoreV1Api(k8s.ApiClient(kube_env.api_client.configuration))
    with pytest.raises((urllib3.exceptions.HTTPError, ConnectionError)):
        client.read_node(WORKERS[0], _request_timeout=5)
    assert kube_env.core.read_node(WORKERS[0]).metadata.name == WORKERS[0]
    dropped = [c for c in kube_env.sim.calls.list() if c.get("dropped")]
    assert len(dropped) == 1


def test_api_unreachable_while_every_control_node_is_off(kube_env: KubeEnv) -> None:
    from kubekit import CONTROL

    for name in CONTROL:
        kube_env.power_off(name)
    kube_env.api_client.configuration.retries = 0
    client = k8s.CoreV1Api(k8s.ApiClient(kube_env.api_client.configuration))
    with pytest.raises((urllib3.exceptions.HTTPError, ConnectionError)):
        client.list_node(_request_timeout=5)
    kube_env.power_on(CONTROL[0])
    assert len(kube_env.core.list_node().items) == 7


def test_patch_flavours_differ_on_lists_with_a_merge_key(kube_env: KubeEnv) -> None:
    path = "/api/v1/namespaces/default/configmaps"
    owner_a = {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "11111111-1111-4111-8111-111111111111"}
    owner_b = {"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": "22222222-2222-4222-8222-222222222222"}
    assert kube_env.raw("POST", path, {"metadata": {"name": "rec", "ownerReferences": [owner_a]},
                                       "data": {"x": "1"}})[0] == 201
    status, cm = kube_env.raw("PATCH", f"{path}/rec", {"metadata": {"ownerReferences": [owner_b]}},
                              headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert status == 200 and [o["name"] for o in cm["metadata"]["ownerReferences"]] == ["a", "b"]
    status, cm = kube_env.raw("PATCH", f"{path}/rec", {"metadata": {"ownerReferences": [owner_b]},
                                                       "data": {"x": None}},
                              headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200 and [o["name"] for o in cm["metadata"]["ownerReferences"]] == ["b"]
    assert "data" not in cm or "x" not in cm["data"]
    status, cm = kube_env.raw("PATCH", f"{path}/rec", [{"op": "add", "path": "/data", "value": {"y": "2"}}],
                              headers={"Content-Type": "application/json-patch+json"})
    assert status == 200 and cm["data"] == {"y": "2"}
    status, body = kube_env.raw("PATCH", f"{path}/rec", {"data": {"z": "3"}},
                                headers={"Content-Type": "application/apply-patch+yaml"})
    assert status == 415 and body["reason"] == "UnsupportedMediaType"


def test_kube_error_fault_with_retry_after_sends_the_header(kube_env: KubeEnv) -> None:
    """A 429 as the max-in-flight and priority-and-fairness filters answer it: the Status carries
    details.retryAfterSeconds and responsewriters.ErrorNegotiated sets the Retry-After header."""
    kube_env.sim.faults.add({"kind": "kube_error", "verb": "create", "resource": "pods/eviction", "status": 429,
                             "reason": "TooManyRequests", "message": "Too many requests, please try again later.",
                             "retry_after": 2, "count": 1})
    pod = kube_env.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={WORKERS[0]}").items[0]
    with pytest.raises(k8s.ApiException) as info:
        kube_env.core.create_namespaced_pod_eviction(pod.metadata.name, pod.metadata.namespace, k8s.V1Eviction(
            metadata=k8s.V1ObjectMeta(name=pod.metadata.name, namespace=pod.metadata.namespace)))
    assert info.value.status == 429 and info.value.headers["Retry-After"] == "2"
    status = _status(info.value)
    assert (status["reason"], status["details"]["retryAfterSeconds"]) == ("TooManyRequests", 2)
