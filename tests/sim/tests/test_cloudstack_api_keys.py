"""API key pairs with rules and an expiry (CloudStack 4.23), through the real `cs` client over HTTP.

Followed in apache/cloudstack 4.23 (pull requests 9504 and 13828):
``DynamicRoleBasedAPIAccessChecker.checkAccess`` (a key pair with explicit permissions: its rules
only, the first matching rule decides, none matching is ``UnavailableCommandException``, 432
"The API [X] does not exist or is not available for the account <name>."),
``ApiKeyPairServiceImpl.findAllPermissionsByKeyPairId`` (a key's rules never exceed its role),
``ApiKeyPairVO.validateDate`` + ``ApiServer.verifyRequest`` (an expired key: 401), ``ListUserKeysCmd``
(``userapikey``; ``count`` before the rules' filter). listApis narrowing by the key's rules follows
the pull requests' descriptions (see cks_sim/api_keys.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from cs import CloudStackApiException

from cks_sim.spec import SpecError, normalize
from simkit import small_spec

ROLLOUT_RULES = [{"rule": "list*", "permission": "allow"}, "queryAsyncJobResult", "stopVirtualMachine",
                 "startVirtualMachine"]


def _date(delta: timedelta) -> str:
    return (datetime.now(timezone.utc) + delta).strftime("%Y-%m-%dT%H:%M:%S+0000")


def _spec(**keys_extra) -> dict:
    raw = small_spec()
    raw["cloud"] = {"version": "4.23.0.0"}
    raw["domains"] = [{"name": "tenants", "parent": "ROOT"}]
    raw["accounts"] = [{"name": "ops", "domain": "tenants", "role": "domainadmin", "apikey": "ops-key",
                        "secretkey": "ops-secret", "keys": [
                            {"name": "rollout", "apikey": "ops-rollout", "secretkey": "ops-rollout-secret",
                             "rules": ROLLOUT_RULES + [{"rule": "listHosts", "permission": "allow"}],
                             "enddate": _date(timedelta(hours=2))},
                            {"name": "old", "apikey": "ops-old", "secretkey": "ops-old-secret",
                             "enddate": _date(timedelta(minutes=-1))},
                            {"name": "no-lists", "apikey": "ops-nolist", "secretkey": "ops-nolist-secret",
                             "rules": [{"rule": "listVirtualMachines", "permission": "deny"},
                                       {"rule": "list*", "permission": "allow"}]},
                        ], **keys_extra}]
    raw["clusters"][0].update(control_nodes=1, workers=1, account="ops", dedication_group=None)
    return raw


def _error(call, **kwargs) -> dict:
    with pytest.raises(CloudStackApiException) as caught:
        call(**kwargs)
    return {"status": caught.value.response.status_code, **caught.value.error}


def test_a_key_with_rules_may_call_what_they_allow_and_gets_432_for_the_rest(sim_factory):
    handle = sim_factory(spec=_spec())
    key = handle.cs(key="ops-rollout", secret="ops-rollout-secret")
    assert key.listVirtualMachines(listall=True)["count"] == 2
    error = _error(key.updateVMAffinityGroup, id="x", affinitygroupids=[])
    assert (error["status"], error["errorcode"], error["cserrorcode"]) == (432, 432, 9999)
    assert error["errortext"] == "The API [updateVMAffinityGroup] does not exist or is not available for the account " \
                                 + error["errortext"].split("for the account ", 1)[1]
    assert '"accountName":"ops"' in error["errortext"]
    # Never beyond the role: listHosts is in the rules, but ops is a domain admin.
    assert _error(key.listHosts)["errorcode"] == 432
    # The account's own key is its role, as before.
    own = handle.cs(key="ops-key", secret="ops-secret")
    assert _error(own.updateVMAffinityGroup, id="x", affinitygroupids=[])["errorcode"] != 432


def test_the_first_matching_rule_decides(sim_factory):
    handle = sim_factory(spec=_spec())
    key = handle.cs(key="ops-nolist", secret="ops-nolist-secret")
    assert _error(key.listVirtualMachines)["errorcode"] == 432  # deny before the list* allow
    assert "count" in key.listServiceOfferings() or key.listServiceOfferings() == {}
    assert _error(key.stopVirtualMachine, id="x")["errorcode"] == 432  # no rule matches


def test_list_apis_answers_only_what_the_key_may_call(sim_factory):
    handle = sim_factory(spec=_spec())
    key = handle.cs(key="ops-rollout", secret="ops-rollout-secret")
    names = {a["name"] for a in key.listApis(fetch_list=True)}
    assert {"stopVirtualMachine", "startVirtualMachine", "queryAsyncJobResult", "listVirtualMachines"} <= names
    assert "updateVMAffinityGroup" not in names and "changeServiceForVirtualMachine" not in names
    assert "listHosts" not in names and "listApis" in names
    error = _error(key.listApis, name="updateVMAffinityGroup")
    assert error["errortext"] == "Api Discovery plugin was unable to find an api by that name or process any apis"
    own = {a["name"] for a in handle.cs(key="ops-key", secret="ops-secret").listApis(fetch_list=True)}
    assert "updateVMAffinityGroup" in own


def test_an_expired_key_is_answered_401_and_a_valid_one_is_not(sim_factory):
    handle = sim_factory(spec=_spec())
    old = handle.cs(key="ops-old", secret="ops-old-secret")
    error = _error(old.listVirtualMachines)
    assert (error["status"], error["errortext"]) == (401, "unable to verify user credentials and/or request signature")
    assert handle.cs(key="ops-rollout", secret="ops-rollout-secret").listZones()["count"] == 1


def test_list_user_keys_names_each_key_pair_its_end_date_and_rules(sim_factory):
    handle = sim_factory(spec=_spec())
    own = handle.cs(key="ops-key", secret="ops-secret")
    listed = own.listUserKeys(listall=True)
    assert listed["count"] == 4
    by_name = {k["name"]: k for k in listed["userapikey"]}
    assert set(by_name) == {"rollout", "old", "no-lists", next(n for n in by_name if n.endswith(" - API Keypair"))}
    rollout = by_name["rollout"]
    assert rollout["apikey"] == "ops-rollout" and rollout["enddate"].endswith("+0000")
    assert rollout["permissions"][0] == {"rule": "list*", "permission": "ALLOW"}
    assert (rollout["accountname"], rollout["accounttype"], rollout["domain"]) == ("ops", "DOMAIN_ADMIN", "tenants")
    # Without listall: only the last made.
    assert [k["name"] for k in own.listUserKeys()["userapikey"]] == ["no-lists"]
    # A key with rules sees only the key pairs within its rules (no-lists allows only list*, which
    # rollout allows too; the account's key and old have no rules: everything), while count is the total.
    seen = handle.cs(key="ops-rollout", secret="ops-rollout-secret").listUserKeys(listall=True)
    assert seen["count"] == 4 and [k["name"] for k in seen["userapikey"]] == ["rollout", "no-lists"]


def test_the_spec_checks_key_pairs():
    with pytest.raises(SpecError, match="keys: API key pairs with rules and dates are CloudStack 4.23's"):
        normalize(dict(_spec(), cloud={"version": "4.22.1.0"}))
    raw = _spec()
    raw["accounts"][0]["keys"][0]["rules"] = [{"rule": "list*", "permission": "maybe"}]
    with pytest.raises(SpecError, match=r"keys\[0\].rules\[0\].permission must be allow or deny"):
        normalize(raw)
    raw = _spec()
    raw["accounts"][0]["keys"][1]["enddate"] = "tomorrow"
    with pytest.raises(SpecError, match=r"keys\[1\].enddate: a date as CloudStack writes it"):
        normalize(raw)
    raw = _spec()
    raw["accounts"][0]["keys"][1]["apikey"] = "ops-key"
    with pytest.raises(SpecError, match="accounts \\(apikey\\)"):
        normalize(raw)
