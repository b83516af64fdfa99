"""``pods/exec`` into kubeadm's etcd mirror pods, through the real clients' streaming code.

The Kubernetes behaviour each test follows is named in it; the module docstring of
cks_sim/kube_exec.py lists the sources (kubelet ``remotecommand.ServeExec``, ``wsstream``,
``proxy.UpgradeAwareHandler``, ``pod.streamLocation``, ``kubelet.GetExec``). Every exec here runs
the REAL ``etcdctl`` against the real etcd members of the sim.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import subprocess
from typing import Any, Iterator
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.stream import stream

from cks_sim.tools import binary, needs
from cks_sim.harness import SimHandle
from cks_sim.kube_exec import accept_key
from cks_sim.server import SimServer
from cks_sim.spec import normalize
from simkit import small_spec

pytestmark = needs("etcd", "etcdctl")

PKI = "/etc/kubernetes/pki/etcd"
CERTS = [f"--cacert={PKI}/ca.crt", f"--cert={PKI}/healthcheck-client.crt", f"--key={PKI}/healthcheck-client.key"]
KUBECTL = binary("kubectl")


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    """One sim with real etcd for the read-only tests (starting three members takes seconds)."""
    server = SimServer(normalize(small_spec()), str(tmp_path_factory.mktemp("exec")), with_etcd=True)
    server.start()
    yield SimHandle(server.env, server)
    server.stop()


def core_of(handle: SimHandle) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(k8s_config.new_client_from_config(handle.env["kubeconfig"]))


def etcd_pods(core: k8s.CoreV1Api) -> list[Any]:
    return core.list_namespaced_pod("kube-system", label_selector="component=etcd,tier=control-plane").items


class Outcome:
    """An exec's stdout, stderr, status (channel 3) and the exit code the client derives from it."""

    def __init__(self, resp: Any) -> None:
        self.stdout = resp.read_stdout()
        self.stderr = resp.read_stderr()
        self.status = json.loads(resp.peek_channel(3))
        # The client's own reading of the same channel; it raises on a Failure that carries no
        # exit code (an InternalError), exactly as against a real cluster.
        self.returncode = resp.returncode if self.status.get("reason") in (None, "NonZeroExitCode") else None


def run(core: k8s.CoreV1Api, pod: str, command: list[str]) -> Outcome:
    resp = stream(core.connect_get_namespaced_pod_exec, pod, "kube-system", command=command,
                  stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
    resp.run_forever(timeout=30)
    return Outcome(resp)


def raw_upgrade(handle: SimHandle, path: str, protocol: str = "v4.channel.k8s.io", upgrade: bool = True,
                token: str | None = None) -> tuple[str, dict[str, str], bytes]:
    """The status line, headers and body of an exec request, read off the socket."""
    with open(handle.env["kubeconfig"], encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    server = urlsplit(config["clusters"][0]["cluster"]["server"])
    ctx = ssl.create_default_context(cafile=handle.env["kube_ca"])
    key = base64.b64encode(os.urandom(16)).decode()
    headers = [f"GET {server.path}{path} HTTP/1.1", f"Host: {server.netloc}",
               f"Authorization: Bearer {token or config['users'][0]['user']['token']}"]
    if upgrade:
        headers += ["Connection: Upgrade", "Upgrade: websocket", "Sec-WebSocket-Version: 13",
                    f"Sec-WebSocket-Key: {key}", f"Sec-WebSocket-Protocol: {protocol}"]
    with socket.create_connection((server.hostname, server.port), timeout=10) as plain:
        with ctx.wrap_socket(plain, server_hostname=server.hostname) as sock:
            sock.sendall(("\r\n".join(headers) + "\r\n\r\n").encode())
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
            head, _sep, body = data.partition(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            fields = {k.lower(): v.strip() for k, _sep, v in (line.partition(":") for line in lines[1:])}
            if not lines[0].startswith("HTTP/1.1 101"):
                length = int(fields.get("content-length", "0"))
                while len(body) < length:
                    chunk = sock.recv(4096)
                    if not chunk:
                        break
                    body += chunk
            else:
                assert fields["sec-websocket-accept"] == accept_key(key)
            return lines[0], fields, body


# --- the mirror pods (kubeadm's static pod manifest) -----------------------------------------


def test_each_control_node_has_kubeadm_etcd_mirror_pod(shared: SimHandle) -> None:
    """kubeadm phases/etcd/local.go GetEtcdPodSpec; the kubelet's mirror pod annotation."""
    core = core_of(shared)
    pods = etcd_pods(core)
    controls = sorted(vm["name"].lower() for vm in shared.node_vms("control"))
    assert sorted(p.spec.node_name for p in pods) == controls
    members = {m["name"]: m["client_url"] for m in shared.env["etcd"]["members"]}
    for pod in pods:
        node = pod.spec.node_name
        assert pod.metadata.name == f"etcd-{node}"
        assert pod.metadata.annotations["kubernetes.io/config.mirror"]
        # The annotation is what `member list` answers as the member's client URL.
        assert pod.metadata.annotations["kubeadm.kubernetes.io/etcd.advertise-client-urls"] == members[node]
        container = pod.spec.containers[0]
        assert container.name == "etcd"
        assert f"--trusted-ca-file={PKI}/ca.crt" in container.command
        assert f"--cert-file={PKI}/server.crt" in container.command
        assert {m.mount_path for m in container.volume_mounts} == {PKI, "/var/lib/etcd"}
        assert pod.status.phase == "Running"


def test_discovery_lists_pods_exec_as_the_api_server_does(shared: SimHandle) -> None:
    api = k8s_config.new_client_from_config(shared.env["kubeconfig"])
    resources = k8s.CoreV1Api(api).get_api_resources().resources
    entry = next(r for r in resources if r.name == "pods/exec")
    assert entry.kind == "PodExecOptions" and sorted(entry.verbs) == ["create", "get"]


# --- exec with the kubernetes client (v4.channel.k8s.io) --------------------------------------


def test_etcdctl_member_list_runs_against_the_real_members(shared: SimHandle) -> None:
    core = core_of(shared)
    pod = etcd_pods(core)[0].metadata.name
    resp = run(core, pod, ["etcdctl", *CERTS, "member", "list", "-w", "json"])
    assert resp.returncode == 0, resp.stderr
    members = json.loads(resp.stdout)["members"]
    assert sorted(m["name"] for m in members) == sorted(vm["name"].lower() for vm in shared.node_vms("control"))
    # The status channel carries metav1.Status Success (remotecommand.ServeExec).
    assert resp.status == {"metadata": {}, "status": "Success"}
    logged = [c for c in shared.admin("GET", "/calls") if c.get("resource") == "pods/exec" and c.get("name") == pod]
    assert logged[-1]["status"] == 101 and logged[-1]["exec_status"] == "Success"
    assert logged[-1]["exec_command"][:1] == ["etcdctl"]


def test_endpoint_health_of_every_member_with_the_pods_certificates(shared: SimHandle) -> None:
    """The node addresses of the peers (<ip>:2379) reach their members, as from a hostNetwork pod."""
    core = core_of(shared)
    pods = etcd_pods(core)
    nodes = {n.metadata.name: n for n in core.list_node().items}
    ips = [next(a.address for a in nodes[p.spec.node_name].status.addresses if a.type == "InternalIP") for p in pods]
    endpoints = ",".join(f"https://{ip}:2379" for ip in ips)
    resp = run(core, pods[0].metadata.name, ["etcdctl", f"--endpoints={endpoints}", *CERTS, "endpoint", "health",
                                             "-w", "json"])
    assert resp.returncode == 0, resp.stderr
    health = json.loads(resp.stdout)
    assert len(health) == 3 and all(h["health"] for h in health)


def test_non_zero_exit_is_a_failure_status_with_the_exit_code(shared: SimHandle) -> None:
    """remotecommand.ServeExec: reason NonZeroExitCode, details.causes [{reason: ExitCode, message: code}]."""
    core = core_of(shared)
    pod = etcd_pods(core)[0].metadata.name
    resp = run(core, pod, ["etcdctl", f"--cacert={PKI}/missing.crt", "endpoint", "health"])
    assert resp.returncode == 128
    assert f"open {PKI}/missing.crt: no such file or directory" in resp.stderr
    status = resp.status
    assert status["status"] == "Failure" and status["reason"] == "NonZeroExitCode"
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "128"}]
    assert status["message"].startswith("command terminated with non-zero exit code: ")


def test_without_client_certificate_etcd_refuses_as_it_does(shared: SimHandle) -> None:
    core = core_of(shared)
    pod = etcd_pods(core)[0].metadata.name
    resp = run(core, pod, ["etcdctl", "--dial-timeout=1s", "--command-timeout=2s", "member", "list"])
    assert resp.returncode != 0  # --client-cert-auth=true: no certificate, no answer


def test_a_binary_the_etcd_image_lacks_is_an_internal_error(shared: SimHandle) -> None:
    """The distroless etcd image has no shell: the runtime cannot start it (InternalError)."""
    core = core_of(shared)
    pod = etcd_pods(core)[0].metadata.name
    resp = run(core, pod, ["sh", "-c", "etcdctl member list"])
    status = resp.status
    assert status["reason"] == "InternalError" and status["code"] == 500
    assert 'exec: "sh": executable file not found in $PATH' in status["message"]


# --- refusals before the upgrade --------------------------------------------------------------


def test_exec_refusals_before_the_upgrade(shared: SimHandle) -> None:
    core = core_of(shared)
    pod = etcd_pods(core)[0].metadata.name
    base = f"/api/v1/namespaces/kube-system/pods/{pod}/exec?command=etcdctl"
    line, _h, body = raw_upgrade(shared, base + "&stdout=1", upgrade=False)
    assert line == "HTTP/1.1 400 Bad Request" and json.loads(body)["message"] == "Upgrade request required"
    line, _h, body = raw_upgrade(shared, base)  # kubelet remotecommand.NewOptions
    assert line == "HTTP/1.1 400 Bad Request"
    assert json.loads(body)["message"] == "you must specify at least 1 of stdin, stdout, stderr"
    line, _h, body = raw_upgrade(shared, base + "&stdout=1&container=nope")  # pod.streamLocation
    assert json.loads(body)["message"] == f"container nope is not valid for pod {pod}"
    line, _h, body = raw_upgrade(shared, "/api/v1/namespaces/kube-system/pods/etcd-x/exec?command=etcdctl&stdout=1")
    assert line == "HTTP/1.1 404 Not Found" and json.loads(body)["message"] == 'pods "etcd-x" not found'


def test_subprotocol_is_the_first_offered_that_the_server_speaks(shared: SimHandle) -> None:
    """wsstream.handshake: client order wins; nothing in common is a 403 (x/net/websocket)."""
    core = core_of(shared)
    pod = etcd_pods(core)[0].metadata.name
    path = f"/api/v1/namespaces/kube-system/pods/{pod}/exec?command=etcdctl&command=version&stdout=1"
    line, fields, _b = raw_upgrade(shared, path, protocol="v5.channel.k8s.io, v4.channel.k8s.io")
    assert line == "HTTP/1.1 101 Switching Protocols" and fields["sec-websocket-protocol"] == "v5.channel.k8s.io"
    line, fields, _b = raw_upgrade(shared, path, protocol="v3.channel.k8s.io, v4.channel.k8s.io")
    assert fields["sec-websocket-protocol"] == "v4.channel.k8s.io"
    # The two streams above are logged when they end, which may be after the refusal below.
    since = shared.admin("GET", "/state")["time"]
    line, _f, _b = raw_upgrade(shared, path, protocol="base64.channel.k8s.io")
    assert line.startswith("HTTP/1.1 403")
    logged = [c for c in shared.admin("GET", f"/calls?since={since}") if c.get("resource") == "pods/exec"]
    assert 403 in [c["status"] for c in logged]


# --- the node or the member down ---------------------------------------------------------------


def test_exec_into_a_pod_whose_node_is_down_fails_dialing_the_kubelet(sim_factory: Any) -> None:
    """UpgradeAwareHandler.tryUpgrade: the dial error becomes a 500 Status without a reason."""
    handle = sim_factory(etcd=True)
    core = core_of(handle)
    vm = handle.node_vms("control")[0]
    node = vm["name"].lower()
    ip = next(a.address for a in core.read_node(node).status.addresses if a.type == "InternalIP")
    handle.cs().stopVirtualMachine(id=vm["id"], fetch_result=True)
    line, _h, body = raw_upgrade(handle, f"/api/v1/namespaces/kube-system/pods/etcd-{node}/exec"
                                         "?command=etcdctl&command=version&stdout=1")
    assert line == "HTTP/1.1 500 Internal Server Error"
    status = json.loads(body)
    assert status["message"] == f"error dialing backend: dial tcp {ip}:10250: connect: no route to host"
    assert "reason" not in status and status["code"] == 500
    with pytest.raises(k8s.ApiException) as failed:  # what the python client makes of it
        stream(core.connect_get_namespaced_pod_exec, f"etcd-{node}", "kube-system", command=["etcdctl", "version"],
               stderr=True, stdin=False, stdout=True, tty=False)
    assert "500" in str(failed.value.reason)
    # Another control node still answers, and its etcdctl sees the member down.
    other = next(p.metadata.name for p in etcd_pods(core) if p.spec.node_name != node)
    resp = run(core, other, ["etcdctl", *CERTS, "--dial-timeout=1s", "--command-timeout=2s", "endpoint", "health",
                             "--cluster", "-w", "json"])
    assert resp.returncode == 1
    assert "unhealthy cluster" in resp.stderr


def test_exec_into_the_pod_of_a_killed_member_is_the_kubelets_container_not_found(sim_factory: Any) -> None:
    """kubelet.GetExec -> findContainer (running containers only): 500 passed through the proxy."""
    handle = sim_factory(etcd=True)
    node = handle.node_vms("control")[0]["name"]
    handle.admin("POST", "/faults", {"kind": "etcd_kill", "vm": node})
    line, _h, body = raw_upgrade(handle, f"/api/v1/namespaces/kube-system/pods/etcd-{node.lower()}/exec"
                                         "?command=etcdctl&command=version&stdout=1")
    assert line == "HTTP/1.1 500 Internal Server Error" and body == b'container not found ("etcd")'


# --- RBAC -----------------------------------------------------------------------------------

EXEC_GET = {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["get"], "namespace": "kube-system"}
EXEC_CREATE = {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"], "namespace": "kube-system"}
PODS_READ = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"], "namespace": "kube-system"}


def restricted(handle: SimHandle, tmp_path: Any, token: str) -> k8s.CoreV1Api:
    with open(handle.env["kubeconfig"], encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    config["users"][0]["user"] = {"token": token}
    path = tmp_path / f"{token}.yaml"
    path.write_text(yaml.safe_dump(config))
    return k8s.CoreV1Api(k8s_config.new_client_from_config(str(path)))


@pytest.mark.parametrize("version, rules, allowed", [
    ("1.30.4", [PODS_READ], False),
    ("1.30.4", [PODS_READ, EXEC_GET], True),  # a websocket GET is authorised as `get` before 1.35
    ("1.30.4", [PODS_READ, EXEC_CREATE], False),
    ("1.35.0", [PODS_READ, EXEC_GET], False),  # AuthorizePodWebsocketUpgradeCreatePermission
    ("1.35.0", [PODS_READ, EXEC_GET, EXEC_CREATE], True),
])
def test_exec_needs_pods_exec_for_the_verbs_of_the_release(sim_factory: Any, tmp_path: Any, version: str,
                                                           rules: list[dict[str, Any]], allowed: bool) -> None:
    spec = small_spec(kube={"users": [{"name": "roller", "token": "roller-token", "rules": rules}]})
    spec["clusters"][0]["kubernetes_version"] = version
    handle = sim_factory(spec=spec, etcd=True)
    core = restricted(handle, tmp_path, "roller-token")
    pod = etcd_pods(core)[0].metadata.name
    path = f"/api/v1/namespaces/kube-system/pods/{pod}/exec?command=etcdctl&command=version&stdout=1"
    line, _h, body = raw_upgrade(handle, path, token="roller-token")
    if allowed:
        assert line == "HTTP/1.1 101 Switching Protocols"
        assert "etcdctl version" in run(core, pod, ["etcdctl", "version"]).stdout
    else:
        assert line == "HTTP/1.1 403 Forbidden"
        message = json.loads(body)["message"]
        assert message.startswith(f'pods "{pod}" is forbidden: User "roller" cannot ')
        assert 'resource "pods/exec" in API group "" in the namespace "kube-system"' in message


# --- kubectl exec (websocket, v5.channel.k8s.io) --------------------------------------------


@needs("kubectl")
def test_kubectl_exec_streams_and_closes_stdin_over_v5(shared: SimHandle) -> None:
    """kubectl >= 1.30 execs over websockets (v5: channel 255 closes stdin on EOF)."""
    core = core_of(shared)
    pod = etcd_pods(core)[0].metadata.name
    kubectl = [KUBECTL, "--kubeconfig", shared.env["kubeconfig"], "-n", "kube-system", "exec"]
    put = subprocess.run([*kubectl, "-i", pod, "--", "etcdctl", *CERTS, "put", "cks-sim/exec"], input="from-stdin",
                         capture_output=True, text=True, timeout=60, check=False)
    assert put.returncode == 0, put.stderr
    assert put.stdout.strip() == "OK"
    other = etcd_pods(core)[1].metadata.name
    got = subprocess.run([*kubectl, other, "--", "etcdctl", *CERTS, "get", "cks-sim/exec", "--print-value-only"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert got.returncode == 0 and got.stdout.strip() == "from-stdin"
    failed = subprocess.run([*kubectl, pod, "--", "etcdctl", f"--cacert={PKI}/missing.crt", "endpoint", "health"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert failed.returncode == 128
    assert "command terminated with exit code 128" in failed.stderr


def test_stdin_is_piped_and_closed_with_the_v5_close_signal(shared: SimHandle) -> None:
    """v5.channel.k8s.io: the client closes stdin with [255, 0]; etcdctl put then reads EOF."""
    core = core_of(shared)
    pod = etcd_pods(core)[0].metadata.name
    resp = stream(core.connect_get_namespaced_pod_exec, pod, "kube-system",
                  command=["etcdctl", *CERTS, "put", "cks-sim/stdin"], stderr=True, stdin=True, stdout=True,
                  tty=False, _preload_content=False)
    if not hasattr(resp, "subprotocol"):
        resp.close()
        pytest.skip("this kubernetes client offers no v5.channel.k8s.io (the oldest allowed, 35, speaks v4 only)")
    assert resp.subprotocol == "v5.channel.k8s.io"  # the client offers v5 first, the server takes it
    resp.write_stdin("piped")
    resp.close_channel(0)
    resp.run_forever(timeout=30)
    outcome = Outcome(resp)
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.stdout.strip() == "OK"
    other = etcd_pods(core)[2].metadata.name
    got = run(core, other, ["etcdctl", *CERTS, "get", "cks-sim/stdin", "--print-value-only"])
    assert got.stdout.strip() == "piped"


def test_a_kube_error_fault_on_pods_exec_refuses_before_the_upgrade(shared: SimHandle) -> None:
    """The sim's kube_error fault matches the resource as logged, `pods/exec`, for one call."""
    core = core_of(shared)
    pod = etcd_pods(core)[0].metadata.name
    shared.admin("POST", "/faults", {"kind": "kube_error", "resource": "pods/exec", "name": pod, "status": 503,
                                     "message": "injected", "count": 1})
    path = f"/api/v1/namespaces/kube-system/pods/{pod}/exec?command=etcdctl&command=version&stdout=1"
    line, _h, body = raw_upgrade(shared, path)
    assert line == "HTTP/1.1 503 Service Unavailable" and json.loads(body)["message"] == "injected"
    assert raw_upgrade(shared, path)[0] == "HTTP/1.1 101 Switching Protocols"  # count 1: the next one passes
