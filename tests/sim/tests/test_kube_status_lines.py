"""Raw HTTP status lines (cks_sim/status_lines.py), read with http.client, not a client library.

Kubernetes: Go's ``net/http`` writes ``http.StatusText`` (``404 Not Found``, ``429 Too Many
Requests``), and kubernetes.core's ``k8s_drain`` compares ``exc.reason == "Not Found"``.
CloudStack: ``ApiServlet`` -> ``HttpUtils.writeHttpResponse`` -> ``setStatus(code)`` with no
reason, so Jetty 9.4's ``HttpGenerator.generateResponseLine`` writes ``HttpStatus``'s message
(``431 Request Header Fields Too Large``, ``500 Server Error``) or, for a code it has none for
(CloudStack's 530, 531, 533...), the code twice: ``530 530``.
"""

from __future__ import annotations

import http.client
import json
import ssl
from typing import Any, Optional
from urllib.parse import urlencode, urlsplit

import yaml

from cks_sim.harness import SimHandle
from cks_sim import signing
from cks_sim.status_lines import go_status_line, jetty_status_line


def kube_request(handle: SimHandle, method: str, path: str, body: Optional[dict[str, Any]] = None,
                 token: Optional[str] = "from-kubeconfig") -> tuple[int, str, bytes]:
    with open(handle.env["kubeconfig"], encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    url = urlsplit(handle.env["kube_url"])
    conn = http.client.HTTPSConnection(url.hostname, url.port, timeout=10,
                                       context=ssl.create_default_context(cafile=handle.env["kube_ca"]))
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {config['users'][0]['user']['token'] if token == 'from-kubeconfig' else token}"
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, resp.reason, data


def test_kubernetes_status_lines_are_gos(sim: SimHandle) -> None:
    assert kube_request(sim, "GET", "/api/v1/nodes")[:2] == (200, "OK")
    assert kube_request(sim, "GET", "/api/v1/namespaces/default/pods/nope")[:2] == (404, "Not Found")
    assert kube_request(sim, "GET", "/api/v1/nodes", token=None)[:2] == (401, "Unauthorized")
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "status-lines"}, "data": {}}
    assert kube_request(sim, "POST", "/api/v1/namespaces/default/configmaps", cm)[:2] == (201, "Created")
    assert kube_request(sim, "POST", "/api/v1/namespaces/default/configmaps", cm)[:2] == (409, "Conflict")
    sim.admin("POST", "/faults", {"kind": "pdb_block", "namespace": "default", "name": "web"})
    pods = json.loads(kube_request(sim, "GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Dweb")[2])
    name = pods["items"][0]["metadata"]["name"]
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}}
    status, reason, _body = kube_request(sim, "POST", f"/api/v1/namespaces/default/pods/{name}/eviction", eviction)
    assert (status, reason) == (429, "Too Many Requests")


def test_go_and_jetty_phrases_for_codes_without_a_name() -> None:
    assert go_status_line(422) == "422 Unprocessable Entity"
    assert go_status_line(599) == "599 status code 599"  # net/http writeStatusLine
    assert jetty_status_line(500) == "500 Server Error"
    assert jetty_status_line(431) == "431 Request Header Fields Too Large"
    assert jetty_status_line(530) == "530 530"


def cloudstack_get(handle: SimHandle, params: dict[str, str], sign: bool = True) -> tuple[int, str]:
    url = urlsplit(handle.env["cloudstack_endpoint"])
    query = dict(params, apiKey=handle.env["cloudstack_key"], response="json")
    query["signature"] = signing.sign(query, handle.env["cloudstack_secret"]) if sign else "bad"
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    conn.request("GET", f"{url.path}?{urlencode(query)}")
    resp = conn.getresponse()
    resp.read()
    conn.close()
    return resp.status, resp.reason


def test_cloudstack_status_lines_are_jettys(sim: SimHandle) -> None:
    assert cloudstack_get(sim, {"command": "listZones"}) == (200, "OK")
    assert cloudstack_get(sim, {"command": "listZones"}, sign=False) == (401, "Unauthorized")
    assert cloudstack_get(sim, {"command": "stopVirtualMachine"}) == (431, "Request Header Fields Too Large")
    assert cloudstack_get(sim, {"command": "listApis", "name": "noSuchApi"}) == (530, "530")
