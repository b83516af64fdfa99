"""Resource limits: account, domain and project CPU, memory and primary storage.

``ResourceLimitManagerImpl``: defaults from ``Config`` (max.account.cpus 40, max.account.memory
40960 MiB, max.account.primary.storage 200 GiB; max.domain.* 80 / 81920 / 400; ROOT unlimited;
root admin accounts never limited); ``checkResourceLimitWithTag`` checks the account
(``checkAccountResourceLimit``), then every domain above it (``checkDomainResourceLimit``).
``UpgradeVMCmd`` (changeServiceForVirtualMachine) and ``ResizeVolumeCmd`` answer the
ResourceAllocationException with RESOURCE_ALLOCATION_ERROR, 535. ``listResourceLimits``
(``searchForLimits``) and ``listAccounts`` report limits, totals and what is available.
"""

from __future__ import annotations

import os

import pytest
from cs import CloudStackApiException

from cks_sim.spec import load_spec

TENANTS = os.path.join(os.path.dirname(__file__), "..", "examples", "tenants.yml")


def _tenants(sim_factory, **account_limits):
    spec = load_spec(TENANTS)
    spec["time_scale"] = 0.01
    alice = next(a for a in spec["accounts"] if a["name"] == "alice")
    alice["limits"].update(account_limits)
    return sim_factory(spec=spec)


def _key(handle, account):
    entry = next(k for k in handle.env["keys"] if k["account"] == account)
    return handle.cs(key=entry["apikey"], secret=entry["secretkey"])


def test_limits_and_totals_as_list_resource_limits_and_list_accounts_report_them(sim_factory):
    handle = _tenants(sim_factory)
    alice = _key(handle, "alice")
    limits = {r["resourcetypename"]: (r["resourcetype"], r["max"]) for r in alice.listResourceLimits()["resourcelimit"]}
    assert limits == {"cpu": ("8", 40), "memory": ("9", 81920), "primary_storage": ("10", 500)}
    account = alice.listAccounts()["account"][0]
    # 3 VMs of cks-medium (2 cores, 4096 MiB) with 20 GB root disks.
    assert (account["name"], account["cputotal"], account["cpulimit"], account["cpuavailable"]) == ("alice", 6, "40", "34")
    assert (account["memorytotal"], account["memoryavailable"]) == (12288, str(81920 - 12288))
    assert (account["primarystoragetotal"], account["primarystoragelimit"]) == (60, "500")
    bob = _key(handle, "bob").listAccounts()["account"][0]
    assert (bob["cpulimit"], bob["memorylimit"], bob["primarystoragelimit"]) == ("40", "40960", "200")  # Config defaults
    root = _key(handle, "admin").listAccounts()["account"][0]
    assert (root["name"], root["cpulimit"]) == ("admin", "Unlimited")
    domain_id = next(k["domainid"] for k in handle.env["keys"] if k["account"] == "ops")
    domain = {r["resourcetypename"]: r["max"] for r in
              _key(handle, "ops").listResourceLimits(domainid=domain_id)["resourcelimit"]}
    assert domain == {"cpu": 200, "memory": 409600, "primary_storage": 2000}


def test_an_offering_change_past_the_cpu_limit_fails_535_and_changes_nothing(sim_factory):
    handle = _tenants(sim_factory, cpu=7)
    alice = _key(handle, "alice")
    vm = next(v for v in alice.listVirtualMachines()["virtualmachine"] if "-node-" in v["name"])
    alice.stopVirtualMachine(id=vm["id"], fetch_result=True)
    large = alice.listServiceOfferings(name="cks-large")["serviceoffering"][0]
    with pytest.raises(CloudStackApiException) as caught:
        alice.changeServiceForVirtualMachine(id=vm["id"], serviceofferingid=large["id"])
    assert caught.value.response.status_code == 535
    error = caught.value.error
    assert (error["errorcode"], error["cserrorcode"]) == (535, 4370)
    assert error["errortext"] == (
        "Maximum amount of resources of Type = 'cpu', tag = 'null' for Account Name = alice in Domain Id = 2 is "
        "exceeded: Account Resource Limit = 7, Current Account Resource Amount = 6, Current Account Resource "
        "Reservation = 0, Requested Resource Amount = 2.")
    assert alice.listVirtualMachines(id=vm["id"])["virtualmachine"][0]["serviceofferingname"] == "cks-medium"


def test_the_domain_limit_counts_every_account_below_it(sim_factory):
    spec = load_spec(TENANTS)
    spec["time_scale"] = 0.01
    spec["domains"][1]["limits"]["memory"] = 20000  # alice 12288 + project 8192 already: 20480
    handle = sim_factory(spec=spec)
    alice = _key(handle, "alice")
    vm = next(v for v in alice.listVirtualMachines()["virtualmachine"] if "-node-" in v["name"])
    alice.stopVirtualMachine(id=vm["id"], fetch_result=True)
    large = alice.listServiceOfferings(name="cks-large")["serviceoffering"][0]
    with pytest.raises(CloudStackApiException) as caught:
        alice.changeServiceForVirtualMachine(id=vm["id"], serviceofferingid=large["id"])
    domain_id = next(k["domainid"] for k in handle.env["keys"] if k["account"] == "alice")
    assert caught.value.error["errortext"] == (
        f"Maximum domain resource limits of Type 'memory' for Domain Id = {domain_id} is exceeded: Domain Resource "
        "Limit = 20000, Current Domain Resource Amount = 20480, Current Resource Reservation = 0, Requested "
        "Resource Amount = 4096.")


def test_a_root_resize_past_primary_storage_fails_535_in_the_job(sim_factory):
    handle = _tenants(sim_factory, primarystorage=70)
    alice = _key(handle, "alice")
    vm = next(v for v in alice.listVirtualMachines()["virtualmachine"] if "-node-" in v["name"])
    root = alice.listVolumes(virtualmachineid=vm["id"], type="ROOT")["volume"][0]
    assert alice.resizeVolume(id=root["id"], size=30, fetch_result=True)["volume"]["size"] == 30 * 2**30  # 70 GiB used
    with pytest.raises(CloudStackApiException) as caught:
        alice.resizeVolume(id=root["id"], size=31, fetch_result=True)
    error = caught.value.error
    assert error["errorcode"] == 535
    assert error["errortext"] == (
        "Maximum amount of resources of Type = 'primary_storage', tag = 'null' for Account Name = alice in Domain Id "
        "= 2 is exceeded: Account Resource Limit = (70.00 GB) 75161927680, Current Account Resource Amount = "
        "(70.00 GB) 75161927680, Current Account Resource Reservation = (0 bytes) 0, Requested Resource Amount = "
        "(1.00 GB) 1073741824.")
    assert alice.listVolumes(id=root["id"])["volume"][0]["size"] == 30 * 2**30


def test_a_root_admin_owner_is_never_limited(sim):
    cs = sim.cs()
    vm = sim.node_vms("worker")[0]
    cs.stopVirtualMachine(id=vm["id"], fetch_result=True)
    xlarge = sim.offering("cks-xlarge")
    assert cs.changeServiceForVirtualMachine(id=vm["id"], serviceofferingid=xlarge["id"])["virtualmachine"]["cpunumber"] == 8
