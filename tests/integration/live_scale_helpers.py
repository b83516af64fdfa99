# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""What the live-path tests share: cks-sim's spec of a cluster CloudStack can scale live, the
settings, and the reads of the sim's journal and a node's capacity."""

from __future__ import annotations

from typing import Any

from helpers import ClusterSim, load_raw_spec

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings

LIVE = {"live_scale": "auto", "live_scale_timeout": 5.0}


def live_spec(version: str = "4.23.0.0", dynamic_scale: bool = True, **cluster: Any) -> dict[str, Any]:
    raw = load_raw_spec("small.yml")
    raw["cloud"] = {"version": version}
    raw["zone"] = dict(raw["zone"], dynamic_scale=dynamic_scale)
    raw["clusters"][0].update(cluster)
    return raw


def workers(sim: ClusterSim, offering: str = "cks-large", root_gb: Any = None, groups: Any = None) -> Settings:
    return Settings(worker=TypeSettings(sim.offering_id(offering), root_gb, groups))


def calls(sim: ClusterSim, command: str) -> list[dict[str, Any]]:
    return [c for c in sim.calls() if c.get("command") == command]


def evictions(sim: ClusterSim) -> list[dict[str, Any]]:
    return [e for e in sim.timeline() if e.get("event") in ("evicted", "eviction")]


def node_capacity(sim: ClusterSim, node: str) -> tuple[str, str, str]:
    raw = sim.kube.read_node(node)
    return raw["status"]["capacity"]["cpu"], raw["status"]["capacity"]["memory"], raw["status"]["nodeInfo"]["bootID"]


def path_of(result: Any, node: str) -> dict[str, Any]:
    return next(r for r in result.results if r.name == node).changes["path"]
