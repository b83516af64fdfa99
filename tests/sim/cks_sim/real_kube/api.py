"""The one small interface the actors (kubelets, the cloud's node power, the workloads at start) are
written against, and its implementation over HTTPS for a real kube-apiserver.

``KubeApi`` is what an actor needs of an API server: read, list, create, patch, delete, each on a
path as the REST API names it, each answer the JSON the API serves, each refusal an ``ApiRefusal``
carrying the HTTP code and the Status' reason. Nothing here knows about nodes or pods.
"""

from __future__ import annotations

from typing import Any, Optional, Protocol

import requests

STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"


class ApiRefusal(RuntimeError):
    """The API server answered with an error status (``code``, the Status' ``reason``)."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason


class KubeApi(Protocol):
    def get(self, path: str) -> dict[str, Any]:
        """The object at ``path``."""

    def list(self, path: str, **params: str) -> list[dict[str, Any]]:
        """The items of the list at ``path``, filtered by ``params``."""

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create ``body`` at ``path``; the object as stored."""

    def patch(self, path: str, body: dict[str, Any], content_type: str = STRATEGIC) -> dict[str, Any]:
        """Patch the object at ``path``; the object as stored."""

    def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """Replace the object at ``path`` (a PUT); the object as stored."""

    def delete(self, path: str, body: Optional[dict[str, Any]] = None) -> Optional[dict[str, Any]]:
        """Delete the object at ``path``; the answer (the object, or a Status)."""


class RestApi:
    """``KubeApi`` over HTTPS with a client certificate (the CA verified)."""

    def __init__(self, url: str, ca_cert: str, client_cert: str, client_key: str, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()
        self.session.trust_env = False  # REQUESTS_CA_BUNDLE would replace the CA given here
        self.session.verify = ca_cert
        self.session.cert = (client_cert, client_key)

    def _call(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
              params: Optional[dict[str, str]] = None) -> Any:
        answer = self.session.request(method, self.url + path, json=body, params=params, timeout=self.timeout,
                                      headers={"Content-Type": content_type} if body is not None else None)
        if answer.status_code >= 400:
            try:
                status = answer.json()
            except ValueError:
                status = {}
            raise ApiRefusal(answer.status_code, str(status.get("reason", "")), str(status.get("message", answer.text)))
        return answer.json() if answer.content else None

    def get(self, path: str) -> dict[str, Any]:
        return dict(self._call("GET", path))

    def list(self, path: str, **params: str) -> list[dict[str, Any]]:
        return list(self._call("GET", path, params=params or None).get("items") or [])

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call("POST", path, body))

    def patch(self, path: str, body: dict[str, Any], content_type: str = STRATEGIC) -> dict[str, Any]:
        return dict(self._call("PATCH", path, body, content_type))

    def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call("PUT", path, body))

    def delete(self, path: str, body: Optional[dict[str, Any]] = None) -> Optional[dict[str, Any]]:
        answer = self._call("DELETE", path, body)
        return dict(answer) if answer else None

    def close(self) -> None:
        self.session.close()
