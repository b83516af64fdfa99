# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Which hosts CloudStack's deployment planner keeps a node off because they are dedicated.

``DeploymentPlanningManagerImpl.checkForNonDedicatedResources`` runs for every user VM:

- a zone dedicated to an account fails the deployment of any other account's VM, and one
  dedicated to a domain that of a VM whose owner's domain may not use the domain's dedication
  group (a root admin's VM is not checked);
- a VM without an ExplicitDedication group gets every dedicated pod, cluster and host of the zone
  in its avoid list, whoever they are dedicated to; one with such a group is placed by
  ``ExplicitDedicationProcessor`` on its group's resources only (``placement.Dedication``).

So a host dedicated to another account or domain is never room for our nodes, and neither is one
dedicated to the owner when the nodes do not carry its dedication group. The listings
(``listDedicatedHosts``, ``listDedicatedClusters``, ``listDedicatedPods``, ``listDedicatedZones``,
root admin commands) come in as ``DedicatedResource``. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

#: The resource types as the listings and ``dedicatedresources`` name them, with their list commands.
KINDS = ("Zone", "Pod", "Cluster", "Host")
LIST_COMMANDS = {kind: f"listDedicated{kind}s" for kind in KINDS}


def _opt(value: Any) -> Optional[str]:
    return None if value in (None, "") else str(value)


@dataclass(frozen=True)
class DedicatedResource:
    """One dedication as ``listDedicated<Kind>s`` answers it (Dedicate<Kind>Response)."""

    kind: str  # Zone, Pod, Cluster or Host
    id: str  # the resource's ID
    name: str
    domain_id: Optional[str]
    domain_name: Optional[str]
    account_id: Optional[str]  # None: dedicated to the domain
    account_name: Optional[str]
    group_id: Optional[str]  # the ExplicitDedication group dedicateX made for its owner

    @classmethod
    def from_listed(cls, kind: str, raw: Mapping[str, Any]) -> DedicatedResource:
        key = kind.lower()
        rid = str(raw.get(f"{key}id") or "")
        return cls(kind, rid, str(raw.get(f"{key}name") or rid), _opt(raw.get("domainid")), _opt(raw.get("domainname")),
                   _opt(raw.get("accountid")), _opt(raw.get("accountname")), _opt(raw.get("affinitygroupid")))

    @property
    def owner(self) -> str:
        """Who it is dedicated to, in the operator's words."""
        domain = self.domain_name or self.domain_id or "?"
        if self.account_name or self.account_id:
            return f"account {self.account_name or self.account_id} of domain {domain}"
        return f"domain {domain}"

    @property
    def label(self) -> str:
        return f"{self.kind.lower()} {self.name}"

    def is_owned_by(self, account: Optional[str], domain_id: Optional[str]) -> Optional[bool]:
        """Whether it is dedicated to the cluster's owner: True, False, or None when only a domain
        tree could tell (dedicated to another domain, which may be above the owner's)."""
        if self.account_name or self.account_id:
            return account is not None and self.account_name == account and self.domain_id == domain_id
        if self.domain_id == domain_id:
            return True
        return None


def covering(host_id: str, cluster_id: Optional[str], pod_id: Optional[str],
             dedicated: Sequence[DedicatedResource]) -> Optional[DedicatedResource]:
    """The dedication that puts the host in a VM's avoid list when the VM has no dedication group:
    the host's own, else its cluster's, else its pod's (the narrowest names it best)."""
    for kind, rid in (("Host", host_id), ("Cluster", cluster_id), ("Pod", pod_id)):
        for found in dedicated:
            if found.kind == kind and rid is not None and found.id == rid:
                return found
    return None


def closed_zone(zone_id: Optional[str], dedicated: Sequence[DedicatedResource], account: Optional[str],
                domain_id: Optional[str]) -> tuple[Optional[DedicatedResource], Optional[str]]:
    """The zone's dedication when it fails every start of the owner's VMs, and a note when it cannot
    be told from here (a domain dedication of a domain other than the owner's)."""
    for found in dedicated:
        if found.kind != "Zone" or zone_id is None or found.id != zone_id:
            continue
        owned = found.is_owned_by(account, domain_id)
        if owned is False:
            return found, None
        if owned is None:
            return None, (f"zone {found.name} is dedicated to {found.owner}: whether the cluster's owner is in that "
                          "domain (the planner refuses every start otherwise) was not checked")
    return None, None


def dedication_note(why: str) -> str:
    """The plan's note when the dedications cannot be listed: counted as if nothing were dedicated."""
    return (f"this key cannot list the dedicated hosts, clusters, pods and zones ({why}): a host dedicated to "
            "another account or domain, which CloudStack's deployment planner never uses for these nodes, was "
            "counted as room")
