# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Placement views, hosts and reads built from raw API dicts as listVirtualMachines, listHosts and
listAffinityGroups return them: shared by the placement, dedication and API access unit tests."""

from __future__ import annotations

from typing import Any, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.placement import (
    Dedication,
    HostRoom,
    Member,
    PlacementReads,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ClusterView, build_view

GIB = 1024 ** 3
OFFERINGS = [
    {"id": "so-medium", "name": "cks-medium", "cpunumber": 2, "cpuspeed": 2000, "memory": 4096},
    {"id": "so-large", "name": "cks-large", "cpunumber": 4, "cpuspeed": 2000, "memory": 8192},
    {"id": "so-huge", "name": "cks-huge", "cpunumber": 32, "cpuspeed": 2000, "memory": 131072},
]
GROUPS = [
    {"id": "g-ded", "name": "dedicated-admin", "type": "ExplicitDedication", "account": "admin", "domainid": "d"},
    {"id": "g-spread", "name": "workers-spread", "type": "host anti-affinity", "account": "admin", "domainid": "d"},
    {"id": "g-together", "name": "workers-together", "type": "host affinity", "account": "admin", "domainid": "d"},
    {"id": "g-soft", "name": "workers-soft", "type": "non-strict host anti-affinity", "account": "admin",
     "domainid": "d"},
]


def view(workers: int = 4, groups: tuple[str, ...] = ("g-ded",), offering: str = "so-medium",
         hosts: Optional[list[str]] = None, states: Optional[list[str]] = None) -> ClusterView:
    by_id = {g["id"]: g for g in GROUPS}
    embedded, vms = [], []
    for i in range(workers):
        name = f"k8s-node-{i}"
        embedded.append({"id": f"vm-{i}", "name": name})
        vm = {"id": f"vm-{i}", "name": name, "state": (states or ["Running"] * workers)[i],
              "serviceofferingid": offering, "cpunumber": 2 if offering == "so-medium" else 4,
              "memory": 4096 if offering == "so-medium" else 8192,
              "affinitygroup": [{"id": g, "name": by_id[g]["name"], "type": by_id[g]["type"]} for g in groups]}
        if hosts is not None and hosts[i]:
            vm["hostid"] = hosts[i]
        vms.append(vm)
    cluster = {"id": "c-1", "name": "k8s", "state": "Running", "account": "admin", "domainid": "d", "zoneid": "z-1",
               "virtualmachines": embedded}
    return build_view(cluster, vms, [], OFFERINGS, [], GROUPS, [])


def host(name: str, cores: int = 64, memory_gb: int = 256, used_cores: int = 0, used_gb: int = 0,
         state: str = "Up", resource: str = "Enabled", zone: str = "z-1", overprovisioned: Optional[int] = None,
         cluster: str = "cl-1") -> dict[str, Any]:
    raw = {"id": name, "name": name, "state": state, "resourcestate": resource, "zoneid": zone, "podid": "p-1",
           "clusterid": cluster, "cpunumber": cores, "cpuspeed": 2000, "cpuallocatedvalue": used_cores * 2000,
           "memorytotal": memory_gb * GIB, "memoryallocatedbytes": used_gb * GIB}
    if overprovisioned is not None:
        raw["cpuwithoverprovisioning"] = str(overprovisioned)
    return raw


def reads(*hosts: dict[str, Any], members: Optional[dict[str, list[Member]]] = None,
          dedications: Optional[dict[str, Dedication]] = None) -> PlacementReads:
    return PlacementReads(tuple(HostRoom.from_listed(h) for h in hosts),
                          {k: tuple(v) for k, v in (members or {}).items()}, dedications or {})


def spread(offering: Optional[str] = None, group: str = "g-spread") -> Settings:
    return Settings(worker=TypeSettings(offering_id=offering, affinity_group_ids=(group,)))


THREE = (host("h1"), host("h2"), host("h3"))
