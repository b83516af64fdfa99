# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The reads behind the placement prediction (``_decisions.placement``), made only when a change
puts planned nodes into a strict host (anti-)affinity group.

listHosts is a root admin's command: any other key is answered "not available for the user" (401
or 432 depending on the version), and the prediction is then a ``not_checked`` note, never a guess.
With it: the zone's routing hosts (paged as every list), each strict group's VMs now
(listVirtualMachines ``affinitygroupid``, with their ``hostid``) and, where the nodes carry an
ExplicitDedication group, what is dedicated to it (listAffinityGroups of a node's VM answers its
groups with ``dedicatedresources``), and what is dedicated in the cloud (``_clients.dedication``):
a host dedicated to another account is no room for the nodes.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.dedication import read_dedicated
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError
from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import CloudStackApi
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.dedication import closed_zone
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.placement import (
    Dedication,
    HostRoom,
    Member,
    PlacementReads,
    not_checked_note,
    strict_groups_changed,
    target_group_ids,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ClusterView, Node


def read_placement(cloud: CloudStackApi, view: ClusterView, settings: Settings,
                   nodes: Sequence[Node]) -> tuple[Optional[PlacementReads], list[str]]:
    """The reads for ``nodes``' strict groups (None when none is needed or the key cannot), and notes."""
    changed = strict_groups_changed(view, settings, nodes)
    if not changed:
        return None, []
    try:
        zone: dict[str, Any] = {"zoneid": view.zone_id} if view.zone_id else {}
        hosts = cloud.list("listHosts", type="Routing", **zone)
    except CksError as exc:
        return None, [not_checked_note(exc.msg)]
    scope: dict[str, Any] = {"projectid": view.project_id} if view.project_id else {}
    notes: list[str] = []
    members = {}
    for gid in sorted(changed):
        try:
            listed = cloud.list("listVirtualMachines", affinitygroupid=gid, listall=True, **scope)
        except CksError as exc:
            notes.append(f"the VMs of affinity group {gid} could not be listed ({exc.msg}): only the cluster's "
                         "nodes were counted as its members")
            listed = []
        members[gid] = tuple(Member.from_listed(vm) for vm in listed)
    dedications = {}
    wanted: dict[str, Node] = {}
    for found in changed.values():
        for node in found:
            for gid in target_group_ids(node, settings):
                group = view.group(gid)
                if group is not None and group.is_dedication:
                    wanted.setdefault(gid, node)
    for gid, node in sorted(wanted.items()):
        try:
            groups = cloud.list("listAffinityGroups", virtualmachineid=node.vm_id, listall=True, **scope)
        except CksError as exc:
            notes.append(f"what is dedicated to affinity group {gid} could not be read ({exc.msg}): the zone's hosts "
                         "were counted")
            continue
        for raw in groups:
            if str(raw.get("id")) == gid:
                dedications[gid] = Dedication.from_listed(raw)
    dedicated, note = read_dedicated(cloud)
    if note is not None:
        notes.append(note)
    _closed, unsure = closed_zone(view.zone_id, dedicated or (), view.account, view.domain_id)
    if unsure is not None:
        notes.append(unsure)
    return PlacementReads(tuple(HostRoom.from_listed(h) for h in hosts), members, dedications, dedicated,
                          now=datetime.now(timezone.utc)), notes
