"""``pods/exec`` over a websocket, as the API server and the kubelet answer it.

What a client meets, in order (Kubernetes 1.30 sources cited per step):

- Before the upgrade, plain HTTP errors: the pod must exist (404), have a node
  (``pod.streamLocation``: 400 "pod X does not have a host assigned"), the container must be
  one of the pod's (400 "container X is not valid for pod Y"), at least one of stdin, stdout,
  stderr (kubelet ``remotecommand.NewOptions``), a request that is no upgrade at all is 400
  "Upgrade request required" (``proxy.UpgradeAwareHandler``). The API server then dials the
  node's kubelet: a node whose VM is off gives 500 "error dialing backend: dial tcp
  <ip>:10250: connect: no route to host", a VM whose kubelet has not started yet "connection
  refused" (``UpgradeAwareHandler.tryUpgrade`` -> ``responder.Error`` -> a Status with no
  reason). A container that is not running (an etcd member killed while its VM runs) is the
  kubelet's own 500, passed through: ``container not found ("etcd")`` (``kubelet.GetExec`` ->
  ``findContainer`` over running containers).
- The websocket handshake picks the first of the client's subprotocols that the server speaks
  (``wsstream.handshake``): v5.channel.k8s.io and v4.channel.k8s.io here; none of them is a
  403 with an empty body (golang.org/x/net/websocket). SPDY is not spoken (see README).
- The stream: binary frames whose first byte is the channel (0 stdin, 1 stdout, 2 stderr,
  3 status, 4 resize; v5 adds 255, "close this channel"); each output channel first gets an
  empty frame (``wsstream.Conn`` opens the channels so), the status on channel 3 is a
  ``metav1.Status`` JSON as ``remotecommand.ServeExec`` writes it: Success, or Failure with
  reason NonZeroExitCode and a cause ``ExitCode`` carrying the code; a command that cannot be
  started is an InternalError ("error executing command in container: ...").

Only what an etcd container has runs: the REAL ``etcdctl`` (Debian's etcd-client) against the
pod's node's member, with kubeadm's certificate paths under /etc/kubernetes/pki/etcd translated
to the sim's files and the pod's loopback and node addresses to the member's real URLs.
Everything else is "executable file not found in $PATH", as in the distroless etcd image.
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import ssl
import struct
import subprocess
import threading
from dataclasses import dataclass
from typing import Any, Callable, Optional
from urllib.parse import urlsplit

from werkzeug.wrappers import Request, Response

from . import request_kinds
from .tools import default_binary
from .kube import ApiError

ETCDCTL_BINARY = default_binary("etcdctl")
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, STATUS, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
KUBEADM_PKI = "/etc/kubernetes/pki/etcd/"
COMMAND_TIMEOUT = 120.0  # real seconds; etcdctl's own timeouts are far shorter
_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_OP_CONT, _OP_TEXT, _OP_BINARY, _OP_CLOSE, _OP_PING, _OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


class UpgradedConnectionDone(ConnectionAbortedError):
    """Raised out of the WSGI app once a websocket session ended on the raw socket.

    Werkzeug's dev server writes "Connection: close" on every response, which a websocket
    client refuses in a 101, so the handshake is written on the socket directly; this
    exception (a ConnectionError, which the server treats as a dropped client) keeps the
    server from writing an HTTP response after the session.
    """


# ---------------------------------------------------------------------------------------------
# The request


def query_bool(values: list[str]) -> bool:
    # apimachinery's Convert_Slice_string_To_bool: absent is false, "0"/"false" false, else true.
    if not values:
        return False
    return not (values[0] == "0" or values[0].lower() == "false")


@dataclass(frozen=True)
class ExecOptions:
    command: tuple[str, ...]
    container: Optional[str]
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool

    @classmethod
    def from_args(cls, args: Any) -> "ExecOptions":
        return cls(command=tuple(args.getlist("command")), container=args.get("container") or None,
                   stdin=query_bool(args.getlist("stdin")), stdout=query_bool(args.getlist("stdout")),
                   stderr=query_bool(args.getlist("stderr")), tty=query_bool(args.getlist("tty")))

    def check(self) -> None:
        if not (self.stdin or self.stdout or self.stderr):
            raise ApiError(400, "you must specify at least 1 of stdin, stdout, stderr", "BadRequest")
        if not self.command:
            raise ApiError(400, "you must specify at least one command for the container", "BadRequest")


@dataclass(frozen=True)
class EtcdMemberFiles:
    """Where the sim keeps what kubeadm mounts into an etcd pod, and the member's real URLs."""

    client_url: str
    metrics_url: Optional[str]
    files: dict[str, str]  # kubeadm path -> sim file
    peers: dict[str, str]  # "<node ip>:2379" of every member -> its real client URL


@dataclass(frozen=True)
class ExecTarget:
    """What the API server found before the upgrade: the container and how to run in it."""

    pod: str
    container: str
    image: str
    node_ip: str
    etcd: Optional[EtcdMemberFiles]
    #: Runs a command in the node's namespaces (kube_host_exec.py): set for ``nsenter`` commands.
    host: Optional[Callable[[tuple[str, ...]], Any]] = None


# ---------------------------------------------------------------------------------------------
# The websocket (RFC 6455, server side)


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1((key + _WS_GUID).encode("ascii")).digest()).decode("ascii")


def offered_protocols(environ: dict[str, Any]) -> list[str]:
    raw = environ.get("HTTP_SEC_WEBSOCKET_PROTOCOL", "")
    return [p.strip() for p in raw.split(",") if p.strip()]


def is_websocket_upgrade(environ: dict[str, Any]) -> bool:
    connection = [t.strip().lower() for t in environ.get("HTTP_CONNECTION", "").split(",")]
    return environ.get("HTTP_UPGRADE", "").lower() == "websocket" and "upgrade" in connection


class WebSocket:
    """Frames over the request's socket: the server sends unmasked, the client must mask."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._write = threading.Lock()
        self._buffer = b""

    def handshake(self, key: str, protocol: str) -> None:
        lines = ["HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade",
                 f"Sec-WebSocket-Accept: {accept_key(key)}", f"Sec-WebSocket-Protocol: {protocol}", "", ""]
        self.sock.sendall("\r\n".join(lines).encode("ascii"))

    def refuse(self, code: int, text: str) -> None:
        self.sock.sendall(f"HTTP/1.1 {code} {text}\r\nContent-Length: 0\r\n\r\n".encode("ascii"))

    def send(self, opcode: int, payload: bytes) -> None:
        length = len(payload)
        if length < 126:
            header = struct.pack("!BB", 0x80 | opcode, length)
        elif length < 1 << 16:
            header = struct.pack("!BBH", 0x80 | opcode, 126, length)
        else:
            header = struct.pack("!BBQ", 0x80 | opcode, 127, length)
        with self._write:
            self.sock.sendall(header + payload)

    def send_channel(self, channel: int, data: bytes) -> None:
        self.send(_OP_BINARY, bytes([channel]) + data)

    def close(self, code: int = 1000) -> None:
        try:
            self.send(_OP_CLOSE, struct.pack("!H", code))
        except OSError:
            pass

    def _read(self, count: int) -> bytes:
        while len(self._buffer) < count:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionResetError("websocket peer closed")
            self._buffer += chunk
        data, self._buffer = self._buffer[:count], self._buffer[count:]
        return data

    def receive(self) -> tuple[int, bytes]:
        """The next whole message (opcode, payload); pings are answered here."""
        message_op, parts = None, []
        while True:
            first, second = self._read(2)
            fin, opcode, masked, length = first & 0x80, first & 0x0F, second & 0x80, second & 0x7F
            if length == 126:
                length = struct.unpack("!H", self._read(2))[0]
            elif length == 127:
                length = struct.unpack("!Q", self._read(8))[0]
            mask = self._read(4) if masked else b""
            payload = self._read(length)
            if masked:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == _OP_PING:
                self.send(_OP_PONG, payload)
                continue
            if opcode == _OP_PONG:
                continue
            if opcode == _OP_CLOSE:
                return _OP_CLOSE, payload
            if opcode != _OP_CONT:
                message_op = opcode
            parts.append(payload)
            if fin:
                return int(message_op or _OP_BINARY), b"".join(parts)


# ---------------------------------------------------------------------------------------------
# The status channel


def success_status() -> dict[str, Any]:
    return {"metadata": {}, "status": "Success"}


def exit_status(command: tuple[str, ...], code: int) -> dict[str, Any]:
    # containerd's CodeExitError text inside the kubelet's "command terminated ..." wrapper.
    cause = f"error executing command [{' '.join(command)}], exit code {code}"
    return {"metadata": {}, "status": "Failure", "message": f"command terminated with non-zero exit code: {cause}",
            "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


def internal_status(error: str) -> dict[str, Any]:
    message = f"error executing command in container: {error}"
    return {"metadata": {}, "status": "Failure", "message": f"Internal error occurred: {message}",
            "reason": "InternalError", "details": {"causes": [{"message": message}]}, "code": 500}


# ---------------------------------------------------------------------------------------------
# etcdctl inside the etcd container


def _endpoint_key(url: str) -> Optional[str]:
    try:
        parts = urlsplit(url if "://" in url else f"https://{url}")
        return f"{parts.hostname}:{parts.port or 2379}"
    except ValueError:
        return None


class EtcdctlInPod:
    """The argv of ``etcdctl`` as the pod would run it, rewritten for the sim's member."""

    _PATH_FLAGS = ("--cacert", "--cert", "--key")

    def __init__(self, member: EtcdMemberFiles, node_ip: str) -> None:
        self.member = member
        self.local = {"127.0.0.1:2379", "localhost:2379", f"{node_ip}:2379"}

    def _endpoint(self, url: str) -> str:
        key = _endpoint_key(url)
        if key in self.local:
            return self.member.client_url
        if key in self.member.peers:
            return self.member.peers[key]
        return url  # an address nobody here listens on fails as it would in the pod

    def _value(self, flag: str, value: str) -> str:
        if flag in ("--endpoints", "--endpoint"):
            return ",".join(self._endpoint(u) for u in value.split(",") if u)
        if flag in self._PATH_FLAGS:
            # An unknown path stays as given: etcdctl then fails on the same path as in the pod.
            return self.member.files.get(value, value)
        return value

    def argv(self, command: tuple[str, ...]) -> list[str]:
        out, has_endpoints, args = [ETCDCTL_BINARY], False, list(command[1:])
        i = 0
        while i < len(args):
            arg = args[i]
            flag, eq, value = arg.partition("=")
            if flag in ("--endpoints", "--endpoint") or flag in self._PATH_FLAGS:
                has_endpoints = has_endpoints or flag.startswith("--endpoint")
                if eq:
                    out.append(f"{flag}={self._value(flag, value)}")
                elif i + 1 < len(args):
                    out += [flag, self._value(flag, args[i + 1])]
                    i += 1
                else:
                    out.append(arg)
            else:
                out.append(arg)
            i += 1
        if not has_endpoints:
            # etcdctl's default, 127.0.0.1:2379, is the pod's own member (hostNetwork).
            out.insert(1, f"--endpoints={self.member.client_url}")
        return out

    @staticmethod
    def env() -> dict[str, str]:
        # Only what the image sets; no ETCDCTL_* from the sim's own environment.
        return {"PATH": "/usr/local/bin:/usr/bin:/bin", "ETCDCTL_API": "3"}


_ETCD_IMAGE_BINARIES = {"etcdctl", "/usr/local/bin/etcdctl", "/usr/bin/etcdctl"}


def resolve(target: ExecTarget, command: tuple[str, ...]) -> tuple[Optional[list[str]], dict[str, str], str]:
    """(argv, env, error): the process to run, or why the runtime cannot start it."""
    binary = command[0]
    if target.etcd is not None and binary in _ETCD_IMAGE_BINARIES:
        runner = EtcdctlInPod(target.etcd, target.node_ip)
        return runner.argv(command), runner.env(), ""
    return None, {}, (f'failed to exec in container: failed to start exec "{hashlib.sha1(binary.encode()).hexdigest()}": '
                      f"OCI runtime exec failed: exec failed: unable to start container process: exec: "
                      f'"{binary}": executable file not found in $PATH: unknown')


# ---------------------------------------------------------------------------------------------
# The session


class ExecSession:
    """One exec: the process, its output pumped to the channels, the status, the close."""

    def __init__(self, ws: WebSocket, protocol: str, options: ExecOptions, target: ExecTarget,
                 on_done: Callable[[dict[str, Any], int], None], fault: Optional[str] = None) -> None:
        self.ws = ws
        self.protocol = protocol
        self.options = options
        self.target = target
        self.on_done = on_done
        # A request_fault on the etcd call: "503" etcdctl fails as when its member does not answer,
        # "drop" the stream is cut before the exit status.
        self.fault = fault
        self._stdin_reader: Optional[threading.Thread] = None

    def _pump(self, stream: Any, channel: int) -> None:
        while True:
            chunk = stream.read1(32768) if hasattr(stream, "read1") else stream.read(32768)
            if not chunk:
                return
            try:
                self.ws.send_channel(channel, chunk)
            except OSError:
                return

    def _feed_stdin(self, proc: subprocess.Popen) -> None:
        try:
            while True:
                opcode, payload = self.ws.receive()
                if opcode == _OP_CLOSE:
                    break
                if not payload:
                    continue
                channel, data = payload[0], payload[1:]
                if channel == STDIN and proc.stdin is not None and data:
                    proc.stdin.write(data)
                    proc.stdin.flush()
                elif channel == CLOSE and self.protocol.startswith("v5") and data[:1] == bytes([STDIN]):
                    break
        except (OSError, ValueError, ConnectionError):
            pass
        finally:
            if proc.stdin is not None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass

    def run(self) -> None:
        for channel, wanted in ((STDOUT, self.options.stdout), (STDERR, self.options.stderr)):
            if wanted:
                self.ws.send_channel(channel, b"")
        if self.target.host is not None and self.options.command[0].rsplit("/", 1)[-1] == "nsenter":
            answer = self.target.host(self.options.command)
            for channel, data, wanted in ((STDOUT, answer.stdout, self.options.stdout),
                                          (STDERR, answer.stderr, self.options.stderr)):
                if wanted and data:
                    self.ws.send_channel(channel, data)
            verdict = success_status() if answer.code == 0 else exit_status(self.options.command, answer.code)
            self.on_done(verdict, 101)
            if not answer.stream_cut:
                self.ws.send_channel(STATUS, json.dumps(verdict, separators=(",", ":")).encode())
            self.ws.close()
            return
        argv, env, error = resolve(self.target, self.options.command)
        status: dict[str, Any]
        if self.fault == "drop":
            self.on_done({"status": "Failure", "message": "dropped"}, 101)
            self.ws.sock.shutdown(socket.SHUT_RDWR)
            return
        if self.fault is not None:
            if self.options.stderr:
                self.ws.send_channel(STDERR, request_kinds.ETCDCTL_DEADLINE.encode())
            status = exit_status(self.options.command, 1)
        elif argv is None:
            status = internal_status(error)
        else:
            status = self._run_process(argv, env)
        # Logged before the client can see the end, so that what it reads next includes it.
        self.on_done(status, 101)
        try:
            self.ws.send_channel(STATUS, json.dumps(status, separators=(",", ":")).encode())
        finally:
            self.ws.close()

    def await_close(self, timeout: float = 2.0) -> None:
        """Wait for the client's answer to our close frame (RFC 6455 5.5.1), then let go."""
        if self._stdin_reader is not None:
            self._stdin_reader.join(timeout)
        self.ws.sock.settimeout(timeout)
        try:
            if self._stdin_reader is None:
                while self.ws.receive()[0] != _OP_CLOSE:
                    pass
            # Then until the client closes TCP: bytes left unread would reach the HTTP server.
            while self.ws.sock.recv(65536):
                pass
        except (OSError, ValueError):
            pass

    def _run_process(self, argv: list[str], env: dict[str, str]) -> dict[str, Any]:
        opts = self.options
        try:
            proc = subprocess.Popen(
                argv, env=env, stdin=subprocess.PIPE if opts.stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE if opts.stdout else subprocess.DEVNULL,
                stderr=subprocess.PIPE if opts.stderr else subprocess.DEVNULL)
        except OSError as exc:
            return internal_status(f"failed to exec in container: {exc.strerror}")
        pumps = [threading.Thread(target=self._pump, args=(stream, channel), daemon=True)
                 for stream, channel in ((proc.stdout, STDOUT), (proc.stderr, STDERR)) if stream is not None]
        for pump in pumps:
            pump.start()
        if opts.stdin:
            self._stdin_reader = threading.Thread(target=self._feed_stdin, args=(proc,), daemon=True)
            self._stdin_reader.start()
        try:
            code = proc.wait(timeout=COMMAND_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        for pump in pumps:
            pump.join(timeout=5)
        return success_status() if code == 0 else exit_status(self.options.command, code)


def serve(environ: dict[str, Any], options: ExecOptions, target: ExecTarget,
          on_done: Callable[[dict[str, Any], int], None], fault: Optional[str] = None) -> Response:
    """Upgrade the request's connection and run the exec on it; raises UpgradedConnectionDone."""
    sock = environ.get("werkzeug.socket")
    if not isinstance(sock, (socket.socket, ssl.SSLSocket)):
        raise ApiError(500, "the server cannot upgrade this connection", "InternalError")
    ws = WebSocket(sock)
    offered = offered_protocols(environ)
    protocol = next((p for p in offered if p in PROTOCOLS), None)
    if protocol is None:
        on_done({"status": "Failure", "message": f"requested protocol(s) are not supported: {offered}"}, 403)
        ws.refuse(403, "Forbidden")
        raise UpgradedConnectionDone()
    ws.handshake(environ.get("HTTP_SEC_WEBSOCKET_KEY", ""), protocol)
    session = ExecSession(ws, protocol, options, target, on_done, fault)
    try:
        session.run()
        session.await_close()
    except OSError:
        pass  # the client went away mid-stream; nothing is left to answer
    finally:
        # The HTTP server would otherwise read the peer's next websocket bytes as a request.
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    raise UpgradedConnectionDone()


def not_an_upgrade() -> ApiError:
    return ApiError(400, "Upgrade request required", "BadRequest")


def kubelet_unreachable(node_ip: str, refused: bool) -> ApiError:
    why = "connection refused" if refused else "no route to host"
    return ApiError(500, f"error dialing backend: dial tcp {node_ip}:10250: connect: {why}", "")


def container_not_running(container: str) -> Response:
    # The kubelet's own answer (streaming.WriteError: plain text), passed through by the proxy.
    return Response(f'container not found ("{container}")', status=500, content_type="text/plain; charset=utf-8")


def request_is_websocket(request: Request) -> bool:
    return is_websocket_upgrade(request.environ)
