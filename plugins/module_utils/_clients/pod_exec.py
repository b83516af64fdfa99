# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""A command run in a pod through ``pods/exec``, over the kubernetes client's websocket stream.

``kubernetes.stream.ws_client.WSClient`` speaks the channel protocols (it offers
v5.channel.k8s.io then v4.channel.k8s.io; channel 1 stdout, 2 stderr, 3 the status the kubelet
writes when the command ends). It is given the session's own isolated ``ApiClient``
configuration (host, CA, client certificate, bearer token), never the process-wide default. The
generated ``CoreV1Api`` is not imported, for the reason ``kube.py`` gives.
"""

from __future__ import annotations

import json
import re
import ssl
from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import quote

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube import HAS_KUBERNETES, scrub_secrets
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.tls_failures import handshake_cut
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import KubernetesError

if HAS_KUBERNETES:
    import websocket
    from kubernetes.stream import ws_client

# Channel 3 of the exec protocol: the command's metav1.Status.
_STATUS_CHANNEL = 3
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class ExecResult:
    """What a command run through ``pods/exec`` said: its output and the status channel's verdict.

    ``exit_code`` is None when the command never ran (the runtime could not start it: the
    status is an InternalError without an exit code); ``status_message`` then says why.
    """

    stdout: str
    stderr: str
    exit_code: Optional[int]
    status_message: str = ""


def _short(text: str, limit: int = 300) -> str:
    text = _SPACES.sub(" ", scrub_secrets(text)).strip()
    return text if len(text) <= limit else text[:limit] + "..."


def exec_result(action: str, stdout: str, stderr: str, status_text: str) -> ExecResult:
    """Read the status channel (metav1.Status) the kubelet writes when the command ends."""
    try:
        status = json.loads(status_text) if status_text else None
    except ValueError:
        status = None
    if not isinstance(status, dict):
        # No status: the stream closed before the command ended; nothing it printed is an answer.
        raise KubernetesError(action, "the exec stream closed without the command's exit status")
    if status.get("status") == "Success":
        return ExecResult(stdout, stderr, 0)
    causes = (status.get("details") or {}).get("causes") or []
    code = next((c.get("message") for c in causes if c.get("reason") == "ExitCode"), None)
    message = str(status.get("message") or "")
    if code is None or not str(code).isdigit():
        return ExecResult(stdout, stderr, None, message)
    return ExecResult(stdout, stderr, int(code), message)


def refusal(action: str, status_code: int, body: Any) -> KubernetesError:
    """A refusal before the upgrade: the API server's Status message (or the kubelet's text) and code."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body or "")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("message"):
        return KubernetesError(action, _short(str(data["message"])), status=status_code, reason=data.get("reason") or None)
    return KubernetesError(action, f"HTTP {status_code}: {_short(text) or 'no body'}", status=status_code)


class PodExec:
    """Runs commands in pods of one cluster. ``kube``: the session's KubeClient (its ApiClient and timeout)."""

    def __init__(self, kube: Any) -> None:
        self.configuration = kube.api_client.configuration
        self.request_timeout = float(kube.options.request_timeout)

    def run(self, namespace: str, pod: str, command: list[str], container: Optional[str] = None,
            timeout: Optional[float] = None) -> ExecResult:
        """Run ``command`` (stdout and stderr, no stdin, no tty) and wait at most ``timeout`` seconds.

        A refusal before the upgrade (403 RBAC, 404 pod missing, 500 the pod's kubelet out of
        reach or its container gone) raises KubernetesError with the API server's status and
        message; so does a command that has not ended in time (its output so far is no answer).
        """
        limit = float(timeout if timeout is not None else self.request_timeout)
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(pod, safe='')}/exec"
        query: list[tuple[str, Any]] = [("command", list(command)), ("stdout", "true"), ("stderr", "true"),
                                        ("stdin", "false"), ("tty", "false")]
        if container:
            query.append(("container", container))
        action = f"exec {command[0] if command else ''} in pod {namespace}/{pod}"
        url = ws_client.get_websocket_url(f"{self.configuration.host}{path}", query)
        stream = self._open(action, url, limit)
        try:
            stream.run_forever(timeout=limit)
            if stream.is_open():
                raise KubernetesError(action, f"the command did not end within {limit:g} s")
            stdout, stderr = stream.read_stdout(timeout=0) or "", stream.read_stderr(timeout=0) or ""
            status_text = stream.read_channel(_STATUS_CHANNEL) or ""
        except websocket.WebSocketException as exc:
            raise KubernetesError(action, f"the exec stream broke: {_short(str(exc))}")
        finally:
            stream.close()
        return exec_result(action, stdout, stderr, status_text)

    def _headers(self) -> dict[str, str]:
        # create_websocket passes only these on; a client certificate goes in the TLS options.
        bearer = self.configuration.auth_settings().get("BearerToken") or {}
        return {"authorization": bearer["value"]} if bearer.get("value") else {}

    def _open(self, action: str, url: str, limit: float) -> Any:
        # create_websocket takes no timeout: websocket-client's default bounds the TCP connect and
        # the handshake, so it is set for this call alone and restored.
        previous = websocket.getdefaulttimeout()
        try:
            websocket.setdefaulttimeout(limit)
            return ws_client.WSClient(self.configuration, url, self._headers(), False)
        except websocket.WebSocketBadStatusException as exc:
            raise refusal(action, int(exc.status_code), exc.resp_body)
        except (websocket.WebSocketException, OSError, ssl.SSLError) as exc:
            trust = isinstance(exc, ssl.SSLError) and not handshake_cut(exc)
            what = "TLS verification failed" if trust else "cannot reach the Kubernetes API"
            raise KubernetesError(action, f"{what} at {self.configuration.host}: {type(exc).__name__}: {_short(str(exc))}")
        finally:
            websocket.setdefaulttimeout(previous)
