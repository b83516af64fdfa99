"""A control node whose kube-apiserver does not serve while the node stays Ready.

kubeadm's kube-apiserver manifest has a readinessProbe (httpGet /readyz, port 6443) on the node's
own API server (kubernetes cmd/kubeadm/app/phases/controlplane/manifests.go, GetStaticPodSpecs;
cmd/kubeadm/app/util/staticpod ReadinessProbe). While it fails the kubelet's prober sets the
mirror pod Ready=False, ContainersNotReady (pkg/kubelet/status generate.go GeneratePodReadyCondition);
the Node's own Ready is the kubelet's and stays True.
"""

from __future__ import annotations

import urllib.error
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config


def _ready(obj: Any) -> str:
    return next(c.status for c in obj.status.conditions if c.type == "Ready")


def test_an_api_server_that_does_not_serve_turns_its_pod_not_ready_and_back(sim_factory):
    handle = sim_factory()
    world = next(iter(handle.sim.kube.values()))
    control = sorted(n for n in world.nodes if "-control-" in n)[0]

    core = k8s.CoreV1Api(k8s_config.new_client_from_config(handle.env["kubeconfig"]))
    pod_name = f"kube-apiserver-{control}"
    assert _ready(core.read_namespaced_pod(pod_name, "kube-system")) == "True"

    answer = handle.admin("POST", "/actions", {"action": "set_api_server", "node": control, "serving": False})

    assert answer == {"node": control, "serving": False}
    pod = core.read_namespaced_pod(pod_name, "kube-system")
    ready = next(c for c in pod.status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("False", "ContainersNotReady") and "kube-apiserver" in ready.message
    assert pod.status.phase == "Running" and not pod.status.container_statuses[0].ready
    assert _ready(core.read_node(control)) == "True"  # the kubelet still posts: the node stays Ready

    handle.admin("POST", "/actions", {"action": "set_api_server", "node": control, "serving": True})
    assert _ready(core.read_namespaced_pod(pod_name, "kube-system")) == "True"


def test_a_node_without_an_api_server_is_refused(sim_factory):
    handle = sim_factory()
    world = next(iter(handle.sim.kube.values()))
    worker = sorted(n for n in world.nodes if "-node-" in n)[0]
    with pytest.raises(urllib.error.HTTPError) as refused:
        handle.admin("POST", "/actions", {"action": "set_api_server", "node": worker, "serving": False})
    assert "no control node" in refused.value.read().decode()
