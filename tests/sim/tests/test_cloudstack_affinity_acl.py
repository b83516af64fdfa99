"""updateVMAffinityGroup: who may name which group, and how a VM's last group goes.

- ``UpdateVMAffinityGroupCmd`` has ``@ACL`` on ``affinitygroupids``; ``ParamProcessWorker``
  checks it in ``doAccessChecks`` before the job is queued. For a caller that is not root admin,
  ``AffinityGroupAccessChecker.checkAccess`` refuses an account-level group of another account:
  a synchronous 531 "<caller> does not have permission to operate with resource <group>".
- For a root admin (``AffinityGroupServiceImpl.updateVMAffinityGroups``) a group whose account
  is not the VM's is refused in the job: PermissionDeniedException "Affinity Group <group> does
  not belong to the VM's account", which ``ApiAsyncJobDispatcher`` ends with 530.
- The last group: ``ParamProcessWorker.processParameters`` skips only an absent parameter; an
  empty ``affinitygroupids`` is tokenised into an empty list, which ``updateVMAffinityGroups``
  writes as the VM's (empty) group list. An absent one is refused in the job: 431
  "affinitygroupids parameter or affinitygroupnames parameter must be given".
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


def _stopped_alice_worker(handle):
    root = _key(handle, "admin")
    vm = next(v for v in root.listVirtualMachines(listall=True)["virtualmachine"] if "-node-" in v["name"])
    root.stopVirtualMachine(id=vm["id"], fetch_result=True)
    return vm


def _group(handle, name):
    return next(g for g in handle.sim.cloud.affinity_groups.values() if g.name == name)


def test_a_domain_admin_naming_the_accounts_dedication_group_gets_531_before_any_job(tenants):
    vm = _stopped_alice_worker(tenants)
    ops = _key(tenants, "ops")
    dedication, spread = _group(tenants, "dedicated-alice"), _group(tenants, "alice-spread")
    jobs_before = len(tenants.sim.cloud.jobs)
    with pytest.raises(CloudStackApiException) as caught:
        ops.updateVMAffinityGroup(id=vm["id"], affinitygroupids=[dedication.id, spread.id])
    assert caught.value.response.status_code == 531
    error = caught.value.error
    assert (error["errorcode"], error["cserrorcode"]) == (531, 4365)
    assert error["errortext"].startswith('Account {"accountName":"ops"')
    assert error["errortext"].endswith(f'does not have permission to operate with resource AffinityGroup '
                                       f'{{"id":1,"name":"dedicated-alice","type":"ExplicitDedication","uuid":"{dedication.id}"}}')
    assert len(tenants.sim.cloud.jobs) == jobs_before  # refused before the job
    assert tenants.sim.cloud.vms[vm["id"]].affinity_group_ids == [dedication.id]
    # Without the account's groups it may change them: a domain-level group of its domain.
    soft = _group(tenants, "tenants-soft")
    updated = ops.updateVMAffinityGroup(id=vm["id"], affinitygroupids=[soft.id], fetch_result=True)
    assert [g["name"] for g in updated["virtualmachine"]["affinitygroup"]] == ["tenants-soft"]


def test_the_owner_itself_may_name_its_groups(tenants):
    vm = _stopped_alice_worker(tenants)
    alice = _key(tenants, "alice")
    ids = [_group(tenants, "dedicated-alice").id, _group(tenants, "alice-spread").id]
    updated = alice.updateVMAffinityGroup(id=vm["id"], affinitygroupids=ids, fetch_result=True)
    assert [g["name"] for g in updated["virtualmachine"]["affinitygroup"]] == ["dedicated-alice", "alice-spread"]
    with pytest.raises(CloudStackApiException) as caught:  # bob's group is not alice's to use
        alice.updateVMAffinityGroup(id=vm["id"], affinitygroupids=[_group(tenants, "bob-spread").id])
    assert caught.value.error["errorcode"] == 531


def test_a_root_admin_is_refused_a_group_of_another_account_in_the_job(tenants):
    vm = _stopped_alice_worker(tenants)
    root = _key(tenants, "admin")
    bob_group = _group(tenants, "bob-spread")
    with pytest.raises(CloudStackApiException) as caught:
        root.updateVMAffinityGroup(id=vm["id"], affinitygroupids=[bob_group.id], fetch_result=True)
    error = caught.value.error
    assert error["errorcode"] == 530
    assert error["errortext"] == (f'Affinity Group AffinityGroup {{"id":4,"name":"bob-spread","type":"host anti-affinity",'
                                  f'"uuid":"{bob_group.id}"}} does not belong to the VM\'s account')
    assert [g.name for g in (tenants.sim.cloud.affinity_groups[i] for i in tenants.sim.cloud.vms[vm["id"]].affinity_group_ids)] \
        == ["dedicated-alice"]
    # The VM's own account's groups are fine for a root admin.
    ids = [_group(tenants, "dedicated-alice").id, _group(tenants, "alice-spread").id]
    assert root.updateVMAffinityGroup(id=vm["id"], affinitygroupids=ids, fetch_result=True)["virtualmachine"]["affinitygroup"]


def test_an_empty_affinitygroupids_removes_the_last_group(sim):
    cs = sim.cs()
    vm = sim.node_vms("worker")[0]
    cs.stopVirtualMachine(id=vm["id"], fetch_result=True)
    assert [g["name"] for g in sim.vm(vm["name"])["affinitygroup"]] == ["dedicated-admin"]
    updated = cs.updateVMAffinityGroup(id=vm["id"], affinitygroupids="", fetch_result=True)
    assert updated["virtualmachine"]["affinitygroup"] == []
    assert sim.vm(vm["name"])["affinitygroup"] == []
    call = [c for c in sim.admin("GET", "/calls?api=cloudstack") if c["command"] == "updateVMAffinityGroup"][-1]
    assert call["params"]["affinitygroupids"] == ""  # cs sends the empty value as it is


def test_an_empty_python_list_is_dropped_by_cs_and_refused(sim):
    cs = sim.cs()
    vm = sim.node_vms("worker")[0]
    cs.stopVirtualMachine(id=vm["id"], fetch_result=True)
    with pytest.raises(CloudStackApiException) as caught:
        cs.updateVMAffinityGroup(id=vm["id"], affinitygroupids=[], fetch_result=True)
    assert caught.value.error["errorcode"] == 431
    assert caught.value.error["errortext"] == "affinitygroupids parameter or affinitygroupnames parameter must be given"
    assert [g["name"] for g in sim.vm(vm["name"])["affinitygroup"]] == ["dedicated-admin"]
