# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The etcd check a batch asks before a member goes down and after it is back."""

from __future__ import annotations

from typing import Callable, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd import QuorumClient
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.etcd_members import match_members

#: ``etcd_check(without=[members], healthy=[members]) -> (ok, message)``: etcd keeps a quorum of
#: healthy voting members without ``without``, every member in ``healthy`` is healthy, and etcd
#: answers a quorum read. The names are node names, matched to members by name without case or,
#: through ``addresses`` (node name to IP address), by the members' peer URLs.
EtcdCheck = Callable[..., "tuple[bool, str]"]


def etcd_check_from(client: QuorumClient) -> EtcdCheck:
    """An ``EtcdCheck`` over a quorum client: its quorum verdict, plus named members healthy."""

    def check(without: Sequence[str] = (), healthy: Sequence[str] = (),
              addresses: Optional[Mapping[str, Optional[str]]] = None) -> tuple[bool, str]:
        try:
            verdict = client.check(going_down=list(without), addresses=addresses)
        except CksError as exc:
            # Unreachable or a name etcd does not know: not proven safe (verify polls again).
            return False, exc.msg
        if not verdict.safe:
            return False, verdict.message
        match = match_members(verdict.members, list(healthy), addresses)
        members = {m.name: m for m in verdict.members if m.name}
        sick = [f"{name} ({members[member].reason or 'unhealthy'})" for name, member in match.members.items()
                if not members[member].healthy]
        if match.unknown:
            return False, f"not an etcd member: {', '.join(match.unknown)}; {verdict.message}"
        if sick:
            return False, f"member not healthy yet: {', '.join(sick)}; {verdict.message}"
        return True, verdict.message

    return check
