"""The Kubernetes API of every simulated cluster, over HTTPS, under ``/clusters/<cluster_id>``.

It speaks the wire protocol the official ``kubernetes`` client expects: JSON objects and lists
as the API server serialises them, ``Status`` errors, discovery documents, the three patch
flavours, list paging and selectors, the eviction subresource, and the plain-text health
endpoints. The world (``kube.KubeWorld``) decides; this module only translates HTTP.

Authentication: a bearer token (in the kubeconfig) or the admin client certificate (when the
HTTPS server asks for client certificates, see ``tls.server_ssl_context``). Without either the
answer is 401, on every path (the API server with anonymous auth off).
"""

from __future__ import annotations

import base64
import copy
import hmac
import json
import time
from typing import Any, Callable, Iterable, Optional

from werkzeug.wrappers import Request, Response

from . import kube_events, kube_exec, kube_table, kube_watch, rbac, selectors
from .core import drop_connection
from .kube import RESOURCES, ApiError, KubeWorld, Resource
from .tls import client_identity, make_tls, read_pem

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

# Lists whose items strategic merge patch merges by a key (patchMergeKey in the Go types of
# the objects this API lets clients write); every other list is replaced whole.
_MERGE_KEYS = {
    "conditions": "type", "addresses": "type", "ownerReferences": "uid", "containers": "name",
    "initContainers": "name", "volumes": "name", "env": "name", "volumeMounts": "mountPath",
    "imagePullSecrets": "name", "ports": "containerPort",
}
_PRIMITIVE_MERGE = {"finalizers"}

_FIELD_SELECTORS = {
    "pods": {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
             "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"},
    "nodes": {"spec.unschedulable"},
    "events": {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
               "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
               "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"},
}

_HEALTH_CHECKS = {
    "livez": ["ping", "log", "etcd", "poststarthook/start-apiserver-admission-initializer",
              "poststarthook/generic-apiserver-start-informers", "poststarthook/bootstrap-controller"],
    "readyz": ["ping", "log", "etcd", "etcd-readiness", "informer-sync",
               "poststarthook/start-apiserver-admission-initializer",
               "poststarthook/generic-apiserver-start-informers", "poststarthook/bootstrap-controller",
               "shutdown"],
    "healthz": ["ping", "log", "etcd", "poststarthook/generic-apiserver-start-informers"],
}

# strconv.ParseBool, as the apiserver reads a boolean query parameter: the python-legacy client
# (kubernetes 35) sends watch=True.
GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})


# ---------------------------------------------------------------------------------------------
# Patches (pure functions)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, null removes, the rest replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Kubernetes strategic merge patch for the fields this API accepts writes to.

    Like a merge patch, but lists with a patch merge key merge item by item, ``$patch`` directives
    (replace, delete) and ``$deleteFromPrimitiveList/<field>`` are honoured.
    """
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list):
                result[field] = [v for v in result[field] if v not in (value or [])]
            continue
        if key.startswith("$"):
            continue  # $setElementOrder, $retainKeys: ordering hints, no effect on content here
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and key in _MERGE_KEYS and isinstance(result.get(key), list):
            result[key] = _merge_list(result[key], value, _MERGE_KEYS[key])
        elif isinstance(value, list) and key in _PRIMITIVE_MERGE and isinstance(result.get(key), list):
            result[key] = result[key] + [v for v in value if v not in result[key]]
        else:
            result[key] = copy.deepcopy(value)
    if isinstance(patch.get("$retainKeys"), list):
        keep = set(patch["$retainKeys"])
        result = {k: v for k, v in result.items() if k in keep}
    return result


def _merge_list(current: list, patch: list, merge_key: str) -> list:
    result = copy.deepcopy(current)
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            result.append(copy.deepcopy(item))
            continue
        index = next((i for i, old in enumerate(result)
                      if isinstance(old, dict) and old.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
        elif index is None:
            result.append({k: v for k, v in copy.deepcopy(item).items() if k != "$patch"})
        else:
            result[index] = strategic_merge_patch(result[index], item)
    return result


class PatchError(Exception):
    pass


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer {path!r} must start with /")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(doc, dict):
            if part not in doc:
                raise PatchError(f"missing path element {part!r}")
            doc = doc[part]
        elif isinstance(doc, list):
            try:
                doc = doc[int(part)]
            except (ValueError, IndexError):
                raise PatchError(f"invalid array index {part!r}") from None
        else:
            raise PatchError(f"cannot descend into {part!r}")
    return doc


def _json_add(doc: Any, parts: list[str], value: Any, replace: bool) -> Any:
    if not parts:
        return copy.deepcopy(value)
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchError(f"replace operation does not apply: doc is missing key: /{'/'.join(parts)}")
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(copy.deepcopy(value))
        else:
            try:
                index = int(last)
            except ValueError:
                raise PatchError(f"invalid array index {last!r}") from None
            if replace:
                if not 0 <= index < len(parent):
                    raise PatchError(f"replace operation does not apply: index {index} out of range")
                parent[index] = copy.deepcopy(value)
            else:
                if not 0 <= index <= len(parent):
                    raise PatchError(f"add operation does not apply: index {index} out of range")
                parent.insert(index, copy.deepcopy(value))
    else:
        raise PatchError("cannot add into a scalar")
    return doc


def _json_remove(doc: Any, parts: list[str]) -> Any:
    if not parts:
        raise PatchError("cannot remove the whole document")
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"remove operation does not apply: doc is missing path: /{'/'.join(parts)}")
        del parent[last]
    elif isinstance(parent, list):
        try:
            del parent[int(last)]
        except (ValueError, IndexError):
            raise PatchError(f"remove operation does not apply: invalid index {last!r}") from None
    else:
        raise PatchError("cannot remove from a scalar")
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test)."""
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid operation {op!r}")
        parts = _pointer(op["path"])
        kind = op["op"]
        if kind == "add":
            doc = _json_add(doc, parts, op.get("value"), replace=False)
        elif kind == "replace":
            doc = _json_add(doc, parts, op.get("value"), replace=True)
        elif kind == "remove":
            doc = _json_remove(doc, parts)
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from", ""))
            value = copy.deepcopy(_walk(doc, source))
            if kind == "move":
                doc = _json_remove(doc, source)
            doc = _json_add(doc, parts, value, replace=False)
        elif kind == "test":
            if _walk(doc, parts) != op.get("value"):
                raise PatchError(f"testing value {op['path']} failed")
        else:
            raise PatchError(f"Unexpected kind: {kind}")
    return doc


# ---------------------------------------------------------------------------------------------
# Selectors


def _field_value(obj: dict[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, bool):
        return "true" if value else "false"
    if path == "source" and isinstance(value, dict):
        return str(value.get("component", ""))
    return "" if value is None else str(value)


def field_selector(text: str, plural: str) -> Callable[[dict[str, Any]], bool]:
    """fields.ParseSelector, then the resource's field label conversion (its selectable fields)."""
    selector = selectors.parse_fields(text)
    selector.check_fields({"metadata.name", "metadata.namespace"} | _FIELD_SELECTORS.get(plural, set()))
    return lambda obj: selector.matches(lambda path: _field_value(obj, path))


# ---------------------------------------------------------------------------------------------
# Discovery documents


def _groups() -> dict[str, list[Resource]]:
    groups: dict[str, list[Resource]] = {}
    for res in list(RESOURCES.values()) + [kube_events.EVENTS_V1]:
        groups.setdefault(res.api_version, []).append(res)
    return groups


def _resource_list(group_version: str) -> dict[str, Any]:
    resources: list[dict[str, Any]] = []
    for res in _groups().get(group_version, []):
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


# ---------------------------------------------------------------------------------------------
# The WSGI application


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
    if head in _HEALTH_CHECKS and len(segments) <= 2:
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
        groups = {g.split("/")[0] for g in _groups() if "/" in g}
        if segments[1] not in groups:
            raise _not_found_path()
        if len(segments) == 2:
            route.kind, route.document = "discovery", ("group", segments[1])
            return route
        gv, rest = f"{segments[1]}/{segments[2]}", segments[3:]
        if gv not in _groups():
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


def _verb(method: str, route: Route, args: Any) -> str:
    if route.kind != "resource":
        return "get"
    if method == "GET":
        if route.name is None:
            return "watch" if args.get("watch") in GO_TRUE else "list"
        return "get"
    return {"POST": "create", "PUT": "update", "PATCH": "patch",
            "DELETE": "delete" if route.name else "deletecollection"}.get(method, method.lower())


def _json_response(body: Any, code: int = 200) -> Response:
    return Response(json.dumps(body), status=code, content_type="application/json")


def _status_response(err: ApiError) -> Response:
    # The eviction handler's budget 429 has retryAfterSeconds 0, hence no Retry-After header.
    return _json_response(err.status(), err.code)


def _text_response(text: str, code: int = 200) -> Response:
    resp = Response(text, status=code, content_type="text/plain; charset=utf-8")
    resp.headers["X-Content-Type-Options"] = "nosniff"
    return resp


def _encode_continue(rv: str, key: tuple[str, str]) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": int(rv), "start": f"{key[0]}/{key[1]}\x00"})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[str, str]:
    try:
        raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode())
        ns, _slash, name = raw["start"].rstrip("\x00").partition("/")
        return ns, name
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ApiError(400, "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
                       "BadRequest") from None


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
        return response(environ, start_response)

    def _dispatch(self, request: Request, environ: dict[str, Any]) -> Response:
        parts = [p for p in request.path.split("/") if p != ""]
        if self.cluster_id is not None:
            cluster_id, parts = self.cluster_id, ["clusters", self.cluster_id] + parts
        elif len(parts) < 2 or parts[0] != "clusters" or parts[1] not in self.sim.kube:
            return _text_response("404 page not found\n", 404)
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
        verb = _verb(request.method, route, request.args) if route else request.method.lower()
        log = {"api": "kubernetes", "cluster": cluster_id, "verb": verb, "path": request.path,
               "resource": route.resource_label if route else "", "namespace": route.namespace if route else None,
               "name": route.name if route else None}

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
            err = ApiError(503, "the server is currently unable to handle the request", "ServiceUnavailable")
            return self._finish(log, _status_response(err))
        user = self._restricted_user(request)
        if user is None and not self._authenticated(request, world):
            return self._finish(log, _status_response(ApiError(401, "Unauthorized", "Unauthorized")))
        if early_error is not None:
            return self._finish(log, _status_response(early_error))
        assert route is not None
        if user is not None:
            log["user"] = user.name  # who the call log shows, for the RBAC tests
            denied = self._forbidden(user, route, verb, "/" + "/".join(parts[2:]), world.version)
            if denied is not None:
                return self._finish(log, _status_response(denied))
        fault = self.sim.faults.take("kube_error", cluster=cluster_id, verb=verb, resource=log["resource"],
                                     name=route.name, namespace=route.namespace,
                                     path="/" + "/".join(parts[2:]))
        if fault is not None:
            code = int(fault.get("status", 500))
            retry_after = fault.get("retry_after")
            err = ApiError(code, fault.get("message") or f"injected error {code}", fault.get("reason"),
                           details={"retryAfterSeconds": int(retry_after)} if retry_after else None)
            response = _status_response(err)
            if retry_after:
                # responsewriters.ErrorNegotiated: Details.RetryAfterSeconds > 0 sets Retry-After.
                response.headers["Retry-After"] = str(int(retry_after))
            return self._finish(log, response)
        try:
            if route.subresource == "exec":
                response = self._exec(world, route, verb, request, environ, log)
            elif route.subresource == "log":
                response = self._log(world, route, verb, request)
            elif route.res is not None and route.res.plural == "selfsubjectaccessreviews":
                response = self._access_review(route, verb, request, user)
            elif route.kind == "health":
                response = self._health(world, route, request)
            elif route.kind == "version":
                response = _json_response(self._version(world))
            elif route.kind == "root":
                response = _json_response({"paths": sorted(
                    ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"]
                    + [f"/apis/{g}" for g in _groups() if "/" in g])})
            elif route.kind == "discovery":
                response = _json_response(self._discovery(route.document, request))
            else:
                response = self._resource(world, route, verb, request, environ)
        except ApiError as err:
            response = _status_response(err)
        return self._finish(log, response)

    def _finish(self, log: dict[str, Any], response: Response) -> Response:
        self.sim.calls.add(**log, status=response.status_code)
        return response

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
        return _json_response(rbac.access_review(user, self._body(request, route.res)), 201)

    # --- pods/log (kube_run.py) ---

    def _log(self, world: KubeWorld, route: Route, verb: str, request: Request) -> Response:
        """GET pods/{name}/log: the container check (``validateContainer``), then the kubelet."""
        if verb != "get":
            raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
        namespace, name = route.namespace or "", route.name or ""
        with self.sim.lock:
            pod = world.get("pods", namespace, name)
            container = log_container(pod, request.args.get("container") or None)
            node = pod["spec"].get("nodeName")
            if not node:
                return _text_response("")  # LogLocation: no node, no location, an empty stream
            state = world.nodes.get(node)
            node_ip = world.node_address(node) if state is not None else ""
            if state is None or not state.vm_running or not state.kubelet_posting:
                raise kubelet_log_unreachable(pod, container, node_ip, refused=state is not None and state.vm_running)
            waiting = waiting_to_start(pod, container)
            if waiting is not None:
                raise waiting
            text = world.container_log(namespace, name, container)
        return _text_response(text or "")

    # --- pods/exec (kube_exec.py) ---

    def _exec(self, world: KubeWorld, route: Route, verb: str, request: Request, environ: dict[str, Any],
              log: dict[str, Any]) -> Response:
        if verb not in ("get", "create"):
            raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
        options = kube_exec.ExecOptions.from_args(request.args)
        target = self._exec_target(world, route.namespace or "", route.name or "", options)
        if isinstance(target, Response):
            return target
        options.check()
        if not kube_exec.request_is_websocket(request):
            # SPDY/3.1 (kubectl's fallback) is not spoken here; see tests/sim/README.md.
            raise kube_exec.not_an_upgrade()

        def done(status: dict[str, Any], code: int) -> None:
            # 101 once upgraded; the handshake's own refusal (no common subprotocol) is a 403.
            self.sim.calls.add(**log, status=code, exec_status=status.get("status"),
                               exec_command=list(options.command))

        return kube_exec.serve(environ, options, target, done)

    def _exec_target(self, world: KubeWorld, namespace: str, name: str,
                     options: "kube_exec.ExecOptions") -> Any:
        """What the API server checks and dials before the upgrade (kube_exec's docstring)."""
        with self.sim.lock:
            pod = world.get("pods", namespace, name)
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
        etcd_files = self._etcd_files(node, peer_nodes) if is_etcd else None
        if is_etcd and etcd_files is not None and not etcd_files[1]:
            return kube_exec.container_not_running(container)
        return kube_exec.ExecTarget(pod=name, container=container, image=image, node_ip=node_ip,
                                    etcd=etcd_files[0] if etcd_files else None)

    def _etcd_files(self, node: str, peer_nodes: dict[str, str]) -> Optional[tuple["kube_exec.EtcdMemberFiles", bool]]:
        etcd = self.sim.etcd
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

    # --- non-resource endpoints ---

    def _etcd_ok(self, world: KubeWorld) -> bool:
        etcd = self.sim.etcd
        if etcd is None:
            return True
        try:
            return bool(etcd.cluster_ready(world.cluster_id))  # network I/O: not under sim.lock
        except Exception:  # an etcd manager that cannot tell is an etcd check that fails
            return False

    def _health(self, world: KubeWorld, route: Route, request: Request) -> Response:
        kind = route.health or "readyz"
        checks = _HEALTH_CHECKS[kind]
        if route.check is not None:
            if route.check not in checks:
                return _text_response("404 page not found\n", 404)
            ok = self._etcd_ok(world) if route.check in ("etcd", "etcd-readiness") else True
            if ok:
                return _text_response("ok")
            return _text_response(f"internal server error: {route.check} check failed\n", 500)
        excluded = set(request.args.getlist("exclude"))
        etcd_ok = self._etcd_ok(world) if {"etcd", "etcd-readiness"} - excluded else True
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
            return _text_response("\n".join(lines) + "\n", 500 if failed else 200)
        return _text_response("ok")

    @staticmethod
    def _version(world: KubeWorld) -> dict[str, Any]:
        major, minor = (world.version.split(".") + ["0"])[:2]
        return {"major": major, "minor": minor, "emulationMajor": major, "emulationMinor": minor,
                "minCompatibilityMajor": major, "minCompatibilityMinor": str(max(0, int(minor) - 1)),
                "gitVersion": f"v{world.version}", "gitCommit": "cks-sim", "gitTreeState": "clean",
                "buildDate": "2024-08-14T18:35:52Z", "goVersion": "go1.22.5", "compiler": "gc",
                "platform": "linux/amd64"}

    @staticmethod
    def _discovery(document: Any, request: Request) -> dict[str, Any]:
        if document == "api":
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}]}
        if document == "apis":
            names = sorted({g.split("/")[0] for g in _groups() if "/" in g})
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_api_group(n) for n in names]}
        if document[0] == "group":
            return {"kind": "APIGroup", "apiVersion": "v1", **_api_group(document[1])}
        return _resource_list(document[1])

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
                result = world.evict(route.namespace or "", route.name or "", body,
                                     dry_run=request.args.get("dryRun") == "All")
            return _json_response(result, 201)
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
            return self._watch(world, res, route.namespace, request, environ or {})
        if verb == "list":
            return Response(self._list(world, res, route.namespace, request), status=200,
                            content_type="application/json")
        if verb == "get":
            with self.sim.lock:
                obj = world.get(res.plural, ns, route.name or "")
                if route.subresource is None and kube_table.wants_table(request.headers.get("Accept", "")):
                    return _json_response(kube_table.table(res.plural, [obj], {"resourceVersion": world.current_rv()},
                                                           include_object=request.args.get("includeObject",
                                                                                           "Metadata")))
                return _json_response(obj)
        if verb == "create":
            body = self._body(request, res)
            if res.plural == "events":
                kube_events.validate_core_create(body, ns)
            with self.sim.lock:
                return _json_response(world.create(res.plural, ns, body), 201)
        if verb == "update":
            body = self._body(request, res)
            with self.sim.lock:
                return _json_response(world.update(res.plural, ns, route.name or "", body, route.subresource))
        if verb == "patch":
            return _json_response(self._patch(world, res, ns, route, request))
        if verb == "delete":
            options = self._body(request, res) or {}
            if not isinstance(options, dict):
                raise ApiError(400, "the body of the request was in an unknown format", "BadRequest")
            if request.args.get("gracePeriodSeconds") is not None:
                options["gracePeriodSeconds"] = int(request.args["gracePeriodSeconds"])
            if request.args.get("dryRun") == "All":
                options["dryRun"] = ["All"]
            with self.sim.lock:
                return _json_response(world.delete(res.plural, ns, route.name or "", options))
        raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")

    def _events_v1(self, world: KubeWorld, route: Route, verb: str, request: Request) -> Response:
        """events.k8s.io/v1: the stored core/v1 Event converted in and out (kube_events.py)."""
        ns, name = route.namespace or "", route.name or ""
        if verb == "create" and route.name is not None:
            raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
        if verb == "get":
            with self.sim.lock:
                world.expire_events()
                current = world.get("events", ns, name)
                if kube_table.wants_table(request.headers.get("Accept", "")):
                    return _json_response(kube_table.table("events", [current], {"resourceVersion": world.current_rv()},
                                                           include_object=request.args.get("includeObject", "Metadata")))
                return _json_response(kube_events.to_v1(current))
        body = self._body(request, kube_events.EVENTS_V1)
        if not isinstance(body, (dict, list)):
            raise ApiError(400, "the body of the request was in an unknown format", "BadRequest")
        with self.sim.lock:
            if verb == "create":
                if not isinstance(body, dict):
                    raise ApiError(400, "the body of the request was in an unknown format", "BadRequest")
                kube_events.validate_create(body, ns)
                return _json_response(kube_events.to_v1(world.create("events", ns, kube_events.to_core(body))), 201)
            world.expire_events()
            old = kube_events.to_v1(world.get("events", ns, name))
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
            return _json_response(kube_events.to_v1(world.update("events", ns, name, kube_events.to_core(body))))

    def _patch(self, world: KubeWorld, res: Resource, ns: str, route: Route, request: Request) -> dict[str, Any]:
        content_type = (request.content_type or "").split(";")[0].strip().lower()
        if content_type not in (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH):
            raise ApiError(415, f"the body of the request was in an unknown format - accepted media types include: "
                                f"{JSON_PATCH}, {MERGE_PATCH}, {STRATEGIC_PATCH}", "UnsupportedMediaType")
        patch = self._body(request, res)
        with self.sim.lock:
            current = world.get(res.plural, ns, route.name or "")
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
            return world.update(res.plural, ns, route.name or "", patched, route.subresource)

    def _watch(self, world: KubeWorld, res: Resource, namespace: Optional[str], request: Request,
               environ: dict[str, Any]) -> Response:
        """A watch stream (handlers/watch.go serveWatch): 200, chunked, one JSON event a line."""
        args = request.args
        labels, fields = self._selectors(res, args)
        if args.get("resourceVersionMatch"):
            # ValidateListOptions: resourceVersionMatch on a watch needs sendInitialEvents.
            raise ApiError(422, 'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
                                'resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided',
                           "Invalid")
        rv = args.get("resourceVersion")
        if rv not in (None, "") and not rv.isdigit():
            # storage.APIObjectVersioner.ParseResourceVersion, wrapped by the cacher as a bad request.
            raise ApiError(400, f'invalid resource version: strconv.ParseUint: parsing "{rv}": invalid syntax',
                           "BadRequest")
        timeout_arg = args.get("timeoutSeconds", type=int)
        timeout = float(timeout_arg) if timeout_arg else kube_watch.default_timeout()
        selector = args.get("fieldSelector", "") + "|" + args.get("labelSelector", "")
        match = {"cluster": world.cluster_id, "resource": res.plural, "selector": selector}
        drop = self.sim.faults.take("watch_drop", **match)
        expire = self.sim.faults.take("watch_expired", **match) is not None
        stream = kube_watch.WatchStream(
            world, res.plural, res.kind, res.api_version, namespace,
            lambda o: labels(o["metadata"].get("labels") or {}) and fields(o), rv, timeout,
            args.get("allowWatchBookmarks") in GO_TRUE, self.sim.clock.real(world.watch_bookmark_seconds),
            drop, expire, environ)
        if kube_table.wants_table(request.headers.get("Accept", "")):
            # kubectl get -w asks for Tables: each event's object is a one-row Table (handlers/watch.go
            # transforms every event object with the same table convertor as a list).
            include = args.get("includeObject", "Metadata")
            stream.as_table = lambda obj: kube_table.table(
                res.plural, [obj], {"resourceVersion": obj["metadata"].get("resourceVersion", "")},
                include_object=include)
        elif res is kube_events.EVENTS_V1:
            stream.as_table = kube_events.to_v1  # the stored core/v1 form, shown as this group's
        return Response(stream.lines(), status=200, content_type="application/json", direct_passthrough=True)

    @staticmethod
    def _selectors(res: Resource, args: Any) -> tuple[Callable[[dict[str, str]], bool], Callable[[dict[str, Any]], bool]]:
        # The label selector is decoded first (ListOptions' conversion order), the field labels
        # checked last; the message is the parser's alone (kubectl adds "Unable to find ...").
        # events.k8s.io/v1 field labels name the stored (core/v1) form's fields.
        fields = args.get("fieldSelector", "")
        if res is kube_events.EVENTS_V1:
            fields = kube_events.core_field_selector(fields)
        try:
            labels = selectors.parse_labels(args.get("labelSelector", ""))
            return labels.matches, field_selector(fields, res.plural)
        except selectors.SelectorError as exc:
            raise ApiError(400, str(exc), "BadRequest") from None

    @staticmethod
    def _check_list_versions(world: KubeWorld, args: Any) -> None:
        """ValidateListOptions, then the cacher's resourceVersion rules for a list."""
        rv, match = args.get("resourceVersion", ""), args.get("resourceVersionMatch", "")
        invalid = 'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: '
        if match:
            if not rv:
                raise ApiError(422, invalid + "Forbidden: resourceVersionMatch is forbidden unless resourceVersion "
                                              "is provided", "Invalid")
            if args.get("continue"):
                raise ApiError(422, invalid + "Forbidden: resourceVersionMatch is forbidden when continue is "
                                              "provided", "Invalid")
            if match not in ("Exact", "NotOlderThan"):
                raise ApiError(422, invalid + f'Unsupported value: "{match}": supported values: "Exact", '
                                              f'"NotOlderThan"', "Invalid")
            if match == "Exact" and rv == "0":
                raise ApiError(422, invalid + 'Forbidden: resourceVersionMatch "exact" is forbidden for '
                                              'resourceVersion "0"', "Invalid")
        if not rv or rv == "0":
            return
        if not rv.isdigit():
            raise ApiError(400, f'invalid resource version: strconv.ParseUint: parsing "{rv}": invalid syntax',
                           "BadRequest")
        wanted = int(rv)
        if wanted > int(world.current_rv()):
            # cacher waitUntilFreshAndBlock: up to 3 s for the cache to reach it, then 504.
            waited = time.monotonic() + kube_watch.TOO_LARGE_WAIT
            while int(world.current_rv()) < wanted and time.monotonic() < waited:
                time.sleep(kube_watch.WAKE)
            if int(world.current_rv()) < wanted:
                raise ApiError(504, f"Too large resource version: {wanted}, current: {world.current_rv()}", "Timeout",
                               details={"causes": [{"reason": "ResourceVersionTooLarge",
                                                    "message": "Too large resource version"}],
                                        "retryAfterSeconds": 1})
        if match == "Exact" and wanted != int(world.current_rv()):
            # etcd answers an older exact list from its history until compaction; the sim keeps no
            # object history, so every older exact list is answered as compacted (README: limits).
            raise ApiError(410, "The resourceVersion for the provided list is too old.", "Expired")

    def _list(self, world: KubeWorld, res: Resource, namespace: Optional[str], request: Request) -> str:
        args = request.args
        labels, fields = self._selectors(res, args)
        self._check_list_versions(world, args)
        limit = args.get("limit", type=int) or 0
        token = args.get("continue") or ""
        start = _decode_continue(token) if token else None
        node = _node_name_term(res.plural, args.get("fieldSelector", ""))
        with self.sim.lock:
            # Filter the stored objects and serialise the page under the lock: no copy of
            # thousands of pods for a drain's `spec.nodeName=` query.
            if namespace is not None and res.namespaced and not world.namespace_exists(namespace):
                stored: list[dict[str, Any]] = []
            elif node is not None:
                stored = [p for p in world.pods_on_node(node)
                          if namespace is None or p["metadata"]["namespace"] == namespace]
            else:
                stored = world.select(res.plural, namespace)
            rv = world.current_rv()
            items = [i for i in stored if labels(i["metadata"].get("labels") or {}) and fields(i)]
            if start is not None:
                items = [i for i in items if (i["metadata"].get("namespace", ""), i["metadata"]["name"]) > start]
            meta: dict[str, Any] = {"resourceVersion": rv}
            if limit and len(items) > limit:
                rest = len(items) - limit
                items = items[:limit]
                last = items[-1]["metadata"]
                meta["continue"] = _encode_continue(rv, (last.get("namespace", ""), last["name"]))
                if not args.get("labelSelector") and not args.get("fieldSelector"):
                    meta["remainingItemCount"] = rest
            if kube_table.wants_table(request.headers.get("Accept", "")):
                return json.dumps(kube_table.table(res.plural, items, meta,
                                                   include_object=args.get("includeObject", "Metadata")))
            if res is kube_events.EVENTS_V1:
                items = [kube_events.to_v1(i) for i in items]
            # The API server omits kind and apiVersion on list items.
            text = json.dumps({"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": meta,
                               "items": [{k: v for k, v in i.items() if k not in ("kind", "apiVersion")}
                                         for i in items]})
        return text


def _at_least(version: str, major: int, minor: int) -> bool:
    try:
        got = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        return False
    return got >= (major, minor)


def _node_name_term(plural: str, selector: str) -> Optional[str]:
    """The node a pod field selector requires (``spec.nodeName=X``), for the index lookup."""
    if plural != "pods":
        return None
    return selectors.parse_fields(selector).requires_exact_match("spec.nodeName")


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


# ---------------------------------------------------------------------------------------------
# pods/log answers (the Kubernetes sources are in cks_sim/kube_run.py's docstring)


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
