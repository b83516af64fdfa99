# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""What the API key may call and when it ends, for the check before the lock (``_decisions.api_access``).

``listApis`` without a name lists every command the caller may call (a key pair with rules: only
what they allow); one call, read whole (it has no paging). Where it lists ``listUserKeys``, that
command with ``listall`` lists the caller's key pairs (CloudStack 4.23, object ``userapikey``;
``count`` counts key pairs the answer leaves out, so it is not paged by it): the entry whose
``apikey`` is the one the calls are signed with gives its name and ``enddate``. Only those two
fields are kept; the answer also carries the keys' secrets, which go nowhere.
"""

from __future__ import annotations

from typing import Any, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError
from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import CloudStackApi
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.api_access import ApiAccessReads, key_entry


def _signing_key(cloud: CloudStackApi) -> Optional[str]:
    options: Any = getattr(cloud, "options", None)
    key = getattr(options, "api_key", None)
    return str(key) if key else None


def read_api_access(cloud: CloudStackApi) -> tuple[ApiAccessReads, list[str]]:
    """What listApis and listUserKeys say of this key, with a note for what could not be read."""
    notes: list[str] = []
    allowed: Optional[frozenset[str]] = None
    try:
        listed = cloud.call("listApis")
        allowed = frozenset(str(api.get("name")) for api in listed.get("api") or [] if isinstance(api, dict))
    except CksError as exc:
        notes.append(f"this key cannot list the commands it may call (listApis: {exc.msg}): whether it may send "
                     "every command the rollout needs was not checked")
    name = end = None
    key = _signing_key(cloud)
    # Asked only of a cloud and key that list it: an older cloud, or a key whose rules leave it out,
    # has no end date to tell.
    if key is not None and allowed is not None and "listUserKeys" in allowed:
        try:
            answer = cloud.call("listUserKeys", listall=True)
        except CksError as exc:
            notes.append(f"this key cannot list its key pairs (listUserKeys: {exc.msg}): whether it expires during the "
                         "rollout was not checked")
        else:
            entries = [k for k in (answer.get("userapikey") or answer.get("userkeys") or []) if isinstance(k, dict)]
            entry = key_entry(entries, key)
            if entry is not None:
                name = str(entry["name"]) if entry.get("name") else None
                end = str(entry["enddate"]) if entry.get("enddate") else None
    return ApiAccessReads(allowed, name, end), notes
