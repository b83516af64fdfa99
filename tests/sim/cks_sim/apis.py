"""The command catalogue of the simulated management server, from the real 4.22.1 data.

``data/cloudstack-apis-4.22.1.json`` is a copy of the project's shared CloudStack API reference
(apache/cloudstack-go e463cd1, generated from CloudStack 4.22.1.0 listApis: parameters with their
types and Java ``required`` flags, response names and fields of each command;
``test_reference_data_copy_matches_shared_reference`` compares the two where the reference is at
hand). Parameters are checked the way ``ParamProcessWorker`` does: a missing required one or a value
that does not parse is error 431; unknown parameters are ignored, as the server ignores them. The
same data answers ``listApis``.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from typing import Any, Optional

from .api_keys import KeyPair
from .cloud import CloudError, param_error

DATA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "cloudstack-apis-4.22.1.json")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_MAP_KEY = re.compile(r"^([a-z0-9]+)\[(\d+)\]\.(\w+)$", re.IGNORECASE)

# Not in the 4.22.1 data file, but a rollout's poller may use it (ListAsyncJobsCmd).
EXTRA_COMMANDS: dict[str, dict[str, Any]] = {
    "listAsyncJobs": {
        "async": False, "list": True, "response_name": "listasyncjobsresponse", "response_kind": "list",
        "response_object": "asyncjobs", "java_class": "ListAsyncJobsCmd", "since": None,
        "params": [
            {"name": "account", "type": "string", "required": False},
            {"name": "domainid", "type": "uuid", "required": False},
            {"name": "isrecursive", "type": "boolean", "required": False},
            {"name": "keyword", "type": "string", "required": False},
            {"name": "listall", "type": "boolean", "required": False},
            {"name": "managementserverid", "type": "uuid", "required": False},
            {"name": "page", "type": "integer", "required": False},
            {"name": "pagesize", "type": "integer", "required": False},
            {"name": "startdate", "type": "date", "required": False},
        ],
        "response_fields": ["accountid", "cmd", "completed", "created", "jobid", "jobinstanceid", "jobinstancetype",
                            "jobprocstatus", "jobresult", "jobresultcode", "jobresulttype", "jobstatus", "userid"],
        "response_field_types": {},
    },
}


def _list_command(name: str, java_class: str, response_object: str, params: list[tuple[str, str]],
                  fields: list[str], since: Optional[str] = None) -> dict[str, Any]:
    return {
        "async": False, "list": True, "response_name": f"{name.lower()}response", "response_kind": "list",
        "response_object": response_object, "java_class": java_class, "since": since,
        "params": sorted(({"name": n, "type": t, "required": False} for n, t in params
                          + [("keyword", "string"), ("page", "integer"), ("pagesize", "integer")]),
                         key=lambda p: p["name"]),
        "response_fields": fields, "response_field_types": {},
    }


# Owners and limits (ListAccountsCmd, ListResourceLimitsCmd, ListProjectsCmd), not in the data file:
# the parameter names of apache/cloudstack-go e463cd1 (its Account, Asyncjob, Project and Limit services'
# toURLValues, 4.22.1), typed as the commands' @Parameter annotations declare them.
EXTRA_COMMANDS["listAccounts"] = _list_command(
    "listAccounts", "ListAccountsCmd", "account",
    [("id", "uuid"), ("name", "string"), ("domainid", "uuid"), ("isrecursive", "boolean"), ("listall", "boolean"),
     ("accounttype", "integer"), ("state", "string"), ("apikeyaccess", "string"), ("details", "list"),
     ("iscleanuprequired", "boolean"), ("showicon", "boolean"), ("tag", "string")],
    ["id", "name", "accounttype", "roletype", "domainid", "domain", "domainpath", "state", "cpulimit", "cputotal",
     "cpuavailable", "memorylimit", "memorytotal", "memoryavailable", "primarystoragelimit", "primarystoragetotal",
     "primarystorageavailable"])
EXTRA_COMMANDS["listResourceLimits"] = _list_command(
    "listResourceLimits", "ListResourceLimitsCmd", "resourcelimit",
    [("id", "long"), ("account", "string"), ("domainid", "uuid"), ("projectid", "uuid"), ("isrecursive", "boolean"),
     ("listall", "boolean"), ("resourcetype", "integer"), ("resourcetypename", "string"), ("tag", "string")],
    ["account", "domainid", "domain", "domainpath", "project", "projectid", "resourcetype", "resourcetypename", "max"])
EXTRA_COMMANDS["listProjects"] = _list_command(
    "listProjects", "ListProjectsCmd", "project",
    [("id", "uuid"), ("name", "string"), ("account", "string"), ("domainid", "uuid"), ("isrecursive", "boolean"),
     ("listall", "boolean"), ("state", "string"), ("details", "list"), ("displaytext", "string"),
     ("showicon", "boolean"), ("tags", "map"), ("username", "string")],
    ["id", "name", "displaytext", "domainid", "domain", "domainpath", "state", "cpulimit", "cputotal", "cpuavailable",
     "memorylimit", "memorytotal", "memoryavailable", "primarystoragelimit", "primarystoragetotal",
     "primarystorageavailable"])
for _extra in ({"name": "resourceid", "type": "uuid", "required": False},
               {"name": "resourcetype", "type": "string", "required": False}):
    EXTRA_COMMANDS["listAsyncJobs"]["params"].append(_extra)
EXTRA_COMMANDS["listAsyncJobs"]["params"].sort(key=lambda p: p["name"])

# Root-admin commands for the zone's hosts (ListClustersCmd, ListDedicatedHostsCmd), not in the data file.
EXTRA_COMMANDS["listClusters"] = _list_command(
    "listClusters", "ListClustersCmd", "cluster",
    [("id", "uuid"), ("name", "string"), ("zoneid", "uuid"), ("podid", "uuid"), ("hypervisor", "string"),
     ("clustertype", "string"), ("allocationstate", "string"), ("managedstate", "string"),
     ("showcapacities", "boolean"), ("arch", "string")],
    ["id", "name", "zoneid", "zonename", "podid", "podname", "hypervisortype", "clustertype", "allocationstate",
     "managedstate", "cpuovercommitratio", "memoryovercommitratio", "arch"])
# ListDedicated{Hosts,Clusters,Pods,Zones}Cmd (plugins/dedicated-resources): the resource's ID, domainid,
# account (with domainid) and affinitygroupid; Dedicate{Host,Cluster,Pod,Zone}Response.
for _kind in ("Host", "Cluster", "Pod", "Zone"):
    _key = _kind.lower()
    EXTRA_COMMANDS[f"listDedicated{_kind}s"] = _list_command(
        f"listDedicated{_kind}s", f"ListDedicated{_kind}sCmd", f"dedicated{_key}",
        [(f"{_key}id", "uuid"), ("domainid", "uuid"), ("account", "string"), ("affinitygroupid", "uuid")],
        ["id", f"{_key}id", f"{_key}name", "domainid", "domainname", "accountid", "accountname", "affinitygroupid"])


# The rate-limit plugin's commands (GetApiLimitCmd, a user command; ResetApiLimitCmd, an admin one):
# not in the data file, which lists only what cloudstack-go generates.
EXTRA_COMMANDS["getApiLimit"] = {
    "async": False, "list": False, "response_name": "getapilimitresponse", "response_kind": "object",
    "response_object": "apilimit", "java_class": "GetApiLimitCmd", "since": None, "params": [],
    "description": "Get API limit count for the caller",
    "response_fields": ["account", "accountid", "apiAllowed", "apiIssued", "expireAfter"],
    "response_field_types": {"apiAllowed": "int", "apiIssued": "int", "expireAfter": "long"},
}
EXTRA_COMMANDS["resetApiLimit"] = {
    "async": False, "list": False, "response_name": "resetapilimitresponse", "response_kind": "success",
    "response_object": "success", "java_class": "ResetApiLimitCmd", "since": None,
    "params": [{"name": "account", "type": "uuid", "required": False}],
    "description": "Reset api count",
    "response_fields": ["displaytext", "success"], "response_field_types": {"success": "boolean"},
}

ADMIN_ONLY_COMMANDS = {"listHosts", "listClusters", "listDedicatedHosts", "listDedicatedClusters", "listDedicatedPods",
                       "listDedicatedZones", "resetApiLimit"}


# ListUserKeysCmd (4.10; 4.23 lists key pairs, ApiKeyPairResponse, object "userapikey"): not in the data file.
EXTRA_COMMANDS["listUserKeys"] = _list_command(
    "listUserKeys", "ListUserKeysCmd", "userapikey",
    [("userid", "uuid"), ("keypairid", "uuid"), ("listall", "boolean"), ("domainid", "uuid"), ("account", "string"),
     ("isrecursive", "boolean")],
    ["id", "name", "apikey", "secretkey", "userid", "username", "created", "startdate", "enddate", "accountid",
     "accountname", "accounttype", "roletype", "domainid", "domain", "domainpath", "state", "permissions"],
    since="4.10.0")


def may_call(role: str, key_pair: Optional[KeyPair], name: str) -> bool:
    """DynamicRoleBasedAPIAccessChecker.checkAccess: the role (root admin commands) and, for a key pair
    with rules, its rules too (they never exceed the role: findAllPermissionsByKeyPairId)."""
    if role != "admin" and name in ADMIN_ONLY_COMMANDS:
        return False
    return key_pair is None or key_pair.allows(name)


@lru_cache(maxsize=1)
def catalogue() -> dict[str, dict[str, Any]]:
    with open(DATA_FILE, encoding="utf-8") as handle:
        data = json.load(handle)
    commands = dict(data["commands"])
    commands.update(EXTRA_COMMANDS)
    return commands


@lru_cache(maxsize=1)
def implicit_params() -> dict[str, Any]:
    with open(DATA_FILE, encoding="utf-8") as handle:
        return json.load(handle)["implicit_params"]


def command(name: str) -> Optional[dict[str, Any]]:
    return catalogue().get(name)


def short_name(definition: dict[str, Any]) -> str:
    # getCommandName() minus "response", as ParamProcessWorker quotes it in its messages.
    return definition["response_name"][: -len("response")]


def _invalid(definition: dict[str, Any], value: str, name: str) -> CloudError:
    return CloudError(431, f"Unable to execute API command {short_name(definition)} due to invalid value {value} for parameter {name}", 9999)


def _invalid_uuid(definition: dict[str, Any], value: str, name: str) -> CloudError:
    return CloudError(
        431,
        f"Unable to execute API command {short_name(definition)} due to invalid value. Invalid parameter {name}"
        f" value={value} due to incorrect long value format, or entity does not exist or due to incorrect"
        " parameter annotation for the field in api cmd class.",
        9999,
    )


def _map_values(params: dict[str, str], name: str) -> list[dict[str, str]]:
    rows: dict[int, dict[str, str]] = {}
    for key, value in params.items():
        match = _MAP_KEY.match(key)
        if match and match.group(1).lower() == name:
            rows.setdefault(int(match.group(2)), {})[match.group(3)] = value
    return [rows[i] for i in sorted(rows)]


def parse_params(definition: dict[str, Any], params: dict[str, str], is_admin: bool = True) -> dict[str, Any]:
    """Typed values of the declared parameters given; raises CloudError 431 like the server."""
    out: dict[str, Any] = {}
    for spec in definition["params"]:
        name = spec["name"]
        kind = spec["type"]
        if spec.get("admin_only") and not is_admin:
            continue
        if kind == "map":
            rows = _map_values(params, name)
            if rows:
                out[name] = rows
            elif spec["required"]:
                raise CloudError(431, f"Unable to execute API command {short_name(definition)} due to missing parameter {name}", 9999)
            continue
        raw = params.get(name)
        if raw == "" and kind == "list" and not spec["required"]:
            # ParamProcessWorker skips only an absent parameter (paramObj == null); an empty
            # one is tokenised into an empty list (that is how a VM's last group is removed).
            out[name] = []
            continue
        if raw is None or raw == "":
            if spec["required"]:
                raise CloudError(431, f"Unable to execute API command {short_name(definition)} due to missing parameter {name}", 9999)
            continue
        out[name] = _convert(definition, name, kind, raw)
    _check_paging(definition, out)
    return out


def _convert(definition: dict[str, Any], name: str, kind: str, raw: str) -> Any:
    if kind == "uuid":
        if raw == "-1":
            # ParamProcessWorker.translateUuidToInternalId passes "-1" through for every uuid
            # parameter: projectid=-1 means "the projects' resources" (buildACLSearchParameters).
            return raw
        if not _UUID.match(raw):
            raise _invalid_uuid(definition, raw, name)
        return raw.lower()
    if kind in ("long", "integer", "short"):
        try:
            return int(raw)
        except ValueError:
            raise _invalid(definition, raw, name) from None
    if kind == "boolean":
        # Java's Boolean.valueOf reads anything but "true" as false; the sim refuses such values
        # so that a client bug ("yes", "1") shows up instead of silently meaning false.
        if raw.lower() not in ("true", "false"):
            raise _invalid(definition, raw, name)
        return raw.lower() == "true"
    if kind == "list":
        items = [item.strip() for item in raw.split(",") if item.strip()]
        if name.endswith("ids") and name != "resourceids":
            for item in items:
                if not _UUID.match(item):
                    raise _invalid_uuid(definition, item, name)
            items = [item.lower() for item in items]
        return items
    return raw


def _check_paging(definition: dict[str, Any], values: dict[str, Any]) -> None:
    if not definition.get("list"):
        return
    page, pagesize = values.get("page"), values.get("pagesize")
    if page is None and pagesize is not None and pagesize != -1:
        raise CloudError(431, '"page" parameter is required when "pagesize" is specified', 9999)
    if pagesize is None and page is not None:
        raise CloudError(431, '"pagesize" parameter is required when "page" is specified', 9999)
    if page is not None and page < 1:
        raise param_error("page must be greater than 0")


def paginate(items: list[Any], values: dict[str, Any], max_page_size: int) -> list[Any]:
    page, pagesize = values.get("page"), values.get("pagesize")
    if pagesize is None or pagesize == -1:
        if pagesize == -1 and page is not None:
            raise param_error("Can't specify page parameter when pagesize is -1 (Unlimited)")
        return items[:max_page_size] if pagesize is None else items
    if pagesize < 1:
        raise param_error("Page size must be greater than 0")
    if pagesize > max_page_size:
        raise param_error(f"Page size can't exceed max allowed page size value: {max_page_size}")
    assert page is not None, "_check_paging refused a pagesize without a page"
    start = (page - 1) * pagesize
    return items[start:start + pagesize]


def list_apis(name: Optional[str], is_admin: bool, key_pair: Optional[KeyPair] = None) -> list[dict[str, Any]]:
    """listApis entries (ApiDiscoveryResponse) for the commands the sim answers and the caller may call."""
    from .cloudstack_api import HANDLERS  # the commands actually served

    names = [n for n in sorted(catalogue()) if n in HANDLERS and may_call("admin" if is_admin else "user", key_pair, n)]
    if name is not None:
        if name not in names:
            raise CloudError(530, "Api Discovery plugin was unable to find an api by that name or process any apis", 9999)
        names = [name]
    out = []
    for cmd in names:
        definition = catalogue()[cmd]
        params = [p for p in definition["params"] if is_admin or not p.get("admin_only")]
        params = params + [dict(p) for p in implicit_params()["all_commands"]]
        if definition.get("async"):
            params += [dict(p) for p in implicit_params()["async_commands"]]
        types = definition.get("response_field_types") or {}
        entry: dict[str, Any] = {
            "name": cmd,
            "description": definition.get("description") or f"{cmd} (cks-sim)",
            "isasync": bool(definition.get("async")),
            "related": "",
            "type": definition.get("java_class", ""),
            "params": [
                {"name": p["name"], "description": p.get("description", ""), "type": p["type"], "length": 255,
                 "required": bool(p.get("required")), "related": "", "since": p.get("since", "")}
                for p in params
            ],
            "response": [
                {"name": field, "description": "", "type": types.get(field, "string")}
                for field in definition.get("response_fields", [])
            ],
        }
        if definition.get("since"):
            entry["since"] = definition["since"]
        out.append(entry)
    return out
