"""List and watch requests: label and field selectors, ``resourceVersion`` and
``resourceVersionMatch`` as the cacher checks them, paging with continue tokens, Tables, and the
watch stream (kube_watch.py).
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any, Callable, Optional

from werkzeug.wrappers import Request, Response

from . import kube_events, kube_table, kube_watch, selectors
from .kube import KubeWorld
from .kube_http import GO_TRUE
from .kube_resources import ApiError, Resource

_FIELD_SELECTORS = {
    "pods": {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
             "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"},
    "nodes": {"spec.unschedulable"},
    "events": {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
               "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
               "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"},
}


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


def _node_name_term(plural: str, selector: str) -> Optional[str]:
    """The node a pod field selector requires (``spec.nodeName=X``), for the index lookup."""
    if plural != "pods":
        return None
    return selectors.parse_fields(selector).requires_exact_match("spec.nodeName")


def selectors_of(res: Resource, args: Any) -> tuple[Callable[[dict[str, str]], bool], Callable[[dict[str, Any]], bool]]:
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


def check_list_versions(world: KubeWorld, args: Any) -> None:
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
    if wanted > int(world.store.current_rv()):
        # cacher waitUntilFreshAndBlock: up to 3 s for the cache to reach it, then 504.
        waited = time.monotonic() + kube_watch.TOO_LARGE_WAIT
        while int(world.store.current_rv()) < wanted and time.monotonic() < waited:
            time.sleep(kube_watch.WAKE)
        if int(world.store.current_rv()) < wanted:
            raise ApiError(504, f"Too large resource version: {wanted}, current: {world.store.current_rv()}", "Timeout",
                           details={"causes": [{"reason": "ResourceVersionTooLarge",
                                                "message": "Too large resource version"}],
                                    "retryAfterSeconds": 1})
    if match == "Exact" and wanted != int(world.store.current_rv()):
        # etcd answers an older exact list from its history until compaction; the sim keeps no
        # object history, so every older exact list is answered as compacted (README: limits).
        raise ApiError(410, "The resourceVersion for the provided list is too old.", "Expired")


def list_page(sim: Any, world: KubeWorld, res: Resource, namespace: Optional[str], request: Request) -> str:
    args = request.args
    labels, fields = selectors_of(res, args)
    check_list_versions(world, args)
    limit = args.get("limit", type=int) or 0
    token = args.get("continue") or ""
    start = _decode_continue(token) if token else None
    node = _node_name_term(res.plural, args.get("fieldSelector", ""))
    with sim.lock:
        # Filter the stored objects and serialise the page under the lock: no copy of
        # thousands of pods for a drain's `spec.nodeName=` query.
        if namespace is not None and res.namespaced and not world.verbs.namespace_exists(namespace):
            stored: list[dict[str, Any]] = []
        elif node is not None:
            stored = [p for p in world.pods.on_node(node)
                      if namespace is None or p["metadata"]["namespace"] == namespace]
        else:
            stored = world.verbs.select(res.plural, namespace)
        rv = world.store.current_rv()
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


def watch(sim: Any, world: KubeWorld, res: Resource, namespace: Optional[str], request: Request,
          environ: dict[str, Any]) -> Response:
    """A watch stream (handlers/watch.go serveWatch): 200, chunked, one JSON event a line."""
    args = request.args
    labels, fields = selectors_of(res, args)
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
    drop = sim.faults.take("watch_drop", **match)
    expire = sim.faults.take("watch_expired", **match) is not None
    stream = kube_watch.WatchStream(
        world, res.plural, res.kind, res.api_version, namespace,
        lambda o: labels(o["metadata"].get("labels") or {}) and fields(o), rv, timeout,
        args.get("allowWatchBookmarks") in GO_TRUE, sim.clock.real(world.watch_bookmark_seconds),
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
