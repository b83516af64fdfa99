"""Pods created through the API and run by the simulated kubelet, through the real client.

The Kubernetes source each rule follows is named in its test; cks_sim/kube_run.py's docstring
lists them (``ValidatePodCreate``, the v1 defaults, the kubelet's ``lifecycle/predicate.go`` and
``EnsureImageExists``, ``validateContainer`` and ``validateContainerLogStatus``,
``CheckGracefulDelete``). Containers of the etcd image run the REAL ``etcdctl`` against the real
external etcd members of tests/sim/examples/external-etcd.yml.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from typing import Any, Iterator

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from cks_sim.tools import binary, needs
from cks_sim.harness import SimHandle
from cks_sim.kube_run import ETCD_IMAGE
from cks_sim.server import SimServer
from cks_sim.spec import load_spec, normalize


pytestmark = needs("etcd", "etcdctl")

EXTERNAL = os.path.join(os.path.dirname(__file__), "..", "examples", "external-etcd.yml")
KUBECTL = binary("kubectl")
NS = "kube-system"


READER = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"], "namespace": NS}]
RUNNER = READER + [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete"], "namespace": NS},
                   {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"], "namespace": NS}]


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    spec = load_spec(EXTERNAL)
    spec["kube"] = {"users": [{"name": "reader", "token": "reader-token", "rules": READER},
                              {"name": "runner", "token": "runner-token", "rules": RUNNER}]}
    server = SimServer(normalize(spec), str(tmp_path_factory.mktemp("runs")), with_etcd=True)
    server.start()
    yield SimHandle(server.env, server)
    server.stop()


def core_of(handle: SimHandle) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(k8s_config.new_client_from_config(handle.env["kubeconfig"]))


def control_node(core: k8s.CoreV1Api, index: int = 0) -> str:
    nodes = core.list_node(label_selector="node-role.kubernetes.io/control-plane").items
    return sorted(n.metadata.name for n in nodes)[index]


def etcd_servers(core: k8s.CoreV1Api, node: str) -> str:
    pod = core.read_namespaced_pod(f"kube-apiserver-{node}", NS)
    flag = next(a for a in pod.spec.containers[0].command if a.startswith("--etcd-servers="))
    return flag.split("=", 1)[1]


def etcd_pod(name: str, node: str, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": dict({"nodeName": node, "hostNetwork": True, "restartPolicy": "Never",
                          "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists",
                                           "effect": "NoSchedule"}],
                          "containers": containers}, **spec)}


def etcdctl(name: str, *args: str, image: str = ETCD_IMAGE, policy: str = "Never") -> dict[str, Any]:
    return {"name": name, "image": image, "imagePullPolicy": policy, "command": ["etcdctl"], "args": list(args)}


def wait_pod(core: k8s.CoreV1Api, name: str, done: Any, timeout: float = 30.0) -> Any:
    end = time.monotonic() + timeout
    while True:
        pod = core.read_namespaced_pod(name, NS)
        if done(pod):
            return pod
        assert time.monotonic() < end, f"pod {name} stayed {pod.status.phase}"
        time.sleep(0.05)


def ended(pod: Any) -> bool:
    return pod.status.phase in ("Succeeded", "Failed")


def status_error(exc: pytest.ExceptionInfo) -> tuple[int, dict[str, Any]]:
    return exc.value.status, json.loads(exc.value.body)


def delete_quietly(core: k8s.CoreV1Api, name: str) -> None:
    try:
        core.delete_namespaced_pod(name, NS, grace_period_seconds=0)
    except k8s.ApiException:
        pass


def log_text(core: Any, name: str, container: str) -> str:
    """The log as the server sent it: the python-legacy clients (up to 35) deserialize a ``str``
    answer that parses as JSON and hand back its Python repr, so JSON output is read raw."""
    answer = core.read_namespaced_pod_log(name, NS, container=container, _preload_content=False)
    return answer.data.decode("utf-8")


def test_kube_apiserver_pods_carry_the_external_members_as_etcd_servers(shared: SimHandle) -> None:
    """kubeadm getAPIServerCommand with external etcd: --etcd-servers lists the members, no certificates."""
    core = core_of(shared)
    members = shared.sim.etcd.endpoints(shared.env["cluster_id"])["members"]
    servers = etcd_servers(core, control_node(core)).split(",")
    assert len(servers) == 3 and all(s.startswith("http://") for s in servers)
    assert sorted(servers) == sorted(m["client_url"] for m in members)
    command = core.read_namespaced_pod(f"kube-apiserver-{control_node(core)}", NS).spec.containers[0].command
    assert not any(a.startswith("--etcd-cafile") for a in command)


def test_nodes_list_the_iso_images_the_etcd_image_among_them(shared: SimHandle) -> None:
    """The kubelet's status.images: every name of each image; CKS imports the ISO's on each node."""
    core = core_of(shared)
    node = core.read_node(control_node(core))
    names = [n for image in node.status.images for n in image.names]
    assert ETCD_IMAGE in names and any(n.startswith("registry.k8s.io/etcd@sha256:") for n in names)


def test_a_pod_of_etcdctl_containers_runs_the_real_etcdctl_and_ends_succeeded(shared: SimHandle) -> None:
    core = core_of(shared)
    node = control_node(core)
    servers = etcd_servers(core, node)
    created = core.create_namespaced_pod(NS, etcd_pod("ask-1", node, [
        etcdctl("members", f"--endpoints={servers}", "member", "list", "-w", "json"),
        etcdctl("health", f"--endpoints={servers}", "endpoint", "health", "-w", "json")]))
    try:
        assert created.status.phase == "Pending" and created.spec.node_name == node
        # The v1 defaults and the DefaultTolerationSeconds admission plugin.
        assert created.spec.termination_grace_period_seconds == 30 and created.spec.dns_policy == "ClusterFirst"
        assert {t.key for t in created.spec.tolerations} >= {"node.kubernetes.io/not-ready",
                                                             "node.kubernetes.io/unreachable"}
        pod = wait_pod(core, "ask-1", ended)
        assert pod.status.phase == "Succeeded"
        for cs in pod.status.container_statuses:
            assert cs.state.terminated.exit_code == 0 and cs.state.terminated.reason == "Completed"
        members = json.loads(log_text(core, "ask-1", "members"))
        assert len(members["members"]) == 3
        # The answer is etcd's own: the cluster's real member IDs, as the HTTP gateway gives them.
        health = json.loads(log_text(core, "ask-1", "health"))
        assert sorted(h["endpoint"] for h in health) == sorted(servers.split(",")) and all(h["health"] for h in health)
    finally:
        delete_quietly(core, "ask-1")


def test_a_container_that_exits_non_zero_fails_the_pod_with_its_exit_code(shared: SimHandle) -> None:
    core = core_of(shared)
    node = control_node(core)
    core.create_namespaced_pod(NS, etcd_pod("ask-bad", node, [
        etcdctl("ok", f"--endpoints={etcd_servers(core, node)}", "endpoint", "health", "-w", "json"),
        etcdctl("nowhere", "--endpoints=http://127.0.0.1:1", "--dial-timeout=1s", "--command-timeout=1s",
                "endpoint", "health", "-w", "json")]))
    try:
        pod = wait_pod(core, "ask-bad", ended)
        assert pod.status.phase == "Failed"
        codes = {cs.name: cs.state.terminated.exit_code for cs in pod.status.container_statuses}
        assert codes["ok"] == 0 and codes["nowhere"] == 1
        assert pod.status.container_statuses[1].state.terminated.reason == "Error"
        assert "127.0.0.1:1" in core.read_namespaced_pod_log("ask-bad", NS, container="nowhere")
    finally:
        delete_quietly(core, "ask-bad")


def test_a_binary_the_etcd_image_lacks_is_a_start_error(shared: SimHandle) -> None:
    """The distroless etcd image has no shell: the runtime cannot start the container (exit 128)."""
    core = core_of(shared)
    node = control_node(core)
    core.create_namespaced_pod(NS, etcd_pod("ask-sh", node, [
        {"name": "sh", "image": ETCD_IMAGE, "imagePullPolicy": "Never", "command": ["sh", "-c", "true"]}]))
    try:
        pod = wait_pod(core, "ask-sh", ended)
        terminated = pod.status.container_statuses[0].state.terminated
        assert pod.status.phase == "Failed" and terminated.exit_code == 128 and terminated.reason == "StartError"
        assert 'exec: "sh": executable file not found in $PATH' in terminated.message
    finally:
        delete_quietly(core, "ask-sh")


def test_pull_policy_never_with_an_image_the_node_lacks_is_err_image_never_pull(shared: SimHandle) -> None:
    """EnsureImageExists: the container waits with ErrImageNeverPull; its log is the kubelet's 400."""
    core = core_of(shared)
    node = control_node(core)
    image = "registry.k8s.io/etcd:3.4.0-0"
    core.create_namespaced_pod(NS, etcd_pod("ask-img", node, [etcdctl("members", "member", "list", image=image)]))
    try:
        pod = wait_pod(core, "ask-img", lambda p: bool(p.status.container_statuses))
        waiting = pod.status.container_statuses[0].state.waiting
        assert pod.status.phase == "Pending" and waiting.reason == "ErrImageNeverPull"
        assert waiting.message == f'Container image "{image}" is not present with pull policy of Never'
        with pytest.raises(k8s.ApiException) as refused:
            core.read_namespaced_pod_log("ask-img", NS, container="members")
        code, status = status_error(refused)
        assert code == 400 and status["reason"] == "BadRequest"
        assert status["message"] == 'container "members" in pod "ask-img" is waiting to start: ErrImageNeverPull'
    finally:
        delete_quietly(core, "ask-img")


def test_the_api_server_validates_containers_but_not_the_node_or_tolerations(shared: SimHandle) -> None:
    """ValidatePodCreate: containers, names, images, restartPolicy; nodeName and taints are the kubelet's."""
    core = core_of(shared)
    with pytest.raises(k8s.ApiException) as invalid:
        core.create_namespaced_pod(NS, etcd_pod("ask-inv", "nowhere", [{"name": "a"}], restartPolicy="Sometimes"))
    code, status = status_error(invalid)
    assert code == 422 and status["reason"] == "Invalid"
    assert status["message"] == ('Pod "ask-inv" is invalid: [spec.containers[0].image: Required value, '
                                 'spec.restartPolicy: Unsupported value: "Sometimes": supported values: '
                                 '"Always", "OnFailure", "Never"]')
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.containers[0].image", "spec.restartPolicy"]
    # No toleration for the control-plane taint, on a node nobody runs: both accepted.
    for name, node in (("ask-untol", control_node(core)), ("ask-nonode", "no-such-node")):
        created = core.create_namespaced_pod(NS, etcd_pod(name, node, [etcdctl("v", "version")], tolerations=[]))
        assert created.spec.node_name == node
    try:
        assert wait_pod(core, "ask-untol", ended).status.phase == "Succeeded"  # NoSchedule is not the kubelet's
        assert core.read_namespaced_pod("ask-nonode", NS).status.phase == "Pending"
    finally:
        delete_quietly(core, "ask-untol")
        delete_quietly(core, "ask-nonode")


def test_log_requests_name_a_container_of_the_pod(shared: SimHandle) -> None:
    """validateContainer (pkg/registry/core/pod/strategy.go): the API server's own 400s."""
    core = core_of(shared)
    node = control_node(core)
    core.create_namespaced_pod(NS, etcd_pod("ask-two", node, [etcdctl("a", "version"), etcdctl("b", "version")]))
    try:
        wait_pod(core, "ask-two", ended)
        for container, message in ((None, "a container name must be specified for pod ask-two, choose one of: [a b]"),
                                   ("c", "container c is not valid for pod ask-two")):
            with pytest.raises(k8s.ApiException) as refused:
                if container is None:
                    core.read_namespaced_pod_log("ask-two", NS)
                else:
                    core.read_namespaced_pod_log("ask-two", NS, container=container)
            code, status = status_error(refused)
            assert code == 400 and status["message"] == message
        assert "etcdctl version" in core.read_namespaced_pod_log("ask-two", NS, container="a")
    finally:
        delete_quietly(core, "ask-two")


def test_a_terminal_pod_is_deleted_at_once(shared: SimHandle) -> None:
    """CheckGracefulDelete: a Succeeded or Failed pod has no grace period; it is gone on the DELETE."""
    core = core_of(shared)
    core.create_namespaced_pod(NS, etcd_pod("ask-del", control_node(core), [etcdctl("v", "version")]))
    wait_pod(core, "ask-del", ended)
    core.delete_namespaced_pod("ask-del", NS)
    with pytest.raises(k8s.ApiException) as gone:
        core.read_namespaced_pod("ask-del", NS)
    assert gone.value.status == 404


@needs("kubectl")
def test_kubectl_logs_reads_a_containers_output(shared: SimHandle) -> None:
    core = core_of(shared)
    node = control_node(core)
    core.create_namespaced_pod(NS, etcd_pod("ask-kubectl", node, [
        etcdctl("members", f"--endpoints={etcd_servers(core, node)}", "member", "list", "-w", "json")]))
    try:
        wait_pod(core, "ask-kubectl", ended)
        out = subprocess.run([KUBECTL, "--kubeconfig", shared.env["kubeconfig"], "logs", "-n", NS, "ask-kubectl",
                              "-c", "members"], capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode == 0, out.stderr
        assert len(json.loads(out.stdout)["members"]) == 3
    finally:
        delete_quietly(core, "ask-kubectl")


def test_a_pod_on_a_node_that_is_down_stays_pending_and_its_log_cannot_be_read(sim_factory: Any) -> None:
    """No kubelet admits it; the API server's dial to the kubelet's containerLogs fails."""
    handle = sim_factory(spec=load_spec(EXTERNAL), etcd=True)
    core = core_of(handle)
    vm = handle.node_vms("control")[0]
    node = vm["name"].lower()
    ip = next(a.address for a in core.read_node(node).status.addresses if a.type == "InternalIP")
    handle.cs().stopVirtualMachine(id=vm["id"], fetch_result=True)
    core.create_namespaced_pod(NS, etcd_pod("ask-down", node, [etcdctl("v", "version")]))
    time.sleep(0.5)
    pod = core.read_namespaced_pod("ask-down", NS)
    assert pod.status.phase == "Pending" and not pod.status.container_statuses
    with pytest.raises(k8s.ApiException) as failed:
        core.read_namespaced_pod_log("ask-down", NS, container="v")
    code, status = status_error(failed)
    assert code == 500
    assert status["message"] == (f'Get "https://{ip}:10250/containerLogs/{NS}/ask-down/v": '
                                 f"dial tcp {ip}:10250: connect: no route to host")
    core.delete_namespaced_pod("ask-down", NS, grace_period_seconds=0)
    assert not [p for p in core.list_namespaced_pod(NS).items if p.metadata.name == "ask-down"]


def restricted(handle: SimHandle, tmp_path: Any, token: str) -> k8s.CoreV1Api:
    with open(handle.env["kubeconfig"], encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    config["users"][0]["user"] = {"token": token}
    path = tmp_path / f"{token}.yaml"
    path.write_text(yaml.safe_dump(config))
    return k8s.CoreV1Api(k8s_config.new_client_from_config(str(path)))


def test_creating_pods_and_reading_logs_need_their_own_verbs(shared: SimHandle, tmp_path: Any) -> None:
    """RBAC (plugin/pkg/auth/authorizer/rbac): pods create, and pods/log get, a subresource with its own rule."""
    node = control_node(core_of(shared))
    reader = restricted(shared, tmp_path, "reader-token")
    with pytest.raises(k8s.ApiException) as denied:
        reader.create_namespaced_pod(NS, etcd_pod("ask-rbac", node, [etcdctl("v", "version")]))
    code, status = status_error(denied)
    assert code == 403 and status["message"] == ('pods is forbidden: User "reader" cannot create resource "pods" '
                                                 'in API group "" in the namespace "kube-system"')
    runner = restricted(shared, tmp_path, "runner-token")
    runner.create_namespaced_pod(NS, etcd_pod("ask-rbac", node, [etcdctl("v", "version")]))
    wait_pod(runner, "ask-rbac", ended)
    with pytest.raises(k8s.ApiException) as no_log:
        reader.read_namespaced_pod_log("ask-rbac", NS, container="v")
    assert no_log.value.status == 403 and 'resource "pods/log"' in json.loads(no_log.value.body)["message"]
    assert "etcdctl version" in runner.read_namespaced_pod_log("ask-rbac", NS, container="v")
    runner.delete_namespaced_pod("ask-rbac", NS)
