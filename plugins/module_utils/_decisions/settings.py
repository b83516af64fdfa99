# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The per-type node settings (offering, root disk, affinity groups) and the API's refusals of them."""

from __future__ import annotations

from collections.abc import Mapping as AbcMapping
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import NODE_TYPES, ClusterView

# The option names refusals speak of (the modules' parameters).
PARAM_OFFERINGS = "node_offerings"


PARAM_ROOT_DISKS = "node_root_disk_sizes"


PARAM_AFFINITY = "node_affinity_groups"


PARAM_MAX_UNAVAILABLE = "max_unavailable"


# CKS's own floor for a node's service offering.
MIN_NODE_CPU = 2


MIN_NODE_MEMORY_MB = 2048


@dataclass(frozen=True)
class TypeSettings:
    """The settings of one node type. None means "not set": that setting is not compared."""

    offering_id: Optional[str] = None
    root_disk_gb: Optional[int] = None
    #: None leaves the nodes' groups alone; () means "no groups" (dedication groups are kept).
    affinity_group_ids: Optional[tuple[str, ...]] = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "offering_id": self.offering_id,
            "root_disk_gb": self.root_disk_gb,
            "affinity_group_ids": (list(self.affinity_group_ids)
                                   if self.affinity_group_ids is not None else None),
        }

    @classmethod
    def from_dict(cls, data: Optional[Mapping[str, Any]]) -> TypeSettings:
        if data is None:
            return cls()
        if not isinstance(data, AbcMapping):
            raise InvalidInput("settings", data, "each node type's settings must be a mapping")
        offering = data.get("offering_id")
        root = data.get("root_disk_gb")
        groups = data.get("affinity_group_ids")
        if offering is not None and not isinstance(offering, str):
            raise InvalidInput("settings.offering_id", offering, "must be an offering id (a string)")
        if root is not None and (isinstance(root, bool) or not isinstance(root, int)):
            raise InvalidInput("settings.root_disk_gb", root, "must be a whole number of GB")
        if groups is not None and (isinstance(groups, (str, bytes))
                                   or not all(isinstance(g, str) for g in groups)):
            raise InvalidInput("settings.affinity_group_ids", groups, "must be a list of group ids")
        return cls(offering_id=offering, root_disk_gb=root,
                   affinity_group_ids=unique_ids(groups) if groups is not None else None)


def unique_ids(ids: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for i in ids:
        seen.setdefault(i, None)
    return tuple(seen)


def _node_type(key: str, parameter: str) -> str:
    node_type = str(key).strip().lower()
    if node_type not in NODE_TYPES:
        raise InvalidInput(parameter, key, f"not a node type; node types are {', '.join(sorted(NODE_TYPES))}")
    return node_type


@dataclass(frozen=True)
class Settings(Mapping[str, TypeSettings]):
    """The settings of every node type: a read-only mapping node type -> TypeSettings."""

    control: TypeSettings = field(default_factory=TypeSettings)
    worker: TypeSettings = field(default_factory=TypeSettings)
    etcd: TypeSettings = field(default_factory=TypeSettings)

    def __getitem__(self, node_type: str) -> TypeSettings:
        if node_type not in NODE_TYPES:
            raise KeyError(node_type)
        return getattr(self, node_type)

    def __iter__(self) -> Iterator[str]:
        return iter(NODE_TYPES)

    def __len__(self) -> int:
        return len(NODE_TYPES)

    def with_type(self, node_type: str, type_settings: TypeSettings) -> Settings:
        return replace(self, **{_node_type(node_type, "node type"): type_settings})

    def with_changes(
        self,
        offerings: Optional[Mapping[str, str]] = None,
        root_disk_sizes: Optional[Mapping[str, int]] = None,
        affinity_groups: Optional[Mapping[str, Optional[Sequence[str]]]] = None,
    ) -> Settings:
        """These settings with the operator's per-type changes laid over them.

        Node type keys are case-insensitive. A type absent from a mapping keeps its value.
        """
        result = self
        for key, offering_id in (offerings or {}).items():
            t = _node_type(key, PARAM_OFFERINGS)
            result = result.with_type(t, replace(result[t], offering_id=offering_id))
        for key, size in (root_disk_sizes or {}).items():
            t = _node_type(key, PARAM_ROOT_DISKS)
            result = result.with_type(t, replace(result[t], root_disk_gb=size))
        for key, ids in (affinity_groups or {}).items():
            t = _node_type(key, PARAM_AFFINITY)
            result = result.with_type(t, replace(
                result[t], affinity_group_ids=unique_ids(ids) if ids is not None else None))
        return result

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {t: self[t].to_dict() for t in NODE_TYPES}

    @classmethod
    def from_dict(cls, data: Optional[Mapping[str, Any]]) -> Settings:
        if data is None:
            return cls()
        if not isinstance(data, AbcMapping):
            raise InvalidInput("settings", data, "must be a mapping of node type to settings")
        unknown = sorted(set(data) - set(NODE_TYPES))
        if unknown:
            raise InvalidInput("settings", unknown, "not node types; node types are control, worker, etcd")
        return cls(**{t: TypeSettings.from_dict(data.get(t)) for t in NODE_TYPES})


def initial_settings(view: ClusterView) -> Settings:
    """The settings of a cluster whose node types have none of their own yet (gen 1 -> gen 2).

    - offering: the per-type offering CloudStack reports, else the cluster's service offering,
      copied to each type so that changing one type later leaves the others as they are;
    - root disk: the smallest root disk of the type's nodes. A node is out of date only when its
      disk is smaller than the type's size, so the minimum is the one size that leaves every node
      up to date (any larger value would restart the smaller nodes for a change nobody asked for);
    - affinity groups: the (non-dedication) groups all nodes of the type share, if they share
      some; otherwise None, which leaves the nodes' groups alone.
    """
    types: dict[str, TypeSettings] = {}
    for t in NODE_TYPES:
        nodes = view.nodes_of(t)
        disks = [n.root_disk_gb for n in nodes if n.root_disk_gb is not None]
        group_sets = {n.chosen_group_ids for n in nodes}
        shared = next(iter(group_sets)) if len(group_sets) == 1 else frozenset()
        types[t] = TypeSettings(
            offering_id=view.node_offerings.get(t) or view.offering_id,
            root_disk_gb=min(disks) if disks else None,
            affinity_group_ids=tuple(sorted(shared)) if shared else None,
        )
    return Settings(**types)


