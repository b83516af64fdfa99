"""A stand-in for a real kube-apiserver under ``real_kube.cluster_api.RestClusterApi``: the ``KubeApi``
calls (get, list, create, replace, delete) on REST paths, with the rules the actors meet there: the
server assigns uid and resourceVersion, a PUT of an older resourceVersion is refused 409, a Pod's or a
Node's status is written only through ``/status`` (a main PUT keeps the stored one), a DELETE honours
its uid precondition. Every request is logged (``requests``); ``refuse(method, path)`` makes the next
such request answer 409 as if another writer came first (its resourceVersion moves on)."""

from __future__ import annotations

import copy
import itertools
import re
import uuid
from typing import Any, Optional

from cks_sim.real_kube.api import ApiRefusal

STATUS_OWNED = ("/api/v1/nodes/", "/api/v1/namespaces/")  # nodes and pods: their status through /status


class FakeKubeApi:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}  # object path -> object
        self.requests: list[tuple[str, str]] = []
        self._versions = itertools.count(1)
        self._refusals: list[tuple[str, str]] = []

    def refuse(self, method: str, path: str) -> None:
        """The next ``method`` of ``path`` is refused 409: another writer's write of it came first."""
        self._refusals.append((method, path))

    def _conflict(self, method: str, path: str) -> None:
        if (method, path) in self._refusals:
            self._refusals.remove((method, path))
            stored = self.objects[path.removesuffix("/status")]
            stored["metadata"]["resourceVersion"] = str(next(self._versions))
            raise ApiRefusal(409, "Conflict", f"the object has been modified: {path}")

    def get(self, path: str) -> dict[str, Any]:
        self.requests.append(("GET", path))
        if path not in self.objects:
            raise ApiRefusal(404, "NotFound", path)
        return copy.deepcopy(self.objects[path])

    def list(self, path: str, **params: str) -> list[dict[str, Any]]:
        self.requests.append(("LIST", path))
        node = params.get("fieldSelector", "").removeprefix("spec.nodeName=")
        every = re.fullmatch(r"(/api/v1|/apis/[^/]+/[^/]+)/([a-z]+)", path)  # of all namespaces (or cluster-scoped)
        pattern = rf"{every[1]}/(namespaces/[^/]+/)?{every[2]}/[^/]+" if every else rf"{re.escape(path)}/[^/]+"
        return [copy.deepcopy(obj) for key, obj in sorted(self.objects.items())
                if re.fullmatch(pattern, key) and (not node or (obj.get("spec") or {}).get("nodeName") == node)]

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(("POST", path))
        obj = copy.deepcopy(body)
        meta = obj["metadata"]
        meta.update(uid=str(uuid.uuid4()), resourceVersion=str(next(self._versions)), creationTimestamp="2026-12-07T00:00:00Z")
        if path.endswith("/pods"):
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        self.objects[f"{path}/{meta['name']}"] = obj
        return copy.deepcopy(obj)

    def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(("PUT", path))
        self._conflict("PUT", path)
        status = path.endswith("/status")
        key = path.removesuffix("/status")
        stored = self.objects.get(key)
        if stored is None:
            raise ApiRefusal(404, "NotFound", path)
        if body["metadata"].get("resourceVersion") != stored["metadata"]["resourceVersion"]:
            raise ApiRefusal(409, "Conflict", f"the object has been modified: {path}")
        obj = copy.deepcopy(stored)
        if status:
            obj["status"] = copy.deepcopy(body.get("status"))
        else:
            obj.update({k: copy.deepcopy(v) for k, v in body.items() if k != "status" or not key.startswith(STATUS_OWNED)})
            obj["metadata"] = dict(copy.deepcopy(body["metadata"]), uid=stored["metadata"]["uid"])
        if obj != stored:
            obj["metadata"]["resourceVersion"] = str(next(self._versions))
        self.objects[key] = obj
        return copy.deepcopy(obj)

    def delete(self, path: str, body: Optional[dict[str, Any]] = None) -> Optional[dict[str, Any]]:
        self.requests.append(("DELETE", path))
        stored = self.objects.get(path)
        if stored is None:
            raise ApiRefusal(404, "NotFound", path)
        uid = ((body or {}).get("preconditions") or {}).get("uid")
        if uid and uid != stored["metadata"]["uid"]:
            raise ApiRefusal(409, "Conflict", f"precondition failed: {path}")
        return self.objects.pop(path)

    def count(self, method: str, path_part: str = "") -> int:
        """How many ``method`` requests went to a path containing ``path_part``."""
        return sum(1 for m, p in self.requests if m == method and path_part in p)
