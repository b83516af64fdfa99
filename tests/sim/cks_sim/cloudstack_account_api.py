"""The owner commands of cks-sim's CloudStack API: listAccounts and listProjects with their
limits, totals and what is available, and listResourceLimits (the rules are ``owners``')."""

from __future__ import annotations

from typing import Any

from . import owners
from .cloud import GB as GIB
from .cloud import CloudWorld, param_error
from .cloudstack_call import Call, handler


def _limit_fields(cloud: CloudWorld, account: Any) -> dict[str, Any]:
    """AccountJoinVO's limit, total and available for cpu, memory and primary storage (GiB)."""
    out: dict[str, Any] = {}
    for resource, prefix in (("cpu", "cpu"), ("memory", "memory"), ("primarystorage", "primarystorage")):
        limit = cloud.directory.limit("account", account, resource)
        total = cloud.usage("account", account.id, resource)
        if resource == "primarystorage":
            limit = limit if limit == -1 else limit // GIB
            total //= GIB
        out[f"{prefix}limit"] = "Unlimited" if limit == -1 else str(limit)
        out[f"{prefix}total"] = total
        out[f"{prefix}available"] = "Unlimited" if limit == -1 else str(max(limit - total, 0))
    return out


@handler("listAccounts")
def list_accounts(call: Call) -> dict[str, Any]:
    cloud = call.cloud
    directory = cloud.directory
    caller = cloud.caller
    out = []
    for account in directory.accounts.values():
        if account.role == "project":
            continue
        if caller.role == "user" and account.id != caller.id:
            continue
        if caller.role != "user" and not call.get("listall") and not call.get("id") and not call.get("domainid") \
                and not call.get("name") and account.id != caller.id:
            continue
        if caller.role == "domainadmin" and not directory.in_subtree(account.domain_id, caller.domain_id):
            continue
        if call.get("id") and account.id != call.get("id"):
            continue
        if call.get("name") and account.name != call.get("name"):
            continue
        if call.get("domainid") and account.domain_id != call.get("domainid"):
            continue
        domain = directory.domains[account.domain_id]
        out.append({
            "id": account.id, "name": account.name, "accounttype": owners.ACCOUNT_TYPES[account.role],
            "roletype": owners.ROLE_TYPES[account.role], "domainid": domain.id, "domain": domain.name,
            "domainpath": domain.path, "state": "enabled", "isdefault": account.id == directory.primary.id,
            **_limit_fields(cloud, account),
        })
    return call.listing(out)


@handler("listProjects")
def list_projects(call: Call) -> dict[str, Any]:
    cloud = call.cloud
    out = []
    for project in cloud.directory.projects.values():
        if not cloud.directory.can_access(cloud.caller, project.account_id):
            continue
        if call.get("id") and project.id != call.get("id"):
            continue
        if call.get("name") and project.name != call.get("name"):
            continue
        domain = cloud.directory.domains[project.domain_id]
        out.append({"id": project.id, "name": project.name, "displaytext": project.name, "domainid": domain.id,
                    "domain": domain.name, "domainpath": domain.path, "state": "Active",
                    **_limit_fields(cloud, cloud.directory.accounts[project.account_id])})
    return call.listing(out)


@handler("listResourceLimits")
def list_resource_limits(call: Call) -> dict[str, Any]:
    """ResourceLimitManagerImpl.searchForLimits for cpu (8), memory (9), primary_storage (10)."""
    cloud = call.cloud
    directory = cloud.directory
    caller = cloud.caller
    owner: Any = caller
    kind = "account"
    if call.get("projectid"):
        project = directory.projects.get(call.get("projectid"))
        if project is None:
            raise param_error(f"Unable to find project by id {call.get('projectid')}")
        cloud.check_access(project.account_id, f"Project {project.name}")
        owner = directory.accounts[project.account_id]
    elif caller.role != "user" and call.get("domainid"):
        domain = directory.domains.get(call.get("domainid"))
        if domain is None:
            return {}
        if call.get("account"):
            owner = next((a for a in directory.accounts.values()
                          if a.name == call.get("account") and a.domain_id == domain.id), None)
            if owner is None:
                return {}
            cloud.check_access(owner.id, owner.ref())
        else:
            owner, kind = domain, "domain"
    out = []
    for resource, (number, name) in owners.RESOURCE_TYPES.items():
        if call.get("resourcetype") is not None and call.get("resourcetype") != number:
            continue
        if call.get("resourcetypename") and call.get("resourcetypename") != name:
            continue
        limit = directory.limit(kind, owner, resource)
        if resource == "primarystorage" and limit != -1:
            limit //= GIB
        entry: dict[str, Any] = {"resourcetype": str(number), "resourcetypename": name, "max": limit}
        if kind == "account":
            entry.update(directory.owner_fields(owner.id))
        else:
            entry.update(domainid=owner.id, domain=owner.name, domainpath=owner.path)
        out.append(entry)
    return call.listing(out)
