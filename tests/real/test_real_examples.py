"""Every example spec served on the real backend, as an operator starts it: ``cks-sim serve --kube real
--spec tests/sim/examples/<spec>`` (those of many nodes or clusters, real_cluster.LARGE, by
test_real_large_examples.py with the same checks). In every running cluster of the spec each serves
a real Kubernetes release (``kubectl version``), its budgets carry a status the disruption controller
wrote and every node is Ready; a cluster stopped in CloudStack has no API answering; the API servers
store in the cluster's own etcd members. For the shapes whose control plane differs (stacked etcd on three control nodes,
external etcd nodes, one control node) the rollout playbook then completes with the invariants
clean, restarting control nodes one at a time where the collection may, each taking its own API
server down with its VM. A spec of more clusters than the machine runs at once (inventory-200.yml's
two hundred) serves too, its planes by turns (real_kube/pool.py): a plane starts when its API is
first asked for, the least recently used idle one stopping, and comes back with its objects and
its nodes Ready."""

from __future__ import annotations

import functools
import glob
import json
import os
import time
from typing import Any

import kubernetes
import pytest
import requests
from cks_sim import harness
from cks_sim.harness import wait_until
from helpers import load_raw_spec, start_sim
from in_process_sims import RolloutSim
from real_cluster import LARGE, heartbeat_story, kubectl, pinned_release, served_and_checked

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
#: The examples of more clusters than the machine runs at once, served as their file says
#: (inventory-200.yml: --no-etcd) by the test of planes by turns below.
BY_TURNS = ("inventory-200.yml",)


def test_the_rollout_shapes_are_examples_the_real_backend_serves() -> None:
    # A renamed example must not silently drop a shape from the rollouts below.
    assert set(ROLLOUTS) <= set(EXAMPLES) - set(LARGE) - set(BY_TURNS)
    # The large ones are served by test_real_large_examples.py; a renamed one must not drop out.
    assert set(LARGE) | set(BY_TURNS) <= set(EXAMPLES)


@pytest.mark.parametrize("spec", [s for s in EXAMPLES if s not in LARGE and s not in BY_TURNS])
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
            assert run.rc == 0, run.output + heartbeat_story(sim)
            sim.assert_converged()
            restarted = {e["node"] for e in sim.timeline() if e.get("event") == "powered_on" and e["t"] >= since}
            assert restarted == {name for kind in types for name in sim.names(kind)}, restarted


def test_more_clusters_than_the_machine_runs_at_once_serve_by_turns(tmp_path_factory: pytest.TempPathFactory) -> None:
    # Two planes at once (the default, six a core, would start twelve at serve time: 2 minutes on the
    # shared machine); the first, the 100th and the last cluster asked for in turn, then the first again.
    spec = os.path.join(harness.EXAMPLES, "inventory-200.yml")
    with harness.SimProcess.start(spec, str(tmp_path_factory.mktemp("by-turns")), "--kube", "real", "--no-etcd",
                                  "--kube-planes", "2", ready_timeout=600) as process:
        sim = RolloutSim(process.env, process=process)
        try:
            clusters = sim.env["clusters"]
            assert len(clusters) == 200
            first, second, hundredth, last = clusters[0], clusters[1], clusters[99], clusters[-1]

            def planes() -> dict[str, str]:
                kube = sim.state()["kube"]
                return {c["name"]: kube[c["id"]]["plane"] for c in clusters}

            # At serve time the first two, in the spec's order; every kubeconfig names its endpoint.
            assert {n for n, state in planes().items() if state != "not started"} == {first["name"], second["name"]}
            assert len({c["kube_url"] for c in clusters}) == 200
            kubectl(sim, "create", "configmap", "kept", "--from-literal=kept=yes", kubeconfig=first["kubeconfig"])
            since = time.time()
            for cluster in (hundredth, last, first):
                # The first request starts the plane (the least recently used idle one stopping), then is
                # answered: the Python client waits as long as it takes. (kubectl gives up a TLS handshake
                # after 10 s, which a plane's start can take on a loaded machine: it asks once it runs.)
                client = kubernetes.config.new_client_from_config(config_file=cluster["kubeconfig"])
                try:
                    assert kubernetes.client.VersionApi(client).get_code().git_version == pinned_release()
                finally:
                    client.close()
                a_real_cluster_with_ready_nodes(sim, cluster["kubeconfig"])
            assert planes()[second["name"]] == planes()[hundredth["name"]] == "dormant"
            assert planes()[last["name"]] == planes()[first["name"]] == "running"
            events = [e for e in sim.timeline() if e["t"] >= since]
            stopped = [e["cluster"] for e in events if e.get("event") == "kube_plane_stopped_idle"]
            assert stopped == [second["id"], first["id"], hundredth["id"]], stopped
            assert [e["cluster"] for e in events if e.get("event") == "kube_plane_resumed"] == [first["id"]]
            # The first cluster's plane stopped and started again: its objects kept, its nodes never NotReady.
            assert kubectl(sim, "get", "configmap", "kept", "-o", "jsonpath={.data.kept}",
                           kubeconfig=first["kubeconfig"]) == "yes"
            assert not [e for e in events if e.get("event") == "notready" and e.get("cluster") == first["id"]]
            # Its calls read from its API server's audit log across the restart, each once.
            calls = [c for c in sim.calls() if c.get("api") == "kubernetes" and c["cluster"] == first["id"]
                     and c.get("resource") == "configmaps"]
            assert [c["verb"] for c in calls] == ["create", "get"] and calls[1]["name"] == "kept", calls
            # The snapshot of a dormant cluster is its last reading.
            dormant = sim.state()["kube"][hundredth["id"]]
            assert [n["ready"] for n in dormant["nodes"]] == ["True", "True"], dormant
            # An operator fetching a cluster's kubeconfig from CloudStack uses it next: its plane starts
            # then, with no connection to its endpoint, and kubectl's first request finds it running.
            assert planes()[second["name"]] == "dormant"
            config = sim.cs().getKubernetesClusterConfig(id=second["id"])["clusterconfig"]["configdata"]
            wait_until(lambda: planes()[second["name"]] == "running", 300, "the plane woken by its kubeconfig's fetch")
            fetched = tmp_path_factory.mktemp("fetched") / "kubeconfig"
            fetched.write_text(config, encoding="utf-8")
            a_real_cluster_with_ready_nodes(sim, str(fetched))
        finally:
            sim.close()


def a_real_cluster_with_ready_nodes(sim: RolloutSim, kubeconfig: str) -> None:
    served = json.loads(kubectl(sim, "version", "-o", "json", kubeconfig=kubeconfig))["serverVersion"]
    assert served["gitVersion"] == pinned_release()
    nodes = json.loads(kubectl(sim, "get", "nodes", "-o", "json", kubeconfig=kubeconfig))["items"]
    not_ready = [n["metadata"]["name"] for n in nodes
                 if not any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])]
    assert len(nodes) == 2 and not not_ready, not_ready


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
