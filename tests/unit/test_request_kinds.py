# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The one table of request kinds (_decisions/request_kinds.py): every request the clients send is in
it, found by reading the clients' source, and what it says decides the retries (issue 33: a 503 on a
SelfSubjectAccessReview, a POST that changes nothing, failed a rollout)."""

from __future__ import annotations

import ast
import http.server
import socket
import threading
import json
from pathlib import Path
from typing import Optional

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.request_kinds import (
    ONCE,
    READ,
    REQUEST_KINDS,
    SETTLED,
    changes_nothing,
    cloudstack_kind,
    effect,
    kube_kind,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.cloudstack_answers import is_idempotent
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.dedication import LIST_COMMANDS

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "plugins"
API_DATA = ROOT / "tests" / "sim" / "cks_sim" / "data" / "cloudstack-apis-4.22.1.json"
# CloudStack commands the reference data file leaves out (cks_sim/apis.py declares them).
COMMANDS_NOT_IN_DATA = {"listAccounts", "listAsyncJobs", "listProjects", "listResourceLimits", "listClusters",
                        "listDedicatedHosts"}
# The Kubernetes client's calls whose method or path is a variable: the kinds each sends, by hand.
# A new call site of that shape fails test_every_kubernetes_request_the_clients_send_is_in_the_table.
INDIRECT_CALLS = {
    ("kube.py", "_object"): {"kubernetes get leases", "kubernetes create leases", "kubernetes update leases",
                             "kubernetes get configmaps", "kubernetes create configmaps",
                             "kubernetes update configmaps"},
    ("kube.py", "_settle_put"): {"kubernetes get leases", "kubernetes get configmaps"},
    ("kube.py", "_delete"): {"kubernetes delete configmaps", "kubernetes get configmaps"},
    ("kube.py", "patch_lease"): {"kubernetes patch leases", "kubernetes get leases"},
    ("kube.py", "_await"): {"kubernetes list nodes", "kubernetes watch nodes", "kubernetes list pods",
                            "kubernetes watch pods"},
    ("kube.py", "await_pod"): {"kubernetes get pods"},
    ("kube_watch.py", "_list"): {"kubernetes list nodes", "kubernetes list pods"},
    ("kube.py", "_paged"): set(),  # its callers' paths are written out
    ("kube_http.py", "_json"): set(),  # the one request function itself
    ("kube_http.py", "raw_get"): set(),
    ("kube.py", "settle"): {"kubernetes get pods", "kubernetes get nodes"},
}
# Files whose ``_request``/``_json`` are not the Kubernetes client's (the etcd gateway's own HTTP,
# the etcd check pod's log parsing).
NOT_KUBERNETES = {("etcd.py", "member_list"), ("etcd.py", "quorum_read"), ("etcd_pod.py", "_ask")}


def cloudstack_commands() -> set[str]:
    from cks_sim import apis

    data = json.loads(API_DATA.read_text(encoding="utf-8"))
    return set(data["commands"]) | COMMANDS_NOT_IN_DATA | set(apis.EXTRA_COMMANDS)


def string_literals(path: Path) -> set[str]:
    return {node.value for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def test_every_cloudstack_command_the_collection_names_is_in_the_table() -> None:
    known = cloudstack_commands()
    sent = {s for path in PLUGINS.rglob("*.py") for s in string_literals(path) if s in known}
    # What the scan must find (a scan that finds nothing proves nothing).
    assert {"listVirtualMachines", "stopVirtualMachine", "queryAsyncJobResult", "listAsyncJobs"} <= sent
    # Commands named by a table rather than a literal.
    sent |= set(LIST_COMMANDS.values())
    missing = sorted(c for c in sent if effect(cloudstack_kind(c)) is None)
    assert missing == [], f"CloudStack commands the collection sends with no entry in request_kinds: {missing}"


def _path_template(node: ast.AST, names: dict[str, ast.AST]) -> Optional[str]:
    """A path literal with every placeholder as ``x``; None when it is not written out here."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            inner = value.value if isinstance(value, ast.FormattedValue) else value
            named = _path_template(inner, names) if isinstance(inner, ast.Name) else None
            parts.append(value.value if isinstance(value, ast.Constant) else named or "x")
        return "".join(str(p) for p in parts)
    if isinstance(node, ast.Name) and node.id in names:
        return _path_template(names[node.id], {})
    return None


def _assignments(tree: ast.AST) -> dict[str, ast.AST]:
    return {t.id: node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name)}


def scanned_kube_requests() -> tuple[set[str], set[tuple[str, str]]]:
    """(kinds of the calls written out, (file, function) of the calls that are not)."""
    kinds: set[str] = set()
    indirect: set[tuple[str, str]] = set()
    for path in sorted((PLUGINS / "module_utils").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module_names = _assignments(tree)
        for function in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
            names = dict(module_names, **_assignments(function))
            for call in [n for n in ast.walk(function) if isinstance(n, ast.Call)]:
                name = getattr(call.func, "attr", None)
                if name in ("_json", "_request") and len(call.args) >= 3:
                    method, target = call.args[1], call.args[2]
                elif name == "_paged" and len(call.args) >= 2:
                    method, target = ast.Constant("GET"), call.args[1]
                elif name == "raw_get" and call.args:
                    method, target = ast.Constant("GET"), call.args[0]
                else:
                    continue
                template = _path_template(target, names)
                if not (isinstance(method, ast.Constant) and template and template.startswith("/")):
                    indirect.add((path.name, function.name))
                    continue
                kinds.add(kube_kind(method.value, template))
    return kinds, indirect


def test_every_kubernetes_request_the_clients_send_is_in_the_table() -> None:
    kinds, indirect = scanned_kube_requests()
    indirect -= NOT_KUBERNETES
    assert indirect <= set(INDIRECT_CALLS), (
        f"Kubernetes calls whose method or path is not written out: {sorted(indirect - set(INDIRECT_CALLS))}; "
        "add them to INDIRECT_CALLS with the kinds they send")
    kinds |= {k for site in indirect for k in INDIRECT_CALLS[site]}
    assert {"kubernetes create selfsubjectaccessreviews", "kubernetes create pods/eviction",
            "kubernetes patch nodes", "kubernetes get /readyz"} <= kinds, kinds
    missing = sorted(k for k in kinds if effect(k) is None)
    assert missing == [], f"Kubernetes requests the clients send with no entry in request_kinds: {missing}"


@pytest.mark.parametrize("method, path, query, kind", [
    ("GET", "/api/v1/nodes", None, "kubernetes list nodes"),
    ("GET", "/api/v1/nodes", {"watch": "1"}, "kubernetes watch nodes"),
    ("GET", "/api/v1/nodes/demo-control-1", None, "kubernetes get nodes"),
    ("PATCH", "/api/v1/nodes/demo-control-1", None, "kubernetes patch nodes"),
    ("POST", "/api/v1/namespaces/default/pods/web-1/eviction", None, "kubernetes create pods/eviction"),
    ("GET", "/api/v1/namespaces/kube-system/pods/etcd-x/exec", {"command": "etcdctl"}, "kubernetes get pods/exec"),
    ("GET", "/api/v1/namespaces/kube-system/pods", {"labelSelector": "component=etcd"}, "kubernetes list pods"),
    ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", None,
     "kubernetes create selfsubjectaccessreviews"),
    ("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/cloudstack-cks-rollout", None,
     "kubernetes update leases"),
    ("DELETE", "/api/v1/namespaces/kube-system/configmaps/x", None, "kubernetes delete configmaps"),
    ("GET", "/api/v1/namespaces/kube-system", None, "kubernetes get namespaces"),
    ("GET", "/readyz/etcd", None, "kubernetes get /readyz/etcd"),
])
def test_a_kubernetes_request_is_named_as_the_api_server_names_it(
        method: str, path: str, query: Optional[dict[str, str]], kind: str) -> None:
    assert kube_kind(method, path, query) == kind


def test_what_a_request_does_decides_not_its_method() -> None:
    # The case: a POST that changes nothing is retried like a read.
    assert changes_nothing("kubernetes create selfsubjectaccessreviews")
    assert changes_nothing("kubernetes create selfsubjectrulesreviews")
    # Any dry run changes nothing, whatever it would have written.
    assert changes_nothing("kubernetes create pods", {"dryRun": "All"})
    assert not changes_nothing("kubernetes create pods")
    assert changes_nothing("kubernetes list pods")
    # A write is never simply sent again, nor is a kind the table does not know.
    assert not changes_nothing("kubernetes patch nodes")
    assert not changes_nothing("kubernetes create pods/eviction")
    assert not changes_nothing("kubernetes create events")
    assert not changes_nothing("kubernetes create secrets")
    # A read the table does not name yet is still a read (the scan above fails on it all the same).
    assert changes_nothing("kubernetes get namespaces") and changes_nothing("kubernetes watch services")


def test_cloudstack_reads_are_retried_and_changes_are_settled() -> None:
    assert is_idempotent("listVirtualMachines") and is_idempotent("queryAsyncJobResult")
    assert is_idempotent("getKubernetesClusterConfig")
    for command in ("stopVirtualMachine", "startVirtualMachine", "resizeVolume", "updateVMAffinityGroup",
                    "changeServiceForVirtualMachine"):
        assert not is_idempotent(command) and effect(cloudstack_kind(command)) == SETTLED
    # A command no one put in the table is a write: never sent twice blindly, even if it reads like a list.
    assert not is_idempotent("listSomethingNew")


def test_every_kind_says_what_it_is() -> None:
    assert set(REQUEST_KINDS.values()) <= {READ, SETTLED, ONCE}
    assert all(k.split(" ", 1)[0] in ("cloudstack", "kubernetes", "etcd") for k in REQUEST_KINDS)


class _DropsFirst(http.server.BaseHTTPRequestHandler):
    """Closes the first connection without an answer, then answers /readyz as a healthy member."""

    dropped: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if not self.dropped:
            self.dropped.append(self.path)
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


def test_an_etcd_question_whose_connection_dropped_is_asked_again() -> None:
    """An etcd question changes nothing (``etcd readyz`` is READ): a connection dropped before the
    answer does not make a healthy member look unhealthy."""
    from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd import EtcdClient
    from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.quorum import Member

    assert effect("etcd readyz") == READ
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _DropsFirst)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        client = EtcdClient([url], timeout=5)
        member = client.probe(Member(id="1", name="m1", peer_urls=(), client_urls=(url,), learner=False))
        assert _DropsFirst.dropped == ["/readyz"]
        assert member.healthy, member
    finally:
        server.shutdown()
