"""Each cluster's API server at the root of its own address; the endpoint that is one node.

CKS hands out an admin.conf whose server is the cluster's endpoint (``https://<ip>:6443``, no
path): a load balancer or port forward in front of the control nodes on isolated networks
and VPCs, or the first control node itself where there is none (shared networks;
``KubernetesClusterStartWorker`` puts the first control node's address in
the kubeconfig then). Without a load balancer, nothing listens at that address while that
VM is down: clients get "connection refused", not an HTTP answer.
"""

from __future__ import annotations

import socket
import time
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from cks_sim.harness import SimHandle, wait_until
from simkit import small_spec


def server_of(kubeconfig_text: str) -> str:
    return yaml.safe_load(kubeconfig_text)["clusters"][0]["cluster"]["server"]


def refuses(url: str) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True
    except ConnectionResetError:
        # A connection that met the listening socket as it closed: not yet an answer, ask again.
        return False


def two_clusters(**second: Any) -> dict[str, Any]:
    spec = small_spec()
    other = dict(spec["clusters"][0], name="other", control_nodes=1, workers=1, **second)
    other.pop("nodes", None)
    spec["clusters"].append(other)
    return spec


def test_every_cluster_has_its_own_api_server_at_the_root(sim_factory: Any) -> None:
    handle = sim_factory(spec=two_clusters())
    clusters = handle.env["clusters"]
    assert len({c["kube_url"] for c in clusters}) == 2
    for cluster in clusters:
        url = urlsplit(cluster["kube_url"])
        assert url.scheme == "https" and url.path == ""
        # The kubeconfig file and getKubernetesClusterConfig hand out that address.
        with open(cluster["kubeconfig"], encoding="utf-8") as fh:
            assert server_of(fh.read()) == cluster["kube_url"]
        fetched = handle.cs().getKubernetesClusterConfig(id=cluster["id"])["clusterconfig"]["configdata"]
        assert server_of(fetched) == cluster["kube_url"]
        core = k8s.CoreV1Api(k8s_config.new_client_from_config(cluster["kubeconfig"]))
        names = {n.metadata.name for n in core.list_node().items}
        assert all(name.startswith(cluster["name"] + "-") for name in names)
    # The old prefix is no path of a real API server: 404 page not found.
    with open(clusters[0]["kubeconfig"], encoding="utf-8") as fh:
        token = yaml.safe_load(fh)["users"][0]["user"]["token"]
    missing = requests.get(f"{clusters[0]['kube_url']}/clusters/{clusters[0]['id']}/api/v1/nodes", timeout=10,
                           headers={"Authorization": f"Bearer {token}"}, verify=handle.env["kube_ca"])
    assert missing.status_code == 404 and missing.json()["reason"] == "NotFound"


def test_each_clusters_token_only_opens_its_own_api_server(sim_factory: Any) -> None:
    handle = sim_factory(spec=two_clusters())
    first, second = handle.env["clusters"]
    with open(first["kubeconfig"], encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    config["clusters"][0]["cluster"]["server"] = second["kube_url"]
    config["users"][0]["user"].pop("client-certificate-data")
    config["users"][0]["user"].pop("client-key-data")
    api = k8s.CoreV1Api(k8s_config.new_client_from_config_dict(config))
    with pytest.raises(k8s.ApiException) as refused:
        api.list_node()
    assert refused.value.status == 401


def test_endpoint_on_the_first_control_node_refuses_connections_while_it_is_down(sim_factory: Any) -> None:
    spec = small_spec()
    spec["clusters"][0]["api_endpoint"] = "first_control_node"
    handle: SimHandle = sim_factory(spec=spec)
    url = handle.env["kube_url"]
    core = k8s.CoreV1Api(k8s_config.new_client_from_config(handle.env["kubeconfig"]))
    first, second = handle.node_vms("control")[:2]
    # Another control node down changes nothing: the endpoint is the first one's address.
    handle.cs().stopVirtualMachine(id=second["id"], fetch_result=True)
    assert core.list_node().items
    handle.cs().stopVirtualMachine(id=first["id"], fetch_result=True)
    wait_until(lambda: refuses(url), timeout=10)
    with pytest.raises(urllib3.exceptions.MaxRetryError) as down:
        k8s.CoreV1Api(k8s_config.new_client_from_config(handle.env["kubeconfig"])).list_node(
            _request_timeout=2)
    assert "Connection refused" in str(down.value)
    timeline = handle.admin("GET", "/timeline")
    assert any(e.get("event") == "api_endpoint_refusing" for e in timeline)
    handle.cs().startVirtualMachine(id=first["id"], fetch_result=True)
    wait_until(lambda: not refuses(url), timeout=10)
    # Same address and port as before: the kubeconfig still works.
    assert k8s.CoreV1Api(k8s_config.new_client_from_config(handle.env["kubeconfig"])).list_node().items


def test_behind_a_load_balancer_the_endpoint_drops_requests_with_every_control_node_down(sim_factory: Any) -> None:
    """The load balancer still accepts connections but has no API server behind it."""
    handle = sim_factory()
    url = handle.env["kube_url"]
    for vm in handle.node_vms("control"):
        handle.cs().stopVirtualMachine(id=vm["id"], fetch_result=True)
    time.sleep(0.2)
    assert not refuses(url)
    core = k8s.CoreV1Api(k8s_config.new_client_from_config(handle.env["kubeconfig"]))
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        core.list_node(_request_timeout=2)


def test_api_endpoint_in_the_spec_is_checked(sim_factory: Any) -> None:
    from cks_sim.spec import SpecError, normalize

    spec = small_spec()
    spec["clusters"][0]["api_endpoint"] = "first-control"
    with pytest.raises(SpecError, match=r"clusters\[0\]\.api_endpoint must be one of load_balancer, first_control_node"):
        normalize(spec)
