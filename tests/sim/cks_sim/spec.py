"""The cks-sim spec: loading, validation, defaults, repeatable IDs and CKS node naming.

A spec is a YAML mapping (see ``tests/sim/examples/small.yml`` and ``tests/sim/README.md``).
``load_spec`` returns a normalised dict: every optional field filled with its default, so the
worlds read it without guessing. Anything wrong raises ``SpecError`` naming the field.
"""

from __future__ import annotations

import copy
import ipaddress
import random
import re
import uuid
from datetime import datetime, timezone
from typing import Any, Iterable, Optional

import yaml

from . import autoscaler, spec_live
from .api_keys import normalize_keys
from .core import DEFAULT_TIMINGS

AFFINITY_TYPES = (
    "host anti-affinity",
    "host affinity",
    "non-strict host anti-affinity",
    "non-strict host affinity",
    "ExplicitDedication",
)
NODE_TYPES = ("control", "worker", "etcd")
CLUSTER_STATES = (
    "Created", "Starting", "Running", "Stopping", "Stopped", "Scaling", "ScalingStoppedCluster",
    "Upgrading", "Importing", "RemovingNodes", "Alert", "Recovering", "Destroyed", "Destroying",
    "Error",
)
VM_START_STATES = ("Running", "Stopped", "Error")
DEFAULT_CREATED = "2025-05-20T08:00:00+00:00"


class SpecError(ValueError):
    """The spec is not usable; the message names the offending field."""


def load_spec(path: str, overrides: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            raw = yaml.safe_load(handle)
    except OSError as exc:
        raise SpecError(f"cannot read spec {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise SpecError(f"spec {path} is not valid YAML: {exc}") from exc
    if overrides:
        raw = dict(raw or {}, **overrides)
    return normalize(raw)


def parse_scale(items: Iterable[str]) -> dict[str, int]:
    """``--scale workers=1000 --scale hosts=40`` -> {"workers": 1000, "hosts": 40}."""
    scale: dict[str, int] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not value.strip().isdigit():
            raise SpecError(f"--scale expects NAME=COUNT, got {item!r}")
        scale[key.strip()] = int(value)
    return scale


# --- validation helpers ---------------------------------------------------------------------


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(f"{where} must be a mapping, got {type(value).__name__}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise SpecError(f"{where} must be a list, got {type(value).__name__}")
    return value


def _int(value: Any, where: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{where} must be an integer, got {value!r}")
    if value < minimum:
        raise SpecError(f"{where} must be >= {minimum}, got {value}")
    return value


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(f"{where} must be a number, got {value!r}")
    if value < 0:
        raise SpecError(f"{where} must be >= 0, got {value}")
    return float(value)


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(f"{where} must be true or false, got {value!r}")
    return value


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise SpecError(f"{where} must be a non-empty string, got {value!r}")
    return value


def _unknown(entry: dict[str, Any], known: Iterable[str], where: str) -> None:
    extra = sorted(set(entry) - set(known))
    if extra:
        raise SpecError(f"{where}: unknown field(s) {', '.join(extra)}")


def _unique(names: list[str], where: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise SpecError(f"{where}: duplicate name {name!r}")
        seen.add(name)


# --- normalisation --------------------------------------------------------------------------

TOP_LEVEL = (
    "time_scale", "seed", "timings", "zone", "account", "hosts", "disk_offerings",
    "service_offerings", "affinity_groups", "clusters", "workloads", "pdbs", "invariants", "scale",
    "cloud", "created", "kube", "etcd", "domains", "accounts", "projects", "storage_pools", "zones",
    "host_clusters",
)
STORAGE_TYPES = ("shared", "local")
ROLES = ("admin", "domainadmin", "user")
LIMIT_TYPES = ("cpu", "memory", "primarystorage")


def normalize(raw: Any) -> dict[str, Any]:
    spec = copy.deepcopy(_mapping(raw, "spec"))
    _unknown(spec, TOP_LEVEL, "spec")
    out: dict[str, Any] = {}
    out["time_scale"] = _number(spec.get("time_scale", 1.0), "time_scale")
    out["seed"] = _int(spec.get("seed", 0), "seed")
    timings = _mapping(spec.get("timings"), "timings")
    for name, value in timings.items():
        if name not in DEFAULT_TIMINGS:
            raise SpecError(f"timings.{name}: unknown timing; known: {', '.join(sorted(DEFAULT_TIMINGS))}")
        _number(value, f"timings.{name}")
    out["timings"] = dict(timings)
    out["created"] = str(spec.get("created", DEFAULT_CREATED))
    try:
        datetime.fromisoformat(out["created"])
    except ValueError as exc:
        raise SpecError(f"created must be an ISO-8601 timestamp, got {out['created']!r}") from exc

    zone = _mapping(spec.get("zone"), "zone")
    _unknown(zone, ("name", "dynamic_scale"), "zone")
    out["zone"] = _zone(zone, "zone", "zone-1")
    # ``zone`` is the first zone; ``zones`` adds more. Hosts and clusters name theirs (default the first).
    extra = [_zone(_mapping(z, f"zones[{i}]"), f"zones[{i}]", None) for i, z in enumerate(_list(spec.get("zones"), "zones"))]
    if extra and extra[0] == out["zone"]:
        extra = extra[1:]  # a normalised spec again: its ``zones`` starts with ``zone``
    out["zones"] = [out["zone"]] + extra
    _unique([z["name"] for z in out["zones"]], "zones")

    account = _mapping(spec.get("account"), "account")
    _unknown(account, ("name", "domain", "apikey", "secretkey", "role", "limits", "keys"), "account")
    out["account"] = {
        "name": str(account.get("name", "admin")),
        "domain": str(account.get("domain", "ROOT")),
        "apikey": _str(account.get("apikey", "sim-api-key"), "account.apikey"),
        "secretkey": _str(account.get("secretkey", "sim-secret-key"), "account.secretkey"),
        "role": str(account.get("role", "admin")),
        "limits": _limits(account.get("limits"), "account.limits"),
        "keys": normalize_keys(account.get("keys"), "account.keys", SpecError),
    }
    if out["account"]["role"] not in ROLES:
        raise SpecError(f"account.role must be one of {', '.join(ROLES)}")
    _owners(spec, out)

    scale = _mapping(spec.get("scale"), "scale")
    _unknown(scale, ("workers", "control_nodes", "etcd_nodes", "hosts"), "scale")
    out["scale"] = {key: _int(value, f"scale.{key}") for key, value in scale.items()}

    out["host_clusters"] = _host_clusters(spec.get("host_clusters"), [z["name"] for z in out["zones"]])
    out["hosts"] = _hosts(spec.get("hosts"), out["scale"].get("hosts"), [z["name"] for z in out["zones"]],
                          out["host_clusters"])
    out["storage_pools"] = _storage_pools(spec.get("storage_pools"))
    out["disk_offerings"] = _disk_offerings(spec.get("disk_offerings"))
    out["service_offerings"] = _service_offerings(spec.get("service_offerings"), out["disk_offerings"])
    out["affinity_groups"] = _affinity_groups(spec.get("affinity_groups"), out["hosts"], out)

    cloud = _mapping(spec.get("cloud"), "cloud")
    _unknown(cloud, ("scanner_counts_etcd", "scanner_adds_etcd", "capacity_release_interval", "page_size_max",
                     "version", "api_throttling_max", "api_throttling_interval"), "cloud")
    out["cloud"] = {
        # The CKS scanner compares the Ready count with control+worker+etcd (reference §1.1),
        # so a cluster with etcd nodes never leaves Alert by itself. False counts only K8s nodes.
        "scanner_counts_etcd": _bool(cloud.get("scanner_counts_etcd", True), "cloud.scanner_counts_etcd"),
        # vm.capacity.release.interval (simulated seconds): a stopped VM's last host stays
        # avoided by its strict anti-affinity peers this long.
        "capacity_release_interval": _number(cloud.get("capacity_release_interval", 3600), "cloud.capacity_release_interval"),
        "page_size_max": _int(cloud.get("page_size_max", 500), "cloud.page_size_max", 1),
        "version": str(cloud.get("version", "4.22.1.0")),
        # api.throttling.max calls per api.throttling.interval (simulated) seconds per account; -1
        # (left out) is api.throttling.enabled=false.
        "api_throttling_max": _int(cloud.get("api_throttling_max", -1), "cloud.api_throttling_max", -1),
        "api_throttling_interval": _number(cloud.get("api_throttling_interval", 1), "cloud.api_throttling_interval"),
    }
    if any(a["keys"] for a in [out["account"]] + out["accounts"]) and not _version_at_least(out["cloud"]["version"], (4, 23)):
        raise SpecError("keys: API key pairs with rules and dates are CloudStack 4.23's; set cloud.version to 4.23.0.0 or later")
    if out["cloud"]["api_throttling_interval"] <= 0:
        raise SpecError("cloud.api_throttling_interval must be more than 0 (simulated seconds)")
    # From 4.21 the Alert recovery adds the etcd node count to kubectl's Ready count, so a
    # cluster with etcd nodes recovers; before that it stayed in Alert.
    out["cloud"]["scanner_adds_etcd"] = _bool(cloud.get("scanner_adds_etcd", _version_at_least(out["cloud"]["version"], (4, 21))),
                                              "cloud.scanner_adds_etcd")

    clusters = _list(spec.get("clusters"), "clusters")
    if not clusters:
        raise SpecError("clusters: at least one cluster is needed")
    out["clusters"] = [_cluster(c, i, out, out["scale"]) for i, c in enumerate(clusters)]
    _unique([c["name"] for c in out["clusters"]], "clusters")

    out["workloads"] = _list(spec.get("workloads"), "workloads")
    out["pdbs"] = _list(spec.get("pdbs"), "pdbs")
    out["kube"] = _mapping(spec.get("kube"), "kube")
    out["etcd"] = _mapping(spec.get("etcd"), "etcd")
    invariants = _mapping(spec.get("invariants"), "invariants")
    _unknown(invariants, ("max_unavailable",), "invariants")
    max_unavailable = _mapping(invariants.get("max_unavailable"), "invariants.max_unavailable")
    _unknown(max_unavailable, NODE_TYPES, "invariants.max_unavailable")
    out["invariants"] = {
        "max_unavailable": {t: _int(max_unavailable.get(t, 1), f"invariants.max_unavailable.{t}") for t in NODE_TYPES}
    }
    return out


def _limits(raw: Any, where: str) -> dict[str, int]:
    """Resource limits of an account, domain or project; -1 is unlimited, absent is the default."""
    limits = _mapping(raw, where)
    _unknown(limits, LIMIT_TYPES, where)
    out = {}
    for name, value in limits.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < -1:
            raise SpecError(f"{where}.{name} must be an integer >= -1 (-1: unlimited), got {value!r}")
        out[name] = value
    return out


def _owners(spec: dict[str, Any], out: dict[str, Any]) -> None:
    """domains, accounts (besides ``account``) and projects: who owns VMs, groups and clusters."""
    domains: list[dict[str, Any]] = [{"name": "ROOT", "parent": None, "limits": {}}]
    for i, entry in enumerate(_list(spec.get("domains"), "domains")):
        where = f"domains[{i}]"
        entry = _mapping(entry, where)
        _unknown(entry, ("name", "parent", "limits"), where)
        if entry.get("name") == "ROOT":
            if entry.get("parent") is not None:
                raise SpecError(f"{where}: ROOT is the top domain and has no parent")
            domains[0]["limits"] = _limits(entry.get("limits"), f"{where}.limits")  # a normalised spec again
            continue
        domains.append({"name": _str(entry.get("name"), f"{where}.name"), "parent": str(entry.get("parent", "ROOT")),
                        "limits": _limits(entry.get("limits"), f"{where}.limits")})
    _unique([d["name"] for d in domains], "domains")
    known: set[str] = set()
    for i, child in enumerate(domains[1:]):
        if child["parent"] not in known | {"ROOT"}:
            raise SpecError(f"domains[{i}].parent: no domain named {child['parent']!r} listed before it")
        known.add(child["name"])
    names = {d["name"] for d in domains}
    if out["account"]["domain"] not in names:
        raise SpecError(f"account.domain: no domain named {out['account']['domain']!r}; add it to domains")
    accounts: list[dict[str, Any]] = []
    for i, entry in enumerate(_list(spec.get("accounts"), "accounts")):
        where = f"accounts[{i}]"
        entry = _mapping(entry, where)
        _unknown(entry, ("name", "domain", "role", "apikey", "secretkey", "limits", "keys"), where)
        role = str(entry.get("role", "user"))
        if role not in ROLES:
            raise SpecError(f"{where}.role must be one of {', '.join(ROLES)}")
        domain = str(entry.get("domain", "ROOT"))
        if domain not in names:
            raise SpecError(f"{where}.domain: no domain named {domain!r}")
        apikey, secretkey = entry.get("apikey"), entry.get("secretkey")
        if (apikey is None) != (secretkey is None):
            raise SpecError(f"{where}: apikey and secretkey go together")
        accounts.append({"name": _str(entry.get("name"), f"{where}.name"), "domain": domain, "role": role,
                         "apikey": None if apikey is None else _str(apikey, f"{where}.apikey"),
                         "secretkey": None if secretkey is None else _str(secretkey, f"{where}.secretkey"),
                         "limits": _limits(entry.get("limits"), f"{where}.limits"),
                         "keys": normalize_keys(entry.get("keys"), f"{where}.keys", SpecError)})
    _unique([out["account"]["name"]] + [a["name"] for a in accounts], "accounts")
    _unique([k for k in [out["account"]["apikey"]] + [a["apikey"] for a in accounts] if k]
            + [k["apikey"] for a in [out["account"]] + accounts for k in a["keys"]], "accounts (apikey)")
    account_names = {out["account"]["name"]} | {a["name"] for a in accounts}
    projects: list[dict[str, Any]] = []
    for i, entry in enumerate(_list(spec.get("projects"), "projects")):
        where = f"projects[{i}]"
        entry = _mapping(entry, where)
        _unknown(entry, ("name", "domain", "accounts", "limits"), where)
        domain = str(entry.get("domain", "ROOT"))
        if domain not in names:
            raise SpecError(f"{where}.domain: no domain named {domain!r}")
        members = [str(a) for a in _list(entry.get("accounts"), f"{where}.accounts")]
        for member in members:
            if member not in account_names:
                raise SpecError(f"{where}.accounts: no account named {member!r}")
        projects.append({"name": _str(entry.get("name"), f"{where}.name"), "domain": domain, "accounts": members,
                         "limits": _limits(entry.get("limits"), f"{where}.limits")})
    _unique([p["name"] for p in projects], "projects")
    out["domains"], out["accounts"], out["projects"] = domains, accounts, projects


def _owner_ref(entry: dict[str, Any], where: str, out: dict[str, Any], allow_domain: bool) -> dict[str, Optional[str]]:
    """``account`` or ``project`` (or, for affinity groups, ``domain``): at most one of them."""
    given = [k for k in ("account", "project", "domain") if entry.get(k) is not None]
    if "domain" in given and not allow_domain:
        raise SpecError(f"{where}.domain: only affinity groups can belong to a domain")
    if len(given) > 1:
        raise SpecError(f"{where}: {' and '.join(given)} are mutually exclusive; give one owner")
    ref: dict[str, Optional[str]] = {"account": None, "project": None, "domain": None}
    if not given:
        return ref
    key = given[0]
    value = str(entry[key])
    known = {"account": {out["account"]["name"]} | {a["name"] for a in out["accounts"]},
             "project": {p["name"] for p in out["projects"]},
             "domain": {d["name"] for d in out["domains"]}}[key]
    if value not in known:
        raise SpecError(f"{where}.{key}: no {key} named {value!r}")
    ref[key] = value
    return ref


def _version_at_least(version: str, wanted: tuple[int, int]) -> bool:
    parts = [int(p) for p in re.findall(r"\d+", version)[:2]]
    return tuple(parts + [0] * (2 - len(parts))) >= wanted


def _zone(entry: dict[str, Any], where: str, default_name: Optional[str]) -> dict[str, Any]:
    _unknown(entry, ("name", "dynamic_scale"), where)
    name = entry.get("name", default_name)
    return {
        "name": _str(name, f"{where}.name"),
        # Zone setting enable.dynamic.scale.vm (default false): needed to scale a Running VM.
        "dynamic_scale": _bool(entry.get("dynamic_scale", False), f"{where}.dynamic_scale"),
    }


# com.cloud.host.Status and com.cloud.resource.ResourceState, as listHosts shows them.
HOST_STATES = ("Creating", "Connecting", "Up", "Down", "Disconnected", "Alert", "Removed", "Error", "Rebalancing",
               "Unknown")
RESOURCE_STATES = ("Creating", "Enabled", "Disabled", "PrepareForMaintenance", "ErrorInMaintenance", "Maintenance",
                   "Error", "ErrorInPrepareForMaintenance")


def default_host_cluster(zone: str, zones: list[str]) -> str:
    """The host cluster of a host that names none: one per zone, ``cluster-1`` in the first."""
    return "cluster-1" if zone == zones[0] else f"{zone}-cluster-1"


def _ratio(value: Any, where: str) -> float:
    ratio = _number(value, where)
    if ratio <= 0:
        raise SpecError(f"{where} must be a number above 0 (the cluster's overcommit ratio), got {value!r}")
    return float(ratio)


def _host_clusters(raw: Any, zones: list[str]) -> list[dict[str, Any]]:
    """Host clusters (CloudStack clusters of hypervisor hosts) with their overcommit ratios."""
    out: list[dict[str, Any]] = []
    for i, entry in enumerate(_list(raw, "host_clusters")):
        where = f"host_clusters[{i}]"
        entry = _mapping(entry, where)
        _unknown(entry, ("name", "zone", "cpu_overcommit_ratio", "memory_overcommit_ratio", *spec_live.HOST_CLUSTER_KEYS), where)
        zone = str(entry.get("zone", zones[0]))
        if zone not in zones:
            raise SpecError(f"{where}.zone: no zone named {zone!r}; add it to zones")
        out.append({
            "name": _str(entry.get("name"), f"{where}.name"),
            "zone": zone,
            # cluster details cpuOvercommitRatio / memoryOvercommitRatio (default 1).
            "cpu_overcommit_ratio": _ratio(entry.get("cpu_overcommit_ratio", 1.0), f"{where}.cpu_overcommit_ratio"),
            "memory_overcommit_ratio": _ratio(entry.get("memory_overcommit_ratio", 1.0), f"{where}.memory_overcommit_ratio"),
            **_live(spec_live.host_cluster_keys, entry, where),
        })
    _unique([c["name"] for c in out], "host_clusters")
    return out


def host_entry(entry: Any, where: str, zones: list[str], clusters: list[dict[str, Any]]) -> dict[str, Any]:
    """One host of the spec (also what the admin API's add_host takes)."""
    entry = _mapping(entry, where)
    _unknown(entry, ("name", "cpu", "memory", "cpuspeed", "state", "resourcestate", "zone", "cluster"), where)
    zone = str(entry.get("zone", zones[0]))
    if zone not in zones:
        raise SpecError(f"{where}.zone: no zone named {zone!r}; add it to zones")
    cluster = str(entry.get("cluster", default_host_cluster(zone, zones)))
    named = next((c for c in clusters if c["name"] == cluster), None)
    if named is None and cluster != default_host_cluster(zone, zones):
        raise SpecError(f"{where}.cluster: no host cluster named {cluster!r}; add it to host_clusters")
    if named is not None and named["zone"] != zone:
        raise SpecError(f"{where}.cluster: host cluster {cluster!r} is in zone {named['zone']!r}, not {zone!r}")
    state = str(entry.get("state", "Up"))
    if state not in HOST_STATES:
        raise SpecError(f"{where}.state must be one of {', '.join(HOST_STATES)}, got {state!r}")
    resourcestate = str(entry.get("resourcestate", "Enabled"))
    if resourcestate not in RESOURCE_STATES:
        raise SpecError(f"{where}.resourcestate must be one of {', '.join(RESOURCE_STATES)}, got {resourcestate!r}")
    return {
        "name": _str(entry.get("name"), f"{where}.name"),
        "cpu": _int(entry.get("cpu", 64), f"{where}.cpu", 1),
        "memory": _int(entry.get("memory", 262144), f"{where}.memory", 1),
        "cpuspeed": _int(entry.get("cpuspeed", 2400), f"{where}.cpuspeed", 1),
        "state": state,
        "resourcestate": resourcestate,
        "zone": zone,
        "cluster": cluster,
    }


def _hosts(raw: Any, scale_hosts: Optional[int], zones: list[str],
           clusters: Optional[list[dict[str, Any]]] = None) -> list[dict[str, Any]]:
    hosts = [host_entry(entry, f"hosts[{i}]", zones, clusters or []) for i, entry in enumerate(_list(raw, "hosts"))]
    if not hosts:
        hosts = [host_entry({"name": "kvm-1"}, "hosts[0]", zones, clusters or [])]
    if scale_hosts:
        template = hosts[-1]
        while len(hosts) < scale_hosts:
            hosts.append(dict(template, name=f"kvm-{len(hosts) + 1}"))
    _unique([h["name"] for h in hosts], "hosts")
    return hosts


def _tags(value: Any, where: str) -> Optional[str]:
    if value is None or value == "":
        return None
    if isinstance(value, list):
        value = ",".join(str(v) for v in value)
    if not isinstance(value, str):
        raise SpecError(f"{where} must be a comma-separated string or a list, got {value!r}")
    return value


def _storage_type(value: Any, where: str) -> str:
    if value not in STORAGE_TYPES:
        raise SpecError(f"{where} must be one of {', '.join(STORAGE_TYPES)}, got {value!r}")
    return str(value)


def _storage_pools(raw: Any) -> list[dict[str, Any]]:
    """Primary storage pools; scope shared (zone/cluster wide) or local (on the host)."""
    pools: list[dict[str, Any]] = []
    for i, entry in enumerate(_list(raw, "storage_pools")):
        where = f"storage_pools[{i}]"
        entry = _mapping(entry, where)
        _unknown(entry, ("name", "scope", "tags"), where)
        pools.append({"name": _str(entry.get("name"), f"{where}.name"),
                      "scope": _storage_type(entry.get("scope", "shared"), f"{where}.scope"),
                      "tags": _tags(entry.get("tags"), f"{where}.tags")})
    if not pools:
        pools = [{"name": "primary-1", "scope": "shared", "tags": None}]
    _unique([p["name"] for p in pools], "storage_pools")
    return pools


def _disk_offerings(raw: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, entry in enumerate(_list(raw, "disk_offerings")):
        where = f"disk_offerings[{i}]"
        entry = _mapping(entry, where)
        _unknown(entry, ("name", "size", "iscustomized", "disksizestrictness", "displaytext", "tags", "storagetype"), where)
        size = _int(entry.get("size", 0), f"{where}.size")
        customized = _bool(entry.get("iscustomized", size == 0), f"{where}.iscustomized")
        if not customized and size == 0:
            raise SpecError(f"{where}: a disk offering that is not customized needs a size > 0")
        out.append({
            "name": _str(entry.get("name"), f"{where}.name"),
            "size": size,
            "iscustomized": customized,
            "disksizestrictness": _bool(entry.get("disksizestrictness", False), f"{where}.disksizestrictness"),
            "displaytext": str(entry.get("displaytext", entry.get("name"))),
            "tags": _tags(entry.get("tags"), f"{where}.tags"),
            "storagetype": _storage_type(entry.get("storagetype", "shared"), f"{where}.storagetype"),
        })
    _unique([d["name"] for d in out], "disk_offerings")
    return out


def _service_offerings(raw: Any, disk_offerings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    disk_names = {d["name"] for d in disk_offerings}
    out: list[dict[str, Any]] = []
    for i, entry in enumerate(_list(raw, "service_offerings")):
        where = f"service_offerings[{i}]"
        entry = _mapping(entry, where)
        _unknown(entry, (
            "name", "cpu", "memory", "cpuspeed", "rootdisksize", "diskoffering", "diskofferingstrictness",
            "dynamicscalingenabled", "iscustomized", "displaytext", "state", "storagetype", "tags",
        ), where)
        disk = entry.get("diskoffering")
        if disk is not None and disk not in disk_names:
            raise SpecError(f"{where}.diskoffering: no disk offering named {disk!r}")
        out.append({
            "name": _str(entry.get("name"), f"{where}.name"),
            "cpu": _int(entry.get("cpu"), f"{where}.cpu", 1),
            "memory": _int(entry.get("memory"), f"{where}.memory", 1),
            "cpuspeed": _int(entry.get("cpuspeed", 2000), f"{where}.cpuspeed", 1),
            "rootdisksize": _int(entry.get("rootdisksize", 0), f"{where}.rootdisksize"),
            "diskoffering": disk,
            "diskofferingstrictness": _bool(entry.get("diskofferingstrictness", False), f"{where}.diskofferingstrictness"),
            "dynamicscalingenabled": _bool(entry.get("dynamicscalingenabled", True), f"{where}.dynamicscalingenabled"),
            "iscustomized": _bool(entry.get("iscustomized", False), f"{where}.iscustomized"),
            "displaytext": str(entry.get("displaytext", entry.get("name"))),
            "state": str(entry.get("state", "Active")),
            # Of its own (compute-only) disk offering; a linked disk offering brings its own.
            "storagetype": _storage_type(entry.get("storagetype", "shared"), f"{where}.storagetype"),
            "tags": _tags(entry.get("tags"), f"{where}.tags"),
        })
        if disk is not None and (entry.get("storagetype") is not None or entry.get("tags") is not None):
            raise SpecError(f"{where}: storagetype and tags come from its diskoffering {disk!r}; set them there")
    if not out:
        raise SpecError("service_offerings: at least one service offering is needed")
    _unique([s["name"] for s in out], "service_offerings")
    return out


def _affinity_groups(raw: Any, hosts: list[dict[str, Any]], spec: dict[str, Any]) -> list[dict[str, Any]]:
    host_names = {h["name"] for h in hosts}
    zone_names = {z["name"] for z in spec["zones"]}
    cluster_names = {c["name"] for c in spec["host_clusters"]} | {h["cluster"] for h in hosts}
    # DedicatedResourceManagerImpl refuses a second dedication of one resource.
    taken: dict[str, dict[str, str]] = {"hosts": {}, "clusters": {}, "pods": {}, "zones": {}}
    out = []
    for i, entry in enumerate(_list(raw, "affinity_groups")):
        where = f"affinity_groups[{i}]"
        entry = _mapping(entry, where)
        _unknown(entry, ("name", "type", "description", "hosts", "clusters", "pods", "zones", "account", "project",
                         "domain"), where)
        kind = entry.get("type")
        if kind not in AFFINITY_TYPES:
            raise SpecError(f"{where}.type must be one of {', '.join(AFFINITY_TYPES)}; got {kind!r}")
        # dedicateHost / dedicateCluster / dedicatePod / dedicateZone to the group's owner (its
        # account, or its domain for a domain-level group); a pod is named by its zone (one pod each).
        dedicated: dict[str, list[str]] = {}
        for key, known in (("hosts", host_names), ("clusters", cluster_names), ("pods", zone_names), ("zones", zone_names)):
            dedicated[key] = [str(n) for n in _list(entry.get(key), f"{where}.{key}")]
            for name in dedicated[key]:
                if name not in known:
                    raise SpecError(f"{where}.{key}: no {key[:-1]} named {name!r}")
                if name in taken[key]:
                    raise SpecError(f"{where}.{key}: {name!r} is dedicated already (to {taken[key][name]})")
                taken[key][name] = str(entry.get("name"))
            if dedicated[key] and kind != "ExplicitDedication":
                raise SpecError(f"{where}.{key}: only ExplicitDedication groups have dedicated {key}")
        out.append({
            "name": _str(entry.get("name"), f"{where}.name"),
            "type": kind,
            "description": entry.get("description"),
            **dedicated,
            **_owner_ref(entry, where, spec, allow_domain=True),
        })
    _unique([g["name"] for g in out], "affinity_groups")
    return out


CLUSTER_FIELDS = (
    "name", "description", "state", "kubernetes_version", "control_nodes", "workers", "etcd_nodes",
    "external_nodes", "offering", "node_offerings", "root_disk_size", "root_disk_offering",
    "dedication_group", "affinity_groups", "keypair", "clustertype", "nodes", "id", "workloads", "pdbs",
    "api_endpoint", "account", "project", "storage_pool", "zone", "guest_cidr", "autoscaling",
    *spec_live.CLUSTER_KEYS,
)
# Where the kubeconfig's server points: CKS's load balancer (or port forward) in front of every
# control node, or the first control node itself (a shared network without one).
API_ENDPOINTS = ("load_balancer", "first_control_node")


def _cluster(entry: Any, index: int, spec: dict[str, Any], scale: dict[str, int]) -> dict[str, Any]:
    where = f"clusters[{index}]"
    entry = _mapping(entry, where)
    _unknown(entry, CLUSTER_FIELDS, where)
    offerings = {s["name"] for s in spec["service_offerings"]}
    disks = {d["name"]: d for d in spec["disk_offerings"]}
    groups = {g["name"]: g for g in spec["affinity_groups"]}

    def offering(name: Any, field: str) -> str:
        if name not in offerings:
            raise SpecError(f"{where}.{field}: no service offering named {name!r}")
        return name

    out: dict[str, Any] = {"name": _str(entry.get("name"), f"{where}.name")}
    out["description"] = str(entry.get("description", out["name"]))
    out["id"] = entry.get("id")
    out["state"] = str(entry.get("state", "Running"))
    if out["state"] not in CLUSTER_STATES:
        raise SpecError(f"{where}.state must be one of {', '.join(CLUSTER_STATES)}")
    out["kubernetes_version"] = str(entry.get("kubernetes_version", "1.30.4"))
    out["control_nodes"] = _int(scale.get("control_nodes", entry.get("control_nodes", 1)), f"{where}.control_nodes", 1)
    out["workers"] = _int(scale.get("workers", entry.get("workers", 1)), f"{where}.workers", 0)
    out["etcd_nodes"] = _int(scale.get("etcd_nodes", entry.get("etcd_nodes", 0)), f"{where}.etcd_nodes", 0)
    out["external_nodes"] = _int(entry.get("external_nodes", 0), f"{where}.external_nodes", 0)
    out["offering"] = offering(entry.get("offering", spec["service_offerings"][0]["name"]), "offering")
    node_offerings = _mapping(entry.get("node_offerings"), f"{where}.node_offerings")
    _unknown(node_offerings, NODE_TYPES, f"{where}.node_offerings")
    out["node_offerings"] = {t: offering(n, f"node_offerings.{t}") for t, n in node_offerings.items() if n}
    out["root_disk_size"] = _int(entry.get("root_disk_size", 20), f"{where}.root_disk_size", 1)
    root_disk = entry.get("root_disk_offering")
    if root_disk is not None and root_disk not in disks:
        raise SpecError(f"{where}.root_disk_offering: no disk offering named {root_disk!r}")
    out["root_disk_offering"] = root_disk
    out.update(_owner_ref(entry, where, spec, allow_domain=False))
    pools = [p["name"] for p in spec["storage_pools"]]
    out["storage_pool"] = str(entry.get("storage_pool", pools[0]))
    if out["storage_pool"] not in pools:
        raise SpecError(f"{where}.storage_pool: no storage pool named {out['storage_pool']!r}")
    out.pop("domain")
    zones = [z["name"] for z in spec["zones"]]
    out["zone"] = str(entry.get("zone", zones[0]))
    if out["zone"] not in zones:
        raise SpecError(f"{where}.zone: no zone named {out['zone']!r}; add it to zones")
    if "dedication_group" in entry:
        dedication = entry.get("dedication_group") or None
    else:
        dedication = _default_dedication(spec, out)
    if dedication is not None and groups.get(dedication, {}).get("type") != "ExplicitDedication":
        raise SpecError(f"{where}.dedication_group: {dedication!r} is not an ExplicitDedication affinity group")
    out["dedication_group"] = dedication
    type_groups = _mapping(entry.get("affinity_groups"), f"{where}.affinity_groups")
    _unknown(type_groups, NODE_TYPES, f"{where}.affinity_groups")
    out["affinity_groups"] = {}
    for node_type in NODE_TYPES:
        names = [str(n) for n in _list(type_groups.get(node_type), f"{where}.affinity_groups.{node_type}")]
        for name in names:
            if name not in groups:
                raise SpecError(f"{where}.affinity_groups.{node_type}: no affinity group named {name!r}")
        out["affinity_groups"][node_type] = names
    out["keypair"] = entry.get("keypair", f"{out['name']}-key")
    out["clustertype"] = str(entry.get("clustertype", "CloudManaged"))
    if out["clustertype"] not in ("CloudManaged", "ExternalManaged"):
        raise SpecError(f"{where}.clustertype must be CloudManaged or ExternalManaged")
    out["workloads"] = _list(entry.get("workloads"), f"{where}.workloads") or None
    out["pdbs"] = _list(entry.get("pdbs"), f"{where}.pdbs") or None
    out["nodes"] = _node_overrides(entry.get("nodes"), where, out, offering, groups)
    out["api_endpoint"] = str(entry.get("api_endpoint", "load_balancer"))
    if out["api_endpoint"] not in API_ENDPOINTS:
        raise SpecError(f"{where}.api_endpoint must be one of {', '.join(API_ENDPOINTS)}")
    out["autoscaling"] = autoscaler.parse_spec(entry.get("autoscaling"), f"{where}.autoscaling", SpecError)
    out["guest_cidr"] = _guest_cidr(entry.get("guest_cidr", f"10.1.{index}.0/24"), f"{where}.guest_cidr")
    out.update(_live(spec_live.cluster_keys, entry, where, spec["cloud"]["version"]))
    return out


def _live(parse: Any, *args: Any) -> dict[str, Any]:
    try:
        return dict(parse(*args))
    except spec_live.LiveSpecError as exc:
        raise SpecError(str(exc)) from None


def _guest_cidr(value: Any, where: str) -> str:
    """The cluster network's /24. A loopback one (127.x.y.0/24) is the sim's own: its external etcd
    members then listen on their VM's address, so peer URLs carry the node's IP as on CKS."""
    try:
        network = ipaddress.ip_network(str(value))
    except ValueError:
        raise SpecError(f"{where}: {value!r} is not an IPv4 network like 10.1.0.0/24")
    if network.version != 4 or network.prefixlen != 24:
        raise SpecError(f"{where}: {value!r} must be an IPv4 /24")
    return str(network)


def _default_dedication(spec: dict[str, Any], cluster: dict[str, Any]) -> Optional[str]:
    """CKS adds the owner's ExplicitDedication group to every node it deploys, else its domain's."""
    dedications = [g for g in spec["affinity_groups"] if g["type"] == "ExplicitDedication"]
    if cluster["project"] is not None:
        owned = [g for g in dedications if g["project"] == cluster["project"]]
        domain = next(p["domain"] for p in spec["projects"] if p["name"] == cluster["project"])
    else:
        account = cluster["account"] or spec["account"]["name"]
        primary = account == spec["account"]["name"]
        # A group without an owner belongs to the spec's own account.
        owned = [g for g in dedications if g["account"] == account
                 or (primary and g["account"] is None and g["project"] is None and g["domain"] is None)]
        domain = spec["account"]["domain"] if primary else next(a["domain"] for a in spec["accounts"] if a["name"] == account)
    if owned:
        return owned[0]["name"]
    return next((g["name"] for g in dedications if g["domain"] == domain), None)


def _node_overrides(raw: Any, where: str, cluster: dict[str, Any], offering: Any, groups: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-node deviations, e.g. one worker already on another offering or left Stopped."""
    counts = {"control": cluster["control_nodes"], "worker": cluster["workers"] + cluster["external_nodes"],
              "etcd": cluster["etcd_nodes"]}
    out = []
    for i, entry in enumerate(_list(raw, f"{where}.nodes")):
        here = f"{where}.nodes[{i}]"
        entry = _mapping(entry, here)
        _unknown(entry, ("type", "index", "offering", "root_disk_size", "state", "affinity_groups", "etcd_member_name"), here)
        node_type = entry.get("type")
        if node_type not in NODE_TYPES:
            raise SpecError(f"{here}.type must be one of {', '.join(NODE_TYPES)}")
        idx = _int(entry.get("index", 0), f"{here}.index")
        if idx >= counts[node_type]:
            raise SpecError(f"{here}.index {idx}: the cluster has only {counts[node_type]} {node_type} node(s)")
        override: dict[str, Any] = {"type": node_type, "index": idx}
        if "offering" in entry:
            override["offering"] = offering(entry["offering"], f"nodes[{i}].offering")
        if "root_disk_size" in entry:
            override["root_disk_size"] = _int(entry["root_disk_size"], f"{here}.root_disk_size", 1)
        if "state" in entry:
            if entry["state"] not in VM_START_STATES:
                raise SpecError(f"{here}.state must be one of {', '.join(VM_START_STATES)}")
            override["state"] = entry["state"]
        if "affinity_groups" in entry:
            names = [str(n) for n in _list(entry["affinity_groups"], f"{here}.affinity_groups")]
            for name in names:
                if name not in groups:
                    raise SpecError(f"{here}.affinity_groups: no affinity group named {name!r}")
            override["affinity_groups"] = names
        if "etcd_member_name" in entry:
            # A member replaced by hand with another --name: its name no longer is its node's.
            if node_type != "etcd":
                raise SpecError(f"{here}.etcd_member_name: only an external etcd node's member can be named apart")
            override["etcd_member_name"] = _str(entry["etcd_member_name"], f"{here}.etcd_member_name")
        out.append(override)
    return out


# --- repeatable identities ------------------------------------------------------------------


class IdFactory:
    """uuid4 values from a seeded generator, so the same spec gives the same IDs."""

    def __init__(self, seed: int, kind: str = "ids") -> None:
        # ``kind`` gives an independent sequence (hosts added later, host clusters, dedications),
        # so new entities never shift the IDs a spec always had.
        self._random = random.Random(f"cks-sim-{kind}-{seed}")

    def uuid(self) -> str:
        return str(uuid.UUID(int=self._random.getrandbits(128), version=4))


_DNS_LABEL = re.compile(r"^[a-z]([a-z0-9-]*[a-z0-9])?$")


def node_name_prefix(cluster_name: str, cluster_id: str) -> str:
    """CKS's host name prefix for control and worker VMs (reference §1.1)."""
    lowered = cluster_name.lower()
    if _DNS_LABEL.match(lowered):
        return lowered[:43]
    stripped = re.sub(r"[^a-z0-9-]", "", lowered)
    return "k8s-" + (stripped or cluster_id)[:39]


def control_vm_name(prefix: str, created_ms: int) -> str:
    return f"{prefix}-control-{created_ms:x}"


def worker_vm_name(prefix: str, created_ms: int) -> str:
    return f"{prefix}-node-{created_ms:x}"


def etcd_vm_name(cluster_name: str, index: int, created_ms: int) -> str:
    """``<name>-etcd-<index>-<hex>``; name stripped to [a-zA-Z0-9-], name+"-etcd" cut to 40."""
    name = cluster_name if re.fullmatch(r"[a-zA-Z0-9-]+", cluster_name) else re.sub(r"[^a-zA-Z0-9-]", "", cluster_name)
    base = (name + "-etcd")[:40]
    return f"{base}-{index}-{created_ms:x}"


def created_ms(spec: dict[str, Any]) -> int:
    when = datetime.fromisoformat(spec["created"])
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return int(when.timestamp() * 1000)


def node_type_of(vm_name: str, is_etcd: bool) -> str:
    if is_etcd:
        return "etcd"
    return "control" if re.search(r"-control-[0-9a-f]+$", vm_name) else "worker"
