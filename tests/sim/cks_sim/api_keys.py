"""API key pairs with their own rules and validity (CloudStack 4.23, apache/cloudstack pull requests
9504 and 13828: ``api_keypair``, ``api_keypair_permissions``; listUserKeys).

A spec gives an account more key pairs besides its ``apikey``:

    account:
      keys:
        - name: rollout
          apikey: rollout-key
          secretkey: rollout-secret
          enddate: "2026-12-07T05:00:00+0000"   # ApiKeyPairVO.endDate; startdate likewise
          rules:                                 # in order; the first whose rule matches decides
            - {rule: "list*", permission: allow}
            - {rule: stopVirtualMachine, permission: allow}
            - startVirtualMachine                # a plain name: allow

Read in apache/cloudstack (4.23):

- ``ApiKeyPairVO.validateDate``: a key before its start date or at/after its end date is refused
  ("Keypair is expired ..."); ``ApiServer.verifyRequest`` then answers 401 with its one text;
- ``DynamicRoleBasedAPIAccessChecker.checkAccess`` with a key pair that has explicit permissions:
  only the key's rules count (the role's annotations are not used, ``keyPairOverride``), the first
  rule matching the command decides, none matching throws ``UnavailableCommandException`` (432,
  "The API [X] does not exist or is not available for the account <name>.");
  ``ApiKeyPairServiceImpl.findAllPermissionsByKeyPairId`` keeps only the rules the account's role
  allows (pull request 13828), so a key never exceeds its role;
- ``ListUserKeysCmd`` (object ``userapikey``, ``ApiKeyPairResponse``): the caller's key pairs, the
  last made unless ``listall``; a key with rules sees only the key pairs whose rules are within
  its own (13828), and ``count`` is the total before that filter (a 4.23 quirk named in 13828's
  review: a client must not page by it).

Whether 4.23's ``ApiDiscoveryServiceImpl.listApis`` narrows by the key's rules is taken from the
pull requests' descriptions (the 4.23 source of it is not in the index read): a key with rules
lists only what its rules allow.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Optional

DATE_FORMAT = "%Y-%m-%dT%H:%M:%S%z"
PERMISSIONS = ("allow", "deny")


@dataclass
class KeyPair:
    id: str
    name: str
    apikey: str
    secretkey: str = field(repr=False)
    rules: list[tuple[str, str]]  # (rule, allow|deny), in order
    created: str
    startdate: Optional[str] = None
    enddate: Optional[str] = None

    def valid_at(self, now: datetime) -> bool:
        """ApiKeyPairVO.validateDate: after the start (exclusive), before the end (exclusive)."""
        if self.startdate is not None and now <= parse_date(self.startdate):
            return False
        return self.enddate is None or now < parse_date(self.enddate)

    def decides(self, command: str) -> Optional[bool]:
        """The first rule matching ``command`` (RolePermission rules: ``*`` wildcards, case-sensitive)."""
        for rule, permission in self.rules:
            if fnmatch.fnmatchcase(command, rule):
                return permission == "allow"
        return None

    def allows(self, command: str) -> bool:
        """A key without rules is its account's role; one with rules allows only what they allow."""
        return not self.rules or bool(self.decides(command))

    def within(self, other: KeyPair) -> bool:
        """Whether every command this key allows by name the other allows too (listUserKeys' filter)."""
        return all(other.allows(rule) for rule, permission in self.rules if permission == "allow") and bool(self.rules)


def parse_date(text: str) -> datetime:
    return datetime.strptime(text, DATE_FORMAT)


def normalize_keys(raw: Any, where: str, error: type[Exception]) -> list[dict[str, Any]]:
    """The ``keys`` of an account in the spec, checked."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise error(f"{where}: must be a list of key pairs")
    out = []
    for i, entry in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(entry, dict):
            raise error(f"{at}: must be a mapping")
        unknown = set(entry) - {"name", "apikey", "secretkey", "rules", "startdate", "enddate"}
        if unknown:
            raise error(f"{at}: unknown key(s) {', '.join(sorted(unknown))}")
        for needed in ("name", "apikey", "secretkey"):
            if not isinstance(entry.get(needed), str) or not entry[needed]:
                raise error(f"{at}.{needed}: a non-empty string is needed")
        rules = []
        for j, rule in enumerate(entry.get("rules") or []):
            if isinstance(rule, str):
                rule = {"rule": rule}
            if not isinstance(rule, dict) or not isinstance(rule.get("rule"), str):
                raise error(f"{at}.rules[{j}]: a command name (with * wildcards) or {{rule, permission}}")
            permission = str(rule.get("permission", "allow")).lower()
            if permission not in PERMISSIONS:
                raise error(f"{at}.rules[{j}].permission must be allow or deny, got {rule.get('permission')!r}")
            rules.append({"rule": rule["rule"], "permission": permission})
        dates = {}
        for name in ("startdate", "enddate"):
            value = entry.get(name)
            if value is not None:
                try:
                    parse_date(str(value))
                except ValueError:
                    raise error(f"{at}.{name}: a date as CloudStack writes it (2026-12-07T05:00:00+0000), "
                                f"got {value!r}") from None
            dates[name] = None if value is None else str(value)
        out.append({"name": entry["name"], "apikey": entry["apikey"], "secretkey": entry["secretkey"],
                    "rules": rules, **dates})
    return out


def key_pairs(entries: list[dict[str, Any]], new_id: Any, created: str) -> list[KeyPair]:
    return [KeyPair(new_id(), e["name"], e["apikey"], e["secretkey"], [(r["rule"], r["permission"]) for r in e["rules"]],
                    created, e.get("startdate"), e.get("enddate")) for e in entries]


def key_view(key: KeyPair, account: Any, owner: dict[str, Any], role: dict[str, str]) -> dict[str, Any]:
    """ApiKeyPairResponse as listUserKeys gives it."""
    view: dict[str, Any] = {
        "id": key.id, "name": key.name, "apikey": key.apikey, "secretkey": key.secretkey,
        "userid": account.user_id, "username": account.name, "created": key.created,
        "accountid": account.id, "accountname": account.name, "accounttype": role["accounttype"],
        "roletype": role["roletype"], "domainid": owner["domainid"], "domain": owner["domain"],
        "domainpath": owner.get("domainpath"), "state": "ENABLED",
        "permissions": [{"rule": r, "permission": p.upper()} for r, p in key.rules],
    }
    if key.startdate:
        view["startdate"] = key.startdate
    if key.enddate:
        view["enddate"] = key.enddate
    return view
