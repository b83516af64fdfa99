"""The state of cks-sim's CloudStack world, declared in one place.

``CloudState`` holds every table, index, counter and the clock the concerns read and write (the
zone, hosts, offerings, groups, VMs, volumes, networks, CKS clusters, jobs); it has no rules. The
concern modules (``cloud_lookups``, ``cloud_jobs``, ``cloud_power``, ``cloud_build``,
``cloud_offerings``, ``cloud_volumes``, ``cloud_affinity``, ``cloud_tags``, ``cloud_cks``,
``cloud_views``) are mixins over it that declare methods only; ``cloud.CloudWorld`` composes them.
Everything runs under ``sim.lock``.
"""

from __future__ import annotations

from typing import Any, Optional

from . import placement
from . import spec as specmod
from .api_keys import KeyPair
from .cloud_entities import (
    VM,
    AffinityGroup,
    Cluster,
    DiskOffering,
    Host,
    Job,
    Network,
    PortForwardingRule,
    PublicIp,
    ServiceOffering,
    StoragePool,
    Volume,
    iso,
)
from .core import Sim
from .owners import Account, Directory


class CloudState:
    """All CloudStack state of the sim (the records' tables and indexes, the id factories, the clock)."""

    def __init__(self, sim: Sim, spec: dict[str, Any]) -> None:
        self.sim = sim
        self.spec = spec
        self.ids = specmod.IdFactory(spec["seed"])
        self.account = spec["account"]
        self.account_id = self.ids.uuid()
        self.user_id = self.ids.uuid()
        self.domain_id = self.ids.uuid()
        self.directory = Directory(spec, self.ids.uuid, self.account_id, self.user_id, self.domain_id)
        # The account of the request being served (the API layer sets it under sim.lock);
        # the scheduler's work runs as the spec's own account.
        self.caller: Account = self.directory.primary
        # The key pair (4.23) the call is signed with, when not the account's own key.
        self.caller_key: Optional[KeyPair] = None
        self.cloud_opts = spec["cloud"]
        self.max_unavailable = spec["invariants"]["max_unavailable"]
        base_ms = specmod.created_ms(spec)
        self._clock_ms = base_ms
        self.zone_id = self.ids.uuid()
        self.zone_name = spec["zone"]["name"]
        self.dynamic_scale = spec["zone"]["dynamic_scale"]
        # Every zone by id, the first (``zone_id``) first; the others' ids come only when a spec has them,
        # so a one-zone spec keeps the ids it always had.
        self.zones: dict[str, dict[str, Any]] = {self.zone_id: dict(spec["zone"], id=self.zone_id)}
        for extra in spec.get("zones", [spec["zone"]])[1:]:
            zone_id = self.ids.uuid()
            self.zones[zone_id] = dict(extra, id=zone_id)
        self.zone_by_name = {z["name"]: z["id"] for z in self.zones.values()}
        self.storage_id = self.ids.uuid()
        self.storage_pools: dict[str, StoragePool] = {}
        for number, pool in enumerate(spec["storage_pools"]):
            pool_id = self.storage_id if number == 0 else self.ids.uuid()
            self.storage_pools[pool_id] = StoragePool(pool_id, pool["name"], pool["scope"], pool["tags"])
        self.template_id = self.ids.uuid()
        self.hosts: dict[str, Host] = {}
        self.host_clusters: dict[str, placement.HostCluster] = {}
        # Hosts, host clusters and dedications added by the spec or at run time take their IDs from
        # their own sequence, so the IDs of everything else stay what they always were.
        self.side_ids = specmod.IdFactory(spec["seed"], "hosts")
        self.dedication_ids: dict[tuple[str, str], str] = {}
        self.disk_offerings: dict[str, DiskOffering] = {}
        self.service_offerings: dict[str, ServiceOffering] = {}
        self.affinity_groups: dict[str, AffinityGroup] = {}
        self.vms: dict[str, VM] = {}
        self.vm_by_name: dict[str, VM] = {}
        self.volumes: dict[str, Volume] = {}
        self.root_volume: dict[str, Volume] = {}
        self.networks: dict[str, Network] = {}
        self.public_ips: dict[str, PublicIp] = {}
        self.pf_rules: dict[str, PortForwardingRule] = {}
        self.clusters: dict[str, Cluster] = {}
        self.tags: dict[str, list[dict[str, Any]]] = {}  # resource id -> tags
        self.jobs: dict[str, Job] = {}
        self.versions: dict[str, dict[str, Any]] = {}
        self._vm_numbers = 10
        self._down: dict[tuple[str, str], set[str]] = {}
        self._vm_json_cache: dict[str, tuple[tuple, str]] = {}

    def _tick_ms(self, step: int = 1500) -> int:
        self._clock_ms += step
        return self._clock_ms

    def _stamp(self) -> str:
        return iso(self._tick_ms(250) / 1000)
