"""Accounts, domains and projects as owners; API keys of a root admin, a domain admin and a user.

List calls are scoped as ``AccountManagerImpl.buildACLSearchParameters`` builds them: without
``listall`` an admin sees only its own account; ``listall`` widens a root admin to everything and
a domain admin to its domain tree; ``account`` + ``domainid`` name one account; project resources
show only with ``projectid`` (or by ``id``). Operating on another owner's VM is refused by
``AccountManagerImpl.checkAccess`` (``DomainChecker``) with 531. Callers that are not root admins
get ``ResponseView.Restricted`` VMs: no ``hostid``, ``hostname`` or ``instancename``.
"""

from __future__ import annotations

import os

import pytest
from cs import CloudStackApiException

from cks_sim.spec import load_spec

TENANTS = os.path.join(os.path.dirname(__file__), "..", "examples", "tenants.yml")


@pytest.fixture
def tenants(sim_factory):
    spec = load_spec(TENANTS)
    spec["time_scale"] = 0.01
    return sim_factory(spec=spec)


def _key(handle, account):
    entry = next(k for k in handle.env["keys"] if k["account"] == account)
    return handle.cs(key=entry["apikey"], secret=entry["secretkey"])


def _names(answer, key="virtualmachine"):
    return sorted(item["name"] for item in answer.get(key, []))


def test_env_lists_a_key_per_account_with_its_role(tenants):
    keys = {k["account"]: (k["role"], k["domain"]) for k in tenants.env["keys"]}
    assert keys == {"admin": ("admin", "ROOT"), "ops": ("domainadmin", "tenants"), "alice": ("user", "tenants"),
                    "bob": ("user", "tenants")}
    assert tenants.env["cloudstack_key"] == "root-key"  # the spec's own account stays the default key


def test_root_admin_sees_only_its_own_account_without_listall(tenants):
    root = _key(tenants, "admin")
    assert root.listVirtualMachines() == {}
    everything = root.listVirtualMachines(listall=True)
    # listall covers every account, but project resources only with projectid.
    assert everything["count"] == 3 and all(vm["account"] == "alice" for vm in everything["virtualmachine"])
    project = root.listKubernetesClusters(listall=True)["kubernetescluster"]
    assert [c["name"] for c in project] == ["alice-k8s"]
    platform_id = root.listKubernetesClusters(projectid=_project_id(tenants))["kubernetescluster"][0]
    assert platform_id["name"] == "platform-k8s" and platform_id["project"] == "platform" and "account" not in platform_id
    assert root.listVirtualMachines(projectid=_project_id(tenants))["count"] == 2
    # By id a root admin finds anything, project resources included.
    assert root.listKubernetesClusters(id=platform_id["id"])["count"] == 1


def _project_id(handle):
    return next(iter(handle.sim.cloud.directory.projects))


def test_account_and_domainid_name_one_account(tenants):
    root = _key(tenants, "admin")
    domain_id = next(k["domainid"] for k in tenants.env["keys"] if k["account"] == "alice")
    scoped = root.listVirtualMachines(account="alice", domainid=domain_id)
    assert scoped["count"] == 3
    assert root.listVirtualMachines(account="bob", domainid=domain_id) == {}
    with pytest.raises(CloudStackApiException) as caught:
        root.listVirtualMachines(account="alice")  # looked up in the caller's domain (ROOT)
    assert caught.value.error["errorcode"] == 431
    assert caught.value.error["errortext"].startswith("could not find account alice in domain")


def test_domain_admin_sees_its_domain_with_listall_and_gets_the_restricted_view(tenants):
    ops = _key(tenants, "ops")
    assert ops.listVirtualMachines() == {}  # its own account owns nothing
    listed = ops.listVirtualMachines(listall=True)["virtualmachine"]
    assert len(listed) == 3
    for vm in listed:
        assert {"hostid", "hostname", "instancename"}.isdisjoint(vm)
        assert (vm["account"], vm["domain"], vm["domainpath"]) == ("alice", "tenants", "ROOT/tenants")
    root_view = _key(tenants, "admin").listVirtualMachines(listall=True)["virtualmachine"][0]
    assert {"hostid", "hostname", "instancename"} <= set(root_view)
    with pytest.raises(CloudStackApiException) as caught:
        ops.listHosts()
    # DynamicRoleBasedAPIAccessChecker.checkAccess -> ApiServer.commandAvailable: 432.
    assert caught.value.error["errorcode"] == 432


def test_a_user_sees_and_touches_only_its_own_resources(tenants):
    alice, bob = _key(tenants, "alice"), _key(tenants, "bob")
    assert alice.listVirtualMachines()["count"] == 3
    assert bob.listVirtualMachines(listall=True) == {}  # listall does not widen a user
    vm = alice.listVirtualMachines()["virtualmachine"][0]
    assert {"hostid", "hostname", "instancename"}.isdisjoint(vm)
    with pytest.raises(CloudStackApiException) as caught:
        bob.stopVirtualMachine(id=vm["id"])
    assert caught.value.response.status_code == 531
    error = caught.value.error
    assert error["cserrorcode"] == 4365
    assert "does not have permission to operate with resource" in error["errortext"]
    assert '"accountName":"bob"' in error["errortext"] and vm["id"] in error["errortext"]
    assert tenants.sim.cloud.vms[vm["id"]].state == "Running"  # nothing changed
    stopped = alice.stopVirtualMachine(id=vm["id"], fetch_result=True)["virtualmachine"]
    assert stopped["state"] == "Stopped" and "hostid" not in stopped
    job = alice.listAsyncJobs()["asyncjobs"][0]
    assert job["account"] == "alice"
    assert bob.listAsyncJobs() == {}  # listAsyncJobs is scoped like every list


def test_a_user_may_name_its_own_domain_but_no_other(tenants):
    """DomainChecker.checkAccess(Account, Domain), called by buildACLSearchParameters for a domainid:
    a normal user passes for its own domain only; the text names the account and the domain's uuid."""
    alice = _key(tenants, "alice")
    own = next(k["domainid"] for k in tenants.env["keys"] if k["account"] == "alice")
    root_domain = next(k["domainid"] for k in tenants.env["keys"] if k["account"] == "admin")
    assert own != root_domain
    assert alice.listVirtualMachines(domainid=own)["count"] == 3
    with pytest.raises(CloudStackApiException) as caught:
        alice.listVirtualMachines(domainid=root_domain)
    assert caught.value.error["errorcode"] == 531
    assert caught.value.error["errortext"] == (
        f"Account alice does not have permission to operate within domain id={root_domain}")


def test_list_async_jobs_takes_no_projectid_and_lists_the_jobs_the_caller_started(tenants):
    """ListAsyncJobsCmd extends BaseListAccountResourcesCmd: projectid is no parameter of it (ignored),
    and a job on a project's VM belongs to the account that started it."""
    alice = _key(tenants, "alice")
    project_id = _project_id(tenants)
    vm = alice.listVirtualMachines(projectid=project_id)["virtualmachine"][0]
    alice.stopVirtualMachine(id=vm["id"], fetch_result=True)
    for answer in (alice.listAsyncJobs(), alice.listAsyncJobs(projectid=project_id)):
        assert [j["jobinstanceid"] for j in answer["asyncjobs"]] == [vm["id"]]
        assert answer["asyncjobs"][0]["account"] == "alice"


def test_project_members_reach_project_resources_with_projectid(tenants):
    alice, bob = _key(tenants, "alice"), _key(tenants, "bob")
    project_id = _project_id(tenants)
    assert alice.listVirtualMachines(projectid=project_id)["count"] == 2
    with pytest.raises(CloudStackApiException) as caught:
        bob.listVirtualMachines(projectid=project_id)
    assert caught.value.error["errorcode"] == 531
    assert "can't access project id=" + project_id in caught.value.error["errortext"]


def test_cks_puts_the_owners_dedication_group_on_its_nodes(tenants):
    root = _key(tenants, "admin")
    alice_vm = root.listVirtualMachines(listall=True)["virtualmachine"][0]
    assert [g["name"] for g in alice_vm["affinitygroup"]] == ["dedicated-alice"]
    platform_vm = root.listVirtualMachines(projectid=_project_id(tenants))["virtualmachine"][0]
    assert [g["name"] for g in platform_vm["affinitygroup"]] == ["dedicated-platform"]
    groups = {g["name"]: g for g in root.listAffinityGroups(listall=True)["affinitygroup"]}
    assert groups["dedicated-alice"]["account"] == "alice"
    assert "dedicated-platform" not in groups  # a project's group shows only with projectid
    assert "tenants-soft" in groups  # domain-level groups show to a root admin's listall
    ops_groups = {g["name"] for g in _key(tenants, "ops").listAffinityGroups()["affinitygroup"]}
    assert ops_groups == {"tenants-soft"}  # its own account has none; its domain's is listed
