# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Whether CloudStack's deployment planner can place the nodes a change puts into strict groups.

A node's start after its change is planned by ``DeploymentPlanningManagerImpl``: the affinity
processors build the set of hosts to avoid from the VM's groups, and only hosts that are Up and
Enabled (``resourcestate``) with room for the VM's offering are tried; nothing left answers 533
("Unable to create a deployment for ..."). The strict groups decide whether room exists at all:

- ``host anti-affinity`` (``HostAntiAffinityProcessor``): every other member with a host (or
  stopped within ``vm.capacity.release.interval``, its last host) is avoided, so each member
  needs a host of its own; listVirtualMachines does not name a stopped VM's last host, so a member
  stopped that recently (its ``lastupdated``) counts as keeping one of the hosts with room;
- ``host affinity`` (``HostAffinityProcessor``): a member goes only where the placed members
  are, so all members need one host with room for all of them;
- an ``ExplicitDedication`` group (``ExplicitDedicationProcessor``): only the resources (hosts,
  clusters, pods, zones) dedicated to it;
- without one, ``checkForNonDedicatedResources`` avoids every dedicated host, cluster and pod, and
  a zone dedicated to another account takes no VM of the owner (``dedication``).

Room is counted as ``CapacityManagerImpl.checkIfHostHasCapacity`` does: CPU in MHz (cores times
the offering's speed) against the host's total after the cluster's ``cpu.overprovisioning.factor``
(listHosts ``cpuwithoverprovisioning``), memory in bytes against ``memorywithoverprovisioning``,
less what is allocated (``cpuallocatedvalue``, ``memoryallocatedbytes``); a node's own allocation
is freed once it is stopped. Pure: the reads come in as ``PlacementReads``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.dedication import DedicatedResource, closed_zone, covering
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node import change_plan
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import PARAM_AFFINITY, PARAM_OFFERINGS, Settings
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ClusterView, Node

ANTI_AFFINITY = "host anti-affinity"
AFFINITY = "host affinity"
STRICT_TYPES = (ANTI_AFFINITY, AFFINITY)
MIB = 1024 * 1024
#: The states in which a VM holds its host (VirtualMachine.State with a hostId).
HOLDING = ("Starting", "Running", "Stopping", "Migrating")


def _num(value: Any) -> int:
    try:
        return int(float(str(value)))
    except (TypeError, ValueError):
        return 0


@dataclass(frozen=True)
class HostRoom:
    """One host as listHosts answers a root admin."""

    id: str
    name: str
    state: str
    resource_state: str
    zone_id: Optional[str]
    pod_id: Optional[str]
    cluster_id: Optional[str]
    cpu_speed: int  # MHz per core
    cpu_mhz: int  # with overprovisioning
    cpu_used_mhz: int
    memory: int  # bytes, with overprovisioning
    memory_used: int

    @classmethod
    def from_listed(cls, raw: Mapping[str, Any]) -> HostRoom:
        speed = _num(raw.get("cpuspeed"))
        cpu = _num(raw.get("cpuwithoverprovisioning")) or _num(raw.get("cpunumber")) * speed
        memory = _num(raw.get("memorywithoverprovisioning")) or _num(raw.get("memorytotal"))
        used_memory = raw.get("memoryallocatedbytes", raw.get("memoryallocated"))
        return cls(id=str(raw.get("id")), name=str(raw.get("name") or raw.get("id")), state=str(raw.get("state") or ""),
                   resource_state=str(raw.get("resourcestate") or "Enabled"),
                   zone_id=_opt(raw.get("zoneid")), pod_id=_opt(raw.get("podid")), cluster_id=_opt(raw.get("clusterid")),
                   cpu_speed=speed, cpu_mhz=cpu, cpu_used_mhz=_num(raw.get("cpuallocatedvalue")),
                   memory=memory, memory_used=_num(used_memory))

    @property
    def usable(self) -> bool:
        """The planner tries only hosts that are Up and Enabled (not Disabled, in Maintenance, Down...)."""
        return self.state == "Up" and self.resource_state == "Enabled"


def _opt(value: Any) -> Optional[str]:
    return None if value in (None, "") else str(value)


@dataclass(frozen=True)
class Member:
    """A VM of a strict group now (listVirtualMachines ``affinitygroupid``)."""

    vm_id: str
    name: str
    state: str
    host_id: Optional[str]
    updated: Optional[str] = None  # lastupdated: when its state last changed

    @classmethod
    def from_listed(cls, raw: Mapping[str, Any]) -> Member:
        return cls(str(raw.get("id")), str(raw.get("name") or raw.get("id")), str(raw.get("state") or ""),
                   _opt(raw.get("hostid")), _opt(raw.get("lastupdated")))

    @property
    def holds_host(self) -> bool:
        return self.host_id is not None and self.state in HOLDING

    def recently_stopped(self, now: Optional[datetime], interval: float) -> bool:
        """Stopped less than ``interval`` seconds ago (its ``lastupdated``): HostAntiAffinityProcessor
        still avoids its last host for the other members, as the capacity it keeps there."""
        if now is None or self.state != "Stopped" or self.updated is None:
            return False
        try:
            stopped = datetime.strptime(self.updated, "%Y-%m-%dT%H:%M:%S%z")
        except ValueError:
            return False
        return (now - stopped).total_seconds() < interval


@dataclass(frozen=True)
class Dedication:
    """What is dedicated to an ExplicitDedication group (listAffinityGroups ``dedicatedresources``)."""

    name: str
    resources: tuple[tuple[str, str], ...]  # (resourcetype, resourceid)

    @classmethod
    def from_listed(cls, raw: Mapping[str, Any]) -> Dedication:
        found = tuple((str(r.get("resourcetype") or ""), str(r.get("resourceid") or ""))
                      for r in raw.get("dedicatedresources") or [] if isinstance(r, Mapping))
        return cls(str(raw.get("name") or raw.get("id")), found)

    def holds(self, host: HostRoom) -> bool:
        if not self.resources:
            return True  # nothing dedicated: the processor leaves the hosts as they are
        where = {"Host": host.id, "Cluster": host.cluster_id, "Pod": host.pod_id, "Zone": host.zone_id}
        return any(where.get(kind) == rid for kind, rid in self.resources)


@dataclass(frozen=True)
class PlacementReads:
    """What the prediction needs, read by a root admin key."""

    hosts: tuple[HostRoom, ...]
    members: Mapping[str, tuple[Member, ...]] = field(default_factory=dict)  # group id -> its VMs now
    dedications: Mapping[str, Dedication] = field(default_factory=dict)  # dedication group id -> its resources
    #: What listDedicated{Hosts,Clusters,Pods,Zones} answered; None when the key may not list them.
    dedicated: Optional[tuple[DedicatedResource, ...]] = None
    #: When the members were read, and vm.capacity.release.interval (CloudStack's default, 3600 s).
    now: Optional[datetime] = None
    release_interval: float = 3600.0


@dataclass(frozen=True)
class PlacementRefusal:
    """A strict group whose members the planner could not all place: no node of it is touched."""

    group: str
    group_type: str
    nodes: tuple[str, ...]
    node_type: str
    members: int
    hosts: int
    why: str
    change: str

    @property
    def message(self) -> str:
        return f"affinity group {self.group} ({', '.join(self.nodes)}): {self.why}; {self.change}"

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "group_type": self.group_type, "nodes": list(self.nodes),
                "node_type": self.node_type, "members": self.members, "hosts": self.hosts, "why": self.why,
                "change": self.change, "message": self.message}


def target_group_ids(node: Node, settings: Settings) -> tuple[str, ...]:
    """The groups the node has once its change is made."""
    plan = change_plan(node, settings[node.node_type])
    return tuple(plan.affinity_groups.to) if plan.affinity_groups is not None else tuple(g.id for g in node.affinity_groups)


def strict_groups_changed(view: ClusterView, settings: Settings, nodes: Sequence[Node]) -> dict[str, list[Node]]:
    """The strict groups a change puts planned nodes into (a new group, or a new offering within
    one), each with every planned node that is in it after its change, in plan order."""
    triggered: set[str] = set()
    members: dict[str, list[Node]] = {}
    for node in nodes:
        plan = change_plan(node, settings[node.node_type])
        before = {g.id for g in node.affinity_groups}
        for gid in target_group_ids(node, settings):
            group = view.group(gid)
            if group is None or group.type not in STRICT_TYPES:
                continue
            members.setdefault(gid, []).append(node)
            if gid not in before or plan.offering is not None:
                triggered.add(gid)
    return {gid: found for gid, found in members.items() if gid in triggered}


def placement_needed(view: ClusterView, settings: Settings, nodes: Sequence[Node]) -> bool:
    return bool(strict_groups_changed(view, settings, nodes))


def _need(view: ClusterView, node: Node, settings: Settings, host: HostRoom) -> tuple[int, int]:
    """CPU MHz and memory bytes the node asks of ``host`` once changed, less what it holds there now."""
    offering_id = settings[node.node_type].offering_id or node.offering_id
    offering = view.offerings.get(str(offering_id)) if offering_id else None
    cores, memory_mb = (offering.cpu, offering.memory_mb) if offering is not None and not offering.customized \
        else (node.cpu, node.memory_mb)
    speed = (offering.cpu_speed_mhz if offering is not None else 0) or host.cpu_speed
    cpu, memory = cores * speed, memory_mb * MIB
    if node.host_id == host.id and node.vm_state in HOLDING:
        old = view.offerings.get(node.offering_id or "")
        cpu -= node.cpu * ((old.cpu_speed_mhz if old is not None else 0) or host.cpu_speed)
        memory -= node.memory_mb * MIB
    return cpu, memory


def _fits(host: HostRoom, cpu: int, memory: int) -> bool:
    return host.cpu_used_mhz + cpu <= host.cpu_mhz and host.memory_used + memory <= host.memory


def _holds_all(view: ClusterView, settings: Settings, nodes: Sequence[Node], host: HostRoom) -> bool:
    needs = [_need(view, n, settings, host) for n in nodes]
    return _fits(host, sum(c for c, _m in needs), sum(m for _c, m in needs))


def _match(nodes: Sequence[Node], hosts: Sequence[HostRoom], fits: Any) -> int:
    """How many ``nodes`` get a host of their own (a maximum bipartite matching, Kuhn's)."""
    owner: dict[str, int] = {}

    def take(i: int, seen: set[str]) -> bool:
        for host in hosts:
            if host.id in seen or not fits(nodes[i], host):
                continue
            seen.add(host.id)
            if host.id not in owner or take(owner[host.id], seen):
                owner[host.id] = i
                return True
        return False

    return sum(1 for i in range(len(nodes)) if take(i, set()))


def _where(view: ClusterView, dedications: Sequence[Dedication]) -> str:
    zone = f"zone {view.zone_id}" if view.zone_id else "the cluster's zone"
    return zone + "".join(f" dedicated to {d.name}" for d in dedications if d.resources)


def _not_dedicated_elsewhere(hosts: Sequence[HostRoom], dedicated: Sequence[DedicatedResource],
                             carried: bool) -> tuple[list[HostRoom], list[tuple[HostRoom, DedicatedResource]]]:
    """The hosts checkForNonDedicatedResources leaves to nodes without a dedication group, and the
    ones it avoids with the dedication that does it (a node with one is placed by its group)."""
    if carried:
        return list(hosts), []
    kept, avoided = [], []
    for host in hosts:
        found = covering(host.id, host.cluster_id, host.pod_id, dedicated)
        if found is None:
            kept.append(host)
        else:
            avoided.append((host, found))
    return kept, avoided


def _avoided_text(avoided: Sequence[tuple[HostRoom, DedicatedResource]]) -> str:
    if not avoided:
        return ""
    named = ", ".join(f"host {h.name} (dedicated to {d.owner}" + ("" if d.kind == "Host" else f" with its {d.label}") + ")"
                      for h, d in avoided)
    return (f"; not counted: {named}, which the planner never uses for a VM without that dedication "
            "(DeploymentPlanningManagerImpl.checkForNonDedicatedResources)")


def _recent_text(recent: Sequence[Member], interval: float) -> str:
    if not recent:
        return ""
    names = ", ".join(m.name for m in recent)
    return (f"; {len(recent)} of those kept by {names}, stopped less than vm.capacity.release.interval "
            f"({interval:g} s) ago: the planner still avoids a stopped member's last host, which listVirtualMachines "
            "does not name")


def _release_text(avoided: Sequence[tuple[HostRoom, DedicatedResource]]) -> str:
    labels = list(dict.fromkeys(d.label for _h, d in avoided))
    return f", or release the dedication of {', '.join(labels)}" if labels else ""


def placement_refusals(view: ClusterView, settings: Settings, nodes: Sequence[Node],
                       reads: PlacementReads) -> list[PlacementRefusal]:
    """The strict groups whose members the planner could not all place after the change (see the module)."""
    refusals: list[PlacementRefusal] = []
    changed = strict_groups_changed(view, settings, nodes)
    for gid in sorted(changed):
        group = view.group(gid)
        if group is None:
            continue
        moving = changed[gid]
        moving_ids = {n.vm_id for n in moving}
        others = [m for m in reads.members.get(gid, ()) if m.vm_id not in moving_ids]
        # Nodes of the cluster not in the plan but in the group are members too, listed or not.
        listed = {m.vm_id for m in others}
        for node in view.nodes:
            if node.vm_id not in moving_ids and node.vm_id not in listed and gid in {g.id for g in node.affinity_groups}:
                others.append(Member(node.vm_id, node.name, node.vm_state, node.host_id))
        dedications = [reads.dedications[d] for n in moving for d in target_group_ids(n, settings)
                       if d in reads.dedications]
        carried = any(g is not None and g.is_dedication for n in moving for g in map(view.group, target_group_ids(n, settings)))
        in_zone = [h for h in reads.hosts if h.usable and (view.zone_id is None or h.zone_id in (None, view.zone_id))]
        eligible, avoided = _not_dedicated_elsewhere(in_zone, reads.dedicated or (), carried)
        eligible = [h for h in eligible if all(d.holds(h) for d in dedications)]
        closed, _unsure = closed_zone(view.zone_id, reads.dedicated or (), view.account, view.domain_id)
        if closed is not None:
            refusals.append(PlacementRefusal(
                group.name, group.type, tuple(n.name for n in moving), moving[0].node_type, len(moving), 0,
                f"{closed.label} is dedicated to {closed.owner}, so CloudStack's deployment planner refuses the start "
                "of every VM of the cluster's owner there once it is stopped "
                "(DeploymentPlanningManagerImpl.checkForNonDedicatedResources)",
                f"release the dedication of {closed.label} (releaseDedicatedZone) or dedicate it to the cluster's owner"))
            continue
        placed = {m.host_id for m in others if m.holds_host}
        node_type = moving[0].node_type
        members = len(others) + len(moving)
        where = _where(view, list(dict.fromkeys(dedications)))
        offering = settings[node_type].offering_id or moving[0].offering_id
        size = view.offering_name(offering)

        def fits(node: Node, host: HostRoom) -> bool:
            return _fits(host, *_need(view, node, settings, host))

        if group.type == ANTI_AFFINITY:
            free = [h for h in eligible if h.id not in placed]
            roomy = [h for h in free if any(fits(n, h) for n in moving)]
            recent = [m for m in others if m.recently_stopped(reads.now, reads.release_interval)]
            # Which host a recently stopped member keeps avoided is not listed: count the worst, one
            # of those with room each.
            short = max(len(moving) - _match(moving, free, fits), len(moving) + len(recent) - len(roomy))
            if short <= 0:
                continue
            holding = len(placed & {h.id for h in eligible}) + len(roomy)
            refusals.append(PlacementRefusal(
                group.name, group.type, tuple(n.name for n in moving), node_type, members, holding,
                f"a strict host anti-affinity group puts each of its {members} members on a host of its own, and only "
                f"{holding} Up and Enabled hosts of {where} can hold them ({len(placed)} taken by members already "
                f"placed, {len(roomy)} more with room for {size}){_recent_text(recent, reads.release_interval)}"
                f"{_avoided_text(avoided)}; CloudStack's deployment "
                f"planner would refuse the start with 533 once the node is stopped (HostAntiAffinityProcessor)",
                f"add at least {short} Up and Enabled host(s) with room for {size} to {where} (or enable one in "
                f"Maintenance or Disabled{_release_text(avoided)}), or give {PARAM_AFFINITY}.{node_type} a non-strict host anti-affinity "
                f"group, or choose a smaller {PARAM_OFFERINGS}.{node_type}"))
        elif group.type == AFFINITY:
            candidates = [h for h in eligible if not placed or h.id in placed]
            if any(_holds_all(view, settings, moving, h) for h in candidates):
                continue
            on = ("the host its placed members are on" if placed else f"any Up and Enabled host of {where}")
            refusals.append(PlacementRefusal(
                group.name, group.type, tuple(n.name for n in moving), node_type, members, 0,
                f"a strict host affinity group puts all its {members} members on one host, and {on} has no room "
                f"for {len(moving)} node(s) on {size}{_avoided_text(avoided)}; CloudStack's deployment planner would "
                "refuse the start with 533 once the node is stopped (HostAffinityProcessor)",
                f"free room on that host, give {PARAM_AFFINITY}.{node_type} a non-strict host affinity group, or "
                f"choose a smaller {PARAM_OFFERINGS}.{node_type}"))
    return refusals


def placement_error(refusals: Sequence[PlacementRefusal]) -> Optional[str]:
    """One message for the plan: the groups whose members could not be placed."""
    if not refusals:
        return None
    return ("CloudStack's deployment planner could not place these nodes once they are stopped, so no node was "
            "touched: " + " | ".join(r.message for r in refusals))


def not_checked_note(why: str) -> str:
    """The plan's note when the hosts cannot be read: the prediction is named, never guessed."""
    return (f"this key cannot list the zone's hosts ({why}): whether CloudStack's deployment planner can place "
            "the nodes of the strict affinity groups this change puts them into was not checked; a start it "
            "refuses puts the node back on what it had")


def start_one_by_one(view: ClusterView, settings: Settings, nodes: Sequence[Node]) -> dict[str, tuple[str, ...]]:
    """For each node of a batch, the strict groups it shares with another node of the batch (before or
    after its change): their starts go one after another. Two starts of one strict group at the
    same moment may both pass ``HostAntiAffinityProcessor``'s check, each before the other VM has
    a host, and land on one host (CloudStack's issue 9110)."""
    strict: dict[str, set[str]] = {}
    for node in nodes:
        ids = {g.id for g in node.affinity_groups} | set(target_group_ids(node, settings))
        found = [view.group(gid) for gid in ids]
        strict[node.name] = {g.id for g in found if g is not None and g.type in STRICT_TYPES}
    shared: dict[str, tuple[str, ...]] = {}
    for name, groups in strict.items():
        others = set().union(*(g for other, g in strict.items() if other != name))
        shared[name] = tuple(sorted(groups & others))
    return shared
