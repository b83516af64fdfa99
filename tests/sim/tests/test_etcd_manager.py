"""cks-sim's etcd members are real etcd processes: TLS, membership, quorum loss and restarts."""

from __future__ import annotations

import base64
import os
import socket
from typing import Any, Iterator

import pytest
import requests

from cks_sim.tools import needs
from cks_sim import core
from cks_sim.harness import wait_until
from cks_sim.etcd import EtcdManager

pytestmark = needs("etcd")

STACKED = ["K-Control-aa01", "K-Control-aa02", "K-Control-aa03"]


@pytest.fixture
def sim(tmp_path: Any) -> Iterator[core.Sim]:
    world = core.Sim({"time_scale": 0.01}, str(tmp_path))
    yield world
    world.scheduler.stop()


@pytest.fixture
def manager(sim: core.Sim, tmp_path: Any) -> Iterator[EtcdManager]:
    etcd = EtcdManager(sim, str(tmp_path), {})
    sim.etcd = etcd
    yield etcd
    etcd.stop_all()


# A member's health takes a request of its own: the waits on etcd poll at this pace.
ETCD_POLL = 0.1


def tls_kwargs(ep: dict) -> dict[str, Any]:
    if ep["mode"] == "stacked":
        return {"verify": ep["ca_cert"], "cert": (ep["client_cert"], ep["client_key"]), "timeout": 5}
    return {"timeout": 5}


def member_list(ep: dict, url: str) -> list[dict]:
    resp = requests.post(f"{url}/v3/cluster/member/list", json={}, **tls_kwargs(ep))
    resp.raise_for_status()
    return resp.json()["members"]


def put(ep: dict, key: str, value: str) -> None:
    body = {"key": base64.b64encode(key.encode()).decode(), "value": base64.b64encode(value.encode()).decode()}
    url = next(m["client_url"] for m in ep["members"] if m["running"])
    requests.post(f"{url}/v3/kv/put", json=body, **tls_kwargs(ep)).raise_for_status()


def get(ep: dict, url: str, key: str) -> str | None:
    body = {"key": base64.b64encode(key.encode()).decode()}
    resp = requests.post(f"{url}/v3/kv/range", json=body, **tls_kwargs(ep))
    resp.raise_for_status()
    kvs = resp.json().get("kvs", [])
    return base64.b64decode(kvs[0]["value"]).decode() if kvs else None


def healthy(ep: dict, url: str) -> bool:
    try:
        resp = requests.get(f"{url}/health", **dict(tls_kwargs(ep), timeout=2))
    except requests.RequestException:
        return False
    return resp.status_code == 200 and resp.json()["health"] == "true"


def running(manager: EtcdManager, cluster: str) -> list[str]:
    return [m["name"] for m in manager.endpoints(cluster)["members"] if m["running"]]


def quorum_violations(sim: core.Sim, cluster: str) -> list[dict]:
    return [v for v in sim.invariants.list() if v["kind"] == "etcd_quorum_lost" and v["cluster"] == cluster]


def test_stacked_members_are_kubeadm_like_tls(manager: EtcdManager) -> None:
    manager.add_cluster("c1", STACKED, "stacked")
    ep = manager.endpoints("c1")

    assert ep["mode"] == "stacked"
    assert [m["name"] for m in ep["members"]] == [n.lower() for n in STACKED]
    assert all(m["client_url"].startswith("https://127.0.0.1:") and m["running"] for m in ep["members"])
    members = member_list(ep, ep["members"][0]["client_url"])
    assert sorted(m["name"] for m in members) == sorted(n.lower() for n in STACKED)
    assert not any(m.get("isLearner") for m in members)
    for member in ep["members"]:
        assert healthy(ep, member["client_url"])
        # The metrics listener is plain HTTP and serves /health too (kubeadm's probes use it).
        assert requests.get(f"{member['metrics_url']}/health", timeout=5).json()["health"] == "true"
    # --client-cert-auth: the CA alone does not get a client in.
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"{ep['members'][0]['client_url']}/health", verify=ep["ca_cert"], timeout=5)
    # And the server certificate is only trusted through the cluster's etcd CA.
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"{ep['members'][0]['client_url']}/health", verify=True,
                     cert=(ep["client_cert"], ep["client_key"]), timeout=5)
    assert manager.cluster_ready("c1")


def test_one_of_three_stopped_keeps_quorum(manager: EtcdManager, sim: core.Sim) -> None:
    manager.add_cluster("c1", STACKED, "stacked")
    manager.vm_powered_off("K-Control-aa01")
    manager.wait_settled()

    ep = manager.endpoints("c1")
    assert running(manager, "c1") == ["k-control-aa02", "k-control-aa03"]
    assert not healthy(ep, ep["members"][0]["client_url"])
    assert manager.cluster_ready("c1")
    wait_until(lambda: healthy(ep, ep["members"][1]["client_url"]), interval=ETCD_POLL)
    assert quorum_violations(sim, "c1") == []
    # Stopping a member is not a membership change.
    assert len(member_list(ep, ep["members"][1]["client_url"])) == 3


def test_two_of_three_stopped_loses_quorum_and_restart_keeps_data(manager: EtcdManager, sim: core.Sim) -> None:
    manager.add_cluster("c1", STACKED, "stacked")
    ep = manager.endpoints("c1")
    put(ep, "/registry/cks-sim/probe", "before")
    ids_before = {m["name"]: m["ID"] for m in member_list(ep, ep["members"][2]["client_url"])}

    manager.vm_powered_off("K-Control-aa01")
    manager.vm_powered_off("K-Control-aa02")
    manager.wait_settled()

    assert running(manager, "c1") == ["k-control-aa03"]
    assert not manager.cluster_ready("c1")
    wait_until(lambda: not healthy(ep, ep["members"][2]["client_url"]), interval=ETCD_POLL)
    violations = quorum_violations(sim, "c1")
    assert len(violations) == 1
    assert violations[0]["quorum"] == 2 and violations[0]["running"] == 1
    assert violations[0]["down"] == ["k-control-aa01", "k-control-aa02"]

    manager.vm_powered_on("K-Control-aa02")
    manager.wait_settled()
    wait_until(lambda: manager.cluster_ready("c1"), interval=ETCD_POLL)
    # Same data dir: the key written before is there and the member kept its ID.
    assert get(ep, ep["members"][1]["client_url"], "/registry/cks-sim/probe") == "before"
    ids_after = {m["name"]: m["ID"] for m in member_list(ep, ep["members"][1]["client_url"])}
    assert ids_after == ids_before
    # One loss, one record: the restart does not add another.
    assert len(quorum_violations(sim, "c1")) == 1


@pytest.mark.parametrize("size", [3, 5])
def test_external_members_serve_plain_http(manager: EtcdManager, sim: core.Sim, size: int) -> None:
    vms = [f"k-etcd-{i:02x}" for i in range(size)]
    manager.add_cluster("ext", vms, "external")
    ep = manager.endpoints("ext")

    assert ep["mode"] == "external" and ep["ca_cert"] is None
    assert all(m["client_url"].startswith("http://127.0.0.1:") for m in ep["members"])
    assert len(member_list(ep, ep["members"][-1]["client_url"])) == size
    assert all(healthy(ep, m["client_url"]) for m in ep["members"])

    tolerated = (size - 1) // 2
    for vm in vms[:tolerated]:
        manager.vm_powered_off(vm)
    manager.wait_settled()
    assert manager.cluster_ready("ext")
    assert quorum_violations(sim, "ext") == []

    manager.vm_powered_off(vms[tolerated])
    manager.wait_settled()
    assert not manager.cluster_ready("ext")
    assert quorum_violations(sim, "ext")[0]["running"] == size - tolerated - 1


def test_etcd_kill_fault_kills_member_until_vm_restarts(manager: EtcdManager, sim: core.Sim) -> None:
    manager.add_cluster("c1", STACKED, "stacked")
    pid_before = manager.snapshot()["c1"]["members"][1]["pid"]

    sim.faults.add({"kind": "etcd_kill", "vm": "K-Control-aa02"})
    manager.wait_settled()

    snap = manager.snapshot()["c1"]["members"][1]
    assert snap["killed"] and snap["up"] and not snap["running"]
    assert manager.cluster_ready("c1")
    with pytest.raises(ValueError):
        sim.faults.add({"kind": "etcd_kill", "vm": "k-node-ffff"})

    # The VM stays Running; only its next power cycle brings the member back.
    manager.vm_powered_off("K-Control-aa02")
    manager.vm_powered_on("K-Control-aa02")
    manager.wait_settled()
    snap = manager.snapshot()["c1"]["members"][1]
    assert snap["running"] and snap["pid"] != pid_before and snap["starts"] == 2
    ep = manager.endpoints("c1")
    wait_until(lambda: healthy(ep, ep["members"][1]["client_url"]), interval=ETCD_POLL)


def test_power_changes_of_other_vms_are_ignored(manager: EtcdManager, sim: core.Sim) -> None:
    manager.add_cluster("c1", STACKED, "stacked")
    manager.vm_powered_off("k-node-0001")
    manager.vm_powered_on("k-node-0001")
    assert running(manager, "c1") == [n.lower() for n in STACKED]


def test_sim_power_hooks_drive_members(manager: EtcdManager, sim: core.Sim) -> None:
    manager.add_cluster("c1", STACKED, "stacked")
    with sim.lock:  # the CloudStack world calls these holding the lock; they must not block on etcd
        sim.vm_powered_off("c1", "K-Control-aa03")
    manager.wait_settled()
    assert "k-control-aa03" not in running(manager, "c1")
    with sim.lock:
        sim.vm_powered_on("c1", "K-Control-aa03", 2, 4096)
    manager.wait_settled()
    assert "k-control-aa03" in running(manager, "c1")


def test_stop_all_stops_every_process_then_removes_the_data_dirs(manager: EtcdManager) -> None:
    manager.add_cluster("a", STACKED, "stacked")
    manager.add_cluster("b", ["e1", "e2", "e3"], "external")
    members = [m for c in manager.snapshot().values() for m in c["members"]]
    pids = [m["pid"] for m in members]
    assert len(pids) == 6 and all(pids)
    member_dirs = [os.path.dirname(m["log"]) for m in members]
    # etcd preallocates its WAL (64 MiB a file): what a run's sims would leave on disk.
    wal = [os.path.join(d, "data", "member", "wal") for d in member_dirs]
    assert all(os.listdir(w) for w in wal)

    manager.stop_all()

    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}")
    assert not manager.cluster_ready("a")
    assert not any(os.path.exists(os.path.join(d, "data")) for d in member_dirs)
    # The logs (and a stacked member's certificates) stay for whoever reads why a test failed.
    assert all(os.path.getsize(m["log"]) > 0 for m in members)
    assert os.path.isdir(os.path.join(member_dirs[0], "pki"))


def test_member_names_must_be_unique(manager: EtcdManager) -> None:
    manager.add_cluster("a", ["e1", "e2", "e3"], "external")
    with pytest.raises(ValueError):
        manager.add_cluster("b", ["E1"], "external")
    with pytest.raises(ValueError):
        manager.add_cluster("c", ["x1"], "sideways")


def test_restart_waits_out_a_busy_port(manager: EtcdManager) -> None:
    manager.add_cluster("c1", STACKED, "stacked")
    manager.vm_powered_off("K-Control-aa01")
    manager.wait_settled()
    port = int(manager.endpoints("c1")["members"][0]["client_url"].rsplit(":", 1)[1])
    # A listener with SO_REUSEADDR (as a Go server binds) gets past the unlistening reservation.
    squatter = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squatter.bind(("127.0.0.1", port))
    squatter.listen()
    try:
        manager.vm_powered_on("K-Control-aa01")

        def failed_once() -> bool:
            snap = manager.snapshot()["c1"]["members"][0]
            return snap["starts"] >= 2 and not snap["running"]

        wait_until(failed_once, interval=ETCD_POLL)  # the restart met the busy port and exited
    finally:
        squatter.close()
    manager.wait_settled()

    snap = manager.snapshot()["c1"]["members"][0]
    assert snap["running"] and snap["starts"] >= 3  # the first start, a failed restart, a good one
    ep = manager.endpoints("c1")
    wait_until(lambda: healthy(ep, ep["members"][0]["client_url"]), interval=ETCD_POLL)


def test_a_stopped_members_ports_stay_its_own(manager: EtcdManager) -> None:
    """Another sim choosing ports (a plain bind, as _reserve_ports makes) cannot take a port of a member
    whose VM is stopped: the member starts again on it, as a real member on its VM's own address does."""
    manager.add_cluster("c1", STACKED, "stacked")
    manager.vm_powered_off("K-Control-aa01")
    manager.wait_settled()
    url = manager.endpoints("c1")["members"][0]["client_url"]
    other = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with pytest.raises(OSError):
            other.bind(("127.0.0.1", int(url.rsplit(":", 1)[1])))
    finally:
        other.close()
    manager.vm_powered_on("K-Control-aa01")
    manager.wait_settled()
    ep = manager.endpoints("c1")
    wait_until(lambda: healthy(ep, url), interval=ETCD_POLL)
