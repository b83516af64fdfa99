"""Every example spec served on the real backend, as an operator starts it: ``cks-sim serve --kube real
--spec tests/sim/examples/<spec>`` (those of many nodes or clusters, real_cluster.LARGE, by
test_real_large_examples.py with the same checks). In every running cluster of the spec each serves
a real Kubernetes release (``kubectl version``), its budgets carry a status the disruption controller
wrote and every node is Ready; a cluster stopped in CloudStack has no API answering; the API servers
store in the cluster's own etcd members. For the shapes whose control plane differs (stacked etcd on three control nodes,
external etcd nodes, one control node) the rollout playbook then completes with the invariants
clean, restarting control nodes one at a time where the collection may, each taking its own API
server down with its VM. A spec whose planes this machine's memory cannot hold (inventory-200.yml's
two hundred) is refused at once, saying why."""

from __future__ import annotations

import functools
import glob
import os
import re
import subprocess
import time
from typing import Any

import pytest
import requests
from cks_sim import harness
from cks_sim.harness import wait_until
from cks_sim.real_kube.world import APISERVER_MB, CONTROLLERS_MB, too_large
from cks_sim.spec import load_spec
from helpers import load_raw_spec, start_sim
from in_process_sims import RolloutSim
from real_cluster import LARGE, served_and_checked

pytestmark = pytest.mark.timeout(900)

EXAMPLES = sorted(os.path.basename(path) for path in glob.glob(os.path.join(harness.EXAMPLES, "*.yml")))
#: The shapes of control plane the rollout runs on, what it changes there and the node types it restarts.
ROLLOUTS: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    # stacked etcd, three control nodes: each control node's API server and member stop together.
    "small.yml": ({"rollout_node_root_disk_sizes": {"control": 30}}, ("control",)),
    # external etcd: the API servers stop with the control nodes, the members with the etcd nodes.
    "external-etcd.yml": ({"rollout_node_root_disk_sizes": {"control": 30, "etcd": 30}}, ("control", "etcd")),
    # one control node with stacked etcd: the collection refuses to restart it (its member is the whole
    # quorum), so its workers roll while the one API server serves throughout.
    "placement.yml": ({"rollout_node_offerings": {"worker": "cks-large"}}, ("worker",)),
}


def too_large_for_real(spec: str) -> str:
    """Why the real backend refuses ``spec`` on this machine ("": it serves it), from the spec as cks-sim reads it."""
    return too_large([c["control_nodes"] for c in load_spec(os.path.join(harness.EXAMPLES, spec))["clusters"]])


REFUSED = [spec for spec in EXAMPLES if too_large_for_real(spec)]


def test_the_rollout_shapes_are_examples_the_real_backend_serves() -> None:
    # A renamed or refused example must not silently drop a shape from the rollouts below.
    assert set(ROLLOUTS) <= set(EXAMPLES) - set(REFUSED) - set(LARGE)
    # The large ones are served by test_real_large_examples.py; a renamed one must not drop out.
    assert set(LARGE) <= set(EXAMPLES) - set(REFUSED)


@pytest.mark.parametrize("spec", [s for s in EXAMPLES if s not in REFUSED and s not in LARGE])
def test_an_example_serves_a_real_cluster_storing_in_its_own_etcd(
        spec: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    handle = functools.partial(RolloutSim, work_dir=str(tmp_path_factory.mktemp("rollout-run")))
    # The rollout shapes at 0.01 (the rollout's waits halved); the others as their file has them.
    with start_sim(spec, in_process=False, kube_backend="real", time_scale=0.01 if spec in ROLLOUTS else None,
                   state_dir=str(tmp_path_factory.mktemp("served")), handle=handle, ready_timeout=600) as sim:
        served_and_checked(sim, spec)
        if spec in ROLLOUTS:
            variables, types = ROLLOUTS[spec]
            since = time.time()
            run = sim.rollout(**variables)
            assert run.rc == 0, run.output
            sim.assert_converged()
            restarted = {e["node"] for e in sim.timeline() if e.get("event") == "powered_on" and e["t"] >= since}
            assert restarted == {name for kind in types for name in sim.names(kind)}, restarted


def test_the_real_backend_refuses_only_planes_the_memory_cannot_hold() -> None:
    # Any number of nodes: the kubelets' heartbeats keep up (threads, a grace period that grows with the cluster).
    one_plane = APISERVER_MB * 3 + CONTROLLERS_MB
    assert too_large([3], available_mb=one_plane) == ""
    assert too_large([1] * 12, available_mb=12 * (APISERVER_MB + CONTROLLERS_MB)) == ""
    why = too_large([1] * 200, available_mb=16000)
    assert why == f"--kube real runs a control plane for each cluster: 200 clusters' planes need about " \
        f"{200 * (APISERVER_MB + CONTROLLERS_MB)} MiB, this machine has 16000 MiB available", why


@pytest.mark.parametrize("spec", REFUSED)
def test_an_example_larger_than_the_real_backend_runs_is_refused_at_once(spec: str, tmp_path: Any) -> None:
    out = subprocess.run([harness.CKS_SIM, "serve", "--kube", "real", "--spec",
                          os.path.join(harness.EXAMPLES, spec), "--state-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 1, out
    # The memory available is read again by the sim: the same words, another count of MiB.
    needed = too_large_for_real(spec).split(", this machine has ")[0]
    assert re.fullmatch(f"cks-sim: {re.escape(needed)}, this machine has [0-9]+ MiB available: serve it with "
                        r"--kube memory \(cks-sim's own Kubernetes API\)", out.stderr.strip()), out.stderr
    assert not os.path.exists(os.path.join(tmp_path, "env.json"))
    assert not os.path.exists(os.path.join(tmp_path, "etcd")), "refused before any etcd member started"


def test_a_stopped_control_node_takes_its_api_server_down_and_the_others_serve(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    with start_sim("small.yml", kube_backend="real", state_dir=str(tmp_path_factory.mktemp("stop"))) as sim:
        world = next(iter(sim.sim.kube.values()))
        plane = world.plane
        first, second, third = sim.names("control")
        assert [s.etcd_servers for s in plane.apiservers.values()] == \
            [[m["client_url"]] for m in sim.env["etcd"]["members"]]  # each its own node's member
        sim.action(action="stop_vm", vm=first)
        wait_until(lambda: not plane.apiservers[first].alive(), 60, "the first control node's API server to stop")
        # Through the endpoint the kubeconfig names, the others answer.
        assert {n["metadata"]["name"] for n in sim.kube.list_nodes()} >= {first, second, third}
        assert world.api_available()
        # A second one stopped: the two members left of three have no quorum, and the API has no store.
        sim.action(action="stop_vm", vm=second)
        wait_until(lambda: not plane.apiservers[second].alive(), 60, "the second API server to stop")
        wait_until(lambda: readyz(sim) != 200, 60, "the last API server to lose its store")
        assert any(v["kind"] == "etcd_quorum_lost" for v in sim.invariants())
        sim.action(action="start_vm", vm=first)
        wait_until(lambda: readyz(sim) == 200, 120, "the API to answer again once quorum is back")
        wait_until(lambda: plane.apiservers[first].alive() and world.api_available(), 120, "the first API server back")


def test_an_endpoint_on_the_first_control_node_refuses_while_its_vm_is_stopped(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    raw = load_raw_spec("small.yml")
    raw["clusters"][0]["api_endpoint"] = "first_control_node"
    with start_sim(raw, kube_backend="real", state_dir=str(tmp_path_factory.mktemp("first"))) as sim:
        plane = next(iter(sim.sim.kube.values())).plane
        first = sim.names("control")[0]
        assert sim.env["kube_url"] == plane.apiservers[first].url != plane.internal_url
        sim.action(action="stop_vm", vm=first)
        wait_until(lambda: not plane.apiservers[first].alive(), 60, "the first control node's API server to stop")
        # Nothing listens at its address now (a real node's address answers no differently).
        with pytest.raises(requests.ConnectionError, match="Connection refused"):
            requests.get(f"{sim.env['kube_url']}/readyz", verify=sim.env["kube_ca"], timeout=5)
        # The other control nodes' API servers serve the cluster meanwhile (its kubelets, its controllers).
        assert requests.get(f"{plane.internal_url}/readyz", verify=sim.env["kube_ca"], timeout=5).status_code == 200
        sim.action(action="start_vm", vm=first)
        wait_until(lambda: readyz(sim) == 200, 120, "the first control node's API server to answer again")


def readyz(sim: RolloutSim) -> int:
    try:
        return requests.get(f"{sim.env['kube_url']}/readyz", verify=sim.env["kube_ca"], timeout=5).status_code
    except requests.RequestException:
        return 0
