# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The service behind ``cks_node_settings``: read, validate and store the per-type node settings.

The flow, for one call:

1. the cluster's CKS state decides whether settings may be stored at all (not while a CKS
   operation runs, not while a rollout holds our lock);
2. offering and affinity group names are resolved to ids against the lists the cluster view
   already holds (no extra calls), refusing unknown, ambiguous and dedication groups;
3. the requested changes are laid over the stored settings, or, on first use, over the
   settings copied from the cluster (``plan.initial_settings``), so a change to one node type
   leaves the others as they are;
4. ``plan.validate`` judges what changes; anything refused means nothing is written;
5. with ``rollout=true`` the lock is taken before the settings are stored; if storing fails,
   the lock is given back and the failure kept as the last error.

``cancel_rollout`` only sets the cancel flag that a running rollout reads between batches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils import plan as plans
from ansible_collections.cloudstack.cks.plugins.module_utils import record as records
from ansible_collections.cloudstack.cks.plugins.module_utils.cluster import NODE_TYPES, WORKER, ClusterLoader, ClusterView
from ansible_collections.cloudstack.cks.plugins.module_utils.errors import CksError, InvalidInput, LockHeld

PARAM_OFFERINGS = plans.PARAM_OFFERINGS
PARAM_ROOT_DISKS = plans.PARAM_ROOT_DISKS
PARAM_AFFINITY = plans.PARAM_AFFINITY
PARAM_MAX_UNAVAILABLE = plans.PARAM_MAX_UNAVAILABLE

#: CKS states in which a CKS operation is running (or the cluster is going away): nothing is
#: stored then, as the operation may be creating or changing nodes with the old settings.
OPERATION_STATES = frozenset({
    "Starting", "Stopping", "Scaling", "ScalingStoppedCluster", "Upgrading", "Importing",
    "RemovingNodes", "Recovering", "Destroying", "Destroyed",
})
#: A rollout starts only from these (it tolerates the Alert its own stopped nodes cause).
ROLLOUT_STATES = frozenset({"Running", "Alert"})

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)


# ---------------------------------------------------------------------------------------------
# The request


def _node_type_key(parameter: str, key: Any) -> str:
    node_type = str(key).strip().lower()
    if node_type not in NODE_TYPES:
        raise InvalidInput(parameter, key, "not a node type; node types are control, worker, etcd")
    return node_type


def _per_type(parameter: str, value: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """A per-type option with its keys checked; types left out or given as null are dropped."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(parameter, value, "must be a mapping of node type (control, worker, etcd) to a value")
    result: dict[str, Any] = {}
    for key, item in value.items():
        node_type = _node_type_key(parameter, key)
        if item is None:
            continue
        if node_type in result:
            raise InvalidInput(parameter, key, f"node type {node_type} is given twice")
        result[node_type] = item
    return result


@dataclass(frozen=True)
class SettingsRequest:
    """What the operator asked for, in the module's words (names or ids, GB)."""

    offerings: Mapping[str, str] = field(default_factory=dict)
    root_disk_sizes: Mapping[str, int] = field(default_factory=dict)
    affinity_groups: Mapping[str, Sequence[str]] = field(default_factory=dict)
    rollout: bool = False
    max_unavailable: Optional[int] = None
    cancel_rollout: bool = False
    lock_holder: Optional[str] = None
    lock_duration: Optional[int] = None

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> SettingsRequest:
        offerings = _per_type(PARAM_OFFERINGS, params.get(PARAM_OFFERINGS))
        for node_type, value in offerings.items():
            if not isinstance(value, str) or not value.strip():
                raise InvalidInput(f"{PARAM_OFFERINGS}.{node_type}", value, "must be an offering name or id")
        sizes = _per_type(PARAM_ROOT_DISKS, params.get(PARAM_ROOT_DISKS))
        for node_type, value in list(sizes.items()):
            sizes[node_type] = _whole_gb(f"{PARAM_ROOT_DISKS}.{node_type}", value)
        groups = _per_type(PARAM_AFFINITY, params.get(PARAM_AFFINITY))
        for node_type, value in list(groups.items()):
            groups[node_type] = _group_list(f"{PARAM_AFFINITY}.{node_type}", value)
        max_unavailable = params.get(PARAM_MAX_UNAVAILABLE)
        if max_unavailable is not None and (isinstance(max_unavailable, bool) or not isinstance(max_unavailable, int)
                                            or max_unavailable < 1):
            raise InvalidInput(PARAM_MAX_UNAVAILABLE, max_unavailable, "must be a whole number, at least 1")
        request = cls(
            offerings=offerings, root_disk_sizes=sizes, affinity_groups=groups,
            rollout=bool(params.get("rollout")), max_unavailable=max_unavailable,
            cancel_rollout=bool(params.get("cancel_rollout")),
            lock_holder=params.get("lock_holder") or None, lock_duration=params.get("lock_duration"),
        )
        request.check()
        return request

    @property
    def changes_settings(self) -> bool:
        return bool(self.offerings or self.root_disk_sizes or self.affinity_groups)

    def check(self) -> None:
        """The combinations that make no sense, refused before anything is read."""
        if self.cancel_rollout and (self.rollout or self.changes_settings or self.max_unavailable is not None):
            raise InvalidInput("cancel_rollout", True, "is given alone: it only asks a running rollout to stop "
                               "between two batches; store settings or start a rollout in another call")
        if self.rollout and not self.lock_holder:
            raise InvalidInput("lock_holder", self.lock_holder, "is required with rollout=true: it names the "
                               "run that holds the lock (the role passes its run id)")
        if self.lock_duration is not None and (isinstance(self.lock_duration, bool) or self.lock_duration < 1):
            raise InvalidInput("lock_duration", self.lock_duration, "must be at least 1 second")


def _whole_gb(parameter: str, value: Any) -> int:
    if isinstance(value, bool):
        raise InvalidInput(parameter, value, "must be a size in GB")
    try:
        size = int(value)
    except (TypeError, ValueError):
        raise InvalidInput(parameter, value, "must be a size in GB (a whole number)")
    if str(size) != str(value).strip() and not isinstance(value, int):
        raise InvalidInput(parameter, value, "must be a size in GB (a whole number)")
    if size < 1:
        raise InvalidInput(parameter, value, "a root disk size is at least 1 GB")
    return size


def _group_list(parameter: str, value: Any) -> list[str]:
    if isinstance(value, str):
        # A comma-separated string, as CloudStack's own list parameters take them.
        value = [v for v in (p.strip() for p in value.split(",")) if v]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v.strip() for v in value):
        raise InvalidInput(parameter, value, "must be a list of affinity group names or ids")
    return [v.strip() for v in value]


# ---------------------------------------------------------------------------------------------
# Names -> ids, against what the view already listed


class NameResolver:
    """Resolves offering and affinity group names or ids with the view's lists (no extra calls)."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view

    def offering(self, parameter: str, value: str) -> str:
        if value in self.view.offerings:
            return value
        matches = [o for o in self.view.offerings.values() if o.name == value]
        if len(matches) == 1:
            return matches[0].id
        if matches:
            ids = ", ".join(sorted(o.id for o in matches))
            raise InvalidInput(parameter, value, f"{len(matches)} service offerings have this name ({ids}); give the id")
        known = ", ".join(sorted({o.name for o in self.view.offerings.values()})) or "none"
        raise InvalidInput(parameter, value, f"no service offering with this name or id is visible to this "
                           f"account; offerings are: {known}")

    def groups(self, parameter: str, values: Sequence[str]) -> tuple[str, ...]:
        ids: list[str] = []
        for value in values:
            group_id = self._group(parameter, values, value)
            group = self.view.group(group_id)
            if group is not None and group.is_dedication:
                raise InvalidInput(parameter, list(values), f"{value} is an ExplicitDedication group, which CKS "
                                   "adds to every node by itself and which every node keeps; leave it out")
            if group_id not in ids:
                ids.append(group_id)
        return tuple(ids)

    def _group(self, parameter: str, values: Sequence[str], value: str) -> str:
        if value in self.view.affinity_groups:
            return value
        matches = [g for g in self.view.affinity_groups.values() if g.name == value]
        if len(matches) == 1:
            return matches[0].id
        if matches:
            ids = ", ".join(sorted(g.id for g in matches))
            raise InvalidInput(parameter, list(values), f"{len(matches)} affinity groups are named {value} "
                               f"({ids}); give the id")
        if _UUID.match(value) and self.view.group(value) is not None:
            # Not listed for the account (a domain-level group), but a node carries it.
            return value
        known = ", ".join(sorted({g.name for g in self.view.affinity_groups.values()
                                  if not g.is_dedication})) or "none"
        raise InvalidInput(parameter, list(values), f"{value}: no affinity group with this name or id is visible "
                           f"to this account; groups are: {known}")


def resolve(view: ClusterView, current: plans.Settings, request: SettingsRequest) -> plans.Settings:
    """The full settings that would be stored: ``current`` with the request's changes, as ids."""
    names = NameResolver(view)
    offerings = {t: names.offering(f"{PARAM_OFFERINGS}.{t}", v) for t, v in request.offerings.items()}
    groups = {t: names.groups(f"{PARAM_AFFINITY}.{t}", v) for t, v in request.affinity_groups.items()}
    return current.with_changes(offerings=offerings, root_disk_sizes=dict(request.root_disk_sizes),
                                affinity_groups=groups)


# ---------------------------------------------------------------------------------------------
# Readable settings (results and diff)


def describe_type(view: ClusterView, settings: plans.TypeSettings) -> dict[str, Any]:
    groups = settings.affinity_group_ids
    return {
        "offering": view.offering_name(settings.offering_id) if settings.offering_id else None,
        "offering_id": settings.offering_id,
        "root_disk_size": settings.root_disk_gb,
        "affinity_groups": None if groups is None else [_group_name(view, g) for g in groups],
        "affinity_group_ids": None if groups is None else list(groups),
    }


def describe(view: ClusterView, settings: plans.Settings) -> dict[str, dict[str, Any]]:
    """Per node type, the settings with the names an operator knows next to the ids."""
    return {t: describe_type(view, settings[t]) for t in ("control", "worker", "etcd")}


def _group_name(view: ClusterView, group_id: str) -> str:
    group = view.group(group_id)
    return group.name if group else group_id


def same_settings(a: plans.Settings, b: plans.Settings) -> bool:
    """Equal as stored: group order does not matter (CloudStack keeps groups as a set)."""
    for t in NODE_TYPES:
        x, y = a[t], b[t]
        if x.offering_id != y.offering_id or x.root_disk_gb != y.root_disk_gb:
            return False
        gx = None if x.affinity_group_ids is None else frozenset(x.affinity_group_ids)
        gy = None if y.affinity_group_ids is None else frozenset(y.affinity_group_ids)
        if gx != gy:
            return False
    return True


def refused(refusals: Sequence[plans.Refusal], request: SettingsRequest) -> InvalidInput:
    """One error for every refusal, naming each parameter with the value the operator gave."""
    given = _given_values(request)
    messages = []
    for r in refusals:
        shown = given.get(r.parameter, r.value)
        value = f"{shown!r}" if shown == r.value else f"{shown!r} ({r.value!r})"
        messages.append(f"{r.parameter}={value}: {r.why}; {r.change}")
    first = refusals[0]
    error = InvalidInput(first.parameter, given.get(first.parameter, first.value), f"{first.why}; {first.change}")
    error.msg = "refused, nothing was changed: " + " | ".join(messages)
    error.args = (error.msg,)
    error.details["refusals"] = [dict(r.to_dict(), given=given.get(r.parameter, r.value)) for r in refusals]
    return error


def _given_values(request: SettingsRequest) -> dict[str, Any]:
    given: dict[str, Any] = {}
    for t, v in request.offerings.items():
        given[f"{PARAM_OFFERINGS}.{t}"] = v
    for t, v in request.root_disk_sizes.items():
        given[f"{PARAM_ROOT_DISKS}.{t}"] = v
    for t, v in request.affinity_groups.items():
        given[f"{PARAM_AFFINITY}.{t}"] = list(v)
    if request.max_unavailable is not None:
        given[PARAM_MAX_UNAVAILABLE] = request.max_unavailable
    return given


# ---------------------------------------------------------------------------------------------
# What the record holds

#: The worker batch size is kept in the worker type's entry: TypeSettings.from_dict ignores keys
#: it does not know, so every reader of the record still reads it with plan.Settings.from_dict.
MAX_UNAVAILABLE_KEY = "max_unavailable"


def stored_settings(record: Optional[records.Record]) -> Optional[plans.Settings]:
    """The settings the record holds, or None before first use."""
    if record is None or not record.settings:
        return None
    try:
        return plans.Settings.from_dict(record.settings)
    except InvalidInput as exc:
        raise CksError(f"the rollout record {records.NAMESPACE}/{records.RECORD_NAME} holds settings that cannot "
                       f"be read ({exc.msg}); store the settings again or delete the ConfigMap")


def stored_max_unavailable(record: Optional[records.Record]) -> Optional[int]:
    worker = (record.settings or {}).get(WORKER) if record is not None else None
    value = worker.get(MAX_UNAVAILABLE_KEY) if isinstance(worker, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def settings_data(settings: plans.Settings, max_unavailable: Optional[int]) -> dict[str, Any]:
    data = settings.to_dict()
    if max_unavailable is not None:
        data[WORKER][MAX_UNAVAILABLE_KEY] = max_unavailable
    return data


def effective_settings(view: ClusterView, record: Optional[records.Record]) -> tuple[plans.Settings, bool]:
    """The settings the nodes are judged against, and whether they are recorded.

    Before first use they are the ones copied from the cluster (``plan.initial_settings``).
    """
    stored = stored_settings(record)
    if stored is not None:
        return stored, True
    return plans.initial_settings(view), False


def lock_dict(info: Optional[records.LockInfo]) -> Optional[dict[str, Any]]:
    if info is None:
        return None
    return {"holder": info.holder, "held": info.held, "acquire_time": info.acquire_time,
            "renew_time": info.renew_time, "duration_seconds": info.duration_seconds,
            "expired": info.expired, "taken_over_from": info.taken_over_from}


def lock_held_error(info: records.LockInfo) -> LockHeld:
    return LockHeld(f"a rollout holds the lock {records.NAMESPACE}/{records.LOCK_NAME} of this cluster: "
                    f"{info.holder}, since {info.acquire_time}, last renewed {info.renew_time} (for "
                    f"{info.duration_seconds}s); wait for it to end, or cancel it with cancel_rollout=true",
                    holder=info.holder, since=info.acquire_time, renew_time=info.renew_time,
                    duration_seconds=info.duration_seconds)


# ---------------------------------------------------------------------------------------------
# The service

LockFactory = Callable[[Optional[str], Optional[int]], records.Lock]


class NodeSettingsService:
    """Stores (and with rollout=true, locks for) the node settings of one cluster."""

    def __init__(self, view: ClusterView, store: records.RecordStore, lock_factory: LockFactory,
                 check_mode: bool = False, diff: bool = False) -> None:
        self.view = view
        self.store = store
        self.lock_factory = lock_factory
        self.check_mode = check_mode
        self.diff = diff

    # -- entry point ---------------------------------------------------------------------------

    def run(self, request: SettingsRequest) -> dict[str, Any]:
        if request.cancel_rollout:
            return self._cancel(request)
        self._check_state(request)
        record = self.store.read()
        lock = self.lock_factory(request.lock_holder, request.lock_duration)
        lock_before = lock.read()
        ours = lock_before is not None and lock_before.held and lock_before.holder == request.lock_holder
        if lock_before is not None and lock_before.held and not ours:
            raise lock_held_error(lock_before)

        current, recorded = effective_settings(self.view, record)
        requested = resolve(self.view, current, request)
        refusals = plans.validate(self.view, current, requested, request.rollout, request.max_unavailable)
        if refusals:
            raise refused(refusals, request)

        stored_mu = stored_max_unavailable(record)
        new_mu = request.max_unavailable if request.max_unavailable is not None else stored_mu
        settings_changed = not recorded or not same_settings(current, requested) or new_mu != stored_mu

        lock_after = lock_before
        # Taking the lock is bookkeeping of the run, not a change of the cluster: a rerun of a
        # rollout with nothing to store reports no change (Molecule's idempotence check).
        stored = False
        if not self.check_mode:
            if request.rollout:
                lock_after = lock.acquire()
                try:
                    if settings_changed or lock_after.taken_over_from or (record is not None and record.cancel):
                        record = self._store(record, current if recorded else None, requested, new_mu, lock_after)
                        stored = True
                except CksError as exc:
                    raise self._give_back(lock, exc, release=not ours)
            elif settings_changed:
                record = self._store(record, current if recorded else None, requested, new_mu, None)
                stored = True

        changed = stored or (self.check_mode and settings_changed)
        result = self._result(request, record, current, requested, recorded, new_mu, lock_after, changed)
        return result

    # -- steps ---------------------------------------------------------------------------------

    def _check_state(self, request: SettingsRequest) -> None:
        state = self.view.state
        if state in OPERATION_STATES:
            raise CksError(f"cluster {self.view.name} is {state}: a CKS operation is running on it (or it is going "
                           "away), and it may be creating or changing nodes; nothing was stored. Run again once it "
                           "is Running, Alert or Stopped", cluster=self.view.name, state=state)
        if request.rollout and state not in ROLLOUT_STATES:
            raise InvalidInput("rollout", True, f"cluster {self.view.name} is {state}; a rollout starts only from "
                               "Running or Alert (store the settings with rollout=false, or start the cluster)")

    def _store(self, basis: Optional[records.Record], judged: Optional[plans.Settings], requested: plans.Settings,
               max_unavailable: Optional[int], lock: Optional[records.LockInfo]) -> records.Record:
        """Compare-and-set the settings over the record read at the start.

        Someone else's write of the cancel flag or the last error is kept (the write is redone over
        it); a change of the stored settings themselves means what was validated is stale: refuse.
        """
        current = basis
        for _attempt in range(5):
            now_stored = stored_settings(current)
            if (judged is None) != (now_stored is None) or (
                    judged is not None and now_stored is not None and not same_settings(judged, now_stored)):
                raise CksError("the stored node settings were changed by someone else while this call validated "
                               "its own; nothing was stored: run again to judge the new ones")
            record = replace(current) if current is not None else records.Record()
            record.settings = settings_data(requested, max_unavailable)
            if lock is not None:
                if lock.taken_over_from:
                    record.previous_holder_stopped = lock.taken_over_from
                if record.cancel and _older(record.updated, lock.acquire_time):
                    # A cancel left from before this rollout took the lock; one asked for since
                    # (while the settings are being stored) stays and stops it before its first batch.
                    record.cancel = False
            try:
                return self.store.write(record, current.resource_version if current is not None else None)
            except records.RecordConflict as exc:
                current = exc.current
        raise CksError(f"the rollout record {records.NAMESPACE}/{records.RECORD_NAME} kept changing while the "
                       "settings were stored; nothing was stored, run again")

    def _give_back(self, lock: records.Lock, failure: CksError, release: bool) -> CksError:
        """Storing failed after the lock was taken: release it and keep the failure as the last error."""
        text = f"the rollout did not start: storing the node settings failed: {failure.msg}"
        released = False
        if release:
            try:
                released = lock.release()
            except CksError:
                released = False
        try:
            self.store.update(lambda r: setattr(r, "last_error", text))
        except CksError:
            pass  # the record cannot be written either; the error below says what happened
        if not release:
            where = "the lock was kept: this run held it before this call"
        elif released:
            where = "the lock was released"
        else:
            where = "the lock could not be released; it expires by itself after lock_duration"
        return CksError(f"{text}; {where}", **failure.details)

    def _cancel(self, request: SettingsRequest) -> dict[str, Any]:
        record = self.store.read()
        info = self.lock_factory(None, None).read()
        running = info is not None and info.held
        already = record is not None and record.cancel
        result: dict[str, Any] = {
            "changed": False, "cluster": self._cluster(), "cancel_requested": already,
            "lock": lock_dict(info), "last_error": record.last_error if record else None,
        }
        if not running:
            result["msg"] = "no rollout holds the lock of this cluster: nothing to cancel"
            return result
        if already:
            result["msg"] = f"a cancel is already asked of the rollout of {info.holder}"
            return result
        if not self.check_mode:
            record = self.store.set_cancel()
        result.update(changed=True, cancel_requested=True,
                      msg=f"the rollout of {info.holder} stops before its next batch")
        return result

    # -- result --------------------------------------------------------------------------------

    def _cluster(self) -> dict[str, Any]:
        return {"id": self.view.id, "name": self.view.name, "state": self.view.state}

    def _result(self, request: SettingsRequest, record: Optional[records.Record], current: plans.Settings,
                requested: plans.Settings, recorded: bool, max_unavailable: Optional[int],
                lock: Optional[records.LockInfo], changed: bool) -> dict[str, Any]:
        effective_mu = max_unavailable or 1
        counts = plans.plan(self.view, requested, effective_mu).out_of_date
        after = describe(self.view, requested)
        before = describe(self.view, current)
        result: dict[str, Any] = {
            "changed": changed,
            "cluster": self._cluster(),
            "settings": after,
            "previous_settings": before,
            "first_use": not recorded,
            "max_unavailable": effective_mu,
            "rollout": request.rollout,
            "lock": lock_dict(lock),
            "cancel_requested": bool(record.cancel) if record is not None else False,
            "last_error": record.last_error if record is not None else None,
        }
        for t in NODE_TYPES:
            result[plans.OUT_OF_DATE_KEYS[t]] = counts.get(t, 0)
        if self.diff:
            result["diff"] = {
                "before_header": "recorded node settings" if recorded
                else "node settings copied from the cluster (nothing recorded yet)",
                "after_header": "node settings to record",
                "before": dict(before, max_unavailable=(stored_max_unavailable(record) if recorded else None)),
                "after": dict(after, max_unavailable=max_unavailable),
            }
        return result


# ---------------------------------------------------------------------------------------------
# Wiring, for the modules

KubeConnector = Callable[[str], Any]


class OpenCluster:
    """A cluster's view with its Kubernetes client, record store and lock factory; closes the client."""

    def __init__(self, cloud: Any, connect_kube: KubeConnector, cluster: str,
                 project_id: Optional[str] = None) -> None:
        # The cluster is found first: without a kubeconfig option the Kubernetes client is
        # built from the cluster's own (getKubernetesClusterConfig), which needs its id.
        entry = ClusterLoader(cloud).find(cluster, project_id)
        self.kube = connect_kube(str(entry["id"]))
        try:
            self.view = ClusterLoader(cloud, self.kube).load_cluster(entry)
        except BaseException:
            self.close()
            raise
        self.store = records.RecordStore(self.kube)

    def lock(self, holder: Optional[str] = None, duration: Optional[int] = None) -> records.Lock:
        return records.Lock(self.kube, holder_identity=holder,
                            duration_seconds=duration or records.DEFAULT_LOCK_SECONDS)

    def close(self) -> None:
        close = getattr(self.kube, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> OpenCluster:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def node_settings(cloud: Any, connect_kube: KubeConnector, params: Mapping[str, Any],
                  check_mode: bool = False, diff: bool = False) -> dict[str, Any]:
    """cks_node_settings: parse the options, then read / validate / store (see the module's docs)."""
    request = SettingsRequest.from_params(params)
    with OpenCluster(cloud, connect_kube, str(params["cluster"]), params.get("project_id")) as opened:
        service = NodeSettingsService(opened.view, opened.store, opened.lock, check_mode=check_mode, diff=diff)
        return service.run(request)


def _older(updated: Optional[str], acquired: Optional[str]) -> bool:
    """Whether the record was last written before the lock was taken."""
    if not updated or not acquired:
        return True
    try:
        return records.parse_microtime(updated) < records.parse_microtime(acquired)
    except ValueError:
        return True


__all__ = [
    "MAX_UNAVAILABLE_KEY",
    "NodeSettingsService",
    "OpenCluster",
    "OPERATION_STATES",
    "ROLLOUT_STATES",
    "NameResolver",
    "SettingsRequest",
    "describe",
    "effective_settings",
    "node_settings",
    "refused",
    "resolve",
    "same_settings",
    "stored_max_unavailable",
    "stored_settings",
]
