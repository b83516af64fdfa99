"""The Kubernetes API of every simulated cluster, over HTTPS, under ``/clusters/<cluster_id>``.

It speaks the wire protocol the official ``kubernetes`` client expects: JSON objects and lists
as the API server serialises them, ``Status`` errors, discovery documents, the three patch
flavours, list paging and selectors, the eviction subresource, and the plain-text health
endpoints. The world (``kube.KubeWorld``) decides; this module only translates HTTP.

This module is the WSGI application: it routes a request (kube_routes), authenticates and
authorises it (rbac), injects the spec's faults, and runs the verb on a resource. The rest of the
protocol lives beside it: kube_patch (the three patch flavours), kube_list (lists, selectors,
paging, watches), kube_pod_io (pods/log and pods/exec), kube_discovery (discovery documents and
``/version``), kube_health (the health endpoints) and kube_http (how answers are written).
Those are functions; the ones that need the simulator (its lock, faults, clock and call log)
take it from the app as their first argument.

Authentication: a bearer token (in the kubeconfig) or the admin client certificate (when the
HTTPS server asks for client certificates, see ``tls.server_ssl_context``). Without either the
answer is 401, on every path (the API server with anonymous auth off).
"""

from __future__ import annotations

import base64
import hmac
import json
import time
from typing import Any, Callable, Iterable, Optional

from werkzeug.wrappers import Request, Response

from . import kube_discovery, kube_events, kube_health, kube_list, kube_pod_io, kube_record, kube_table, rbac, request_kinds
from .core import drop_connection
from .kube import KubeWorld
from .kube_discovery import group_versions
from .kube_http import json_response, status_response, text_response
from .kube_patch import JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, PatchError, json_patch, merge_patch, strategic_merge_patch
from .kube_resources import ApiError, Resource
from .kube_routes import Route, parse_route, verb_of
from .tls import client_identity, make_tls, read_pem

# ---------------------------------------------------------------------------------------------
# The WSGI application


class KubeApp:
    """One cluster's API server at the root path (``cluster_id`` given), or every cluster's
    under ``/clusters/<cluster_id>`` (the in-process tests' shared server)."""

    def __init__(self, sim: Any, cluster_id: Optional[str] = None) -> None:
        self.sim = sim
        self.cluster_id = cluster_id

    # --- WSGI ---

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        request = Request(environ)
        response = self._dispatch(request, environ)
        kube_record.record(request, response, self.cluster_id)
        return response(environ, start_response)

    def _dispatch(self, request: Request, environ: dict[str, Any]) -> Response:
        parts = [p for p in request.path.split("/") if p != ""]
        if self.cluster_id is not None:
            cluster_id, parts = self.cluster_id, ["clusters", self.cluster_id] + parts
        elif len(parts) < 2 or parts[0] != "clusters" or parts[1] not in self.sim.kube:
            return text_response("404 page not found\n", 404)
        else:
            cluster_id = parts[1]
        world: KubeWorld = self.sim.kube[cluster_id]
        route: Optional[Route] = None
        try:
            route = parse_route(parts[2:])
        except ApiError as err:
            route = None
            early_error: Optional[ApiError] = err
        else:
            early_error = None
        verb = verb_of(request.method, route, request.args) if route else request.method.lower()
        log = {"api": "kubernetes", "cluster": cluster_id, "verb": verb, "path": request.path,
               "resource": route.resource_label if route else "", "namespace": route.namespace if route else None,
               "name": route.name if route else None}
        log["request"] = request_kinds.kubernetes(verb, route.resource_label if route else "", "/" + "/".join(parts[2:]))

        delay = self.sim.delay("api_latency") + self.sim.faults.latency("kubernetes")
        if delay > 0:
            time.sleep(delay)  # never under sim.lock
        with self.sim.lock:
            available = world.api_available()
        mode = self.sim.faults.transient("kubernetes")
        if not available or mode == "drop":
            # No API server behind the endpoint (or the load balancer dropped us): no HTTP answer.
            self.sim.calls.add(**log, status=0, dropped=True)
            drop_connection(environ)
            return Response(b"", status=503)
        if mode is not None:
            unavailable = ApiError(503, "the server is currently unable to handle the request", "ServiceUnavailable")
            return self._finish(log, status_response(unavailable))
        user = self._restricted_user(request)
        if user is None and not self._authenticated(request, world):
            return self._finish(log, status_response(ApiError(401, "Unauthorized", "Unauthorized")))
        if early_error is not None:
            return self._finish(log, status_response(early_error))
        assert route is not None
        if user is not None:
            log["user"] = user.name  # who the call log shows, for the RBAC tests
            denied = self._forbidden(user, route, verb, "/" + "/".join(parts[2:]), world.version)
            if denied is not None:
                return self._finish(log, status_response(denied))
        fault = self.sim.faults.take("kube_error", cluster=cluster_id, verb=verb, resource=log["resource"],
                                     name=route.name, namespace=route.namespace,
                                     path="/" + "/".join(parts[2:]))
        if fault is not None:
            code = int(fault.get("status", 500))
            retry_after = fault.get("retry_after")
            injected = ApiError(code, fault.get("message") or f"injected error {code}", fault.get("reason"),
                                details={"retryAfterSeconds": int(retry_after)} if retry_after else None)
            response = status_response(injected)
            if retry_after:
                # responsewriters.ErrorNegotiated: Details.RetryAfterSeconds > 0 sets Retry-After.
                response.headers["Retry-After"] = str(int(retry_after))
            return self._finish(log, response)
        planted = self.sim.faults.take("request_fault", request=log["request"])
        if planted is not None and str(planted.get("mode", "503")) == "503":
            unavailable = ApiError(503, "the server is currently unable to handle the request", "ServiceUnavailable")
            return self._finish(dict(log, fault="request_fault"), status_response(unavailable))
        if planted is not None and route.subresource == "exec":
            return self._dropped(log, environ)  # a stream: cut before the command runs
        try:
            if route.subresource == "exec":
                response = kube_pod_io.exec_stream(self.sim, world, route, verb, request, environ, log)
            elif route.subresource == "log":
                response = kube_pod_io.log_stream(self.sim, world, route, verb, request)
            elif route.res is not None and route.res.plural == "selfsubjectaccessreviews":
                response = self._access_review(route, verb, request, user)
            elif route.kind == "health":
                response = kube_health.health(self.sim, world, route, request)
            elif route.kind == "version":
                response = json_response(kube_discovery.version(world))
            elif route.kind == "root":
                response = json_response({"paths": sorted(
                    ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"]
                    + [f"/apis/{g}" for g in group_versions() if "/" in g])})
            elif route.kind == "discovery":
                response = json_response(kube_discovery.discovery(route.document, request))
            else:
                response = self._resource(world, route, verb, request, environ)
        except ApiError as err:
            response = status_response(err)
        if planted is not None:
            return self._dropped(log, environ)  # carried out; the answer never reaches the client
        return self._finish(log, response)

    def _finish(self, log: dict[str, Any], response: Response) -> Response:
        self.sim.calls.add(**log, status=response.status_code)
        return response

    def _dropped(self, log: dict[str, Any], environ: dict[str, Any]) -> Response:
        self.sim.calls.add(**log, status=0, dropped=True, fault="request_fault")
        drop_connection(environ)
        return Response(b"", status=503)

    def _restricted_user(self, request: Request) -> Optional[rbac.User]:
        """The spec's restricted user (kube.users, see rbac.py) whose bearer token this is, if any."""
        header = request.headers.get("Authorization", "")
        if not header.startswith("Bearer "):
            return None
        return rbac.find_user(rbac.users_from_spec(getattr(self.sim, "spec", None) or {}), header[7:].strip())

    @staticmethod
    def _forbidden(user: rbac.User, route: Route, verb: str, path: str, version: str = "") -> Optional[ApiError]:
        if route.kind in ("discovery", "root"):
            return None  # system:discovery: every authenticated user
        if route.kind != "resource" or route.res is None:
            return None if rbac.allows_path(user, verb, path) else rbac.forbidden_path(user, verb, path)
        res, label = route.res, route.resource_label
        if rbac.review_needs_no_rule(res.group, res.plural):
            return None
        verbs = [verb]
        if route.subresource == "exec" and verb == "get" and _at_least(version, 1, 35):
            # AuthorizePodWebsocketUpgradeCreatePermission (beta, on, from 1.35): a websocket
            # GET must also be allowed to create, as SPDY's POST always was.
            verbs.append("create")
        for wanted in verbs:
            if not rbac.allows_resource(user, wanted, res.group, label, route.namespace, route.name):
                return rbac.forbidden_resource(user, wanted, res.group, label, res.kind, route.namespace, route.name)
        return None

    def _access_review(self, route: Route, verb: str, request: Request, user: Optional[rbac.User]) -> Response:
        if verb != "create" or route.name is not None:
            raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
        assert route.res is not None
        return json_response(rbac.access_review(user, self._body(request, route.res)), 201)

    # --- authentication ---

    @staticmethod
    def _authenticated(request: Request, world: KubeWorld) -> bool:
        header = request.headers.get("Authorization", "")
        if header.startswith("Bearer "):
            return hmac.compare_digest(header[7:].strip().encode(), world.token.encode())
        pem = request.environ.get("SSL_CLIENT_CERT")
        if pem:
            # The TLS handshake already verified the certificate against the sim CA.
            try:
                _common_name, orgs = client_identity(pem)
            except ValueError:
                return False
            return "system:masters" in orgs
        return False

    # --- resources ---

    def _body(self, request: Request, res: Resource) -> Any:
        data = request.get_data()
        if not data:
            return {}
        try:
            return json.loads(data)
        except ValueError as exc:
            raise ApiError(400, f"the object provided is unrecognized (must be of type {res.kind}): couldn't get "
                                f"version/kind; json parse error: {exc}", "BadRequest") from None

    def _resource(self, world: KubeWorld, route: Route, verb: str, request: Request,
                  environ: Optional[dict[str, Any]] = None) -> Response:
        res = route.res
        assert res is not None
        if res is kube_events.EVENTS_V1 and verb in ("get", "create", "update", "patch"):
            return self._events_v1(world, route, verb, request)
        if route.subresource == "eviction":
            if verb != "create":
                raise ApiError(405, "the server does not allow this method on the requested resource",
                               "MethodNotAllowed")
            body = self._body(request, res)
            with self.sim.lock:
                result = world.evictions.evict(route.namespace or "", route.name or "", body,
                                               dry_run=request.args.get("dryRun") == "All")
            return json_response(result, 201)
        allowed = set(res.verbs)
        if route.subresource == "status":
            allowed = {"get"}
        if verb in ("list", "watch") and route.name is None:
            pass
        elif verb not in allowed or (verb == "create" and route.name is not None) or (
                res.namespaced and route.namespace is None and verb != "list"):
            raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
        if verb == "list" and "list" not in res.verbs:
            raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
        ns = route.namespace or ""
        if verb == "watch":
            if not world.watch_enabled or "watch" not in res.verbs:
                raise ApiError(405, "the server does not allow this method on the requested resource",
                               "MethodNotAllowed")
            return kube_list.watch(self.sim, world, res, route.namespace, request, environ or {})
        if verb == "list":
            return Response(kube_list.list_page(self.sim, world, res, route.namespace, request), status=200,
                            content_type="application/json")
        if verb == "get":
            with self.sim.lock:
                obj = world.verbs.get(res.plural, ns, route.name or "")
                if route.subresource is None and kube_table.wants_table(request.headers.get("Accept", "")):
                    return json_response(kube_table.table(res.plural, [obj], {"resourceVersion": world.store.current_rv()},
                                                          include_object=request.args.get("includeObject",
                                                                                          "Metadata")))
                return json_response(obj)
        if verb == "create":
            body = self._body(request, res)
            if res.plural == "events":
                kube_events.validate_core_create(body, ns)
            with self.sim.lock:
                return json_response(world.verbs.create(res.plural, ns, body), 201)
        if verb == "update":
            body = self._body(request, res)
            with self.sim.lock:
                return json_response(world.verbs.update(res.plural, ns, route.name or "", body, route.subresource))
        if verb == "patch":
            return json_response(self._patch(world, res, ns, route, request))
        if verb == "delete":
            options = self._body(request, res) or {}
            if not isinstance(options, dict):
                raise ApiError(400, "the body of the request was in an unknown format", "BadRequest")
            if request.args.get("gracePeriodSeconds") is not None:
                options["gracePeriodSeconds"] = int(request.args["gracePeriodSeconds"])
            if request.args.get("dryRun") == "All":
                options["dryRun"] = ["All"]
            with self.sim.lock:
                return json_response(world.verbs.delete(res.plural, ns, route.name or "", options))
        raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")

    def _events_v1(self, world: KubeWorld, route: Route, verb: str, request: Request) -> Response:
        """events.k8s.io/v1: the stored core/v1 Event converted in and out (kube_events.py)."""
        ns, name = route.namespace or "", route.name or ""
        if verb == "create" and route.name is not None:
            raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
        if verb == "get":
            with self.sim.lock:
                world.recorder.expire()
                current = world.verbs.get("events", ns, name)
                if kube_table.wants_table(request.headers.get("Accept", "")):
                    return json_response(kube_table.table("events", [current], {"resourceVersion": world.store.current_rv()},
                                                          include_object=request.args.get("includeObject", "Metadata")))
                return json_response(kube_events.to_v1(current))
        body = self._body(request, kube_events.EVENTS_V1)
        if not isinstance(body, (dict, list)):
            raise ApiError(400, "the body of the request was in an unknown format", "BadRequest")
        with self.sim.lock:
            if verb == "create":
                if not isinstance(body, dict):
                    raise ApiError(400, "the body of the request was in an unknown format", "BadRequest")
                kube_events.validate_create(body, ns)
                return json_response(kube_events.to_v1(world.verbs.create("events", ns, kube_events.to_core(body))), 201)
            world.recorder.expire()
            old = kube_events.to_v1(world.verbs.get("events", ns, name))
            if verb == "patch":
                content_type = (request.content_type or "").split(";")[0].strip().lower()
                if content_type not in (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH):
                    raise ApiError(415, f"the body of the request was in an unknown format - accepted media types "
                                        f"include: {JSON_PATCH}, {MERGE_PATCH}, {STRATEGIC_PATCH}", "UnsupportedMediaType")
                try:
                    if content_type == JSON_PATCH:
                        body = json_patch(old, body)
                    elif isinstance(body, dict):
                        body = (merge_patch if content_type == MERGE_PATCH else strategic_merge_patch)(old, body)
                except PatchError as exc:
                    raise ApiError(422, f"the server rejected our request due to an error in our request: {exc}",
                                   "Invalid") from None
            if not isinstance(body, dict):
                raise ApiError(400, "the body of the request was in an unknown format", "BadRequest")
            kube_events.validate_update(old, body)
            return json_response(kube_events.to_v1(world.verbs.update("events", ns, name, kube_events.to_core(body))))

    def _patch(self, world: KubeWorld, res: Resource, ns: str, route: Route, request: Request) -> dict[str, Any]:
        content_type = (request.content_type or "").split(";")[0].strip().lower()
        if content_type not in (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH):
            raise ApiError(415, f"the body of the request was in an unknown format - accepted media types include: "
                                f"{JSON_PATCH}, {MERGE_PATCH}, {STRATEGIC_PATCH}", "UnsupportedMediaType")
        patch = self._body(request, res)
        with self.sim.lock:
            current = world.verbs.get(res.plural, ns, route.name or "")
            try:
                if content_type == JSON_PATCH:
                    patched = json_patch(current, patch)
                else:
                    if not isinstance(patch, dict):
                        raise ApiError(400, "the body of the request was in an unknown format", "BadRequest")
                    merge = merge_patch if content_type == MERGE_PATCH else strategic_merge_patch
                    patched = merge(current, patch)
            except PatchError as exc:
                raise ApiError(422, f"the server rejected our request due to an error in our request: {exc}",
                               "Invalid") from None
            if not isinstance(patched, dict):
                raise ApiError(422, "the server rejected our request due to an error in our request", "Invalid")
            return world.verbs.update(res.plural, ns, route.name or "", patched, route.subresource)


def _at_least(version: str, major: int, minor: int) -> bool:
    try:
        got = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        return False
    return got >= (major, minor)


def make_app(sim: Any, cluster_id: Optional[str] = None) -> KubeApp:
    """The WSGI app of one cluster's API server at the root path, or (no ``cluster_id``) of
    every cluster in ``sim.kube``, each under ``/clusters/<cluster_id>``."""
    return KubeApp(sim, cluster_id)


def kubeconfig(sim: Any, cluster_id: str, server_url: str) -> dict:
    """A kubeadm-style admin kubeconfig for one cluster: the sim CA inline, a token and the admin cert.

    ``server_url`` is the cluster's API server URL as clients must use it: its own server's
    ``https://127.0.0.1:PORT``, or the shared server's URL with ``/clusters/<cluster_id>``.
    """
    world: KubeWorld = sim.kube[cluster_id]
    tls = getattr(sim, "tls", None) or make_tls(sim.state_dir)

    def b64(path: str) -> str:
        return base64.b64encode(read_pem(path)).decode("ascii")

    context = f"kubernetes-admin@{world.name}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": world.name, "cluster": {
            "server": server_url.rstrip("/"),
            "certificate-authority-data": b64(tls["ca_cert"]),
        }}],
        "users": [{"name": "kubernetes-admin", "user": {
            "token": world.token,
            "client-certificate-data": b64(tls["client_cert"]),
            "client-key-data": b64(tls["client_key"]),
        }}],
        "contexts": [{"name": context, "context": {"cluster": world.name, "user": "kubernetes-admin"}}],
        "current-context": context,
    }
