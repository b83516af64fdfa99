# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The reads behind the checks before a drain (``_clients.owners``): who the key is and what the
cluster's owner has left, in as few calls as the owner allows, and a note (never a guess) where
the key cannot read them. And the loader's fallback for a key refused the owner's domain."""

from __future__ import annotations

from typing import Any

import pytest
from fakes import FakeCloudStack

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.owners import read_owner
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CloudStackError
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.stop_refusals import DOMAIN_ADMIN, USER
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import build_view
from ansible_collections.cloudstack.cks.plugins.module_utils._model.loader import ClusterLoader

ALICE = {"name": "alice", "domainid": "d-t", "domainpath": "ROOT/tenants", "accounttype": 0,
         "cpuavailable": "34", "memoryavailable": "57344", "primarystorageavailable": "440"}
OPS = {"name": "ops", "domainid": "d-t", "domainpath": "ROOT/tenants", "accounttype": 2,
       "cpuavailable": "Unlimited", "memoryavailable": "Unlimited", "primarystorageavailable": "Unlimited"}


def cluster_view(**owner: Any) -> Any:
    return build_view(dict(owner, id="c", name="k8s", virtualmachines=[]), [], [], [], [], [], [])


def test_nothing_is_read_when_nothing_needs_it() -> None:
    cloud = FakeCloudStack()
    reads = read_owner(cloud, cluster_view(account="alice", domainid="d-t"), caller=False, headroom=False)
    assert (reads.caller, reads.headroom, reads.notes, cloud.asked) == (None, None, [], [])


def test_the_keys_own_cluster_costs_one_call() -> None:
    cloud = FakeCloudStack(lists={"listAccounts": [ALICE]})
    reads = read_owner(cloud, cluster_view(account="alice", domainid="d-t"), caller=True, headroom=True)
    assert cloud.asked == [("listAccounts", {})]
    assert reads.caller is not None and (reads.caller.account, reads.caller.role) == ("alice", USER)
    assert reads.headroom is not None
    assert (reads.headroom.owner, reads.headroom.cpu, reads.headroom.memory_mb, reads.headroom.storage_gb) == (
        "account alice", 34, 57344, 440)
    # Domain limits have no readable usage: said, not guessed.
    assert reads.notes == ["limits of the domain of account alice and its parents were not checked "
                           "(their usage is not readable with listResourceLimits)"]


def test_another_accounts_headroom_is_asked_by_name_and_domain() -> None:
    def accounts(params: dict[str, Any]) -> list[dict[str, Any]]:
        return [ALICE] if params.get("name") == "alice" else [OPS]

    cloud = FakeCloudStack(lists={"listAccounts": accounts})
    reads = read_owner(cloud, cluster_view(account="alice", domainid="d-t"), caller=True, headroom=True)
    assert cloud.asked == [("listAccounts", {}), ("listAccounts", {"name": "alice", "domainid": "d-t"})]
    assert reads.caller is not None and reads.caller.role == DOMAIN_ADMIN
    assert reads.headroom is not None and reads.headroom.cpu == 34


def test_a_projects_headroom_comes_from_list_projects() -> None:
    cloud = FakeCloudStack(lists={"listAccounts": [ALICE], "listProjects": [dict(ALICE, name="platform", cpuavailable="2")]})
    reads = read_owner(cloud, cluster_view(projectid="p-1", domainid="d-t"), caller=False, headroom=True)
    assert cloud.asked[-1] == ("listProjects", {"id": "p-1"})
    assert reads.headroom is not None and (reads.headroom.owner, reads.headroom.cpu) == ("project p-1", 2)


def test_limits_the_key_may_not_read_are_a_note_not_a_guess() -> None:
    refused = CloudStackError("listAccounts", "does not have permission", errorcode=531)

    def accounts(params: dict[str, Any]) -> list[dict[str, Any]]:
        if params:
            raise refused
        return [OPS]

    reads = read_owner(FakeCloudStack(lists={"listAccounts": accounts}), cluster_view(account="bob", domainid="d-x"),
                       caller=True, headroom=True)
    assert reads.headroom is None and reads.caller is not None
    assert len(reads.notes) == 1 and reads.notes[0].startswith("this key cannot read the resource limits of account bob")
    assert "were not checked" in reads.notes[0]

    unlisted = read_owner(FakeCloudStack(lists={"listAccounts": lambda p: [] if p else [OPS]}),
                          cluster_view(account="bob", domainid="d-x"), caller=False, headroom=True)
    assert unlisted.headroom is None and "are not listed to this key" in unlisted.notes[0]


def test_a_key_that_cannot_tell_its_account_does_not_judge_groups() -> None:
    many = read_owner(FakeCloudStack(lists={"listAccounts": [ALICE, OPS]}), cluster_view(account="alice", domainid="d-t"),
                      caller=True, headroom=False)
    assert many.caller is None and "more than one account" in many.notes[0]
    failing = FakeCloudStack(lists={"listAccounts": CloudStackError("listAccounts", "no", errorcode=432)})
    refused = read_owner(failing, cluster_view(account="alice", domainid="d-t"), caller=True, headroom=False)
    assert refused.caller is None and refused.notes[0].startswith("this key cannot read its own account")


def test_the_loader_lists_without_the_owners_domain_when_the_key_is_refused_it() -> None:
    entry = {"id": "c", "name": "k8s", "account": "alice", "domainid": "d-t",
             "virtualmachines": [{"id": "vm-1", "name": "k8s-node-1"}]}

    def vms(params: dict[str, Any]) -> list[dict[str, Any]]:
        if "domainid" in params:
            raise CloudStackError("listVirtualMachines", "does not have permission to access domain", errorcode=531)
        return [{"id": "vm-1", "name": "k8s-node-1", "state": "Running"}]

    def volumes(params: dict[str, Any]) -> list[dict[str, Any]]:
        if "domainid" in params:
            raise CloudStackError("listVolumes", "does not have permission to access domain", errorcode=531)
        return []

    cloud = FakeCloudStack(lists={"listVirtualMachines": vms, "listVolumes": volumes, "listServiceOfferings": [],
                                  "listDiskOfferings": [], "listAffinityGroups": []})
    view = ClusterLoader(cloud).load_cluster(entry)
    assert [n.vm_state for n in view.nodes] == ["Running"]
    assert ("listVirtualMachines", {"ids": "vm-1", "listall": True}) in cloud.asked

    other = FakeCloudStack(lists={"listVirtualMachines": CloudStackError("listVirtualMachines", "x", errorcode=530)})
    with pytest.raises(CloudStackError) as refused:
        ClusterLoader(other).load_cluster(entry)
    assert refused.value.errorcode == 530 and len(other.asked) == 1  # a refusal other than 531 is not retried


# -- the headroom alone (no group change): the owner is asked by name, in one call ----------------

def test_the_headroom_alone_asks_the_owner_by_name_in_one_call() -> None:
    # The key's own cluster (a user's): its account by name and domain, nothing else.
    cloud = FakeCloudStack(lists={"listAccounts": lambda p: [ALICE] if p.get("name") == "alice" else [OPS]})
    reads = read_owner(cloud, cluster_view(account="alice", domainid="d-t"), caller=False, headroom=True)
    assert cloud.asked == [("listAccounts", {"name": "alice", "domainid": "d-t"})]
    assert reads.caller is None and reads.headroom is not None and reads.headroom.cpu == 34

    # An admin key rolling a tenant's cluster: one call where the key's own account came first before.
    cloud = FakeCloudStack(lists={"listAccounts": lambda p: [ALICE] if p.get("name") == "alice" else [OPS]})
    read_owner(cloud, cluster_view(account="alice", domainid="d-t"), caller=False, headroom=True)
    assert cloud.commands() == ["listAccounts"]


def test_a_projects_headroom_alone_is_one_call() -> None:
    cloud = FakeCloudStack(lists={"listProjects": [dict(ALICE, name="platform", cpuavailable="2")]})
    reads = read_owner(cloud, cluster_view(projectid="p-1", domainid="d-t"), caller=False, headroom=True)
    assert cloud.asked == [("listProjects", {"id": "p-1"})]
    assert reads.headroom is not None and reads.headroom.cpu == 2


def test_a_key_refused_the_owners_domain_still_reads_its_own_account_when_it_is_the_owner() -> None:
    def accounts(params: dict[str, Any]) -> list[dict[str, Any]]:
        if params:
            raise CloudStackError("listAccounts", "does not have permission to access domain", errorcode=531)
        return [ALICE]

    cloud = FakeCloudStack(lists={"listAccounts": accounts})
    reads = read_owner(cloud, cluster_view(account="alice", domainid="d-t"), caller=False, headroom=True)
    assert reads.headroom is not None and reads.headroom.cpu == 34
    assert cloud.asked == [("listAccounts", {"name": "alice", "domainid": "d-t"}), ("listAccounts", {})]
    # Refused another account's: a note, never the key's own limits taken for the owner's.
    refused = read_owner(FakeCloudStack(lists={"listAccounts": accounts}), cluster_view(account="bob", domainid="d-t"),
                         caller=False, headroom=True)
    assert refused.headroom is None and refused.notes[0].startswith("this key cannot read the resource limits of account bob")


def test_an_owner_the_cluster_does_not_name_is_found_through_the_keys_account() -> None:
    cloud = FakeCloudStack(lists={"listAccounts": [ALICE]})
    reads = read_owner(cloud, cluster_view(), caller=False, headroom=True)
    assert cloud.asked == [("listAccounts", {})]
    assert reads.headroom is None and "are not listed to this key" in reads.notes[0]
