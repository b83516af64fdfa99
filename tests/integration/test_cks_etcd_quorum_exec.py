"""cks_etcd_quorum given the cluster's connection options: etcdctl in the etcd pods through pods/exec.

The module runs through ansible-playbook against ``cks-sim serve`` (small.yml: 3 stacked control
nodes with REAL etcd members); its answers come from the REAL etcdctl the sim runs for the exec,
reached through the kubernetes client's websocket stream. The controller is given no etcd endpoint
and no etcd certificate, except where the test shows that given endpoints take precedence.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from typing import Any, Iterator

import pytest
from cks_sim.tools import needs
from helpers import ANSIBLE_PLAYBOOK, COLLECTIONS, PYTHON, ClusterSim, ModuleRunError, run_module, running_sim

pytestmark = needs("etcd", "etcdctl")

MODULE = "cks_etcd_quorum"
# The module's environment without the operator's own connection variables: only what a test gives counts.
CLEAN_ENV = {k: v for k, v in os.environ.items() if not k.startswith(("CLOUDSTACK_", "K8S_AUTH_"))}


@pytest.fixture(scope="module")
def sim() -> Iterator[ClusterSim]:
    with running_sim("small.yml") as handle:
        yield handle


def controls(sim: ClusterSim) -> list[str]:
    return sorted(m["name"] for m in sim.env["etcd"]["members"])


def execs(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in calls if c.get("api") == "kubernetes" and c.get("resource") == "pods/exec"]


def commands(calls: list[dict[str, Any]]) -> set[str]:
    return {str(c.get("command")) for c in calls if c.get("command")}


def cloud_args(sim: ClusterSim) -> dict[str, Any]:
    return {"api_url": sim.env["cloudstack_endpoint"], "api_key": sim.env["cloudstack_key"],
            "api_secret": sim.env["cloudstack_secret"]}


def run_play(play: dict[str, Any]) -> list[dict[str, Any]]:
    """One play (module_defaults and all) on localhost: each task's registered result, in order."""
    with tempfile.TemporaryDirectory(prefix="cks-quorum-") as work:
        out_path = os.path.join(work, "results.json")
        names = [f"r{i}" for i in range(len(play["tasks"]))]
        tasks = [dict(task, register=name, ignore_errors=True) for task, name in zip(play["tasks"], names, strict=True)]
        tasks.append({"name": "write the results", "ansible.builtin.copy": {
            "content": "{{ [" + ", ".join(names) + "] | to_json }}", "dest": out_path}})
        playbook = os.path.join(work, "play.yml")
        with open(playbook, "w", encoding="utf-8") as fh:
            json.dump([dict(play, hosts="localhost", gather_facts=False, tasks=tasks)], fh)
        inventory = os.path.join(work, "inventory.ini")
        with open(inventory, "w", encoding="utf-8") as fh:
            fh.write(f"localhost ansible_connection=local ansible_python_interpreter={PYTHON}\n")
        env = dict(CLEAN_ENV, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1",
                   ANSIBLE_LOCAL_TEMP=os.path.join(work, "tmp"), ANSIBLE_HOME=os.path.join(work, "home"))
        proc = subprocess.run([ANSIBLE_PLAYBOOK, "-i", inventory, "-vvv", playbook], env=env, capture_output=True,
                              text=True, timeout=300, cwd=work, check=False)
        if not os.path.exists(out_path):
            raise ModuleRunError(f"ansible-playbook exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        with open(out_path, encoding="utf-8") as fh:
            results: list[dict[str, Any]] = json.load(fh)
    for result in results:
        result["_stdout"] = proc.stdout + proc.stderr
    return results


def test_a_kubeconfig_alone_is_asked_through_pods_exec_without_cloudstack(sim: ClusterSim) -> None:
    names = controls(sim)
    since = time.time()
    result = run_module(MODULE, {"kubeconfig": sim.env["kubeconfig"], "going_down": [names[0].upper()]},
                        env=dict(CLEAN_ENV))
    calls = sim.calls(since)
    assert not result.get("failed"), result.get("msg")
    assert result["safe"] is True and result["checked_through"] == "pods/exec"
    assert (result["voters"], result["quorum"], result["healthy"], result["healthy_after"], result["tolerates"]) == (
        3, 2, 3, 2, 0)
    assert result["going_down"] == [names[0]]  # the member as etcd names it
    assert sorted(m["name"] for m in result["members"]) == names and all(m["healthy"] for m in result["members"])
    # The pod asked is not the one on the node going down, named without case as the members are.
    assert result["msg"].endswith(")") and f"etcdctl in etcd-{names[0]})" not in result["msg"]
    assert "etcdctl in etcd-" in result["msg"]
    asked = execs(calls)
    assert asked and all(c.get("status") == 101 for c in asked)
    assert not [c for c in calls if c.get("api") == "cloudstack"], "a kubeconfig needs no CloudStack call"


def test_the_cluster_alone_fetches_its_own_kubeconfig_from_cloudstack(sim: ClusterSim) -> None:
    since = time.time()
    result = run_module(MODULE, dict(cloud_args(sim), cluster=sim.cluster()["name"]), env=dict(CLEAN_ENV))
    calls = sim.calls(since)
    assert not result.get("failed"), result.get("msg")
    assert result["safe"] is True and result["checked_through"] == "pods/exec"
    assert result["healthy"] == 3 and result["tolerates"] == 1
    assert "getKubernetesClusterConfig" in commands(calls) and execs(calls)
    assert sim.env["cloudstack_secret"] not in result["_stdout"]


def test_the_cks_group_module_defaults_reach_it_and_given_endpoints_take_precedence(sim: ClusterSim) -> None:
    names = controls(sim)
    etcd = sim.env["etcd"]
    direct = {"etcd_endpoints": [m["client_url"] for m in etcd["members"]], "etcd_ca_cert": etcd["ca_cert"],
              "etcd_client_cert": etcd["client_cert"], "etcd_client_key": etcd["client_key"]}
    defaults = {"group/cloudstack.cks.cks": dict(cloud_args(sim), cluster=sim.cluster()["name"])}
    since = time.time()
    by_exec, = run_play({"module_defaults": defaults, "tasks": [
        {"name": "two going down", f"cloudstack.cks.{MODULE}": {"going_down": names[:2], "fail_when_unsafe": False}}]})
    exec_calls = sim.calls(since)
    since = time.time()
    by_endpoints, = run_play({"module_defaults": defaults, "tasks": [
        {"name": "two going down", f"cloudstack.cks.{MODULE}": dict(direct, going_down=names[:2],
                                                                    fail_when_unsafe=False)}]})
    direct_calls = sim.calls(since)

    for result in (by_exec, by_endpoints):
        assert not result.get("failed"), result.get("msg")
        assert result["safe"] is False and (result["healthy_after"], result["quorum"], result["tolerates"]) == (1, 2, -1)
        assert "1 of 3 voting members healthy" in result["msg"]
    assert by_exec["checked_through"] == "pods/exec" and execs(exec_calls)
    # The only member left is the one whose pod answered.
    assert by_exec["msg"].endswith(f"(etcdctl in etcd-{names[2]})")
    assert by_endpoints["checked_through"] == "etcd_endpoints"
    assert not execs(direct_calls) and not [c for c in direct_calls if c.get("api") == "cloudstack"]
    assert sim.env["cloudstack_secret"] not in by_exec["_stdout"] + by_endpoints["_stdout"]


def test_quorum_about_to_be_lost_fails_with_the_arithmetic_and_every_value(sim: ClusterSim) -> None:
    names = controls(sim)
    result = run_module(MODULE, {"kubeconfig": sim.env["kubeconfig"], "going_down": names[1:]}, env=dict(CLEAN_ENV))
    assert result["failed"] and result["safe"] is False
    assert result["msg"].startswith("etcd would lose quorum")
    assert f"1 of 3 voting members healthy without {', '.join(names[1:])}; 2 needed" in result["msg"]
    assert result["msg"].endswith(f"(etcdctl in etcd-{names[0]})")
    assert result["checked_through"] == "pods/exec" and result["voters"] == 3 and len(result["members"]) == 3


def test_a_name_that_is_no_member_is_refused_through_pods_exec_too(sim: ClusterSim) -> None:
    result = run_module(MODULE, {"kubeconfig": sim.env["kubeconfig"], "going_down": ["no-such-node"]},
                        env=dict(CLEAN_ENV))
    assert result["failed"] and "going_down" in result["msg"] and "no-such-node" in result["msg"]
    assert "safe" not in result


def test_nothing_to_ask_through_is_refused_naming_what_to_give(sim: ClusterSim) -> None:
    since = time.time()
    result = run_module(MODULE, {"going_down": [controls(sim)[0]]}, env=dict(CLEAN_ENV))
    assert result["failed"]
    assert result["msg"].startswith("etcd_endpoints=[]: nothing to ask etcd through: give etcd_endpoints")
    assert "cluster" in result["msg"] and "kubeconfig" in result["msg"]
    assert sim.calls(since) == []


def test_a_timeout_of_zero_is_refused_not_replaced_by_the_default(sim: ClusterSim) -> None:
    since = time.time()
    result = run_module(MODULE, {"kubeconfig": sim.env["kubeconfig"], "etcd_timeout": 0}, env=dict(CLEAN_ENV))
    assert result["failed"] and result["msg"].startswith("etcd_timeout=0.0: must be more than 0 seconds")
    assert not execs(sim.calls(since))
