"""What a request is about, parsed from its path as the API server's mux would: a resource (with
namespace, name and subresource), a discovery document, a health check, ``/version`` or the root;
and the verb its method means.
"""

from __future__ import annotations

from typing import Any, Optional

from . import kube_events
from .kube_discovery import group_versions
from .kube_health import HEALTH_CHECKS
from .kube_http import GO_TRUE
from .kube_resources import RESOURCES, ApiError, Resource


class Route:
    """What a request is about, parsed from its path."""

    def __init__(self) -> None:
        self.kind = "resource"  # resource | discovery | health | version | root
        self.res: Optional[Resource] = None
        self.namespace: Optional[str] = None
        self.name: Optional[str] = None
        self.subresource: Optional[str] = None
        self.document: Any = None
        self.health: Optional[str] = None
        self.check: Optional[str] = None

    @property
    def resource_label(self) -> str:
        if self.res is None:
            return ""
        return f"{self.res.plural}/{self.subresource}" if self.subresource else self.res.plural


def _not_found_path() -> ApiError:
    return ApiError(404, "the server could not find the requested resource", "NotFound",
                    {"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]})


def parse_route(segments: list[str]) -> Route:
    route = Route()
    if not segments:
        route.kind = "root"
        return route
    head = segments[0]
    if head in HEALTH_CHECKS and len(segments) <= 2:
        route.kind = "health"
        route.health = head
        route.check = "/".join(segments[1:]) or None
        return route
    if head == "version" and len(segments) == 1:
        route.kind = "version"
        return route
    if head == "api":
        if len(segments) == 1:
            route.kind, route.document = "discovery", "api"
            return route
        if segments[1] != "v1":
            raise _not_found_path()
        gv, rest = "v1", segments[2:]
    elif head == "apis":
        if len(segments) == 1:
            route.kind, route.document = "discovery", "apis"
            return route
        groups = {g.split("/")[0] for g in group_versions() if "/" in g}
        if segments[1] not in groups:
            raise _not_found_path()
        if len(segments) == 2:
            route.kind, route.document = "discovery", ("group", segments[1])
            return route
        gv, rest = f"{segments[1]}/{segments[2]}", segments[3:]
        if gv not in group_versions():
            raise _not_found_path()
    else:
        raise _not_found_path()
    if not rest:
        route.kind, route.document = "discovery", ("resources", gv)
        return route
    if rest[0] == "namespaces" and len(rest) >= 3 and not (len(rest) == 3 and rest[2] in ("status", "finalize")):
        route.namespace, rest = rest[1], rest[2:]
    res = RESOURCES.get(rest[0])
    if res is not None and res.api_version != gv and gv == kube_events.EVENTS_V1.api_version:
        res = kube_events.EVENTS_V1 if rest[0] == kube_events.EVENTS_V1.plural else None
    if res is None or res.api_version != gv or len(rest) > 3:
        raise _not_found_path()
    if route.namespace is not None and not res.namespaced:
        raise _not_found_path()
    route.res = res
    route.name = rest[1] if len(rest) > 1 else None
    route.subresource = rest[2] if len(rest) > 2 else None
    if route.subresource is not None and route.subresource not in res.subresources:
        raise _not_found_path()
    return route


def verb_of(method: str, route: Route, args: Any) -> str:
    if route.kind != "resource":
        return "get"
    if method == "GET":
        if route.name is None:
            return "watch" if args.get("watch") in GO_TRUE else "list"
        return "get"
    return {"POST": "create", "PUT": "update", "PATCH": "patch",
            "DELETE": "delete" if route.name else "deletecollection"}.get(method, method.lower())
