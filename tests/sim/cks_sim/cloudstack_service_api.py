"""The commands of cks-sim's CloudStack API about the API service itself: async job results and
lists, the API rate limit (plugins/api/rate-limit), discovery (listApis, listCapabilities) and the
caller's key pairs (listUserKeys)."""

from __future__ import annotations

from typing import Any

from . import api_keys, apis
from .cloud import CS_SERVER_API, CloudError, param_error
from .cloudstack_call import Call, handler
from .rate_limit import DISABLED_TEXT, UNSUPPORTED_ACTION_ERROR, ApiRateLimit


@handler("queryAsyncJobResult")
def query_async_job_result(call: Call) -> dict[str, Any]:
    job_id = call.get("jobid")
    if not job_id:
        raise param_error("Either jobid or resourceid and resourcetype must be specified")
    job = call.cloud.jobs.get(job_id)
    if job is None:
        raise call.cloud.invalid_uuid("jobid", job_id)
    return call.cloud.job_view(job)


@handler("listAsyncJobs")
def list_async_jobs(call: Call) -> dict[str, Any]:
    # ListAsyncJobsCmd extends BaseListAccountResourcesCmd, not the project variant: a projectid is
    # no parameter of it and is ignored; a job belongs to the account that started it.
    allowed = call.cloud.list_scope({k: v for k, v in call.values.items() if k != "projectid"})
    jobs = sorted((j for j in call.cloud.jobs.values() if allowed(j.caller_id or call.cloud.directory.primary.id)),
                  key=lambda j: j.created, reverse=True)
    views = [call.cloud.job_view(j) for j in jobs]
    keyword = call.get("keyword")
    if keyword:
        # QueryManagerImpl.searchForAsyncJobsInternal: sc.addAnd("cmd", LIKE, "%" + keyword + "%").
        views = [v for v in views if str(keyword).lower() in str(v["cmd"]).lower()]
    return call.listing(views)


# --- the API rate limit (plugins/api/rate-limit) ------------------------------------------


def _rate_limit(call: Call) -> ApiRateLimit:
    limit: ApiRateLimit = call.sim.api_rate_limit
    if not limit.enabled:
        raise CloudError(UNSUPPORTED_ACTION_ERROR, DISABLED_TEXT, CS_SERVER_API)
    return limit


@handler("getApiLimit")
def get_api_limit(call: Call) -> dict[str, Any]:
    # GetApiLimitCmd.execute: searchApiLimit(caller), object name "apilimit".
    limit = _rate_limit(call)
    caller = call.cloud.caller
    return {"apilimit": {"accountid": caller.id, "account": caller.name, **limit.search(caller.id)}}


@handler("resetApiLimit")
def reset_api_limit(call: Call) -> dict[str, Any]:
    limit = _rate_limit(call)
    account = call.get("account")
    if account is not None and account not in call.cloud.directory.accounts:
        raise call.cloud.invalid_uuid("account", account)
    limit.reset(account)
    return {"success": True}


# --- discovery ----------------------------------------------------------------------------


@handler("listApis")
def list_apis(call: Call) -> dict[str, Any]:
    return call.listing(apis.list_apis(call.get("name"), call.cloud.is_admin, call.cloud.caller_key))


@handler("listUserKeys")
def list_user_keys(call: Call) -> dict[str, Any]:
    """ListUserKeysCmd as 4.23 answers the caller's own key pairs (see api_keys): the account's key
    and its key pairs in the order made, the last one unless ``listall`` (or ``keypairid``)."""
    cloud = call.cloud
    account, key = cloud.caller, cloud.caller_key
    if call.get("userid") and call.get("userid") != account.user_id:
        raise CloudError(530, "Listing other users' keys is not simulated", CS_SERVER_API)
    pairs = list(account.key_pairs)
    if account.apikey:
        pairs.insert(0, api_keys.KeyPair(account.user_id, f"{account.user_id} - API Keypair", account.apikey,
                                         account.secretkey or "", [], cloud.spec["created"]))
    total = len(pairs)
    if call.get("keypairid"):
        pairs = [p for p in pairs if p.id == call.get("keypairid")]
    elif not call.get("listall"):
        pairs = pairs[-1:]
    if key is not None and key.rules:
        pairs = [p for p in pairs if p is key or p.within(key)]
    owner = cloud.owner_fields(account.id)
    role = {"accounttype": {"admin": "ADMIN", "domainadmin": "DOMAIN_ADMIN"}.get(account.role, "USER"),
            "roletype": {"admin": "Admin", "domainadmin": "DomainAdmin"}.get(account.role, "User")}
    views = [api_keys.key_view(p, account, owner, role) for p in pairs]
    # ``count`` is the number of the user's key pairs before the rules' filter (4.23, pull request 13828).
    return {"count": total, "userapikey": views} if views else {}


@handler("listCapabilities")
def list_capabilities(call: Call) -> dict[str, Any]:
    cloud = call.cloud
    return {"capability": {
        "cloudstackversion": cloud.cloud_opts["version"], "securitygroupsenabled": False,
        "userpublictemplateenabled": True, "supportELB": "false", "projectinviterequired": False,
        "allowusercreateprojects": True, "customdiskofferingminsize": 1, "customdiskofferingmaxsize": 1024,
        "kubernetesserviceenabled": True, "kubernetesclusterexperimentalfeaturesenabled": False,
        "dynamicscalingenabled": cloud.dynamic_scale, "apilimitinterval": 1, "apilimitmax": 0,
        "defaultuipagesize": 20, "allowuserviewdestroyedvm": False, "allowuserexpungerecovervm": False,
        "allowuserforcestopvm": True, "kvmsnapshotenabled": False, "instanceleaseenabled": False,
    }}
