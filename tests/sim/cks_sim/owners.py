"""Domains, accounts and projects of cks-sim: who owns what, who may see and touch it, and the
resource limits CloudStack keeps per owner.

Follows ``AccountManagerImpl.buildACLSearchParameters`` (which owners a list call covers),
``AccountManagerImpl.checkAccess`` with ``DomainChecker`` and ``AffinityGroupAccessChecker``
(who may operate on an entity) and ``ResourceLimitManagerImpl`` (limits, their defaults from
``Config`` and the texts of ``checkAccountResourceLimit`` / ``checkDomainResourceLimit``).
A project owns its resources through a project account of its own, as in CloudStack.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .api_keys import KeyPair, key_pairs

CS_PERMISSION_DENIED = 4365
CS_RESOURCE_ALLOCATION = 4370
UNLIMITED = -1
GIB = 1 << 30

# Account type numbers of Account.Type, and the roles' names in AccountResponse.roletype.
ACCOUNT_TYPES = {"user": 0, "admin": 1, "domainadmin": 2, "project": 5}
ROLE_TYPES = {"user": "User", "admin": "Admin", "domainadmin": "DomainAdmin", "project": "User"}

# Resource.ResourceType ordinals and names used by listResourceLimits.
RESOURCE_TYPES = {"cpu": (8, "cpu"), "memory": (9, "memory"), "primarystorage": (10, "primary_storage")}

# Config's defaults (max.account.*, max.project.*, max.domain.*): cores, MiB, GiB.
DEFAULT_LIMITS = {
    "account": {"cpu": 40, "memory": 40960, "primarystorage": 200},
    "project": {"cpu": 40, "memory": 40960, "primarystorage": 200},
    "domain": {"cpu": 80, "memory": 81920, "primarystorage": 400},
}


class OwnerError(Exception):
    """A refusal in CloudStack's terms (turned into ``cloud.CloudError`` by the caller)."""

    def __init__(self, code: int, text: str, cserrorcode: int) -> None:
        super().__init__(text)
        self.code, self.text, self.cserrorcode = code, text, cserrorcode


@dataclass
class Domain:
    id: str
    number: int
    name: str
    parent_id: Optional[str]
    path: str  # "ROOT", "ROOT/tenants": what responses call domainpath
    limits: dict[str, int]


@dataclass
class Account:
    id: str
    number: int
    name: str
    domain_id: str
    role: str  # admin | domainadmin | user | project
    limits: dict[str, int]
    user_id: str
    apikey: Optional[str] = None
    secretkey: Optional[str] = field(default=None, repr=False)
    project_id: Optional[str] = None
    key_pairs: list[KeyPair] = field(default_factory=list)  # 4.23: its key pairs besides ``apikey``

    def ref(self) -> str:
        # AccountVO.toString(), as it shows up in PermissionDeniedException texts.
        return "Account " + json.dumps({"accountName": self.name, "domainId": self.number, "id": self.number,
                                        "uuid": self.id}, separators=(",", ":"))


@dataclass
class Project:
    id: str
    name: str
    domain_id: str
    account_id: str  # the project account that owns the project's resources
    member_ids: list[str]


def human_size(size: int) -> str:
    """NumbersUtil.toHumanReadableSize with display.human.readable.sizes=true: "(50.00 GB) 53687091200"."""
    value, unit = float(size), "bytes"
    for name, scale in (("KB", 1 << 10), ("MB", 1 << 20), ("GB", 1 << 30), ("TB", 1 << 40)):
        if size >= scale:
            value, unit = size / scale, name
    shown = f"{int(value)} bytes" if unit == "bytes" else f"{value:.2f} {unit}"
    return f"({shown}) {size}"


class Directory:
    """Every domain, account and project, looked up by id, name or API key."""

    def __init__(self, spec: dict[str, Any], new_id: Callable[[], str], primary_account_id: str, primary_user_id: str,
                 primary_domain_id: str) -> None:
        self.domains: dict[str, Domain] = {}
        self.accounts: dict[str, Account] = {}
        self.projects: dict[str, Project] = {}
        by_name: dict[str, Domain] = {}
        for number, entry in enumerate(spec["domains"], start=1):
            parent = by_name.get(entry["parent"]) if entry["parent"] else None
            domain_id = primary_domain_id if entry["name"] == spec["account"]["domain"] else new_id()
            path = entry["name"] if parent is None else f"{parent.path}/{entry['name']}"
            domain = Domain(domain_id, number, entry["name"], parent.id if parent else None, path, entry["limits"])
            self.domains[domain.id] = domain
            by_name[domain.name] = domain
        self._domain_by_name = by_name
        primary = spec["account"]
        number = 2  # 1 is the system account
        self.primary = Account(primary_account_id, number, primary["name"], by_name[primary["domain"]].id,
                               primary["role"], primary["limits"], primary_user_id, primary["apikey"],
                               primary["secretkey"])
        self.accounts[self.primary.id] = self.primary
        self.primary.key_pairs = key_pairs(primary.get("keys", []), new_id, spec["created"])
        for entry in spec["accounts"]:
            number += 1
            account = Account(new_id(), number, entry["name"], by_name[entry["domain"]].id, entry["role"],
                              entry["limits"], new_id(), entry["apikey"], entry["secretkey"])
            account.key_pairs = key_pairs(entry.get("keys", []), new_id, spec["created"])
            self.accounts[account.id] = account
        for entry in spec["projects"]:
            number += 1
            project_id = new_id()
            account = Account(new_id(), number, f"PrjAcct-{entry['name']}-{project_id}", by_name[entry["domain"]].id,
                              "project", entry["limits"], new_id(), project_id=project_id)
            self.accounts[account.id] = account
            members = [self.account_named(n).id for n in entry["accounts"]]
            self.projects[project_id] = Project(project_id, entry["name"], account.domain_id, account.id, members)

    # -- lookups -----------------------------------------------------------------------------

    def account_named(self, name: str) -> Account:
        return next(a for a in self.accounts.values() if a.name == name and a.role != "project")

    def project_named(self, name: str) -> Project:
        return next(p for p in self.projects.values() if p.name == name)

    def domain_named(self, name: str) -> Domain:
        return self._domain_by_name[name]

    def owner_id(self, ref: dict[str, Optional[str]]) -> str:
        """The owning account of a spec entry's ``account``/``project`` (default: the primary)."""
        if ref.get("project"):
            return self.project_named(ref["project"]).account_id  # type: ignore[arg-type]
        if ref.get("account"):
            return self.account_named(ref["account"]).id  # type: ignore[arg-type]
        return self.primary.id

    def by_apikey(self) -> dict[str, Account]:
        """Every key that may sign a call, the account's own and its key pairs (4.23), to the account."""
        found = {a.apikey: a for a in self.accounts.values() if a.apikey}
        found.update({k.apikey: a for a in self.accounts.values() for k in a.key_pairs})
        return found

    def key_pairs_by_apikey(self) -> dict[str, KeyPair]:
        return {k.apikey: k for a in self.accounts.values() for k in a.key_pairs}

    def secrets(self) -> dict[str, str]:
        found = {a.apikey: a.secretkey or "" for a in self.accounts.values() if a.apikey}
        found.update({k.apikey: k.secretkey for a in self.accounts.values() for k in a.key_pairs})
        return found

    def key_listing(self) -> list[dict[str, Any]]:
        """env.json's ``keys``: every account that can call the API, with its role and domain (a key
        pair of an account also with its ``keypair`` name)."""
        listed = []
        for a in self.accounts.values():
            base = {"account": a.name, "domain": self.domains[a.domain_id].name, "domainid": a.domain_id, "role": a.role}
            if a.apikey:
                listed.append(dict(base, apikey=a.apikey, secretkey=a.secretkey))
            listed.extend(dict(base, apikey=k.apikey, secretkey=k.secretkey, keypair=k.name) for k in a.key_pairs)
        return listed

    def project_of(self, account: Account) -> Optional[Project]:
        return self.projects.get(account.project_id or "")

    def ancestors(self, domain_id: str) -> list[str]:
        """The domain and its parents up to ROOT."""
        out = []
        current: Optional[str] = domain_id
        while current is not None:
            out.append(current)
            current = self.domains[current].parent_id
        return out

    def in_subtree(self, domain_id: str, top_id: str) -> bool:
        return top_id in self.ancestors(domain_id)

    def owner_fields(self, account_id: str) -> dict[str, Any]:
        """ApiResponseHelper.populateOwner/populateDomain: account or project, then the domain."""
        account = self.accounts[account_id]
        domain = self.domains[account.domain_id]
        out: dict[str, Any] = {}
        project = self.project_of(account)
        if project is not None:
            out.update(projectid=project.id, project=project.name)
        else:
            out["account"] = account.name
        out.update(domainid=domain.id, domain=domain.name, domainpath=domain.path)
        return out

    # -- access (AccountManagerImpl.checkAccess and its security checkers) ---------------------

    def can_access(self, caller: Account, owner_id: str) -> bool:
        """DomainChecker.checkAccess for an entity owned by ``owner_id``."""
        if caller.role == "admin":
            return True
        owner = self.accounts[owner_id]
        if caller.id == owner.id:
            return True
        project = self.project_of(owner)
        if project is not None and caller.id in project.member_ids:
            return True
        if caller.role == "domainadmin":
            return self.in_subtree(owner.domain_id, caller.domain_id)
        return False

    def check_access(self, caller: Account, owner_id: str, entity_ref: str) -> None:
        if not self.can_access(caller, owner_id):
            raise OwnerError(531, f"{caller.ref()} does not have permission to operate with resource {entity_ref}",
                             CS_PERMISSION_DENIED)

    def check_group_access(self, caller: Account, group_owner_id: str, domain_level_id: Optional[str],
                           entity_ref: str) -> None:
        """AffinityGroupAccessChecker.checkAccess (UseEntry, as ``@ACL`` on affinitygroupids asks)."""
        if caller.role == "admin":
            return  # checkAccess lets a root admin through before any checker
        if domain_level_id is not None:
            if domain_level_id not in self.ancestors(caller.domain_id):
                raise OwnerError(531, f"Affinity group is not available in domain id={self.domains[caller.domain_id].id}",
                                 CS_PERMISSION_DENIED)
            return
        if caller.id == group_owner_id:
            return
        project = self.project_of(self.accounts[group_owner_id])
        if project is not None and caller.id in project.member_ids:
            return
        raise OwnerError(531, f"{caller.ref()} does not have permission to operate with resource {entity_ref}",
                         CS_PERMISSION_DENIED)

    # -- list scope (AccountManagerImpl.buildACLSearchParameters) ------------------------------

    def list_scope(self, caller: Account, values: dict[str, Any]) -> Callable[[str], bool]:
        """A predicate on an owner account id: what this list call may show."""
        id_given = bool(values.get("id") or values.get("ids"))
        listall = bool(values.get("listall"))
        recursive = bool(values.get("isrecursive"))
        domain_id = values.get("domainid")
        account_name = values.get("account")
        project_id = values.get("projectid")
        if domain_id is not None:
            domain = self.domains.get(domain_id)
            if domain is None:
                raise OwnerError(431, f"Unable to find domain by id {domain_id}", 4350)
            # DomainChecker.checkAccess(Account, Domain): a user may name its own domain, an admin its subtree.
            allowed = (caller.role == "admin"
                       or (caller.role == "user" and domain_id == caller.domain_id)
                       or (caller.role == "domainadmin" and self.in_subtree(domain_id, caller.domain_id)))
            if not allowed:
                raise OwnerError(531, f"Account {caller.name} does not have permission to operate within domain id={domain.id}",
                                 CS_PERMISSION_DENIED)
        permitted: Optional[set[str]] = None
        if account_name is not None:
            if project_id is not None:
                raise OwnerError(431, "Account and projectId can't be specified together", 4350)
            where = domain_id or caller.domain_id
            found = next((a for a in self.accounts.values()
                          if a.name == account_name and a.domain_id == where and a.role != "project"), None)
            if found is None:
                raise OwnerError(431, f"could not find account {account_name} in domain {where}", 4350)
            if not self.can_access(caller, found.id):
                raise OwnerError(531, f"{caller.ref()} does not have permission to operate with resource {found.ref()}",
                                 CS_PERMISSION_DENIED)
            permitted = {found.id}
        if project_id is not None:
            if project_id == "-1":
                projects = [p for p in self.projects.values() if caller.role != "user" or caller.id in p.member_ids]
                allowed = {p.account_id for p in projects}
                if caller.role == "domainadmin":
                    allowed = {a for a in allowed if self.in_subtree(self.accounts[a].domain_id, caller.domain_id)}
                return lambda owner: owner in allowed
            project = self.projects.get(project_id)
            if project is None:
                raise OwnerError(431, f"Unable to find project by id {project_id}", 4350)
            if not self.can_access(caller, project.account_id):
                raise OwnerError(531, f"Account {caller.ref()} can't access project id={project_id}", CS_PERMISSION_DENIED)
            return lambda owner: owner == project.account_id
        skip_projects = not id_given
        top: Optional[str] = domain_id
        if permitted is None and domain_id is None:
            if caller.role == "user":
                permitted = {caller.id}
            elif not listall:
                if not id_given:
                    permitted = {caller.id}
                elif caller.role == "domainadmin":
                    top, recursive = caller.domain_id, True
            elif caller.role == "domainadmin":
                top, recursive = caller.domain_id, True

        def allowed_owner(owner_id: str) -> bool:
            owner = self.accounts[owner_id]
            if skip_projects and owner.role == "project":
                return False
            if permitted is not None:
                return owner_id in permitted
            if top is not None:
                return self.in_subtree(owner.domain_id, top) if recursive else owner.domain_id == top
            return True

        return allowed_owner

    # -- resource limits (ResourceLimitManagerImpl) --------------------------------------------

    def limit(self, kind: str, owner: Any, resource: str) -> int:
        """The limit in the API's unit (cores, MiB, bytes for primary storage); -1 unlimited."""
        if kind == "domain" and owner.parent_id is None:
            return UNLIMITED  # findCorrectResourceLimitForDomain: the ROOT domain has none
        if kind == "account" and owner.role == "admin":
            return UNLIMITED
        default_kind = "project" if kind == "account" and owner.role == "project" else kind
        value = owner.limits.get(resource, DEFAULT_LIMITS[default_kind][resource])
        if resource == "primarystorage" and value != UNLIMITED:
            value *= GIB
        return value

    def check_limit(self, owner_id: str, resource: str, amount: int, usage: Callable[[str, str, str], int]) -> None:
        """checkResourceLimitWithTag: the account, then every domain above it but ROOT.

        ``usage(kind, id, resource)`` gives the current count of an account or a domain.
        """
        if amount <= 0:
            return
        account = self.accounts[owner_id]
        if account.role == "admin":
            return  # "Don't place any limits on system or root admin accounts"
        type_name = RESOURCE_TYPES[resource][1]

        def shown(value: int) -> str:
            return human_size(value) if resource == "primarystorage" else str(value)

        project = self.project_of(account)
        limit = self.limit("account", account, resource)
        current = usage("account", account.id, resource)
        if limit != UNLIMITED and current + amount > limit:
            who = f"Project Name = {project.name}" if project else f"Account Name = {account.name}"
            raise OwnerError(535, (
                f"Maximum amount of resources of Type = '{type_name}', tag = 'null' for {who} in Domain Id = "
                f"{self.domains[account.domain_id].number} is exceeded: Account Resource Limit = {shown(limit)}, "
                f"Current Account Resource Amount = {shown(current)}, Current Account Resource Reservation = "
                f"{shown(0)}, Requested Resource Amount = {shown(amount)}."), CS_RESOURCE_ALLOCATION)
        for domain_id in self.ancestors(account.domain_id):
            domain = self.domains[domain_id]
            limit = self.limit("domain", domain, resource)
            current = usage("domain", domain_id, resource)
            if limit != UNLIMITED and current + amount > limit:
                raise OwnerError(535, (
                    f"Maximum domain resource limits of Type '{type_name}' for Domain Id = {domain.id} is exceeded: "
                    f"Domain Resource Limit = {shown(limit)}, Current Domain Resource Amount = {shown(current)}, "
                    f"Current Resource Reservation = {shown(0)}, Requested Resource Amount = {shown(amount)}."),
                    CS_RESOURCE_ALLOCATION)
