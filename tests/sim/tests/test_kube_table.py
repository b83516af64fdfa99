"""The Table form of reads (kube_table.py), through the real client with kubectl's Accept header.

Columns and cells as ``pkg/printers/internalversion/printers.go`` prints them (``printNode``,
``printPod``); ``rest.DefaultTableConvertor`` for kinds without a printer; ages as
apimachinery's ``duration.HumanDuration``.
kubectl's Accept header is sent as kubectl sends it; the body is read as it comes.
"""

from __future__ import annotations

from typing import Any

import requests
import yaml

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from cks_sim.harness import SimHandle
from cks_sim.kube_table import human_duration, wants_table


KUBECTL_ACCEPT = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
                  "application/json")


def get_table(handle: SimHandle, path: str, accept: str = KUBECTL_ACCEPT) -> Any:
    with open(handle.env["kubeconfig"], encoding="utf-8") as fh:
        token = yaml.safe_load(fh)["users"][0]["user"]["token"]
    resp = requests.get(handle.env["kube_url"] + path, headers={"Accept": accept, "Authorization": f"Bearer {token}"},
                        verify=handle.env["kube_ca"], timeout=10)
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_nodes_table_has_the_api_servers_columns(sim: SimHandle) -> None:
    table = get_table(sim, "/api/v1/nodes")
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    columns = [(c["name"], c["priority"]) for c in table["columnDefinitions"]]
    assert columns[:5] == [("Name", 0), ("Status", 0), ("Roles", 0), ("Age", 0), ("Version", 0)]
    assert all(priority == 1 for _name, priority in columns[5:])
    rows = {r["cells"][0]: r for r in table["rows"]}
    control = next(name for name in rows if "-control-" in name)
    assert rows[control]["cells"][1:3] == ["Ready", "control-plane"]
    assert rows[control]["object"]["kind"] == "PartialObjectMetadata"
    assert rows[control]["object"]["metadata"]["name"] == control


def test_a_cordoned_node_shows_scheduling_disabled(sim: SimHandle) -> None:
    core = k8s.CoreV1Api(k8s_config.new_client_from_config(sim.env["kubeconfig"]))
    node = next(vm["name"].lower() for vm in sim.node_vms("worker"))
    core.patch_node(node, {"spec": {"unschedulable": True}})
    table = get_table(sim, f"/api/v1/nodes/{node}")
    assert [r["cells"][1] for r in table["rows"]] == ["Ready,SchedulingDisabled"]


def test_pods_table_and_the_default_convertor(sim: SimHandle) -> None:
    table = get_table(sim, "/api/v1/namespaces/kube-system/pods")
    assert [c["name"] for c in table["columnDefinitions"]][:5] == ["Name", "Ready", "Status", "Restarts", "Age"]
    etcd = [r["cells"] for r in table["rows"] if r["cells"][0].startswith("kube-apiserver-")]
    assert etcd and all(cells[1:4] == ["1/1", "Running", 0] for cells in etcd)
    statefulsets = get_table(sim, "/apis/apps/v1/namespaces/default/statefulsets")
    assert [c["name"] for c in statefulsets["columnDefinitions"]] == ["Name", "Created At"]


def test_plain_json_without_the_table_media_type(sim: SimHandle) -> None:
    assert get_table(sim, "/api/v1/nodes", accept="application/json")["kind"] == "NodeList"
    assert wants_table(KUBECTL_ACCEPT)
    assert not wants_table("application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")


def test_human_duration_as_apimachinery() -> None:
    assert [human_duration(s) for s in (0, 119, 120, 310, 600, 3 * 3600, 7 * 3600 + 60, 30 * 3600, 50 * 3600,
                                        20 * 86400, 800 * 86400)] == [
        "0s", "119s", "2m", "5m10s", "10m", "3h", "7h1m", "30h", "2d2h", "20d", "2y70d"]
