"""The Kubernetes client, the rollout lock and the record through the real ``kubernetes`` client,
over HTTPS, against cks-sim (small.yml: 3 stacked control nodes, 4 workers, PDBs).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from typing import Any, Iterator

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from helpers import running_sim

from ansible_collections.cloudstack.cks.plugins.module_utils._state import record as rec
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.cloudstack import CloudStackClient
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.cloudstack_options import CloudStackOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import KubernetesError, LockHeld
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube import KubeClient
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube_options import KubeOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline, wait_for

ANNOTATION = "cloudstack.apache.org/rollout-boot-id"


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    with running_sim("small.yml") as handle:
        yield handle


@pytest.fixture(autouse=True)
def no_faults(sim: Any) -> Iterator[None]:
    yield
    sim.admin("DELETE", "/faults")


@pytest.fixture(scope="module")
def cloudstack(sim: Any) -> CloudStackClient:
    return CloudStackClient(CloudStackOptions(api_url=sim.env["cloudstack_endpoint"], api_key=sim.env["cloudstack_key"],
                                              api_secret=sim.env["cloudstack_secret"]))


@pytest.fixture()
def kube(sim: Any) -> Iterator[KubeClient]:
    client = KubeClient.connect(KubeOptions(kubeconfig=sim.env["kubeconfig"], request_timeout=10))
    yield client
    client.close()


def node_names(sim: Any, cloudstack: CloudStackClient) -> dict[str, list[str]]:
    vms = cloudstack.list("listVirtualMachines", listall=True)
    names = sorted(vm["name"].lower() for vm in vms)
    return {"control": [n for n in names if "-control-" in n], "worker": [n for n in names if "-node-" in n]}


# -- connecting -----------------------------------------------------------------------------------------

def test_kubeconfig_fetched_with_getKubernetesClusterConfig(sim: Any, cloudstack: CloudStackClient) -> None:
    before = cloudstack.calls["getKubernetesClusterConfig"]
    with KubeClient.connect(KubeOptions(), cloudstack=cloudstack, cluster_id=sim.env["cluster_id"]) as kube:
        temp_dir = os.path.dirname(kube.api_client.configuration.ssl_ca_cert)
        assert os.stat(temp_dir).st_mode & 0o777 == 0o700
        names = sorted(n["metadata"]["name"] for n in kube.list_nodes())
    assert cloudstack.calls["getKubernetesClusterConfig"] == before + 1
    expected = node_names(sim, cloudstack)
    assert names == sorted(expected["control"] + expected["worker"])
    assert not os.path.exists(temp_dir)  # the embedded certificates are gone at close


def test_kubeconfig_inline_yaml_and_dict(sim: Any) -> None:
    with open(sim.env["kubeconfig"], encoding="utf-8") as fh:
        text = fh.read()
    for value in (text, yaml.safe_load(text)):
        with KubeClient.connect(KubeOptions(kubeconfig=value)) as kube:
            assert kube.list_nodes()


def _foreign_ca(tmp_path: Any) -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "not-the-cluster-ca")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    path = tmp_path / "other-ca.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return str(path)


def test_wrong_ca_is_a_clear_tls_error_without_key_material(sim: Any, tmp_path: Any) -> None:
    with KubeClient.connect(KubeOptions(kubeconfig=sim.env["kubeconfig"], ca_cert=_foreign_ca(tmp_path))) as kube:
        with pytest.raises(KubernetesError) as info:
            kube.list_nodes()
    assert "TLS verification" in info.value.msg and "ca_cert" in info.value.msg
    with open(sim.env["kubeconfig"], encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    user = config["users"][0]["user"]
    for secret in (user.get("token"), user.get("client-key-data")):
        assert not secret or secret not in info.value.msg


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_validate_certs_false_skips_verification(sim: Any, tmp_path: Any) -> None:
    options = KubeOptions(kubeconfig=sim.env["kubeconfig"], ca_cert=_foreign_ca(tmp_path), validate_certs=False)
    with KubeClient.connect(options) as kube:
        assert kube.list_nodes()


def test_raw_paths(kube: KubeClient) -> None:
    assert kube.raw_get("/readyz")[0] == 200
    status, text = kube.raw_get("/readyz/etcd")
    assert status == 200 and "ok" in text
    status, text = kube.raw_get("/version")
    assert status == 200 and json.loads(text)["gitVersion"].startswith("v1.30")
    assert kube.raw_get("/readyz/no-such-check")[0] == 404


def test_request_timeout_applies_once_without_urllib3_retries(sim: Any) -> None:
    import time

    since = time.time()
    sim.fault(kind="latency", api="kubernetes", seconds=1.0)
    # A float: 35.x would silently ignore it as a plain number, which is why a tuple goes out.
    with KubeClient.connect(KubeOptions(kubeconfig=sim.env["kubeconfig"], request_timeout=0.3)) as kube:
        with pytest.raises(KubernetesError) as info:
            kube.list_nodes()
    assert "no answer" in info.value.msg and "0.3s" in info.value.msg
    sim.admin("DELETE", "/faults")

    def logged() -> list[dict[str, Any]]:
        return [c for c in sim.calls(since) if c.get("api") == "kubernetes" and c.get("path", "").endswith("/api/v1/nodes")]

    wait_for(logged, Deadline(10), interval=0.1, what="the sim to log the slow request")
    time.sleep(1.0)  # a retry (sent when the first attempt timed out) would be logged by now
    assert len(logged()) == 1


def test_api_errors_carry_status_and_reason(kube: KubeClient) -> None:
    with pytest.raises(KubernetesError) as info:
        kube.read_node("no-such-node")
    assert (info.value.status, info.value.reason) == (404, "NotFound")
    assert "no-such-node" in info.value.msg


# -- nodes, pods, evictions ---------------------------------------------------------------------------------

def test_patch_node_annotates_cordons_and_removes(kube: KubeClient, sim: Any, cloudstack: CloudStackClient) -> None:
    name = node_names(sim, cloudstack)["worker"][0]
    boot_id = kube.read_node(name)["status"]["nodeInfo"]["bootID"]
    node = kube.patch_node(name, {"metadata": {"annotations": {ANNOTATION: boot_id}}, "spec": {"unschedulable": True}})
    assert node["metadata"]["annotations"][ANNOTATION] == boot_id and node["spec"]["unschedulable"] is True
    assert kube.read_node(name)["spec"]["unschedulable"] is True
    node = kube.patch_node(name, {"metadata": {"annotations": {ANNOTATION: None}}, "spec": {"unschedulable": None}})
    assert ANNOTATION not in (node["metadata"].get("annotations") or {})
    assert not node["spec"].get("unschedulable")


def test_list_pods_of_one_node(kube: KubeClient, sim: Any, cloudstack: CloudStackClient) -> None:
    name = node_names(sim, cloudstack)["worker"][0]
    pods = kube.list_pods(name)
    assert pods and all(p["spec"]["nodeName"] == name for p in pods)
    one = pods[0]
    assert kube.read_pod(one["metadata"]["namespace"], one["metadata"]["name"])["metadata"]["uid"] == one["metadata"]["uid"]
    assert kube.read_pod("default", "no-such-pod") is None


def test_eviction_blocked_by_pdb_names_it(kube: KubeClient, sim: Any) -> None:
    sim.fault(kind="pdb_block", namespace="default", name="web")
    pod = _pod_of(kube, "default", "web-")
    result = kube.evict("default", pod["metadata"]["name"], grace_seconds=5)
    assert (result.outcome, result.status, result.pdb) == ("blocked", 429, "web")
    assert "disruption budget web" in result.message
    assert kube.read_pod("default", pod["metadata"]["name"]) is not None


def test_eviction_accepted_then_pod_goes(kube: KubeClient) -> None:
    pod = _pod_of(kube, "default", "cache-")
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    result = kube.evict("default", name)
    assert result.ok and result.outcome == "evicted"

    def gone() -> bool:
        now = kube.read_pod("default", name)
        return now is None or now["metadata"]["uid"] != uid

    wait_for(gone, Deadline(30), interval=0.1, what=f"pod {name} gone")
    assert kube.evict("default", name).outcome in ("gone", "evicted")  # a new pod may reuse the name


def _pod_of(kube: KubeClient, namespace: str, prefix: str) -> dict[str, Any]:
    for node in kube.list_nodes():
        for pod in kube.list_pods(node["metadata"]["name"]):
            if pod["metadata"]["namespace"] == namespace and pod["metadata"]["name"].startswith(prefix) \
                    and not pod["metadata"].get("deletionTimestamp"):
                return pod
    raise AssertionError(f"no {namespace}/{prefix}* pod")


def test_pdbs_and_daemonsets(kube: KubeClient) -> None:
    names = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in kube.list_pdbs()}
    assert {("default", "web"), ("default", "db"), ("kube-system", "coredns")} <= names
    assert kube.read_daemonset("kube-system", "kube-proxy")["metadata"]["name"] == "kube-proxy"
    assert kube.read_daemonset("kube-system", "no-such-daemonset") is None


# -- the lock ---------------------------------------------------------------------------------------------

def later(seconds: float) -> rec.Clock:
    return lambda: rec.utcnow() + dt.timedelta(seconds=seconds)


@pytest.fixture()
def lock_name(request: pytest.FixtureRequest) -> str:
    return f"test-lock-{request.node.name.replace('_', '-')[:40].lower()}"


def test_lock_acquire_renew_conflict_release(kube: KubeClient, lock_name: str) -> None:
    a = rec.Lock(kube, holder_identity="run-a", duration_seconds=60, name=lock_name)
    b = rec.Lock(kube, holder_identity="run-b", duration_seconds=60, name=lock_name)
    first = a.acquire()
    assert first.holder == "run-a" and first.held
    lease = kube.get_lease("kube-system", lock_name)
    assert lease["spec"]["renewTime"].endswith("Z") and len(lease["spec"]["renewTime"].split(".")[1]) == 7
    with pytest.raises(LockHeld) as info:
        b.acquire()
    assert "run-a" in info.value.msg and info.value.details["since"] == first.acquire_time
    renewed = a.renew()
    assert renewed.resource_version != first.resource_version and renewed.acquire_time == first.acquire_time
    assert a.release() is True
    assert a.release() is False  # twice: nothing left to release
    assert kube.get_lease("kube-system", lock_name)["spec"]["holderIdentity"] in ("", None)
    assert b.acquire().holder == "run-b"
    assert b.release() is True


def test_lock_takeover_after_expiry_and_the_old_holder_loses(kube: KubeClient, lock_name: str) -> None:
    old = rec.Lock(kube, holder_identity="run-old", duration_seconds=30, name=lock_name)
    old.acquire()
    # The new rollout runs 2 minutes later (its clock), the old one never renewed.
    new = rec.Lock(kube, holder_identity="run-new", duration_seconds=30, name=lock_name, clock=later(120))
    taken = new.acquire()
    assert taken.holder == "run-new" and taken.transitions == 1
    assert taken.taken_over_from["holder"] == "run-old"
    with pytest.raises(rec.LockLost, match="run-new"):
        old.renew()
    assert old.release() is False  # it does not hold it any more: nothing changes
    assert kube.get_lease("kube-system", lock_name)["spec"]["holderIdentity"] == "run-new"
    assert new.release() is True


def test_lock_race_exactly_one_wins(kube: KubeClient, lock_name: str) -> None:
    a = rec.Lock(kube, holder_identity="run-a", duration_seconds=30, name=lock_name)
    a.acquire()
    stale = kube.get_lease("kube-system", lock_name)
    a.renew()  # the lease moves on: a write with the old resourceVersion must lose
    stale["spec"]["holderIdentity"] = "intruder"
    with pytest.raises(KubernetesError) as info:
        kube.replace_lease("kube-system", lock_name, stale)
    assert (info.value.status, info.value.reason) == (409, "Conflict")
    assert a.read().holder == "run-a"
    a.release()


# -- the record -------------------------------------------------------------------------------------------

def test_record_compare_and_set(kube: KubeClient) -> None:
    store = rec.RecordStore(kube, name="test-record-cas")
    assert store.read() is None
    first = store.write(rec.Record(settings={"worker": {"serviceofferingid": "o-1"}}), None)
    with pytest.raises(rec.RecordConflict) as info:
        store.write(rec.Record(settings={"worker": {"serviceofferingid": "o-2"}}), None)
    assert info.value.current.settings == first.settings
    second = store.write(rec.Record(settings={"worker": {"serviceofferingid": "o-3"}}, last_error="x"),
                         first.resource_version)
    with pytest.raises(rec.RecordConflict):
        store.write(rec.Record(), first.resource_version)
    assert store.read() == second
    cancelled = store.set_cancel()
    assert cancelled.cancel and cancelled.settings == second.settings and cancelled.last_error == "x"
    configmap = kube.get_configmap("kube-system", "test-record-cas")
    assert all(isinstance(v, str) for v in configmap["data"].values())
    assert kube.delete_configmap("kube-system", "test-record-cas") is True
    assert kube.delete_configmap("kube-system", "test-record-cas") is False


def test_the_real_record_and_lock_names(kube: KubeClient) -> None:
    lock = rec.Lock(kube, holder_identity="names-test")
    assert (lock.namespace, lock.name) == ("kube-system", "cloudstack-cks-rollout")
    assert rec.RecordStore(kube).name == "cloudstack-cks-rollout"
