# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The changes CloudStack would refuse only once a node's VM is stopped, judged before its drain.

changeServiceForVirtualMachine, resizeVolume and updateVMAffinityGroup need a stopped VM, so
whatever they refuse is refused after the node was drained and stopped. Each rule here is one
such refusal, read from CloudStack's source, judged on what the key can read:

- affinity groups the key may send for the VM (``updateVMAffinityGroup`` replaces the whole list,
  so CKS's ExplicitDedication group is sent again too): ``ParamProcessWorker.doAccessChecks`` runs
  ``AffinityGroupAccessChecker`` on every group before the job (531 for a domain admin or user
  naming an account-level group of another account), and
  ``AffinityGroupServiceImpl.updateVMAffinityGroups`` refuses a root admin a group of another
  account than the VM's (a job failing 530);
- the owner's CPU, memory and primary-storage headroom: ``ResourceLimitManagerImpl
  .checkVmResourceLimitsForServiceOfferingChange`` counts only the growth of each change, and a
  root resize counts ``newSize - currentSize`` (535); stopped VMs count as well
  (resource.count.running.vms.only=false), so every change of a rollout adds to the account's
  total for good and the headroom is spent in plan order;
- the new offering's state and its fit with the VM's storage (``VirtualMachineManagerImpl
  .checkIfCanUpgrade``: ``checkIfNewOfferingStorageScopeMatchesStoragePool``, then the old
  offering's storage tags within the new one's).

Pure: the reads (who the key is, the owner's headroom) come in as ``Caller`` and ``Headroom``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node import ChangePlan, change_plan
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import (
    PARAM_AFFINITY,
    PARAM_OFFERINGS,
    PARAM_ROOT_DISKS,
    Settings,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import AffinityGroup, ClusterView, Node, Offering

ROOT_ADMIN = "root admin"


DOMAIN_ADMIN = "domain admin"


USER = "user"


#: listAccounts' accounttype (Account.Type): 1 ADMIN, 2 DOMAIN_ADMIN, 4 RESOURCE_DOMAIN_ADMIN.
_ACCOUNT_TYPES = {"1": ROOT_ADMIN, "2": DOMAIN_ADMIN, "4": DOMAIN_ADMIN}


RULE_GROUP_ACCESS = "affinity group access"


RULE_GROUP_OWNER = "affinity group owner"


RULE_LIMIT = "resource limit"


RULE_STORAGE = "storage fit"


RULE_OFFERING_STATE = "offering state"


@dataclass(frozen=True)
class Caller:
    """The account the API key belongs to (its own listAccounts entry)."""

    account: str
    domain_id: str
    domain_path: str
    role: str  # ROOT_ADMIN | DOMAIN_ADMIN | USER

    @classmethod
    def from_account(cls, raw: Mapping[str, Any]) -> Caller:
        return cls(account=str(raw.get("name") or ""), domain_id=str(raw.get("domainid") or ""),
                   domain_path=str(raw.get("domainpath") or raw.get("domain") or ""),
                   role=_ACCOUNT_TYPES.get(str(raw.get("accounttype")), USER))

    def owns(self, account: Optional[str], domain_id: Optional[str]) -> bool:
        return account == self.account and domain_id == self.domain_id

    def reaches_path(self, domain_path: str) -> bool:
        """The domain is the key's own or below it (its domain tree)."""
        return domain_path == self.domain_path or domain_path.startswith(self.domain_path.rstrip("/") + "/")


@dataclass(frozen=True)
class Headroom:
    """What the cluster's owner may still grow by; None: unlimited."""

    owner: str  # account alice | project platform
    cpu: Optional[int]  # cores
    memory_mb: Optional[int]
    storage_gb: Optional[int]

    @classmethod
    def from_entry(cls, owner: str, raw: Mapping[str, Any]) -> Headroom:
        """From a listAccounts or listProjects entry (``*available``; primary storage in GiB)."""
        return cls(owner, _available(raw.get("cpuavailable")), _available(raw.get("memoryavailable")),
                   _available(raw.get("primarystorageavailable")))


def _available(value: Any) -> Optional[int]:
    if value in (None, "", "Unlimited") or str(value).strip().lower() == "unlimited":
        return None
    try:
        return int(float(str(value)))
    except ValueError:
        return None


@dataclass(frozen=True)
class StopRefusal:
    """A change of one node CloudStack would refuse once its VM is stopped: the node is not touched."""

    node: str
    node_type: str
    rule: str
    parameter: str
    why: str
    change: str

    @property
    def message(self) -> str:
        return f"{self.node} ({self.parameter}.{self.node_type}): {self.why}; {self.change}"

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "node_type": self.node_type, "rule": self.rule, "parameter": self.parameter,
                "why": self.why, "change": self.change, "message": self.message}


def view_owner(view: ClusterView) -> str:
    return f"project {view.project_id}" if view.project_id else f"account {view.account or '?'}"


@dataclass(frozen=True)
class NeededReads:
    caller: bool  # a group change: who the key is decides which groups it may send
    headroom: bool  # growth of CPU, memory or a root disk


def needed_reads(view: ClusterView, settings: Settings, nodes: Iterable[Node]) -> NeededReads:
    """What must be read to judge these nodes' changes (nothing for nodes already as set)."""
    caller = headroom = False
    for node in nodes:
        plan = change_plan(node, settings[node.node_type])
        caller = caller or plan.affinity_groups is not None
        headroom = headroom or plan.root_disk is not None or bool(_growth(view, node, plan)[:2] != (0, 0))
    return NeededReads(caller, headroom)


def _growth(view: ClusterView, node: Node, plan: ChangePlan) -> tuple[int, int, int]:
    """CPU cores, MiB and GiB this node's changes add to its owner's count (decreases count 0)."""
    cpu = memory = 0
    if plan.offering is not None:
        new = view.offerings.get(str(plan.offering.to))
        if new is not None and not new.customized:
            cpu, memory = max(0, new.cpu - node.cpu), max(0, new.memory_mb - node.memory_mb)
    disk = max(0, int(plan.root_disk.to) - int(plan.root_disk.from_)) if plan.root_disk is not None else 0
    return cpu, memory, disk


def _group_refusal(view: ClusterView, node: Node, group: AffinityGroup, caller: Caller) -> Optional[StopRefusal]:
    """Whether this key may send ``group`` for the node's VM (see the module's docstring)."""
    if group.account is None and group.project_id is None:
        return None  # not listed to this key: its owner is unknown, so it is not judged
    owner = view_owner(view)
    kept = (" (CKS's ExplicitDedication group, which every node keeps, so updateVMAffinityGroup must send it "
            "again)" if group.is_dedication else "")
    if caller.role == ROOT_ADMIN:
        same = (group.project_id == view.project_id if view.project_id or group.project_id
                else (group.account, group.domain_id) == (view.account, view.domain_id))
        if same:
            return None
        return StopRefusal(node.name, node.node_type, RULE_GROUP_OWNER, PARAM_AFFINITY,
                           f"affinity group {group.name}{kept} belongs to {group.owner}, not to the VM's {owner}, "
                           "and CloudStack refuses it (AffinityGroupServiceImpl.updateVMAffinityGroups: the job "
                           "fails 530 \"does not belong to the VM's account\")",
                           f"choose affinity groups of {owner}")
    if group.project_id:
        if caller.role == USER:
            return None  # a user lists a project's groups only as a member, and members may use them
        denied = f"a group of {group.owner}, which a {caller.role} key may send only as a member of that project"
    elif caller.owns(group.account, group.domain_id):
        return None
    elif group.domain_path is not None and not caller.reaches_path(group.domain_path):
        # Another account's account-level group outside the key's domain tree is never listed to
        # it: a group listed from there is a domain-level group of the key's domain or above.
        return None
    else:
        denied = f"an account-level group of {group.owner}, not of the key's account {caller.account}"
    return StopRefusal(node.name, node.node_type, RULE_GROUP_ACCESS, PARAM_AFFINITY,
                       f"updateVMAffinityGroup would send affinity group {group.name}{kept}, {denied}, and CloudStack "
                       f"refuses it before the job (531 \"does not have permission to operate with resource\", "
                       "AffinityGroupAccessChecker)",
                       f"a root admin key (or a key of {owner}) can make this change: run the rollout with one, or "
                       f"leave {PARAM_AFFINITY}.{node.node_type} out so the other changes roll")


def _offering_refusal(view: ClusterView, node: Node, new: Offering) -> Optional[StopRefusal]:
    if new.state.lower() != "active":
        return StopRefusal(node.name, node.node_type, RULE_OFFERING_STATE, PARAM_OFFERINGS,
                           f"service offering {new.name} is {new.state}, and CloudStack refuses an inactive offering",
                           "choose an active service offering")
    on = node.root_storage_type
    if on is not None and new.storage_type.lower() != on.lower():
        return StopRefusal(node.name, node.node_type, RULE_STORAGE, PARAM_OFFERINGS,
                           f"service offering {new.name} uses {new.storage_type} storage but the root volume is on "
                           f"{on.lower()} storage (VirtualMachineManagerImpl.checkIfNewOfferingStorageScopeMatchesStoragePool)",
                           f"choose an offering with {on.lower()} storage")
    old = view.offerings.get(node.offering_id) if node.offering_id else None
    if old is not None and old.storage_tags and not set(old.storage_tags) <= set(new.storage_tags):
        return StopRefusal(node.name, node.node_type, RULE_STORAGE, PARAM_OFFERINGS,
                           f"the storage tags of its offering {old.name} ({', '.join(old.storage_tags)}) are not all "
                           f"in those of {new.name} ({', '.join(new.storage_tags) or 'none'}), and CloudStack refuses "
                           "the change (VirtualMachineManagerImpl.checkIfCanUpgrade)",
                           "choose an offering whose storage tags include the current ones")
    return None


_LIMITS = (("cpu", PARAM_OFFERINGS, "cores", "8"), ("memory", PARAM_OFFERINGS, "MiB", "9"),
           ("primary storage", PARAM_ROOT_DISKS, "GiB", "10"))


def _limit_refusal(node: Node, headroom: Headroom, index: int, needed: int, left: int) -> StopRefusal:
    what, parameter, unit, resource_type = _LIMITS[index]
    return StopRefusal(node.name, node.node_type, RULE_LIMIT, parameter,
                       f"would take {headroom.owner} past its {what} limit: this node and the ones before it in the "
                       f"plan grow it by {needed} {unit}, {left} {unit} are left, and CloudStack refuses the change "
                       "with 535 (ResourceLimitManagerImpl)",
                       f"raise the {what} limit of {headroom.owner} by at least {needed - left} {unit} "
                       f"(updateResourceLimit resourcetype={resource_type}), or choose a smaller {parameter}.{node.node_type}")


def stop_refusals(view: ClusterView, settings: Settings, nodes: Sequence[Node], caller: Optional[Caller] = None,
                  headroom: Optional[Headroom] = None) -> list[StopRefusal]:
    """Every change of ``nodes`` (in plan order) CloudStack would refuse once the VM is stopped.

    ``caller`` None: the groups are not judged; ``headroom`` None: the limits are not (the key
    could not read them; the caller says so). One refusal per node, the first rule it breaks.
    """
    refusals: list[StopRefusal] = []
    spent = [0, 0, 0]
    for node in nodes:
        plan = change_plan(node, settings[node.node_type])
        refusal: Optional[StopRefusal] = None
        if plan.offering is not None:
            new = view.offerings.get(str(plan.offering.to))
            refusal = _offering_refusal(view, node, new) if new is not None else None
        if refusal is None and plan.affinity_groups is not None and caller is not None:
            for gid in plan.affinity_groups.to:
                group = view.group(gid)
                refusal = _group_refusal(view, node, group, caller) if group is not None else None
                if refusal is not None:
                    break
        if refusal is None and headroom is not None:
            growth = _growth(view, node, plan)
            lefts = (headroom.cpu, headroom.memory_mb, headroom.storage_gb)
            for index, grow in enumerate(growth):
                left = lefts[index]
                if grow and left is not None and spent[index] + grow > left:
                    refusal = _limit_refusal(node, headroom, index, spent[index] + grow, left)
                    break
            if refusal is None:
                spent = [spent[i] + growth[i] for i in range(len(spent))]
        if refusal is not None:
            refusals.append(refusal)
    return refusals


def refusal_error(refusals: Sequence[StopRefusal]) -> Optional[str]:
    """One message for the plan: what CloudStack would refuse after the stop, node by node."""
    if not refusals:
        return None
    return ("CloudStack would refuse these changes only once the node is stopped, so no node was touched: "
            + " | ".join(r.message for r in refusals))
