# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The Kubernetes API of one CKS cluster, over the official ``kubernetes`` client.

What it adds to the client:

- the kubeconfig from a path, inline (a dict or YAML text), or by default fetched from CloudStack
  with getKubernetesClusterConfig, loaded into an isolated ``ApiClient`` (never the process-wide
  default, so several clusters can live in one process) with the embedded certificates in a
  private directory that ``close`` removes;
- timeouts that apply on every supported client version (35.x ignores a float timeout, so a
  ``(connect, read)`` tuple is always passed) and no urllib3 retries multiplying them;
- plain dicts in the API's JSON field names out of every call, so code above does not depend on
  the client's model classes (python-legacy up to 36, pydantic from 37). Every request goes out
  through the ApiClient as raw JSON: the generated API classes are never imported, because with
  37.x importing them and turning answers into models and back costs more than a second per
  module run (a rollout runs one module per batch);
- one error type, ``KubernetesError``, with the Status message and reason; transport failures
  (refused, timed out, TLS) become ``KubernetesError`` too, with a message that says what to check.

Raw JSON also keeps MicroTime values of Leases exactly as formatted (37.x would re-serialize a
parsed datetime with ``isoformat()``), and an eviction's answer is read as the Status it is.

The HTTP side (raw JSON requests, their retries and the checks that make a write safe to
repeat) is in ``kube_http.py``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from typing import Any, Callable, Mapping, Optional, TypeVar
from urllib.parse import quote

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube_answers import EvictionResult, eviction_result
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube_http import (
    KubeHttp,
    _json_or_none,
    _Settled,
    _status_error,
    merge_patch_applied,
    scrub_secrets,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube_options import KubeOptions, fetch_kubeconfig, parse_kubeconfig
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube_watch import KubeWatcher, State, WatchUnsupported, object_key
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput, KubernetesError
from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import ObjectList, PodList
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline, wait_for

try:
    import urllib3
    from kubernetes import client as k8s_client
    from kubernetes.config import kube_config
    from kubernetes.config.config_exception import ConfigException

    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR: Optional[str] = None
except ImportError as exc:  # pragma: no cover - exercised only without the library
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = str(exc)

LIST_LIMIT = 500
MERGE_PATCH = "application/merge-patch+json"
# Read-modify-write rounds before a node that keeps changing under us is reported.
CONFLICT_ATTEMPTS = 5
T = TypeVar("T")


if HAS_KUBERNETES:
    class _DroppedConnectionRetry(urllib3.util.Retry):
        """urllib3's Retry that gives up at once on a read timeout (the caller's timeout holds)."""

        def increment(self, method=None, url=None, response=None, error=None, _pool=None, _stacktrace=None):
            if isinstance(error, urllib3.exceptions.ReadTimeoutError):
                raise urllib3.exceptions.MaxRetryError(_pool, url, error)
            return super().increment(method=method, url=url, response=response, error=error,
                                     _pool=_pool, _stacktrace=_stacktrace)


class KubeClient(KubeHttp):
    """One cluster's API. Use ``KubeClient.connect``; call ``close`` when done."""

    def __init__(self, api_client: Any, options: KubeOptions, temp_dir: Optional[str] = None) -> None:
        super().__init__(api_client, options)
        self._finalizer = weakref.finalize(self, _remove_temp_dir, temp_dir)
        self.watcher = KubeWatcher(self)
        # Cleared by the first watch the server refuses: every later wait polls.
        self.watch_supported = True

    # -- connecting ---------------------------------------------------------------------------

    @classmethod
    def connect(cls, options: KubeOptions, cloudstack: Any = None, cluster_id: Optional[str] = None) -> KubeClient:
        """Load the kubeconfig (path, inline, or from CloudStack) into an isolated client."""
        if not HAS_KUBERNETES:
            raise KubernetesError("connect", f"the kubernetes Python library is required: {KUBERNETES_IMPORT_ERROR}")
        if options.kubeconfig is not None:
            path, config = parse_kubeconfig(options.kubeconfig)
        elif cloudstack is not None and cluster_id:
            path, config = None, fetch_kubeconfig(cloudstack, cluster_id)
        else:
            raise InvalidInput("kubeconfig", None, "not given, and no CloudStack cluster to fetch it from "
                                                   "(getKubernetesClusterConfig)")
        # mkdtemp makes the directory 0700 and the client's mkstemp files are 0600; we remove
        # them at close instead of leaving them until interpreter exit.
        temp_dir = tempfile.mkdtemp(prefix="cks-kubeconfig-")
        try:
            configuration = k8s_client.Configuration()
            try:
                if path is not None:
                    kube_config.load_kube_config(config_file=path, context=options.context,
                                                 client_configuration=configuration, persist_config=False,
                                                 temp_file_path=temp_dir)
                else:
                    # What new_client_from_config_dict does, with our overrides applied before
                    # the ApiClient builds its connection pool from the configuration.
                    kube_config.load_kube_config_from_dict(config_dict=config, context=options.context,
                                                           client_configuration=configuration,
                                                           persist_config=False, temp_file_path=temp_dir)
            except ConfigException as exc:
                raise KubernetesError("load kubeconfig", scrub_secrets(str(exc)))
            except (OSError, ValueError, TypeError, KeyError) as exc:
                raise KubernetesError("load kubeconfig", f"{type(exc).__name__}: {scrub_secrets(str(exc))}")
            if options.validate_certs is not None:
                configuration.verify_ssl = bool(options.validate_certs)
            if options.ca_cert:
                configuration.ssl_ca_cert = options.ca_cert
            # urllib3's default would retry reads three times and multiply the timeout by four.
            # The transport retries nothing here: every retry goes through the one policy
            # (retry.py), which counts it, and writes are settled by reading back first.
            configuration.retries = _DroppedConnectionRetry(total=0, connect=0, read=0, status=0, other=0,
                                                            allowed_methods=frozenset({"GET"}), redirect=False)
            api_client = k8s_client.ApiClient(configuration=configuration)
        except BaseException:
            _remove_temp_dir(temp_dir)
            raise
        return cls(api_client, options, temp_dir)

    def close(self) -> None:
        try:
            self.api_client.close()
        except Exception:  # closing a pool must not hide the caller's own error
            pass
        self._finalizer()

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _paged(self, action: str, path: str, versions: Optional[list[str]] = None, **query: str) -> list[dict[str, Any]]:
        """Every item, page by page; ``versions`` gets the first page's resourceVersion (the list's)."""
        items: list[dict[str, Any]] = []
        token: Optional[str] = None
        while True:
            page_query = dict(query, limit=str(LIST_LIMIT))
            if token:
                page_query["continue"] = token
            page = self._json(action, "GET", path, query=page_query)
            items.extend(page.get("items") or [])
            if versions is not None and not versions:
                versions.append(str((page.get("metadata") or {}).get("resourceVersion") or ""))
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items

    def list_nodes(self) -> list[dict[str, Any]]:
        return self.list_nodes_at().items

    def list_nodes_at(self) -> ObjectList:
        """Every node and the list's resourceVersion (a batch's shared watch starts from it)."""
        versions: list[str] = []
        return ObjectList(self._paged("list nodes", "/api/v1/nodes", versions), versions[0] if versions else "")

    def read_node(self, name: str) -> dict[str, Any]:
        return self._json(f"read node {name}", "GET", f"/api/v1/nodes/{quote(name, safe='')}")

    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch of a node (annotations, labels, ``spec.unschedulable``); None values
        delete keys. A ``metadata.resourceVersion`` in it makes it apply to that version only."""
        def settle() -> Optional[dict[str, Any]]:
            node = self._json(f"read node {name}", "GET", f"/api/v1/nodes/{quote(name, safe='')}",
                              missing_is_none=True)
            if node is None:
                raise KubernetesError(f"patch node {name}", f'nodes "{name}" not found', status=404, reason="NotFound")
            return node if merge_patch_applied(node, patch) else None

        return self._json(f"patch node {name}", "PATCH", f"/api/v1/nodes/{quote(name, safe='')}", body=patch,
                          content_type=MERGE_PATCH, settle=settle)

    def patch_node_checked(self, name: str, build: Callable[[dict[str, Any]], Optional[dict[str, Any]]],
                           node: Optional[dict[str, Any]] = None,
                           attempts: int = CONFLICT_ATTEMPTS) -> Optional[dict[str, Any]]:
        """A patch computed from the node as read, applied only to that version of it.

        ``build(node)`` returns the patch (None: nothing to write); it goes out with the read's
        ``metadata.resourceVersion`` as a precondition. On 409 Conflict someone wrote the node in
        between: it is read again and the patch computed again (client-go's RetryOnConflict), up
        to ``attempts`` times. ``node`` is a read already made, used for the first attempt.
        Needed for lists without a patch merge key (``spec.taints``), which a patch replaces whole.
        """
        current = node
        for attempt in range(1, attempts + 1):
            if current is None:
                current = self.read_node(name)
            patch = build(current)
            if patch is None:
                return None
            version = (current.get("metadata") or {}).get("resourceVersion")
            patch = dict(patch, metadata=dict(patch.get("metadata") or {}, resourceVersion=version))
            try:
                return self.patch_node(name, patch)
            except KubernetesError as exc:
                if exc.status != 409 or exc.reason != "Conflict" or attempt == attempts:
                    raise
                current = None
        return None  # pragma: no cover - the loop returns or raises

    # -- waits: a watch each, polling where the server does not watch ---------------------------

    def await_node(self, name: str, check: Callable[[Optional[dict[str, Any]]], Optional[T]], deadline: Deadline,
                   interval: float, what: str, since: Optional[Mapping[str, Any]] = None) -> T:
        """The first truthy ``check(node)`` (None while there is no such node).

        ``since``: the node as a write of this run answered: the watch follows from its
        resourceVersion, so the wait costs no list (every change after that write is an event).
        """
        path = f"/api/v1/nodes/{quote(name, safe='')}"
        start = None
        if since is not None:
            start = ({name: dict(since)}, str((since.get("metadata") or {}).get("resourceVersion") or ""))
        return self._await("/api/v1/nodes", f"metadata.name={name}", lambda state: check(state.get(name)),
                           lambda: check(self._json(f"read node {name}", "GET", path, missing_is_none=True)),
                           deadline, interval, what, start)

    def await_pods(self, node_name: str, check: Callable[[State], Optional[T]], deadline: Deadline, interval: float,
                   what: str, since: Optional[PodList] = None) -> T:
        """The first truthy ``check(pods)``, ``pods`` being the node's pods by "namespace/name".

        ``since``: the drain's own list of the node's pods: the watch follows from its version.
        """
        start = ({object_key(p): p for p in since.items}, since.version) if since is not None else None
        return self._await("/api/v1/pods", f"spec.nodeName={node_name}", check,
                           lambda: check({object_key(p): p for p in self.list_pods(node_name)}),
                           deadline, interval, what, start)

    def _await(self, path: str, selector: str, from_state: Callable[[State], Optional[T]],
               poll: Callable[[], Optional[T]], deadline: Deadline, interval: float, what: str,
               start: Optional[tuple[State, str]] = None) -> T:
        if self.watch_supported:
            try:
                return self.watcher.until(path, from_state, deadline, what, field_selector=selector, interval=interval,
                                          start=start)
            except WatchUnsupported as exc:
                self.watch_supported = False
                self.retry_log.retried(f"watch {path}", f"the server does not watch ({exc}); polling instead", 0.0)
        value: T = wait_for(poll, deadline, interval, what=what)  # type: ignore[assignment]
        return value

    def list_pods(self, node_name: str) -> list[dict[str, Any]]:
        return self.list_pods_at(node_name).items

    def list_pods_at(self, node_name: str) -> PodList:
        """The node's pods and the resourceVersion of the list (a watch can follow from it)."""
        versions: list[str] = []
        items = self._paged(f"list pods on node {node_name}", "/api/v1/pods", versions,
                            fieldSelector=f"spec.nodeName={node_name}")
        return PodList(items, versions[0] if versions else "")

    def list_labelled_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return self._paged(f"list pods {selector}", f"/api/v1/namespaces/{quote(namespace, safe='')}/pods", labelSelector=selector)

    def review_access(self, attributes: dict[str, str]) -> dict[str, Any]:
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {"resourceAttributes": attributes}}
        return self._json("review access", "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=body)

    def list_all_pods(self) -> list[dict[str, Any]]:
        """Every pod of the cluster, paged: one listing instead of one per node (the dry run's drain check)."""
        return self._paged("list pods", "/api/v1/pods")

    def read_pod(self, namespace: str, name: str) -> Optional[dict[str, Any]]:
        return self._json(f"read pod {namespace}/{name}", "GET",
                          f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}",
                          missing_is_none=True)

    def evict(self, namespace: str, name: str, grace_seconds: Optional[int] = None) -> EvictionResult:
        """Ask the Eviction API (policy/v1) to evict a pod; a 429 or 500 is an answer, not an error.

        The answer is a Status (not the Eviction the generated client expects); a 429's PDB
        message sits in its ``details.causes``.
        """
        body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction",
                                "metadata": {"name": name, "namespace": namespace}}
        if grace_seconds is not None:
            body["deleteOptions"] = {"gracePeriodSeconds": int(grace_seconds)}
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}/eviction"

        def settle() -> Optional[EvictionResult]:
            # Gone: evicted (or deleted); terminating: the eviction went through; else post again.
            pod = self.read_pod(namespace, name)
            if pod is None:
                return EvictionResult("gone", 404, "the pod was gone when the eviction was checked")
            if (pod.get("metadata") or {}).get("deletionTimestamp"):
                return EvictionResult("evicted", 201, "the pod was terminating when the eviction was checked")
            return None

        answer = self._request(f"evict pod {namespace}/{name}", "POST", path, body=body, settle=settle)
        if isinstance(answer, _Settled):
            return answer.value
        status, text = answer
        data = _json_or_none(text)
        return eviction_result(status, data if isinstance(data, dict) else {})

    # -- short-lived pods (the external etcd check, etcd_pod.py) -----------------------------------

    def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        # No settle: a generateName create whose answer was lost cannot be found again by name,
        # and a second pod is worse than a failed check (the caller deletes what it knows of).
        return self._json(f"create pod in {namespace}", "POST", f"/api/v1/namespaces/{quote(namespace, safe='')}/pods",
                          body=body)

    def delete_pod(self, namespace: str, name: str) -> bool:
        """Delete at once (no grace: a pod on a node that is down would wait for its kubelet); False if gone."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
        answer = self._json(f"delete pod {namespace}/{name}", "DELETE",
                            f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}",
                            body=body, missing_is_none=True)
        return answer is not None

    def read_pod_log(self, namespace: str, name: str, container: str) -> str:
        action = f"read the log of {namespace}/{name} container {container}"
        status, text = self.raw_get(f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}/log",
                                    {"container": container})
        if status != 200:
            data = _json_or_none(text)
            raise _status_error(action, status, data if isinstance(data, dict) else {"message": text[:300]})
        return text

    def await_pod(self, namespace: str, name: str, check: Callable[[Optional[dict[str, Any]]], Optional[T]],
                  deadline: Deadline, interval: float, what: str) -> T:
        """The first truthy ``check(pod)`` (None once there is no such pod)."""
        return self._await(f"/api/v1/namespaces/{quote(namespace, safe='')}/pods", f"metadata.name={name}",
                           lambda state: check(state.get(f"{namespace}/{name}")),
                           lambda: check(self.read_pod(namespace, name)), deadline, interval, what)

    def list_pdbs(self) -> list[dict[str, Any]]:
        return self._paged("list pod disruption budgets", "/apis/policy/v1/poddisruptionbudgets")

    def read_daemonset(self, namespace: str, name: str) -> Optional[dict[str, Any]]:
        return self._json(f"read daemonset {namespace}/{name}", "GET",
                          f"/apis/apps/v1/namespaces/{quote(namespace, safe='')}/daemonsets/{quote(name, safe='')}",
                          missing_is_none=True)

    # -- leases and configmaps, as raw JSON ---------------------------------------------------------

    def get_lease(self, namespace: str, name: str) -> Optional[dict[str, Any]]:
        return self._object("get", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", name,
                            f"lease {namespace}/{name}")

    def create_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._object("create", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", None,
                            f"lease {namespace}/{body['metadata']['name']}", body)

    def replace_lease(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """PUT; ``body.metadata.resourceVersion`` makes it a compare-and-set (409 Conflict if stale)."""
        return self._object("replace", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", name,
                            f"lease {namespace}/{name}", body)

    def patch_lease(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch of a Lease; ``metadata.resourceVersion`` in it applies it to that version
        only (409 Conflict otherwise): a renewal in one call instead of a read and a replace.

        A lost answer is settled by reading back: the version sent still there, it did not happen;
        the patch's values there, it did; else 409, what the second send would have got.
        """
        path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{quote(name, safe='')}"
        action, sent = f"patch lease {namespace}/{name}", (patch.get("metadata") or {}).get("resourceVersion")

        def settle() -> Optional[dict[str, Any]]:
            current = self._json(f"read back after {action}", "GET", path, missing_is_none=True)
            if current is None:
                raise KubernetesError(action, "it was deleted meanwhile", status=404, reason="NotFound")
            if sent is not None and (current.get("metadata") or {}).get("resourceVersion") == sent:
                return None
            if merge_patch_applied(current, patch):
                return current
            raise KubernetesError(action, "the object has been modified by someone else meanwhile",
                                  status=409, reason="Conflict")

        return self._json(action, "PATCH", path, body=patch, content_type=MERGE_PATCH, settle=settle)

    def get_configmap(self, namespace: str, name: str) -> Optional[dict[str, Any]]:
        return self._object("get", f"/api/v1/namespaces/{namespace}/configmaps", name, f"configmap {namespace}/{name}")

    def create_configmap(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._object("create", f"/api/v1/namespaces/{namespace}/configmaps", None,
                            f"configmap {namespace}/{body['metadata']['name']}", body)

    def replace_configmap(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._object("replace", f"/api/v1/namespaces/{namespace}/configmaps", name,
                            f"configmap {namespace}/{name}", body)

    def delete_configmap(self, namespace: str, name: str, resource_version: Optional[str] = None) -> bool:
        return self._delete(f"/api/v1/namespaces/{namespace}/configmaps", name,
                            f"configmap {namespace}/{name}", resource_version)

    def _object(self, verb: str, collection: str, name: Optional[str], what: str, body: Optional[dict[str, Any]] = None) -> Any:
        method = {"get": "GET", "create": "POST", "replace": "PUT"}[verb]
        path = collection if name is None else f"{collection}/{quote(name, safe='')}"
        settle = None
        if body is not None:
            target = str(name or (body.get("metadata") or {}).get("name"))
            settle = self._settle_put(f"{verb} {what}", f"{collection}/{quote(target, safe='')}", body,
                                      creating=verb == "create")
        return self._json(f"{verb} {what}", method, path, body=body, missing_is_none=verb == "get", settle=settle)

    def _settle_put(self, action: str, path: str, body: dict[str, Any], creating: bool) -> Callable[[], Any]:
        """How to tell whether a create or a compare-and-set replace whose answer was lost happened.

        The object as read carries our ``spec`` / ``data`` (every write here is a whole object,
        the Lease's with our holder and renew time): it did. A replace finds the resourceVersion
        it was sent with still there: it did not, send again. Anything else is what the server
        would have answered the second send with: 409 (someone else wrote), 404 (deleted).
        """
        sent_version = (body.get("metadata") or {}).get("resourceVersion")

        def settle() -> Optional[dict[str, Any]]:
            current = self._json(f"read back after {action}", "GET", path, missing_is_none=True)
            if current is None:
                if creating:
                    return None
                raise KubernetesError(action, "it was deleted meanwhile", status=404, reason="NotFound")
            if all(current.get(key) == body.get(key) for key in ("spec", "data") if key in body):
                return current
            if not creating and sent_version is not None and \
                    (current.get("metadata") or {}).get("resourceVersion") == sent_version:
                return None
            raise KubernetesError(action, "the object has been modified by someone else meanwhile",
                                  status=409, reason="AlreadyExists" if creating else "Conflict")

        return settle

    def _delete(self, collection: str, name: str, what: str, resource_version: Optional[str]) -> bool:
        """True if deleted, False if it was already gone."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if resource_version:
            body["preconditions"] = {"resourceVersion": resource_version}
        path = f"{collection}/{quote(name, safe='')}"

        def settle() -> Optional[dict[str, Any]]:
            current = self._json(f"read back after delete {what}", "GET", path, missing_is_none=True)
            if current is None:
                return {"kind": "Status", "status": "Success"}
            if resource_version and (current.get("metadata") or {}).get("resourceVersion") != resource_version:
                raise KubernetesError(f"delete {what}", "the object has been modified by someone else meanwhile",
                                      status=409, reason="Conflict")
            return None

        answer = self._json(f"delete {what}", "DELETE", path, body=body, missing_is_none=True, settle=settle)
        return answer is not None


def _remove_temp_dir(temp_dir: Optional[str]) -> None:
    if not temp_dir:
        return
    # The client caches the temp file of each certificate by content; forget ours, or a later
    # client in this process with the same certificate would be handed a deleted file.
    cache = getattr(kube_config, "_temp_files", None) if HAS_KUBERNETES else None
    if isinstance(cache, dict):
        prefix = os.path.join(temp_dir, "")
        for key, path in list(cache.items()):
            if isinstance(path, str) and path.startswith(prefix):
                cache.pop(key, None)
    shutil.rmtree(temp_dir, ignore_errors=True)
