# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""What is dedicated in the cloud, for the placement check (``_decisions.dedication``).

``listDedicatedHosts``, ``listDedicatedClusters``, ``listDedicatedPods`` and ``listDedicatedZones``
are root admin commands (plugins/dedicated-resources); any other key is answered 432 (or 401
before 4.15), and the check then names the dedications as not read, never guessed. None of them
filters by zone: all are listed (paged), and the decision keeps what the zone's hosts are in.
"""

from __future__ import annotations

from typing import Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError
from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import CloudStackApi
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.dedication import KINDS, LIST_COMMANDS, DedicatedResource, dedication_note


def read_dedicated(cloud: CloudStackApi) -> tuple[Optional[tuple[DedicatedResource, ...]], Optional[str]]:
    """Every dedicated zone, pod, cluster and host, or None and the note when the key may not list them."""
    found: list[DedicatedResource] = []
    for kind in KINDS:
        try:
            listed = cloud.list(LIST_COMMANDS[kind])
        except CksError as exc:
            return None, dedication_note(exc.msg)
        found.extend(DedicatedResource.from_listed(kind, raw) for raw in listed)
    return tuple(found), None
