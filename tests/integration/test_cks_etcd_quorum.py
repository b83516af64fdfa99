"""cks_etcd_quorum through ansible-playbook against real etcd members (cks-sim's EtcdManager)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from typing import Any, Iterator

import pytest
import requests

from cks_sim.tools import needs
from cks_sim import core
from cks_sim.harness import wait_until
from cks_sim.etcd import EtcdManager
from cks_sim.tls import make_tls

from helpers import ANSIBLE_PLAYBOOK, COLLECTIONS, PYTHON, ModuleRunError

# A member's health takes a request of its own: the waits on etcd poll at this pace.
ETCD_POLL = 0.1

pytestmark = needs("etcd")

MODULE = "cks_etcd_quorum"


@pytest.fixture
def manager(tmp_path: Any) -> Iterator[EtcdManager]:
    sim = core.Sim({"time_scale": 0.01}, str(tmp_path))
    etcd = EtcdManager(sim, str(tmp_path), {})
    sim.etcd = etcd
    yield etcd
    etcd.stop_all()
    sim.scheduler.stop()


def run_module(module: str, args: dict[str, Any]) -> dict[str, Any]:
    return run_tasks(module, [args])[0]


def run_tasks(module: str, args_list: list[dict[str, Any]], checked: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    """One ansible-playbook run with one task per ``args``: each result as a later task sees it.

    Like ``helpers.run_module``, but several questions of the same etcd state for the price of
    one ansible-playbook start. The tasks numbered in ``checked`` run in check mode.
    """
    with tempfile.TemporaryDirectory(prefix="cks-etcd-") as work:
        out_path = os.path.join(work, "results.json")
        tasks: list[dict[str, Any]] = [
            {"name": f"ask {i}", f"cloudstack.cks.{module}": args, "register": f"r{i}", "ignore_errors": True,
             "check_mode": i in checked}
            for i, args in enumerate(args_list)
        ]
        together = "[" + ", ".join(f"r{i}" for i in range(len(args_list))) + "]"
        tasks.append({"name": "write the results", "check_mode": False,
                      "ansible.builtin.copy": {"content": "{{ " + together + " | to_json }}", "dest": out_path}})
        playbook = os.path.join(work, "play.yml")
        with open(playbook, "w", encoding="utf-8") as fh:
            json.dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}], fh)
        inventory = os.path.join(work, "inventory.ini")
        with open(inventory, "w", encoding="utf-8") as fh:
            fh.write(f"localhost ansible_connection=local ansible_python_interpreter={PYTHON}\n")
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1",
                   ANSIBLE_LOCAL_TEMP=os.path.join(work, "tmp"), ANSIBLE_HOME=os.path.join(work, "home"))
        # check=False: a failed task is a result to read, not an error.
        proc = subprocess.run([ANSIBLE_PLAYBOOK, "-i", inventory, playbook], env=env, capture_output=True,
                              text=True, timeout=300, cwd=work, check=False)
        if not os.path.exists(out_path):
            raise ModuleRunError(f"ansible-playbook exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        with open(out_path, encoding="utf-8") as fh:
            results = json.load(fh)
    for result in results:
        result["_stdout"] = proc.stdout
    return results


def member_healthy(ep: dict, url: str) -> bool:
    kwargs: dict[str, Any] = {"timeout": 3}
    if ep["mode"] == "stacked":
        kwargs.update(verify=ep["ca_cert"], cert=(ep["client_cert"], ep["client_key"]))
    try:
        resp = requests.get(f"{url}/health", **kwargs)
    except requests.RequestException:
        return False
    return resp.status_code == 200 and resp.json().get("health") == "true"


def settle(manager: EtcdManager, cluster: str, healthy: set[str]) -> dict:
    """Carry out queued stops/starts, then wait until exactly ``healthy`` members say so."""
    manager.wait_settled()
    ep = manager.endpoints(cluster)
    wait_until(lambda: {m["name"] for m in ep["members"] if member_healthy(ep, m["client_url"])} == healthy,
               interval=ETCD_POLL)
    return ep


def module_args(ep: dict, **extra: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"endpoints": [m["client_url"] for m in ep["members"]], "timeout": 2}
    if ep["mode"] == "stacked":
        args.update(ca_cert=ep["ca_cert"], client_cert=ep["client_cert"], client_key=ep["client_key"])
    args.update(extra)
    return args


def by_name(result: dict) -> dict[str, dict]:
    return {m["name"]: m for m in result["members"]}


STACKED = ["K-Control-0a1b", "K-Control-0a1c", "K-Control-0a1d"]


def test_stacked_tls_one_may_go_down_not_two(manager: EtcdManager) -> None:
    manager.add_cluster("stk", STACKED, "stacked")
    ep = settle(manager, "stk", {n.lower() for n in STACKED})
    # On a control node the endpoint is the local member only: the others come from the member list.
    local_only = module_args(ep, endpoints=[ep["members"][0]["client_url"]])

    one, checked, two, reported = run_tasks(MODULE, [
        dict(local_only, going_down=["k-control-0a1b"]),
        dict(local_only, going_down=["k-control-0a1b"]),
        dict(local_only, going_down=["k-control-0a1b", "k-control-0a1c"]),
        dict(local_only, going_down=["k-control-0a1b", "k-control-0a1c"], fail_when_unsafe=False),
    ], checked=(1,))
    assert not one["failed"] and not one["changed"]
    assert one["safe"] is True and one["ready"] is True
    assert (one["voters"], one["quorum"], one["healthy"], one["healthy_after"], one["tolerates"]) == (3, 2, 3, 2, 0)
    assert sorted(by_name(one)) == [n.lower() for n in STACKED]
    assert all(m["healthy"] and not m["learner"] and m["client_urls"][0].startswith("https://")
               for m in one["members"])
    assert one["msg"] == "2 of 3 voting members healthy without k-control-0a1b; 2 needed"
    # The key is used, never shown.
    assert open(ep["client_key"]).read() not in one["_stdout"]

    # Read-only: check mode asks etcd just the same.
    assert checked["safe"] is True and not checked["changed"] and checked["members"] == one["members"]

    assert two["failed"] and two["safe"] is False
    assert two["msg"] == ("etcd would lose quorum (k-control-0a1b, k-control-0a1c going down); "
                          "1 of 3 voting members healthy without k-control-0a1b, k-control-0a1c; 2 needed")
    assert two["healthy_after"] == 1 and two["tolerates"] == -1

    assert not reported["failed"] and reported["safe"] is False


def test_stacked_tls_needs_the_etcd_ca_and_a_client_certificate(manager: EtcdManager, tmp_path: Any) -> None:
    manager.add_cluster("stk", STACKED, "stacked")
    ep = settle(manager, "stk", {n.lower() for n in STACKED})

    no_client_cert = module_args(ep)
    del no_client_cert["client_cert"], no_client_cert["client_key"]
    # Another CA (the API server's, say) does not verify etcd's server certificates.
    other_ca = make_tls(str(tmp_path / "other"))["ca_cert"]
    refused, unverified, relaxed = run_tasks(MODULE, [
        no_client_cert,
        module_args(ep, ca_cert=other_ca),
        # validate_certs=false skips verification of the server; the client certificate is still needed.
        module_args(ep, ca_cert=other_ca, etcd_validate_certs=False),
    ])
    assert refused["failed"]
    assert refused["msg"].startswith("no etcd endpoint gave the member list")
    assert "safe" not in refused

    assert unverified["failed"] and "CERTIFICATE_VERIFY_FAILED" in unverified["msg"]
    assert relaxed["safe"] is True


def test_stacked_member_already_down(manager: EtcdManager) -> None:
    manager.add_cluster("stk", STACKED, "stacked")
    manager.vm_powered_off("K-Control-0a1d")
    ep = settle(manager, "stk", {"k-control-0a1b", "k-control-0a1c"})

    other, itself = run_tasks(MODULE, [module_args(ep, going_down=["k-control-0a1b"]),
                                       module_args(ep, going_down=["k-control-0a1d"])])
    assert other["failed"] and other["safe"] is False
    assert not by_name(other)["k-control-0a1d"]["healthy"]
    assert "unhealthy: k-control-0a1d (" in other["msg"]
    assert "1 of 3 voting members healthy without k-control-0a1b; 2 needed" in other["msg"]

    # The member that is down may be the one to restart (a rollout resuming after a stop).
    assert itself["safe"] is True and itself["healthy"] == 2 and itself["healthy_after"] == 2


def test_killed_member_is_reported_unhealthy(manager: EtcdManager) -> None:
    manager.add_cluster("stk", STACKED, "stacked")
    manager.sim.faults.add({"kind": "etcd_kill", "vm": "K-Control-0a1c"})
    ep = settle(manager, "stk", {"k-control-0a1b", "k-control-0a1d"})

    result = run_module(MODULE, module_args(ep, endpoints=[ep["members"][1]["client_url"],
                                                           ep["members"][0]["client_url"]]))
    # The first endpoint is the dead member: the member list comes from the next one.
    assert result["safe"] is True and result["healthy"] == 2
    assert "Connection refused" in by_name(result)["k-control-0a1c"]["reason"]


@pytest.mark.parametrize("size", [3, 5])
def test_external_http_by_size(manager: EtcdManager, size: int) -> None:
    vms = [f"k-etcd-{i:02x}" for i in range(size)]
    manager.add_cluster("ext", vms, "external")
    ep = settle(manager, "ext", set(vms))
    tolerated = (size - 1) // 2

    ok, too_many = run_tasks(MODULE, [module_args(ep, going_down=vms[:tolerated]),
                                      module_args(ep, going_down=vms[:tolerated + 1])])
    assert ok["safe"] is True and ok["quorum"] == size // 2 + 1 and ok["tolerates"] == 0
    assert all(m["client_urls"][0].startswith("http://") for m in ok["members"])

    assert too_many["failed"] and too_many["tolerates"] == -1

    # One already down: one fewer may go.
    manager.vm_powered_off(vms[-1])
    ep = settle(manager, "ext", set(vms[:-1]))
    after, again = run_tasks(MODULE, [module_args(ep, going_down=vms[:tolerated - 1], fail_when_unsafe=False),
                                      module_args(ep, going_down=vms[:tolerated], fail_when_unsafe=False)])
    assert after["safe"] is True and after["healthy"] == size - 1
    assert again["safe"] is False
    assert f"unhealthy: {vms[-1]} (" in again["msg"]


def test_external_quorum_lost_is_not_ready(manager: EtcdManager) -> None:
    vms = ["k-etcd-a0", "k-etcd-a1", "k-etcd-a2"]
    manager.add_cluster("ext", vms, "external")
    manager.vm_powered_off("k-etcd-a1")
    manager.vm_powered_off("k-etcd-a2")
    ep = settle(manager, "ext", set())

    # 3.4 still answers the member list without quorum; health and the read tell the truth.
    now, unready = run_tasks(MODULE, [module_args(ep),
                                      module_args(ep, require_ready=False, fail_when_unsafe=False)])
    assert now["failed"] and now["safe"] is False and now["ready"] is False
    assert now["healthy"] == 0 and len(now["members"]) == 3
    assert "etcd would lose quorum (now)" in now["msg"] and "etcd is not ready" in now["msg"]
    assert "/health HTTP 503: health=false" in by_name(now)["k-etcd-a0"]["reason"]

    assert unready["safe"] is False and unready["ready"] is None

    manager.vm_powered_on("k-etcd-a1")
    ep = settle(manager, "ext", {"k-etcd-a0", "k-etcd-a1"})
    back = run_module(MODULE, module_args(ep))
    assert back["safe"] is True and back["ready"] is True and back["healthy"] == 2


def test_two_member_cluster_cannot_lose_one(manager: EtcdManager) -> None:
    vms = ["k-etcd-b0", "k-etcd-b1"]
    manager.add_cluster("two", vms, "external")
    ep = settle(manager, "two", set(vms))

    now, one = run_tasks(MODULE, [module_args(ep), module_args(ep, going_down=["k-etcd-b1"])])
    assert now["safe"] is True
    assert one["failed"] and one["quorum"] == 2
    assert "1 of 2 voting members healthy without k-etcd-b1; 2 needed" in one["msg"]


def test_unknown_member_name_is_refused(manager: EtcdManager) -> None:
    vms = ["k-etcd-c0", "k-etcd-c1", "k-etcd-c2"]
    manager.add_cluster("ext", vms, "external")
    ep = settle(manager, "ext", set(vms))

    result = run_module(MODULE, module_args(ep, going_down=["k-etcd-c9"]))
    assert result["failed"] and "safe" not in result
    assert result["msg"].startswith("going_down=['k-etcd-c9']: not etcd member name(s)")
    assert "k-etcd-c0, k-etcd-c1, k-etcd-c2" in result["msg"]
    # Names are matched without case (CKS keeps the cluster name's case in external members' names).
    assert run_module(MODULE, module_args(ep, going_down=["K-ETCD-C0"]))["safe"] is True
