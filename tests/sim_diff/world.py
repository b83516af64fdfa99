"""The two APIs the replay talks to, and the same starting objects on both.

cks-sim's side is one simulated cluster's Kubernetes on its own (its ``Sim``, ``KubeWorld`` and
HTTPS server, as the sim's own tests build it) from ``SPEC``: the sim builds its nodes, pods and
budgets from a spec, as its kubelets and controllers would have. The real side gets the same
objects through its API, as a kubelet and a user would write them: each Node created and its
status written (``nodes/status``), each node's Lease in ``kube-node-lease``, each Pod created on
its node and its status written (``pods/status``), each PodDisruptionBudget created; the real
disruption controller then computes the budgets' status. What the API server sets itself (uids,
resourceVersions, timestamps) differs and is left out of every comparison.

No kubelet runs on the real side: run.py starts the control plane with a node-monitor grace period
longer than the replay, so the node lifecycle controller keeps the nodes Ready throughout.
"""

from __future__ import annotations

import copy
import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import requests
from requests.adapters import HTTPAdapter

CLUSTER_ID = "5d1ff000-0000-4000-8000-000000000001"
CONTROL = "demo-control-0a1"
WORKERS = ["demo-node-0b2", "demo-node-1b2"]

# Pods placed by name: the budget `web` (minAvailable 2 of 2) refuses an eviction; `free` has no
# budget; `doomed` is deleted before it is evicted; `victim` is deleted gracefully.
SPEC: dict[str, Any] = {
    "time_scale": 0.01,
    "seed": 11,
    "timings": {"boot_to_ready": 30, "notready_grace": 40, "pod_termination": 5, "pod_start": 3},
    "clusters": [{"name": "demo", "kubernetes_version": "1.35.4", "control_nodes": 1, "workers": 2,
                  "etcd_nodes": 0, "root_disk_size": 20}],
    "workloads": [
        {"kind": "Pod", "namespace": "default", "name": "web-a", "node": WORKERS[0], "labels": {"app": "web"}},
        {"kind": "Pod", "namespace": "default", "name": "web-b", "node": WORKERS[1], "labels": {"app": "web"}},
        {"kind": "Pod", "namespace": "default", "name": "free-a", "node": WORKERS[0]},
        {"kind": "Pod", "namespace": "default", "name": "doomed", "node": WORKERS[1]},
        {"kind": "Pod", "namespace": "default", "name": "victim", "node": WORKERS[1]},
        {"kind": "Pod", "namespace": "kube-system", "name": "agent", "node": WORKERS[0]},
    ],
    "pdbs": [{"namespace": "default", "name": "web", "selector": {"app": "web"}, "minAvailable": 2}],
}


@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)
    events: Optional[list[dict[str, Any]]] = None  # a watch's events


class Api:
    """One API server over HTTPS as the admin client certificate (kubeadm's admin.conf) sees it."""

    def __init__(self, name: str, url: str, ca: str, cert: str, key: str) -> None:
        self.name, self.url = name, url.rstrip("/")
        self.session = requests.Session()
        # Per request: a session's verify loses to REQUESTS_CA_BUNDLE from the environment.
        self.ca = ca
        self.session.cert = (cert, key)
        self.session.mount("https://", HTTPAdapter(pool_connections=4, pool_maxsize=8))

    def request(self, method: str, path: str, query: Optional[dict[str, str]] = None, body: Any = None,
                content_type: Optional[str] = None, accept: str = "application/json",
                watch_seconds: float = 0.0) -> Answer:
        headers = {"Accept": accept}
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = content_type or "application/json"
        if watch_seconds:
            return self._watch(path, query or {}, headers, watch_seconds)
        resp = self.session.request(method, self.url + path, params=query, data=data, headers=headers, timeout=20,
                                    verify=self.ca)
        try:
            parsed: Any = resp.json()
        except ValueError:
            parsed = resp.text
        return Answer(resp.status_code, parsed, dict(resp.headers))

    def _watch(self, path: str, query: dict[str, str], headers: dict[str, str], seconds: float) -> Answer:
        """The events a watch streams until the server ends it (its timeoutSeconds) or ``seconds`` pass."""
        events: list[dict[str, Any]] = []
        resp = self.session.get(self.url + path, params=query, headers=headers, stream=True, timeout=(5, seconds + 5),
                                verify=self.ca)
        if resp.status_code != 200:
            try:
                return Answer(resp.status_code, resp.json(), dict(resp.headers))
            except ValueError:
                return Answer(resp.status_code, resp.text, dict(resp.headers))
        deadline = time.monotonic() + seconds
        try:
            for line in resp.iter_lines(chunk_size=1):
                if line:
                    events.append(json.loads(line))
                if time.monotonic() > deadline:
                    break
        except requests.exceptions.RequestException:
            pass
        finally:
            resp.close()
        return Answer(200, None, dict(resp.headers), events)

    def json(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        answer = self.request(method, path, body=body, **kw)
        if answer.status >= 300:
            raise RuntimeError(f"{self.name}: {method} {path} -> {answer.status}: {answer.body}")
        return answer.body


class SimSide:
    """cks-sim's Kubernetes for ``SPEC``, served over HTTPS at the root path."""

    def __init__(self, state_dir: str) -> None:
        from cks_sim import core  # pylint: disable=import-outside-toplevel
        from cks_sim.kube import KubeWorld  # pylint: disable=import-outside-toplevel
        from cks_sim.kube_api import make_app  # pylint: disable=import-outside-toplevel
        from cks_sim.spec import normalize  # pylint: disable=import-outside-toplevel
        from cks_sim.tls import make_tls, server_ssl_context  # pylint: disable=import-outside-toplevel
        from werkzeug.serving import WSGIRequestHandler, make_server  # pylint: disable=import-outside-toplevel

        class Quiet(WSGIRequestHandler):
            def log_request(self, *args: Any, **kwargs: Any) -> None:
                pass

        spec = normalize(copy.deepcopy(SPEC) | {"service_offerings": [{"name": "m", "cpu": 2, "memory": 4096}]})
        os.makedirs(state_dir, exist_ok=True)
        self.sim = core.Sim(spec, state_dir)
        self.tls = make_tls(state_dir)
        self.sim.tls = self.tls
        cluster = spec["clusters"][0]
        nodes = [{"name": CONTROL, "node_type": "control", "cpu": 2, "memory_mb": 4096, "vm_running": True}]
        nodes += [{"name": n, "node_type": "worker", "cpu": 2, "memory_mb": 4096, "vm_running": True} for n in WORKERS]
        self.world = KubeWorld(self.sim, CLUSTER_ID, cluster, nodes, cluster.get("workloads") or spec["workloads"],
                               cluster.get("pdbs") or spec["pdbs"])
        self.sim.kube[CLUSTER_ID] = self.world
        self.server = make_server("127.0.0.1", 0, make_app(self.sim, CLUSTER_ID), threaded=True,
                                  request_handler=Quiet, ssl_context=server_ssl_context(self.tls))
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.api = Api("cks-sim", f"https://127.0.0.1:{self.server.server_port}", self.tls["ca_cert"],
                       self.tls["client_cert"], self.tls["client_key"])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.sim.stop()


# -- the same objects on the real API server -----------------------------------------------------

_SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink")


def _meta_for_create(meta: dict[str, Any], uids: dict[str, str]) -> dict[str, Any]:
    out = {k: v for k, v in meta.items() if k not in _SERVER_SET}
    owners = []
    for ref in meta.get("ownerReferences") or []:
        # A Node owns its mirror pods: the real Node's uid, or the garbage collector deletes them.
        if ref.get("kind") == "Node" and ref.get("name") in uids:
            owners.append(dict(ref, uid=uids[ref["name"]]))
    if owners:
        out["ownerReferences"] = owners
    else:
        out.pop("ownerReferences", None)
    return out


def seed_real(sim: Api, real: Api) -> dict[str, str]:
    """Copy the sim's nodes, node Leases, pods and budgets to ``real``; the real nodes' uids by name."""
    uids: dict[str, str] = {}
    for node in sim.json("GET", "/api/v1/nodes")["items"]:
        body = {"apiVersion": "v1", "kind": "Node", "metadata": _meta_for_create(node["metadata"], uids),
                "spec": node["spec"]}
        created = real.json("POST", "/api/v1/nodes", body)
        uids[node["metadata"]["name"]] = created["metadata"]["uid"]
        # A patch, as the kubelet's status updates: the node controller writes the Node meanwhile.
        real.json("PATCH", f"/api/v1/nodes/{node['metadata']['name']}/status", {"status": _fresh_status(node["status"])},
                  content_type="application/merge-patch+json")
    for lease in sim.json("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")["items"]:
        meta = _meta_for_create(lease["metadata"], uids)
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": uids[meta["name"]]}]
        real.json("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                  {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                   "spec": dict(lease["spec"], renewTime=_micro_now())})
    for pod in sim.json("GET", "/api/v1/pods")["items"]:
        ns = pod["metadata"]["namespace"]
        real.json("POST", f"/api/v1/namespaces/{ns}/pods",
                  {"apiVersion": "v1", "kind": "Pod", "metadata": _meta_for_create(pod["metadata"], uids),
                   "spec": pod["spec"]})
        real.json("PATCH", f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}/status", {"status": pod["status"]},
                  content_type="application/merge-patch+json")
    for pdb in sim.json("GET", "/apis/policy/v1/poddisruptionbudgets")["items"]:
        ns = pdb["metadata"]["namespace"]
        real.json("POST", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
                  {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                   "metadata": _meta_for_create(pdb["metadata"], uids), "spec": pdb["spec"]})
    return uids


def _micro_now() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"


def _fresh_status(status: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(status)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for cond in out.get("conditions") or []:
        cond["lastHeartbeatTime"] = stamp
    return out


unsettled: list[Any] = []  # what settled() saw last, for the timeout's message


def settled(sim: Api, real: Api) -> bool:
    """The real side caught up: each budget's status as the sim's, each node's taints as the sim's."""
    def budgets(api: Api) -> dict[str, Any]:
        return {p["metadata"]["name"]: (p.get("status") or {}).get("disruptionsAllowed")
                for p in api.json("GET", "/apis/policy/v1/poddisruptionbudgets")["items"]}

    def taints(api: Api) -> dict[str, Any]:
        return {n["metadata"]["name"]: sorted(t["key"] for t in n["spec"].get("taints") or [])
                for n in api.json("GET", "/api/v1/nodes")["items"]}

    pair = [(budgets(sim), taints(sim)), (budgets(real), taints(real))]
    unsettled[:] = pair
    return pair[0] == pair[1]
