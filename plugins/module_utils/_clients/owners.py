# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Who the API key is, and how much the cluster's owner may still grow: the reads behind the
checks made before a drain (``_decisions.stop_refusals``).

listAccounts without parameters answers the key's own account (an admin without ``listall``
sees only its own, ``buildACLSearchParameters``). Its entry carries the account's limits, totals
and what is available (AccountResponse's ``cpuavailable``, ``memoryavailable``,
``primarystorageavailable`` in GiB). The key's own account is read only when the groups' rules need
to know who the key is; the owner's headroom is asked by ``name`` + ``domainid`` (a project's with
listProjects ``id``), or taken from the key's own entry when that was read and is the owner's: one
call either way. A key that may not read them gets a note saying so, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError
from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import CloudStackApi
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.stop_refusals import Caller, Headroom, view_owner
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ClusterView


@dataclass
class OwnerReads:
    """What was read (None where it was not needed or could not be read) and why not."""

    caller: Optional[Caller] = None
    headroom: Optional[Headroom] = None
    notes: list[str] = field(default_factory=list)


def read_owner(cloud: CloudStackApi, view: ClusterView, caller: bool, headroom: bool) -> OwnerReads:
    """The key's account when ``caller``, the owner's headroom when ``headroom``."""
    reads = OwnerReads()
    if not (caller or headroom):
        return reads
    own = None
    # Only the groups' rules need to know who the key is. For the headroom alone, the owner is
    # asked by name: listAccounts ``name`` + ``domainid`` answers a user its own account as it
    # answers an admin any account it may see (QueryManagerImpl.searchForAccountsInternal:
    # checkAccess on the domain, then on the account found), and listProjects ``id`` a project,
    # so one call does what the key's own account and then the owner's took (two calls whenever
    # the key is not the owner: an admin key rolling a tenant's or a project's cluster).
    if caller or not _owner_named(view):
        try:
            mine = cloud.list("listAccounts")
        except CksError as exc:
            mine = []
            reads.notes.append(f"this key cannot read its own account (listAccounts: {exc.msg}): "
                               "the affinity groups it may send were not checked")
        if len(mine) == 1:
            own = mine[0]
            reads.caller = Caller.from_account(own)
        elif mine:
            reads.notes.append("listAccounts answered more than one account, so which one this key is stays "
                               "unknown: the affinity groups it may send were not checked")
    if headroom:
        reads.headroom = _read_headroom(cloud, view, reads, own)
        # Domains above the owner have limits too; listResourceLimits gives a domain's limit but
        # not its usage, so it cannot be judged from here.
        if reads.headroom is not None:
            reads.notes.append(f"limits of the domain of {view_owner(view)} and its parents were not checked "
                               "(their usage is not readable with listResourceLimits)")
    return reads


def _own_if_owner(cloud: CloudStackApi, view: ClusterView) -> Optional[dict]:
    """The key's own account when it is the cluster's owner: what a key refused the owner's domain by
    name still reads (its own account needs no parameter), as it did before the owner was asked first."""
    try:
        mine = cloud.list("listAccounts")
    except CksError:
        return None
    if len(mine) == 1 and mine[0].get("name") == view.account and mine[0].get("domainid") == view.domain_id:
        return mine[0]
    return None


def _owner_named(view: ClusterView) -> bool:
    """The cluster names its owner well enough to ask for it directly (a project, or an account in a domain)."""
    return bool(view.project_id or (view.account and view.domain_id))


def _read_headroom(cloud: CloudStackApi, view: ClusterView, reads: OwnerReads,
                   own: Optional[dict]) -> Optional[Headroom]:
    owner = view_owner(view)
    try:
        if view.project_id:
            found = cloud.list("listProjects", id=view.project_id)
        elif own is not None and own.get("name") == view.account and own.get("domainid") == view.domain_id:
            found = [own]
        elif view.account and view.domain_id:
            found = cloud.list("listAccounts", name=view.account, domainid=view.domain_id)
        else:
            found = []
    except CksError as exc:
        mine = _own_if_owner(cloud, view) if own is None and not view.project_id else None
        if mine is None:
            reads.notes.append(f"this key cannot read the resource limits of {owner} ({exc.msg}): "
                               "CPU, memory and primary storage headroom were not checked")
            return None
        found = [mine]
    if len(found) != 1:
        reads.notes.append(f"the resource limits of {owner} are not listed to this key: "
                           "CPU, memory and primary storage headroom were not checked")
        return None
    return Headroom.from_entry(owner, found[0])
