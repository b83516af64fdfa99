"""CloudStack's API rate limit (plugins/api/rate-limit), through the real ``cs`` client.

``ApiRateLimitServiceImpl.checkAccess(Account, String)``: a root admin account is never counted;
``hasApiRateLimitBeenExceeded`` counts every call of any other account (lists, queries, async
commands, and the refused calls too) in a ``StoreEntry`` made by the account's first call and
expiring ``api.throttling.interval`` seconds later (``StoreEntryImpl``); past ``api.throttling.max``
``throwExceptionDueToApiRateLimitReached`` raises ``RequestLimitException`` "The given user has
reached his/her account api limit, please retry after [N] ms." (4.22's wording), which
``ApiServer.commandAvailable`` answers as ``ServerApiException(ApiErrorCode.API_LIMIT_EXCEED)``:
HTTP 429, errorcode 429. ``GetApiLimitCmd`` (any caller) answers ``searchApiLimit``;
``ResetApiLimitCmd`` (admin) ``resetApiLimit``; both refuse with 432 when the limit is off.
"""

from __future__ import annotations

import re
import time

import pytest
from cs import CloudStackApiException

from cks_sim.spec import SpecError, normalize
from simkit import small_spec

LIMIT = re.compile(r"^The given user has reached his/her account api limit, please retry after \[(\d+)\] ms\.$")
USER = {"name": "ops", "domain": "ROOT", "role": "domainadmin", "apikey": "ops-key", "secretkey": "ops-secret"}
OTHERS = [{"name": "root", "domain": "ROOT", "role": "admin", "apikey": "root-key", "secretkey": "root-secret"},
          {"name": "bob", "domain": "ROOT", "role": "user", "apikey": "bob-key", "secretkey": "bob-secret"}]
# time_scale 0.01: 300 simulated seconds are a 3 s window, long enough for a handful of calls on a busy machine.
WINDOW = 300


def _limited(sim_factory, max_calls: int = 3, interval: float = WINDOW):
    return sim_factory(spec=small_spec(account=USER, accounts=OTHERS,
                                       cloud={"api_throttling_max": max_calls, "api_throttling_interval": interval}))


def _key(handle, name):
    entry = next(k for k in handle.env["keys"] if k["account"] == name)
    return handle.cs(key=entry["apikey"], secret=entry["secretkey"])


def _refused(call, **params):
    with pytest.raises(CloudStackApiException) as caught:
        call(**params)
    return caught.value


def test_past_the_max_every_command_of_the_account_is_refused_429_until_the_window_ends(sim_factory):
    handle = _limited(sim_factory)
    ops = _key(handle, "ops")
    # The root admin's calls are not counted: the test looks up with that key.
    vms = _key(handle, "root").listVirtualMachines(listall=True)["virtualmachine"]
    vm = next(v for v in vms if "-node-" in v["name"])
    ops.listVirtualMachines()
    ops.listCapabilities()
    ops.queryAsyncJobResult(jobid=handle.admin("POST", "/actions", {"action": "stop_vm", "vm": vm["name"]})["jobid"])
    # The fourth call of the window, an async command this time: refused before it runs.
    error = _refused(ops.startVirtualMachine, id=vm["id"])
    assert error.response.status_code == 429
    body = error.error
    assert body["errorcode"] == 429 and body["cserrorcode"] == 9999
    found = LIMIT.match(body["errortext"])
    assert found, body["errortext"]
    assert 0 < int(found.group(1)) <= WINDOW * handle.sim.clock.time_scale * 1000
    calls = [c for c in handle.admin("GET", "/calls") if c.get("throttled")]
    assert [(c["command"], c["status"], c["account"]) for c in calls] == [("startVirtualMachine", 429, "ops")]
    # Refused before it ran: no start job, the VM still stopping or stopped.
    assert not any("StartVM" in j.cmd for j in handle.sim.cloud.jobs.values())
    # Another account keeps its own counter.
    assert _key(handle, "bob").listZones()["count"] == 1


def test_refused_calls_are_counted_and_do_not_move_the_window(sim_factory):
    handle = _limited(sim_factory, max_calls=1)
    ops = _key(handle, "ops")
    ops.listZones()
    first = int(LIMIT.match(_refused(ops.listZones).error["errortext"]).group(1))
    time.sleep(0.2)
    second = int(LIMIT.match(_refused(ops.listZones).error["errortext"]).group(1))
    # The window is fixed from the first call (StoreEntryImpl.expiry): the wait shrinks.
    assert second < first
    limit = handle.sim.api_rate_limit.search(handle.sim.cloud.directory.account_named("ops").id)
    assert limit["apiIssued"] == 3


def test_a_new_window_starts_with_the_first_call_after_the_last_one_expired(sim_factory):
    handle = _limited(sim_factory, max_calls=1, interval=20)  # 0.2 s
    ops = _key(handle, "ops")
    ops.listZones()
    wait_ms = int(LIMIT.match(_refused(ops.listZones).error["errortext"]).group(1))
    time.sleep(wait_ms / 1000 + 0.05)
    assert ops.listZones()["count"] == 1


def test_the_root_admin_is_never_limited(sim_factory):
    handle = _limited(sim_factory, max_calls=0)
    root = _key(handle, "root")
    for _call in range(5):
        root.listZones()
    assert _refused(_key(handle, "ops").listZones).error["errorcode"] == 429


def test_get_api_limit_reports_the_callers_window_and_counts_itself(sim_factory):
    handle = _limited(sim_factory, max_calls=5)
    ops = _key(handle, "ops")
    ops.listZones()
    limit = ops.getApiLimit()["apilimit"]
    ops_id = handle.sim.cloud.directory.account_named("ops").id
    # The getApiLimit call went through checkAccess first: it is the second call of the window.
    assert (limit["accountid"], limit["account"], limit["apiIssued"], limit["apiAllowed"]) == (ops_id, "ops", 2, 3)
    assert 0 < limit["expireAfter"] <= WINDOW * handle.sim.clock.time_scale * 1000
    # A root admin is not counted, so its entry is new: expireAfter is the interval as configured.
    root = _key(handle, "root").getApiLimit()["apilimit"]
    assert (root["apiIssued"], root["apiAllowed"], root["expireAfter"]) == (0, 5, WINDOW)


def test_reset_api_limit_is_for_admins_and_lets_the_account_call_again(sim_factory):
    handle = _limited(sim_factory, max_calls=1)
    ops, root = _key(handle, "ops"), _key(handle, "root")
    ops.listZones()
    assert _refused(ops.listZones).error["errorcode"] == 429
    ops_id = handle.sim.cloud.directory.account_named("ops").id
    bob = _key(handle, "bob")
    # A user is not offered the admin command: DynamicRoleBasedAPIAccessChecker.checkAccess refuses it
    # (UnavailableCommandException, 432 from ApiServer.commandAvailable), after the rate limit counted it.
    refused = _refused(bob.resetApiLimit, account=ops_id).error
    assert refused["errorcode"] == 432
    assert "The API [resetApiLimit] does not exist or is not available for the account" in refused["errortext"]
    assert root.resetApiLimit(account=ops_id)["success"] is True
    assert ops.listZones()["count"] == 1
    assert _refused(root.resetApiLimit, account="6e3b4d2a-0000-4000-8000-000000000000").error["errorcode"] == 431


def test_the_commands_answer_432_when_the_limit_is_off(sim_factory):
    handle = sim_factory(spec=small_spec(account=USER, accounts=OTHERS))
    ops = _key(handle, "ops")
    for _call in range(30):
        ops.listZones()
    error = _refused(ops.getApiLimit).error
    assert (error["errorcode"], error["errortext"]) == (432, "This api is only available when api.throttling.enabled = true.")
    assert _refused(_key(handle, "root").resetApiLimit).error["errorcode"] == 432


def test_the_commands_are_in_the_api_listing(sim_factory):
    handle = _limited(sim_factory)
    listed = {a["name"]: a for a in _key(handle, "root").listApis()["api"]}
    fields = sorted(r["name"] for r in listed["getApiLimit"]["response"])
    assert fields == ["account", "accountid", "apiAllowed", "apiIssued", "expireAfter"]
    assert [p["name"] for p in listed["resetApiLimit"]["params"]][0] == "account"
    user_listed = {a["name"] for a in _key(handle, "bob").listApis()["api"]}
    assert "getApiLimit" in user_listed and "resetApiLimit" not in user_listed


def test_the_limit_can_be_set_on_a_running_sim(sim_factory):
    handle = sim_factory(spec=small_spec(account=USER, accounts=OTHERS))
    limit = {"api_throttling_max": 0, "api_throttling_interval": WINDOW}
    handle.admin("POST", "/actions", {"action": "set_config", "cloud": limit})
    assert _refused(_key(handle, "ops").listZones).error["errorcode"] == 429


def test_a_bad_interval_is_refused_naming_the_field():
    raw = small_spec(cloud={"api_throttling_max": 5, "api_throttling_interval": 0})
    with pytest.raises(SpecError, match="cloud.api_throttling_interval"):
        normalize(raw)
