"""The pods/log and pods/exec subresources: the API server's checks before it dials the kubelet,
and the kubelet's answers (the Kubernetes sources are in kube_run.py's and kube_exec.py's docstrings).
"""

from __future__ import annotations

from typing import Any, Optional

from werkzeug.wrappers import Request, Response

from . import kube_exec, kube_host_exec, request_kinds
from .kube import KubeWorld
from .kube_http import text_response
from .kube_resources import ApiError
from .kube_routes import Route


def log_stream(sim: Any, world: KubeWorld, route: Route, verb: str, request: Request) -> Response:
    """GET pods/{name}/log: the container check (``validateContainer``), then the kubelet."""
    if verb != "get":
        raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
    namespace, name = route.namespace or "", route.name or ""
    with sim.lock:
        pod = world.verbs.get("pods", namespace, name)
        container = log_container(pod, request.args.get("container") or None)
        node = pod["spec"].get("nodeName")
        if not node:
            return text_response("")  # LogLocation: no node, no location, an empty stream
        state = world.nodes.get(node)
        node_ip = world.node_address(node) if state is not None else ""
        if state is None or not state.vm_running or not state.kubelet_posting:
            raise kubelet_log_unreachable(pod, container, node_ip, refused=state is not None and state.vm_running)
        waiting = waiting_to_start(pod, container)
        if waiting is not None:
            raise waiting
        text = world.client_pods.container_log(namespace, name, container)
    return text_response(text or "")


def exec_stream(sim: Any, world: KubeWorld, route: Route, verb: str, request: Request, environ: dict[str, Any],
                log: dict[str, Any]) -> Response:
    if verb not in ("get", "create"):
        raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
    options = kube_exec.ExecOptions.from_args(request.args)
    target = exec_target(sim, world, route.namespace or "", route.name or "", options)
    if isinstance(target, Response):
        return target
    options.check()
    if not kube_exec.request_is_websocket(request):
        # SPDY/3.1 (kubectl's fallback) is not spoken here; see tests/sim/README.md.
        raise kube_exec.not_an_upgrade()

    etcd_request = request_kinds.etcd(options.command) if target.etcd is not None else None
    planted = sim.faults.take("request_fault", request=etcd_request) if etcd_request else None
    mode = str(planted.get("mode", "503")) if planted else None

    def done(status: dict[str, Any], code: int) -> None:
        # 101 once upgraded; the handshake's own refusal (no common subprotocol) is a 403.
        extra: dict[str, Any] = {"etcd_request": etcd_request} if etcd_request else {}
        if mode:
            extra.update(fault="request_fault", dropped=mode == "drop")
        sim.calls.add(**log, status=code, exec_status=status.get("status"),
                      exec_command=list(options.command), **extra)

    return kube_exec.serve(environ, options, target, done, fault=mode)


def exec_target(sim: Any, world: KubeWorld, namespace: str, name: str,
                options: kube_exec.ExecOptions) -> Any:
    """What the API server checks and dials before the upgrade (kube_exec's docstring)."""
    with sim.lock:
        pod = world.verbs.get("pods", namespace, name)
        node = pod["spec"].get("nodeName")
        if not node:
            raise ApiError(400, f"pod {name} does not have a host assigned", "BadRequest")
        containers = [c["name"] for c in pod["spec"].get("containers", [])]
        container = options.container
        if container is None:
            if len(containers) != 1:
                raise ApiError(400, f"a container name must be specified for pod {name}, choose one of: "
                                    f"[{' '.join(containers)}]", "BadRequest")
            container = containers[0]
        elif container not in containers:
            raise ApiError(400, f"container {container} is not valid for pod {name}", "BadRequest")
        state = world.nodes.get(node)
        node_ip = world.node_address(node) if state is not None else ""
        if state is None or not state.vm_running:
            raise kube_exec.kubelet_unreachable(node_ip, refused=False)
        if not state.kubelet_posting:
            raise kube_exec.kubelet_unreachable(node_ip, refused=True)
        image = next(c.get("image", "") for c in pod["spec"]["containers"] if c["name"] == container)
        labels = pod["metadata"].get("labels") or {}
        is_etcd = namespace == "kube-system" and labels.get("component") == "etcd"
        peer_nodes = {n: world.node_address(n) for n, s in world.nodes.items() if s.node_type == "control"}
        host_pod = kube_host_exec.is_host_pod(pod, container)
    etcd_files = member_files_of(sim, node, peer_nodes) if is_etcd else None
    if is_etcd and etcd_files is not None and not etcd_files[1]:
        return kube_exec.container_not_running(container)

    def host(command: tuple[str, ...]) -> kube_host_exec.HostAnswer:
        def restart(delay: float) -> None:
            sim.scheduler.schedule(delay, lambda: world.kubelets.restart(node))

        with sim.lock:
            return kube_host_exec.run(sim, world, node, host_pod, command, restart)

    return kube_exec.ExecTarget(pod=name, container=container, image=image, node_ip=node_ip,
                                etcd=etcd_files[0] if etcd_files else None,
                                host=None if is_etcd else host)


def member_files_of(sim: Any, node: str, peer_nodes: dict[str, str]) -> Optional[tuple[kube_exec.EtcdMemberFiles, bool]]:
    etcd = sim.etcd
    if etcd is None:
        return None
    info = etcd.member_files(node)
    if info is None:
        return None
    peers = {}
    for peer, ip in peer_nodes.items():
        other = etcd.member_files(peer)
        if other is not None:
            peers[f"{ip}:2379"] = other["client_url"]
    files = {f"{kube_exec.KUBEADM_PKI}{k}": v for k, v in info["files"].items() if v}
    member = kube_exec.EtcdMemberFiles(client_url=info["client_url"], metrics_url=info["metrics_url"],
                                       files=files, peers=peers)
    return member, bool(info["running"])


def log_container(pod: dict[str, Any], container: Optional[str]) -> str:
    """The container a log request names (``validateContainer``), or the API server's 400."""
    name = pod["metadata"]["name"]
    names = [c["name"] for c in pod["spec"].get("containers") or []]
    if not container:
        if len(names) != 1:
            raise ApiError(400, f"a container name must be specified for pod {name}, choose one of: "
                                f"[{' '.join(names)}]", "BadRequest")
        return names[0]
    if container not in names:
        raise ApiError(400, f"container {container} is not valid for pod {name}", "BadRequest")
    return container


def waiting_to_start(pod: dict[str, Any], container: str) -> Optional[ApiError]:
    """The kubelet's answer for a container that has not run yet, None when it has."""
    for status in pod["status"].get("containerStatuses") or []:
        if status["name"] == container:
            waiting = status["state"].get("waiting")
            if waiting is None:
                return None
            return ApiError(400, f'container "{container}" in pod "{pod["metadata"]["name"]}" is waiting to start: '
                                 f'{waiting.get("reason", "ContainerCreating")}', "BadRequest")
    return ApiError(400, f'container "{container}" in pod "{pod["metadata"]["name"]}" is waiting to start: '
                         "ContainerCreating", "BadRequest")


def kubelet_log_unreachable(pod: dict[str, Any], container: str, node_ip: str, refused: bool) -> ApiError:
    # The API server's LocationStreamer fails on the dial to the kubelet's containerLogs endpoint.
    why = "connection refused" if refused else "no route to host"
    meta = pod["metadata"]
    return ApiError(500, f'Get "https://{node_ip}:10250/containerLogs/{meta["namespace"]}/{meta["name"]}/{container}": '
                         f"dial tcp {node_ip}:10250: connect: {why}", "")
