# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Every kind of request the collection sends, and whether a transient fault may send it again.

A request is retried by what it does, never by its HTTP method: a SelfSubjectAccessReview is a
POST that changes nothing, and a 503 on it must not fail a rollout (issue 33). The kinds:

- ``READ``: changes nothing (a GET, list or watch, an access or rules review, a dry run, an etcd
  question): sent again after a 5xx, a 429 or a dropped connection, like any read (CloudStack's own
  INTERNAL_ERROR, 530, included: it is about the server, not the request);
- ``SETTLED``: a write sent again only after reading what it changes showed it did not happen
  (``CloudStackClient.run_change``, the Kubernetes client's ``settle`` read-backs), a 530 answer
  included (the command may have run part-way);
- ``ONCE``: a write sent once, whose failure its caller rides out: an Event about a node (a
  warning), the live path's scaleVirtualMachine (the node takes the restart path instead).

A kind is named ``<api> <what>``: ``cloudstack <command>``, ``kubernetes <verb> <resource>[/<subresource>]``
(or ``kubernetes get <path>`` below no resource, e.g. ``/readyz``), ``etcd <call>``; cks-sim's call
log names them the same way (``make fault-sweep`` sweeps each one it records). A kind missing
here is a write sent once (tests/unit/test_request_kinds.py fails on one the clients send).
"""

from __future__ import annotations

from typing import Mapping, Optional
from urllib.parse import unquote

READ = "read"
SETTLED = "settled"
ONCE = "once"

_CLOUDSTACK: dict[str, str] = {
    # reads
    "listKubernetesClusters": READ,
    "getKubernetesClusterConfig": READ,
    "listVirtualMachines": READ,
    "listVolumes": READ,
    "listServiceOfferings": READ,
    "listDiskOfferings": READ,
    "listAffinityGroups": READ,
    "listAccounts": READ,
    "listProjects": READ,
    "listHosts": READ,
    "listAsyncJobs": READ,
    "listPortForwardingRules": READ,
    "listResourceLimits": READ,
    "listApis": READ,
    "listCapabilities": READ,
    "listZones": READ,
    "listClusters": READ,
    "listDedicatedHosts": READ,
    "listDedicatedClusters": READ,
    "listDedicatedPods": READ,
    "listDedicatedZones": READ,
    "listUserKeys": READ,
    "listUserKeyRules": READ,
    "queryAsyncJobResult": READ,
    # changes, each settled by reading the VM or volume it changes (run_change)
    "stopVirtualMachine": SETTLED,
    "startVirtualMachine": SETTLED,
    "changeServiceForVirtualMachine": SETTLED,
    "resizeVolume": SETTLED,
    "updateVMAffinityGroup": SETTLED,
    # the live path's grow of a running VM: any fault on it hands the node to the restart path
    # (stop, change, start), which settles what it finds (_rollout/live_scale.py)
    "scaleVirtualMachine": ONCE,
}

_KUBERNETES: dict[str, str] = {
    "get nodes": READ,
    "list nodes": READ,
    "watch nodes": READ,
    "get pods": READ,
    "list pods": READ,
    "watch pods": READ,
    "get pods/log": READ,
    "list poddisruptionbudgets": READ,
    "get daemonsets": READ,
    "list deployments": READ,
    "get leases": READ,
    "get configmaps": READ,
    "get /readyz": READ,
    "get /readyz/etcd": READ,
    # POSTs that change nothing: the server answers a question
    "create selfsubjectaccessreviews": READ,
    "create selfsubjectrulesreviews": READ,
    # etcdctl in an etcd pod: the command run is itself a question (etcd kinds below); the
    # stream is opened again only when it never ran (no exit status)
    "get pods/exec": READ,
    "create pods/exec": READ,
    # writes, each with its read-back (kube.py): the object as written, or not done yet
    "patch nodes": SETTLED,
    "create pods/eviction": SETTLED,
    "create pods": SETTLED,
    "delete pods": SETTLED,
    "create leases": SETTLED,
    "update leases": SETTLED,
    "patch leases": SETTLED,
    "create configmaps": SETTLED,
    "update configmaps": SETTLED,
    "delete configmaps": SETTLED,
    # The rollout's Events about the nodes: a retry could record one twice, and one lost is a
    # warning, never a failed rollout (node_events.py)
    "create events": ONCE,
    "patch events": ONCE,
}

_ETCD: dict[str, str] = {
    # etcdctl through pods/exec (the kubeconfig alone), or the v3 HTTP gateway with etcd_endpoints
    "member list": READ,
    "endpoint health": READ,
    "endpoint status": READ,
    "readyz": READ,
    "health": READ,
    "range": READ,
}

#: The one table: request kind -> READ or SETTLED.
REQUEST_KINDS: Mapping[str, str] = {
    **{f"cloudstack {k}": v for k, v in _CLOUDSTACK.items()},
    **{f"kubernetes {k}": v for k, v in _KUBERNETES.items()},
    **{f"etcd {k}": v for k, v in _ETCD.items()},
}

_TRUE = ("1", "true", "True")


def effect(kind: str) -> Optional[str]:
    """READ, SETTLED, ONCE, or None for a kind not in the table (a write: sent once)."""
    return REQUEST_KINDS.get(kind)


def changes_nothing(kind: str, query: Optional[Mapping[str, str]] = None) -> bool:
    """Whether a request of ``kind`` may simply be sent again: a read, or any dry run (the
    server checks and answers, and persists nothing: ``dryRun=All``)."""
    if query and str(query.get("dryRun", "")) == "All":
        return True
    # A GET changes nothing whatever it reads (RFC 9110 safe methods); the table still names each.
    if kind.startswith("kubernetes ") and kind.split(" ")[1] in ("get", "list", "watch"):
        return True
    return effect(kind) == READ


def cloudstack_kind(command: str) -> str:
    return f"cloudstack {command}"


def kube_kind(method: str, path: str, query: Optional[Mapping[str, str]] = None) -> str:
    """The kind of one Kubernetes request, named as the API server's RequestInfo names it: the verb
    from the method (a GET of a collection is list, or watch with ``watch``), the resource with its
    subresource; a path under no API group (``/readyz``) as it is."""
    parts = [unquote(p) for p in path.split("?")[0].split("/") if p]
    if not parts or parts[0] not in ("api", "apis"):
        return f"kubernetes get /{'/'.join(parts)}"
    # /api/v1/... or /apis/<group>/<version>/...
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) != 2:
        rest = rest[2:]
    elif len(rest) == 2 and rest[0] == "namespaces":
        rest = ["namespaces", rest[1]]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    label = f"{resource}/{sub}" if sub else resource
    method = method.upper()
    if method == "GET":
        if name is None:
            verb = "watch" if query and str(query.get("watch", "")) in _TRUE else "list"
        else:
            verb = "get"
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete" if name else "deletecollection"}.get(method, method.lower())
    return f"kubernetes {verb} {label}"
