# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Whether the API key may send every command the rollout will, judged before the lock.

A role without a command, and from CloudStack 4.23 an API key pair whose own rules leave it out
(``api_keypair_permissions``, apache/cloudstack pull requests 9504 and 13828), is answered 432
"The API [X] does not exist or is not available for the account ..." by
``DynamicRoleBasedAPIAccessChecker.checkAccess``. A key that may stop a VM but not change its
groups or start it again would leave the node down: so before the lock, ``listApis`` (which lists
only what the key may call) is compared with the commands the plan will send, per node type:

- every node: ``stopVirtualMachine`` and ``startVirtualMachine`` (also the put-back's start), the
  reads of a node's cycle (``listVirtualMachines``, ``queryAsyncJobResult``, and ``listAsyncJobs``
  that settles a change whose answer was lost);
- a new offering: ``changeServiceForVirtualMachine`` (also the put-back's previous offering);
- new affinity groups: ``updateVMAffinityGroup`` (also the put-back's previous groups);
- a larger root disk: ``resizeVolume`` and ``listVolumes``.

The live path (``rollout_live_scale: auto``) sends ``scaleVirtualMachine`` and reads
``listServiceOfferings`` and ``listCapabilities`` to decide: a key without one of them has the plan's
live-path nodes planned on the restart path, with the reason, and the batches run without the live
path, instead of a refusal of the scale after the lock. A node whose VM has its offering already
would only restart its kubelet, which no CloudStack command does; it restarts too, so that what the
plan shows is what the batches do.

A key pair's end date (``listUserKeys``' ``enddate``; after it every call is answered 401) that
falls within the rollout's longest expected time gets a warning naming it. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node import change_plan
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import Node

EVERY_NODE = ("stopVirtualMachine", "startVirtualMachine", "listVirtualMachines", "queryAsyncJobResult",
              "listAsyncJobs")
FOR_OFFERING = ("changeServiceForVirtualMachine",)
FOR_GROUPS = ("updateVMAffinityGroup",)
FOR_ROOT_DISK = ("resizeVolume", "listVolumes")
FOR_LIVE_PATH = ("scaleVirtualMachine", "listServiceOfferings", "listCapabilities")
#: CloudStack's date format (``2026-12-07T05:00:00+0000``).
DATE_FORMAT = "%Y-%m-%dT%H:%M:%S%z"


@dataclass(frozen=True)
class ApiAccessReads:
    """What the key may call (listApis' names; None when it could not be listed) and its end date."""

    allowed: Optional[frozenset[str]]
    key_name: Optional[str] = None
    key_end: Optional[str] = None  # listUserKeys' enddate, as CloudStack writes it


@dataclass(frozen=True)
class MissingCommand:
    command: str
    node_types: tuple[str, ...]
    nodes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"command": self.command, "node_types": list(self.node_types), "nodes": list(self.nodes)}


def needed_commands(settings: Settings, nodes: Sequence[Node]) -> dict[str, list[Node]]:
    """Each command the plan's node cycles (and their put-backs) send, with the nodes that send it."""
    needed: dict[str, list[Node]] = {}
    for node in nodes:
        plan = change_plan(node, settings[node.node_type])
        commands = list(EVERY_NODE)
        if plan.offering is not None:
            commands += FOR_OFFERING
        if plan.affinity_groups is not None:
            commands += FOR_GROUPS
        if plan.root_disk is not None:
            commands += FOR_ROOT_DISK
        for command in commands:
            needed.setdefault(command, []).append(node)
    return needed


def missing_commands(settings: Settings, nodes: Sequence[Node], reads: ApiAccessReads) -> list[MissingCommand]:
    """The commands the plan needs that the key may not call (none when listApis could not be read)."""
    if reads.allowed is None:
        return []
    missing = []
    for command, senders in sorted(needed_commands(settings, nodes).items()):
        if command not in reads.allowed:
            types = tuple(dict.fromkeys(n.node_type for n in senders))
            missing.append(MissingCommand(command, types, tuple(n.name for n in senders)))
    return missing


def live_path_refusal(reads: ApiAccessReads) -> Optional[str]:
    """Why the live path cannot scale a VM with this key (None: it may, or listApis was not read)."""
    if reads.allowed is None:
        return None
    missing = [c for c in FOR_LIVE_PATH if c not in reads.allowed]
    return f"the API key may not call {', '.join(missing)}" if missing else None


def without_live_scale(result: Mapping[str, Any], why: str) -> dict[str, Any]:
    """``result`` (a plan with ``live_paths``) with each planned live node on the restart path for
    ``why``, and ``live_scale_refused`` (the batches run with ``live_scale: never``)."""
    planned = result.get("live_paths")
    if not planned:
        return dict(result)
    live = set(planned["live"])
    nodes = [dict(r, path={"path": "restart", "reason": why}) if r.get("name") in live else r
             for r in result.get("nodes") or []]
    paths = {"live": [], "restart": list(planned["restart"]) + list(planned["live"])}
    return dict(result, nodes=nodes, live_paths=paths, live_scale_refused=why)


def api_access_error(missing: Sequence[MissingCommand], key_name: Optional[str] = None) -> Optional[str]:
    """One message naming each command the key may not call and the node types that need it."""
    if not missing:
        return None
    key = f"the API key pair {key_name}" if key_name else "this API key"
    named = "; ".join(f"{m.command} (needed by the {', '.join(m.node_types)} node(s): {', '.join(m.nodes)})"
                      for m in missing)
    return (f"{key} may not call every command the rollout sends (listApis does not list them; CloudStack would "
            f"answer 432 once a node is stopped, leaving it down): {named}. Give the key's rules (4.23 API key "
            "pairs: listUserKeyRules) or the account's role these commands, or run with a key that has them")


def parse_date(text: str) -> Optional[datetime]:
    try:
        return datetime.strptime(text, DATE_FORMAT)
    except (TypeError, ValueError):
        return None


def longest_expected_seconds(batches: int, batch_timeout: float) -> float:
    """The longest the rollout is expected to take: each batch may take up to ``batch_timeout``."""
    return max(1, batches) * float(batch_timeout)


def expiry_warning(reads: ApiAccessReads, now: datetime, batches: int, batch_timeout: float) -> Optional[str]:
    """A warning when the key pair ends within the rollout's longest expected time (or has ended)."""
    end = parse_date(reads.key_end) if reads.key_end else None
    if end is None:
        return None
    longest = longest_expected_seconds(batches, batch_timeout)
    if end > now + timedelta(seconds=longest):
        return None
    key = f"API key pair {reads.key_name}" if reads.key_name else "The API key"
    when = end.astimezone(timezone.utc).strftime(DATE_FORMAT)
    return (f"{key} expires at {when}, within the rollout's longest expected time ({batches} batch(es) x "
            f"batch_timeout {batch_timeout:g} s = {longest / 3600:.1f} h from now): from then on CloudStack answers "
            "every call 401 and a node stopped by then stays down until a run with a valid key; renew the key "
            "(a new key pair, or a later end date) before the rollout")


def key_entry(listed: Sequence[Mapping[str, Any]], api_key: str) -> Optional[Mapping[str, Any]]:
    """The listUserKeys entry of the key the calls are signed with."""
    return next((k for k in listed if k.get("apikey") == api_key), None)
