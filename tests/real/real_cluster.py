"""What the real tier's test modules share: kubectl against a sim's cluster, the release
tests/kube-plane pins (what ``kubectl version`` must name), and the checks of a served example spec."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
from typing import Any, Optional

import requests
from cks_sim.harness import wait_until
from cks_sim.real_kube.world import OUT_OF_SERVICE_TAINTS
from helpers import load_raw_spec
from in_process_sims import RolloutSim

KUBECTL = shutil.which("kubectl") or "kubectl"
#: The examples of many nodes or many clusters, served by test_real_large_examples.py: ``make real``
#: runs a file's tests on one worker (``--dist loadfile``), and these take about ten minutes together.
LARGE = ("fleet.yml", "inventory.yml", "large.yml", "page-size-100.yml")
GO_MOD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kube-plane", "go.mod")


def kubectl(sim: RolloutSim, *args: str, kubeconfig: Optional[str] = None) -> str:
    """kubectl against the sim's first cluster, or the one ``kubeconfig`` names."""
    out = subprocess.run([KUBECTL, "--kubeconfig", kubeconfig or sim.env["kubeconfig"], *args], capture_output=True,
                         text=True, timeout=90, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout


def heartbeat_story(sim: RolloutSim) -> str:
    """What a failed rollout's message adds on the real backend: each cluster's node lifecycle grace,
    its kubelets' renewal interval and the longest gap between two renewals (from /state), and the
    timeline's NotReady readings: a node the rollout found not Ready is told from a lapsed lease."""
    lines = [f"--- heartbeats {cluster}: {kube.get('heartbeats')}" for cluster, kube in sim.state()["kube"].items()]
    lines += [f"--- {event}" for event in sim.timeline() if event.get("event") == "notready"]
    lines += [f"--- {readiness(node)}" for node in sim.kube.list_nodes()]
    return "\n".join(lines)


def readiness(node: dict[str, Any]) -> str:
    """A Node's name, Ready condition (status, reason, since when) and taints: why it is not Ready."""
    ready = next((c for c in node["status"].get("conditions") or [] if c["type"] == "Ready"), {})
    taints = [t["key"] for t in node["spec"].get("taints") or []]
    return (f"{node['metadata']['name']}: Ready={ready.get('status')} ({ready.get('reason')}, "
            f"since {ready.get('lastTransitionTime')}), taints {taints}")


def pinned_release() -> str:
    with open(GO_MOD, encoding="utf-8") as handle:
        found = re.search(r"^\s*k8s\.io/kubernetes (v[0-9.]+)$", handle.read(), re.M)
    assert found, GO_MOD
    return found.group(1)


def served_and_checked(sim: RolloutSim, spec: str) -> None:
    """The example ``spec`` served on the real backend: every running cluster a real one (below), the
    spec's stopped ones without an API, the first cluster's nodes read back from its etcd members."""
    assert sim.env["kube_version"] == pinned_release()
    stopped = set()
    kube = sim.state()["kube"]
    for cluster in sim.env["clusters"]:
        if any(node["vm_running"] for node in kube[cluster["id"]]["nodes"]):
            a_real_cluster_with_budgets_and_ready_nodes(sim, cluster["kubeconfig"])
        else:
            stopped.add(cluster["name"])  # inventory.yml's acme-dev: no API answers, as on a stopped CKS cluster
    assert stopped == {c["name"] for c in load_raw_spec(spec)["clusters"] if c.get("state") == "Stopped"}
    stored_in_the_clusters_etcd(sim)


def a_real_cluster_with_budgets_and_ready_nodes(sim: RolloutSim, kubeconfig: str) -> None:
    """The cluster ``kubeconfig`` names serves the pinned release, its budgets carry the disruption
    controller's status, and every node is Ready and in service (its kubelet's lease renewed within the
    node lifecycle controller's grace, however many nodes the sim plays)."""
    served = json.loads(kubectl(sim, "version", "-o", "json", kubeconfig=kubeconfig))["serverVersion"]
    assert served["gitVersion"] == pinned_release()
    budgets_computed_by_the_disruption_controller(sim, kubeconfig)
    nodes = json.loads(kubectl(sim, "get", "nodes", "-o", "json", kubeconfig=kubeconfig))["items"]
    # In service: Ready, and none of the taints the node lifecycle controller keeps on a node it does not
    # count Ready (the API server gives every new Node not-ready; the collection counts either as not Ready).
    not_ready = [readiness(n) for n in nodes
                 if not any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
                 or {t["key"] for t in n["spec"].get("taints") or []} & OUT_OF_SERVICE_TAINTS]
    assert nodes and not not_ready, not_ready


def budgets_computed_by_the_disruption_controller(sim: RolloutSim, kubeconfig: Optional[str] = None) -> None:
    """Each budget's status is the disruption controller's: for its generation, and allowing what its
    healthy pods leave over its desired ones. A spec without budgets gets one over its kube-proxy pods."""
    budgets = json.loads(kubectl(sim, "get", "pdb", "-A", "-o", "json", kubeconfig=kubeconfig))["items"]
    if not budgets:
        kubectl(sim, "create", "pdb", "kube-proxy", "-n", "kube-system", "--selector", "app=kube-proxy",
                "--min-available", "1", kubeconfig=kubeconfig)
        wait_until(lambda: status_of(sim, "kube-system", "kube-proxy", kubeconfig) is not None, 60,
                   "the disruption controller to write the new budget's status")
        budgets = json.loads(kubectl(sim, "get", "pdb", "-A", "-o", "json", kubeconfig=kubeconfig))["items"]
    for budget in budgets:
        status = budget.get("status") or {}
        assert status.get("observedGeneration") == budget["metadata"]["generation"], budget
        assert status["disruptionsAllowed"] == max(0, status["currentHealthy"] - status["desiredHealthy"]), budget
        assert status["expectedPods"] > 0, budget


def status_of(sim: RolloutSim, namespace: str, name: str, kubeconfig: Optional[str] = None) -> Optional[dict[str, Any]]:
    status = json.loads(kubectl(sim, "get", "pdb", name, "-n", namespace, "-o", "json",
                                kubeconfig=kubeconfig)).get("status") or {}
    return status if status.get("observedGeneration") else None


def stored_in_the_clusters_etcd(sim: RolloutSim) -> None:
    """The nodes' objects are in the cluster's own etcd members (read from them, not through the API)."""
    etcd = sim.env["etcd"]
    assert etcd, "the example runs with etcd members"
    tls: dict[str, Any] = {}
    if etcd["mode"] == "stacked":
        tls = {"verify": etcd["ca_cert"], "cert": (etcd["client_cert"], etcd["client_key"])}
    prefix = b"/registry/minions/"
    found = requests.post(f"{etcd['members'][-1]['client_url']}/v3/kv/range", timeout=10, json={
        "key": base64.b64encode(prefix).decode(), "range_end": base64.b64encode(prefix[:-1] + b"0").decode(),
        "keys_only": True}, **tls).json()
    stored = {base64.b64decode(kv["key"])[len(prefix):].decode() for kv in found.get("kvs") or []}
    assert stored == {n["metadata"]["name"] for n in sim.kube.list_nodes()}, stored
