"""What the API server says about itself: the discovery documents (``/api``, ``/apis``, each group
version's resource list) and ``/version``.
"""

from __future__ import annotations

from typing import Any

from werkzeug.wrappers import Request

from . import kube_events
from .kube import KubeWorld
from .kube_resources import RESOURCES, Resource


def group_versions() -> dict[str, list[Resource]]:
    groups: dict[str, list[Resource]] = {}
    for res in list(RESOURCES.values()) + [kube_events.EVENTS_V1]:
        groups.setdefault(res.api_version, []).append(res)
    return groups


def _resource_list(group_version: str) -> dict[str, Any]:
    resources: list[dict[str, Any]] = []
    for res in group_versions().get(group_version, []):
        entry: dict[str, Any] = {"name": res.plural, "singularName": res.singular, "namespaced": res.namespaced,
                                 "kind": res.kind, "verbs": sorted(res.verbs)}
        if res.short_names:
            entry["shortNames"] = list(res.short_names)
        resources.append(entry)
        for sub in res.subresources:
            if sub == "exec":
                resources.append({"name": f"{res.plural}/exec", "singularName": "", "namespaced": True,
                                  "kind": "PodExecOptions", "verbs": ["create", "get"]})
            elif sub == "log":
                resources.append({"name": f"{res.plural}/log", "singularName": "", "namespaced": True,
                                  "kind": "Pod", "verbs": ["get"]})
            elif sub == "eviction":
                resources.append({"name": f"{res.plural}/eviction", "singularName": "", "namespaced": True,
                                  "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]})
            else:
                resources.append({"name": f"{res.plural}/{sub}", "singularName": "", "namespaced": res.namespaced,
                                  "kind": res.kind, "verbs": ["get", "patch", "update"]})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


def _api_group(name: str) -> dict[str, Any]:
    version = {"groupVersion": f"{name}/v1", "version": "v1"}
    return {"name": name, "versions": [version], "preferredVersion": version}


def version(world: KubeWorld) -> dict[str, Any]:
    major, minor = (world.version.split(".") + ["0"])[:2]
    return {"major": major, "minor": minor, "emulationMajor": major, "emulationMinor": minor,
            "minCompatibilityMajor": major, "minCompatibilityMinor": str(max(0, int(minor) - 1)),
            "gitVersion": f"v{world.version}", "gitCommit": "cks-sim", "gitTreeState": "clean",
            "buildDate": "2024-08-14T18:35:52Z", "goVersion": "go1.22.5", "compiler": "gc",
            "platform": "linux/amd64"}


def discovery(document: Any, request: Request) -> dict[str, Any]:
    if document == "api":
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}]}
    if document == "apis":
        names = sorted({g.split("/")[0] for g in group_versions() if "/" in g})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_api_group(n) for n in names]}
    if document[0] == "group":
        return {"kind": "APIGroup", "apiVersion": "v1", **_api_group(document[1])}
    return _resource_list(document[1])
