"""The API's verbs on stored objects: get, list, create, update (PATCH ends there too) and delete,
with the API server's validation of what a client may write.

``Verbs`` is handed the store and the objects whose writes a read brings up to date (the Event
recorder, the budgets, the control plane's leases), the nodes' hidden state (a foreign cordon), the
sim (timeline, invariants), and what the cluster does about a write: ``renew_node_leases()``
before a read of node Leases, ``create_pod(pod)`` (admission and scheduling, answering the pod as
created), ``terminate(pod, grace)`` for a pod's DELETE, ``after_change()`` once a node is
uncordoned.
"""

from __future__ import annotations

import builtins
import copy
import re
from typing import Any, Callable, Optional

from . import kube_leases, kube_run
from .kube_helpers import mirror_lifecycle_taints, now_time, parse_microtime
from .kube_hidden import NodeState
from .kube_pdbs import Budgets
from .kube_recorder import Recorder
from .kube_resources import (
    LIFECYCLE_TAINTS,
    NODE_LEASE_NS,
    RESOURCES,
    STALE_OBJECT,
    UNCONDITIONAL_UPDATE_REFUSED,
    ApiError,
    Resource,
    _details,
    conflict,
    go_value,
    not_found,
    precondition_failed,
    success_status,
    unchanged,
)
from .kube_store import ObjectStore


class Verbs:
    """What kube_api.py calls for each request on a resource.

    Below ``list`` (the verb), ``list`` in the class body names the method: annotations there
    spell the type ``builtins.list``.
    """

    def __init__(self, store: ObjectStore, sim: Any, cluster_id: str, nodes: dict[str, NodeState],
                 recorder: Recorder, budgets: Budgets, leader_leases: kube_leases.LeaderLeases, *,
                 renew_node_leases: Callable[[], None], create_pod: Callable[[dict[str, Any]], dict[str, Any]],
                 terminate: Callable[[dict[str, Any], Optional[int]], None], after_change: Callable[[], None]) -> None:
        self.store = store
        self.sim = sim
        self.cluster_id = cluster_id
        self.nodes = nodes
        self.recorder = recorder
        self.budgets = budgets
        self.leader_leases = leader_leases
        self.renew_node_leases = renew_node_leases
        self.create_pod = create_pod
        self.terminate = terminate
        self.after_change = after_change

    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        self._before_read(plural, namespace, name)
        obj = self.store.read(plural, namespace, name)
        if obj is None:
            raise not_found(RESOURCES[plural], name)
        return copy.deepcopy(obj)

    def list(self, plural: str, namespace: Optional[str]) -> list[dict[str, Any]]:
        """Copies of the objects of a resource (one namespace or all), sorted by namespace and name."""
        return [copy.deepcopy(obj) for obj in self.select(plural, namespace)]

    def select(self, plural: str, namespace: Optional[str]) -> builtins.list[dict[str, Any]]:
        """The stored objects themselves, sorted; for readers that serialise them under sim.lock."""
        self._before_read(plural, namespace)
        return self.store.select(plural, namespace)

    def _before_read(self, plural: str, namespace: Optional[str], name: Optional[str] = None) -> None:
        # Controllers' writes that depend on time or faults, brought up to date before a read. The
        # control plane's leases only when they can be seen: a read of another Lease of kube-system
        # (the rollout's lock) leaves the store, and its resourceVersion, as it was.
        if plural == "leases" and namespace in (None, NODE_LEASE_NS):
            self.renew_node_leases()
        if plural == "leases" and namespace in (None, kube_leases.NAMESPACE) and (
                name is None or kube_leases.is_control_plane_lease(name)):
            self.leader_leases.refresh()
        if plural == "events":
            self.recorder.expire()
        if RESOURCES[plural].group in ("policy", "apps"):
            self.budgets.refresh()

    def namespace_exists(self, ns: str) -> bool:
        return self.store.read("namespaces", "", ns) is not None

    def _validate(self, res: Resource, obj: dict[str, Any]) -> None:
        if res.plural == "pods":
            causes = kube_run.validation_causes(obj)
            if causes:
                name = obj["metadata"]["name"]
                raise ApiError(422, kube_run.invalid_message(name, causes), "Invalid", _details(
                    res, name, kind=res.kind, causes=[{"reason": r, "message": d, "field": f} for f, r, d in causes]))
        if res.plural == "leases":
            spec = obj.get("spec") or {}
            for field_name in ("acquireTime", "renewTime"):
                if spec.get(field_name) is not None:
                    spec[field_name] = parse_microtime(spec[field_name], f"spec.{field_name}", "Lease")
            for field_name in ("leaseDurationSeconds", "leaseTransitions"):
                value = spec.get(field_name)
                if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                    raise ApiError(400, f'Lease in version "v1" cannot be handled as a Lease: '
                                        f'json: cannot unmarshal {type(value).__name__} into Go struct field '
                                        f'LeaseSpec.spec.{field_name} of type int32', "BadRequest")
            causes = []
            if isinstance(spec.get("leaseDurationSeconds"), int) and spec["leaseDurationSeconds"] <= 0:
                causes.append(("spec.leaseDurationSeconds", spec["leaseDurationSeconds"], "must be greater than 0"))
            if isinstance(spec.get("leaseTransitions"), int) and spec["leaseTransitions"] < 0:
                causes.append(("spec.leaseTransitions", spec["leaseTransitions"],
                               "must be greater than or equal to 0"))
            if causes:
                raise self._invalid(res, obj["metadata"]["name"], causes)
        if res.plural == "configmaps":
            for key, value in (obj.get("data") or {}).items():
                if not isinstance(value, str):
                    raise ApiError(400, f'ConfigMap in version "v1" cannot be handled as a ConfigMap: '
                                        f'json: cannot unmarshal {type(value).__name__} into Go struct field '
                                        f'ConfigMap.data of type string', "BadRequest")
                if not re.match(r"^[-._a-zA-Z0-9]+$", key):
                    raise self._invalid(res, obj["metadata"]["name"], [(
                        "data", key, "a valid config key must consist of alphanumeric characters, '-', '_' or '.'")])

    @staticmethod
    def _invalid(res: Resource, name: str, causes: builtins.list[tuple[str, Any, str]],
                 reason: str = "FieldValueInvalid") -> ApiError:
        """errors.NewInvalid: the details name the Kind (not the resource), each value as Go prints it."""
        word = "Unsupported value" if reason == "FieldValueNotSupported" else "Invalid value"
        messages = [(f, f"{word}: {go_value(v)}: {m}") for f, v, m in causes]
        text = "; ".join(f"{f}: {m}" for f, m in messages)
        return ApiError(422, f'{res.kind} "{name}" is invalid: {text}', "Invalid", _details(
            res, name, kind=res.kind, causes=[{"reason": reason, "message": m, "field": f} for f, m in messages]))

    def create(self, plural: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        res = RESOURCES[plural]
        if not isinstance(body, dict):
            raise ApiError(400, "the body of the request was in an unknown format", "BadRequest")
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {}) or {}
        obj["metadata"] = meta
        if res.namespaced:
            if meta.get("namespace") not in (None, "", namespace):
                raise ApiError(400, "the namespace of the provided object does not match the namespace "
                                    "sent on the request", "BadRequest")
            if not self.namespace_exists(namespace):
                raise not_found(RESOURCES["namespaces"], namespace)
            meta["namespace"] = namespace
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = meta["generateName"] + self.store.suffix()
            else:
                raise self._invalid(res, "", [("metadata.name", "", "name or generateName is required")])
        name = meta["name"]
        if self.store.read(plural, namespace, name) is not None:
            raise ApiError(409, f'{res.qualified} "{name}" already exists', "AlreadyExists", _details(res, name))
        if meta.get("resourceVersion"):
            raise ApiError(400, "resourceVersion should not be set on objects to be created", "BadRequest")
        self._validate(res, obj)
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        meta.update({"uid": self.store.new_uid(), "creationTimestamp": now_time()})
        for drop in ("deletionTimestamp", "deletionGracePeriodSeconds", "generation", "managedFields", "selfLink"):
            meta.pop(drop, None)
        if plural == "pods":
            return self.create_pod(obj)
        self.store.put(plural, obj)
        return copy.deepcopy(obj)

    def update(self, plural: str, namespace: str, name: str, body: dict[str, Any],
               subresource: Optional[str] = None, actor: str = "api") -> dict[str, Any]:
        """PUT semantics; PATCH ends here too, with the patched object as ``body``."""
        res = RESOURCES[plural]
        current = self.store.read(plural, namespace, name)
        if current is None:
            raise not_found(res, name)
        if not isinstance(body, dict) or not isinstance(body.get("metadata") or {}, dict):
            raise ApiError(400, "the body of the request was in an unknown format", "BadRequest")
        obj = copy.deepcopy(body)
        meta = obj.get("metadata") or {}
        obj["metadata"] = meta
        if meta.get("name", name) != name:
            raise ApiError(400, f"the name of the object ({meta.get('name')}) does not match the name on the "
                                f"URL ({name})", "BadRequest")
        if res.namespaced and meta.get("namespace") not in (None, "", namespace):
            raise ApiError(400, "the namespace of the provided object does not match the namespace sent on "
                                "the request", "BadRequest")
        rv = meta.get("resourceVersion")
        if rv in (None, "") and plural in UNCONDITIONAL_UPDATE_REFUSED:
            # rest.BeforeUpdate: a strategy whose AllowUnconditionalUpdate is false (the Lease's,
            # pkg/registry/coordination/lease/strategy.go) needs the version the update is based on.
            cause = "Invalid value: 0: must be specified for an update"
            raise ApiError(422, f'{res.kind}.{res.group} "{name}" is invalid: metadata.resourceVersion: {cause}'
                           if res.group else f'{res.kind} "{name}" is invalid: metadata.resourceVersion: {cause}',
                           "Invalid", _details(res, name, causes=[
                               {"reason": "FieldValueInvalid", "message": cause, "field": "metadata.resourceVersion"}]))
        if rv not in (None, "") and rv != current["metadata"]["resourceVersion"]:
            raise conflict(res, name, STALE_OBJECT)
        if meta.get("uid") not in (None, "") and meta["uid"] != current["metadata"]["uid"]:
            raise conflict(res, name, f"Precondition failed: UID in precondition: {meta['uid']}, UID in object "
                                      f"meta: {current['metadata']['uid']}")
        self._validate(res, obj)
        # What a client cannot change through this endpoint stays as stored.
        for keep in ("uid", "creationTimestamp", "generation", "deletionTimestamp", "deletionGracePeriodSeconds"):
            if keep in current["metadata"]:
                meta[keep] = current["metadata"][keep]
            else:
                meta.pop(keep, None)
        meta["name"] = name
        if res.namespaced:
            meta["namespace"] = namespace
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        if plural == "nodes":
            return self._update_node(current, obj, subresource, actor)
        if "status" in current and plural != "events":
            obj["status"] = current["status"]
        if unchanged(current, obj):
            return copy.deepcopy(current)
        self.store.put(plural, obj)
        return copy.deepcopy(obj)

    def _update_node(self, current: dict[str, Any], obj: dict[str, Any], subresource: Optional[str],
                     actor: str) -> dict[str, Any]:
        name = current["metadata"]["name"]
        if subresource == "status":
            raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
        # The main resource ignores status; the kubelet owns it.
        obj["status"] = current["status"]
        obj.setdefault("spec", {})
        self._validate_taints(name, obj["spec"].get("taints"))
        was = bool(current["spec"].get("unschedulable"))
        now = bool(obj["spec"].get("unschedulable"))
        if not now:
            obj["spec"].pop("unschedulable", None)
        if unchanged(current, obj):
            return copy.deepcopy(current)
        # The client's write is stored as sent and answered; the node lifecycle controller mirrors
        # spec.unschedulable (and Ready) into taints in a write of its own just after it
        # (doNoScheduleTaintingPass), so the answer shows no such taint yet and the resourceVersion
        # moves once more: a write based on the answer's version meets 409, as on a real cluster.
        self.store.put("nodes", obj)
        answer = copy.deepcopy(obj)
        mirrored = copy.deepcopy(obj)
        mirror_lifecycle_taints(mirrored)
        if mirrored["spec"].get("taints") != obj["spec"].get("taints"):
            self.store.put("nodes", mirrored)
            obj = mirrored
        state = self.nodes[name]
        old_ann = current["metadata"].get("annotations") or {}
        new_ann = obj["metadata"].get("annotations") or {}
        for key in sorted(set(old_ann) | set(new_ann)):
            if old_ann.get(key) != new_ann.get(key):
                self.sim.timeline.add(cluster=self.cluster_id, node=name, event="annotated", key=key,
                                      value=new_ann.get(key))
        old_labels = current["metadata"].get("labels") or {}
        new_labels = obj["metadata"].get("labels") or {}
        for key in sorted(set(old_labels) | set(new_labels)):
            if old_labels.get(key) != new_labels.get(key):
                self.sim.timeline.add(cluster=self.cluster_id, node=name, event="labelled", key=key,
                                      value=new_labels.get(key))
        # Taints a client wrote (the lifecycle controller's own are journaled as cordon / notready).
        old_taints = {(t.get("key"), t.get("effect")) for t in current["spec"].get("taints") or []
                      if t.get("key") not in LIFECYCLE_TAINTS}
        new_taints = {(t.get("key"), t.get("effect")) for t in obj["spec"].get("taints") or []
                      if t.get("key") not in LIFECYCLE_TAINTS}
        for key, effect in sorted(new_taints - old_taints):
            self.sim.timeline.add(cluster=self.cluster_id, node=name, event="tainted", key=key, effect=effect)
        for key, effect in sorted(old_taints - new_taints):
            self.sim.timeline.add(cluster=self.cluster_id, node=name, event="untainted", key=key, effect=effect)
        if now and not was:
            self.sim.timeline.add(cluster=self.cluster_id, node=name, event="cordoned", by=actor)
        if was and not now:
            self.sim.timeline.add(cluster=self.cluster_id, node=name, event="uncordoned", by=actor)
            if state.foreign_cordon:
                self.sim.invariants.add(kind="foreign_cordon_undone", cluster=self.cluster_id, node=name,
                                        detail="a node cordoned by someone else was uncordoned through the API")
                state.foreign_cordon = False
            self.after_change()
        return answer

    def _validate_taints(self, name: str, taints: Any) -> None:
        """ValidateNodeTaints: a key, a known effect, and each key and effect pair once."""
        if taints is None:
            return
        if not isinstance(taints, list):
            raise ApiError(400, 'Node in version "v1" cannot be handled as a Node: json: cannot unmarshal '
                                'into Go struct field NodeSpec.spec.taints of type []v1.Taint', "BadRequest")
        # ValidateNode checks the taints under the path "metadata.taints" (sic), and an update validates
        # them twice: kube-apiserver v1.35.4 lists each cause two times (seen by make sim-diff).
        causes: list[tuple[str, Any, str]] = []
        unsupported: list[tuple[str, Any, str]] = []
        seen: set[tuple[Any, Any]] = set()
        for i, taint in enumerate(taints):
            taint = taint if isinstance(taint, dict) else {}
            if not taint.get("key"):
                causes.append((f"metadata.taints[{i}].key", "", "name part must be non-empty"))
            if taint.get("effect") not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
                unsupported.append((f"metadata.taints[{i}].effect", taint.get("effect"),
                                    'supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"'))
            pair = (taint.get("key"), taint.get("effect"))
            if pair in seen:
                causes.append((f"metadata.taints[{i}]", taint, "taints must be unique by key and effect pair"))
            seen.add(pair)
        if unsupported and not causes:
            raise self._invalid(RESOURCES["nodes"], name, unsupported * 2, reason="FieldValueNotSupported")
        if causes or unsupported:
            raise self._invalid(RESOURCES["nodes"], name, (causes + unsupported) * 2)

    def delete(self, plural: str, namespace: str, name: str, options: dict[str, Any]) -> dict[str, Any]:
        res = RESOURCES[plural]
        current = self.store.read(plural, namespace, name)
        if current is None:
            raise not_found(res, name)
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != current["metadata"]["uid"]:
            raise precondition_failed(res, name, f"the UID in the precondition ({pre['uid']}) does not match the "
                                                 f"UID in record ({current['metadata']['uid']}). The object "
                                                 f"might have been deleted and then recreated")
        if pre.get("resourceVersion") and pre["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise precondition_failed(res, name, f"the ResourceVersion in the precondition "
                                                 f"({pre['resourceVersion']}) does not match the ResourceVersion "
                                                 f"in record ({current['metadata']['resourceVersion']}). The "
                                                 f"object might have been modified")
        dry_run = bool(options.get("dryRun"))
        if plural == "pods":
            if not dry_run and "deletionTimestamp" not in current["metadata"]:
                self.terminate(current, options.get("gracePeriodSeconds"))
            gone = self.store.objects["pods"].get((namespace, name))
            return copy.deepcopy(gone if gone is not None else current)
        if not dry_run:
            self.store.remove(plural, (namespace if res.namespaced else "", name))
        # The delete handler's Status carries no code (metav1.Status{Status: Success, Details: ...}).
        answer = success_status(200, _details(res, name, uid=current["metadata"]["uid"]))
        del answer["code"]
        return answer
