# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""A settings request as the modules receive it: per-type maps parsed, names resolved to ids."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.refusals import Refusal
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import (
    PARAM_AFFINITY,
    PARAM_MAX_UNAVAILABLE,
    PARAM_OFFERINGS,
    PARAM_ROOT_DISKS,
    Settings,
    TypeSettings,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import NODE_TYPES, UUID_PATTERN, ClusterView


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
        if UUID_PATTERN.match(value) and self.view.group(value) is not None:
            # Not listed for the account (a domain-level group), but a node carries it.
            return value
        known = ", ".join(sorted({g.name for g in self.view.affinity_groups.values()
                                  if not g.is_dedication})) or "none"
        raise InvalidInput(parameter, list(values), f"{value}: no affinity group with this name or id is visible "
                           f"to this account; groups are: {known}")


def resolve(view: ClusterView, current: Settings, request: SettingsRequest) -> Settings:
    """The full settings that would be stored: ``current`` with the request's changes, as ids."""
    names = NameResolver(view)
    offerings = {t: names.offering(f"{PARAM_OFFERINGS}.{t}", v) for t, v in request.offerings.items()}
    groups = {t: names.groups(f"{PARAM_AFFINITY}.{t}", v) for t, v in request.affinity_groups.items()}
    return current.with_changes(offerings=offerings, root_disk_sizes=dict(request.root_disk_sizes),
                                affinity_groups=groups)


def describe_type(view: ClusterView, settings: TypeSettings) -> dict[str, Any]:
    groups = settings.affinity_group_ids
    return {
        "offering": view.offering_name(settings.offering_id) if settings.offering_id else None,
        "offering_id": settings.offering_id,
        "root_disk_size": settings.root_disk_gb,
        "affinity_groups": None if groups is None else [_group_name(view, g) for g in groups],
        "affinity_group_ids": None if groups is None else list(groups),
    }


def describe(view: ClusterView, settings: Settings) -> dict[str, dict[str, Any]]:
    """Per node type, the settings with the names an operator knows next to the ids."""
    return {t: describe_type(view, settings[t]) for t in ("control", "worker", "etcd")}


def _group_name(view: ClusterView, group_id: str) -> str:
    group = view.group(group_id)
    return group.name if group else group_id


def same_settings(a: Settings, b: Settings) -> bool:
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


def refused(refusals: Sequence[Refusal], request: SettingsRequest) -> InvalidInput:
    """One error for every refusal, naming each parameter with the value the operator gave."""
    given = _given_values(request)
    messages = []
    for r in refusals:
        shown = given.get(r.parameter, r.value)
        value = f"{shown!r}" if shown == r.value else f"{shown!r} ({r.value!r})"
        # A value stored earlier with rollout=false, judged now that a rollout would apply it:
        # the operator has to know it is not one this call gave, and how to replace it.
        stored = "" if r.parameter in given or r.parameter == PARAM_MAX_UNAVAILABLE else (
            " (stored earlier, not given in this call; give this parameter a value that is accepted)")
        messages.append(f"{r.parameter}={value}{stored}: {r.why}; {r.change}")
    first = refusals[0]
    error = InvalidInput(first.parameter, given.get(first.parameter, first.value), f"{first.why}; {first.change}")
    error.msg = "refused, nothing was changed: " + " | ".join(messages)
    error.args = (error.msg,)
    error.details["refusals"] = [dict(r.to_dict(), given=given.get(r.parameter, r.value)) for r in refusals]
    return error


def _given_values(request: SettingsRequest) -> dict[str, Any]:
    given: dict[str, Any] = {}
    for t, offering in request.offerings.items():
        given[f"{PARAM_OFFERINGS}.{t}"] = offering
    for t, size in request.root_disk_sizes.items():
        given[f"{PARAM_ROOT_DISKS}.{t}"] = size
    for t, groups in request.affinity_groups.items():
        given[f"{PARAM_AFFINITY}.{t}"] = list(groups)
    if request.max_unavailable is not None:
        given[PARAM_MAX_UNAVAILABLE] = request.max_unavailable
    return given
