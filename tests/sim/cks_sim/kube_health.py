"""The API server's health endpoints (``/livez``, ``/readyz``, ``/healthz`` and their checks), the
etcd checks answered by the sim's etcd members.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Request, Response

from .kube import KubeWorld
from .kube_http import text_response

if TYPE_CHECKING:
    from .kube_routes import Route


HEALTH_CHECKS = {
    "livez": ["ping", "log", "etcd", "poststarthook/start-apiserver-admission-initializer",
              "poststarthook/generic-apiserver-start-informers", "poststarthook/bootstrap-controller"],
    "readyz": ["ping", "log", "etcd", "etcd-readiness", "informer-sync",
               "poststarthook/start-apiserver-admission-initializer",
               "poststarthook/generic-apiserver-start-informers", "poststarthook/bootstrap-controller",
               "shutdown"],
    "healthz": ["ping", "log", "etcd", "poststarthook/generic-apiserver-start-informers"],
}


def etcd_healthy(sim: Any, world: KubeWorld) -> bool:
    etcd = sim.etcd
    if etcd is None:
        return True
    try:
        return bool(etcd.cluster_ready(world.cluster_id))  # network I/O: not under sim.lock
    except Exception:  # an etcd manager that cannot tell is an etcd check that fails
        return False


def health(sim: Any, world: KubeWorld, route: Route, request: Request) -> Response:
    kind = route.health or "readyz"
    checks = HEALTH_CHECKS[kind]
    if route.check is not None:
        if route.check not in checks:
            return text_response("404 page not found\n", 404)
        ok = etcd_healthy(sim, world) if route.check in ("etcd", "etcd-readiness") else True
        if ok:
            return text_response("ok")
        return text_response(f"internal server error: {route.check} check failed\n", 500)
    excluded = set(request.args.getlist("exclude"))
    etcd_ok = etcd_healthy(sim, world) if {"etcd", "etcd-readiness"} - excluded else True
    lines, failed = [], False
    for check in checks:
        if check in excluded:
            lines.append(f"[+]{check} excluded: ok")
            continue
        ok = etcd_ok if check in ("etcd", "etcd-readiness") else True
        failed = failed or not ok
        lines.append(f"[+]{check} ok" if ok else f"[-]{check} failed: reason withheld")
    if "verbose" in request.args or failed:
        lines.append(f"{kind} check failed" if failed else f"{kind} check passed")
        return text_response("\n".join(lines) + "\n", 500 if failed else 200)
    return text_response("ok")
