"""cks-sim as a process: env.json once everything listens, a clean stop on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
from urllib.parse import urlparse, urlsplit

import pytest
import requests
import yaml
from cs import CloudStack

from cks_sim.harness import wait_until
from simkit import CKS_SIM, SMALL_SPEC

ENV_KEYS = {"cloudstack_endpoint", "cloudstack_key", "cloudstack_secret", "cluster_id", "cluster_name", "kubeconfig",
            "admin_url", "kube_ca", "etcd", "clusters"}


def _listening(url: str) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname, parsed.port), timeout=1):
            return True
    except OSError:
        return False


def test_serve_writes_env_and_stops_on_sigterm(sim_process):
    handle = sim_process(SMALL_SPEC)
    env = handle.env
    assert ENV_KEYS <= set(env)
    assert env["cloudstack_endpoint"].startswith("http://127.0.0.1:") and env["cloudstack_endpoint"].endswith("/client/api")
    assert env["cluster_name"] == "demo"
    assert [c["id"] for c in env["clusters"]] == [env["cluster_id"]]
    assert env["clusters"][0]["kubeconfig"] == env["kubeconfig"]
    assert os.path.exists(env["kube_ca"])
    with open(env["kubeconfig"], encoding="utf-8") as fh:
        kubeconfig = yaml.safe_load(fh)
    # Each cluster's API server at the root path of its own port, as a real one is.
    assert kubeconfig["clusters"][0]["cluster"]["server"] == env["clusters"][0]["kube_url"] == env["kube_url"]
    assert urlsplit(env["kube_url"]).path == ""
    # Stacked etcd: one real member per control node, named after its VM.
    members = env["etcd"]["members"]
    assert env["etcd"]["mode"] == "stacked" and len(members) == 3
    assert all(m["name"].startswith("demo-control-") for m in members)
    cs = CloudStack(endpoint=env["cloudstack_endpoint"], key=env["cloudstack_key"], secret=env["cloudstack_secret"])
    assert cs.listKubernetesClusters()["kubernetescluster"][0]["id"] == env["cluster_id"]
    state = requests.get(env["admin_url"] + "/state", timeout=10).json()
    assert {"cloud", "kube", "etcd", "faults"} <= set(state)
    assert handle.stop() == 0
    assert not os.path.exists(os.path.join(handle.state_dir, "env.json"))
    for url in [env["cloudstack_endpoint"], env["admin_url"], *(m["client_url"] for m in members)]:
        assert not _listening(url), url


def test_admin_shutdown_stops_the_process(sim_process):
    handle = sim_process(SMALL_SPEC, "--no-etcd")
    assert handle.env["etcd"] is None
    answer = requests.post(handle.env["admin_url"] + "/shutdown", timeout=10)
    assert answer.status_code == 202
    assert handle.proc.wait(30) == 0


def test_fixed_ports_and_scale_from_the_command_line(sim_process):
    port = _free_port()
    handle = sim_process(SMALL_SPEC, "--no-etcd", "--cloudstack-port", str(port), "--scale", "workers=12")
    assert handle.env["cloudstack_endpoint"] == f"http://127.0.0.1:{port}/client/api"
    env = handle.env
    cs = CloudStack(endpoint=env["cloudstack_endpoint"], key=env["cloudstack_key"], secret=env["cloudstack_secret"])
    assert cs.listKubernetesClusters()["kubernetescluster"][0]["size"] == 12


def test_a_bad_spec_is_a_clear_error(tmp_path):
    spec = tmp_path / "bad.yml"
    spec.write_text(yaml.safe_dump({"clusters": [{"name": "x", "offering": "nope"}],
                                    "service_offerings": [{"name": "a", "cpu": 2, "memory": 2048}]}))
    result = subprocess.run([sys.executable, CKS_SIM, "serve", "--spec", str(spec), "--state-dir", str(tmp_path / "s")],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert "clusters[0].offering" in result.stderr and "nope" in result.stderr


def test_check_prints_the_normalised_spec_without_the_secret():
    result = subprocess.run([sys.executable, CKS_SIM, "check", "--spec", SMALL_SPEC], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0
    spec = json.loads(result.stdout)
    assert spec["clusters"][0]["dedication_group"] == "dedicated-admin"
    assert "demo-secret-key" not in result.stdout


def test_admin_api_routes(sim):
    assert set(sim.admin("GET", "/")["endpoints"]) >= {"/state", "/calls", "/faults", "/actions"}
    with pytest.raises(urllib.error.HTTPError):
        sim.admin("POST", "/faults", {"kind": "no-such-fault"})
    with pytest.raises(urllib.error.HTTPError):
        sim.admin("POST", "/actions", {"action": "no-such-action"})
    fault = sim.admin("POST", "/faults", {"kind": "latency", "api": "kubernetes", "seconds": 0})
    sim.admin("DELETE", f"/faults/{fault['id']}")
    assert sim.admin("GET", "/faults") == []
    worker = sim.node_vms("worker")[0]
    job = sim.admin("POST", "/actions", {"action": "stop_vm", "vm": worker["name"]})
    wait_until(lambda: sim.cs().queryAsyncJobResult(jobid=job["jobid"])["jobstatus"] == 1)
    assert sim.vm(worker["name"])["state"] == "Stopped"
    state = sim.admin("GET", "/state")
    vms = {vm["name"]: vm for vm in state["cloud"]["clusters"][0]["vms"]}
    assert vms[worker["name"]]["state"] == "Stopped" and vms[worker["name"]]["host"] is None
    since = sim.admin("GET", "/calls")[-1]["t"]
    sim.cs().listZones()
    assert [c["command"] for c in sim.admin("GET", f"/calls?since={since}")][-1] == "listZones"
    changed = sim.admin("POST", "/actions", {"action": "set_config", "timings": {"stop": 5}, "max_unavailable": {"worker": 2}})
    assert changed["timings"]["stop"] == 5 and changed["max_unavailable"]["worker"] == 2
    sim.admin("POST", "/actions", {"action": "set_vm_state", "vm": worker["name"], "state": "Error"})
    assert sim.vm(worker["name"])["state"] == "Error"


def test_in_process_sim_with_real_etcd_stops_its_members(sim_factory):
    handle = sim_factory(etcd=True)
    members = handle.env["etcd"]["members"]
    assert all(_listening(m["client_url"]) for m in members)
    handle.server.stop()
    assert not any(_listening(m["client_url"]) for m in members)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_sigint_stops_too(sim_process):
    handle = sim_process(SMALL_SPEC, "--no-etcd")
    handle.proc.send_signal(signal.SIGINT)
    assert handle.proc.wait(30) == 0


def test_external_etcd_members_are_the_etcd_vms(sim_factory):
    import yaml as _yaml

    from simkit import SIM_DIR

    with open(os.path.join(SIM_DIR, "examples", "external-etcd.yml"), encoding="utf-8") as fh:
        raw = _yaml.safe_load(fh)
    raw["time_scale"] = 0.01
    handle = sim_factory(spec=raw, etcd=True)
    etcd = handle.env["etcd"]
    names = sorted(vm["name"].lower() for vm in handle.vms() if "-etcd-" in vm["name"])
    assert etcd["mode"] == "external" and sorted(m["name"] for m in etcd["members"]) == names
    assert all(m["client_url"].startswith("http://") for m in etcd["members"])
    cluster = handle.cks_cluster()
    assert (cluster["etcdofferingname"], cluster["controlofferingname"]) == ("etcd-small", "cks-large")
    assert len(cluster["etcdips"]) == 1
    # Stopping an etcd VM stops its member.
    etcd_vm = next(vm for vm in handle.vms() if "-etcd-" in vm["name"])
    handle.cs().stopVirtualMachine(id=etcd_vm["id"], fetch_result=True)
    member = next(m for m in etcd["members"] if m["name"] == etcd_vm["name"].lower())
    wait_until(lambda: not _listening(member["client_url"]))
