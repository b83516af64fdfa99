# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The etcd check a batch asks before a member goes down and after it is back."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError

#: ``etcd_check(without=[members], healthy=[members]) -> (ok, message)``: etcd keeps a quorum of
#: healthy voting members without ``without``, every member in ``healthy`` is healthy, and etcd
#: answers a quorum read. Member names are node names.
EtcdCheck = Callable[..., "tuple[bool, str]"]


def etcd_check_from(client: Any) -> EtcdCheck:
    """An ``EtcdCheck`` over ``etcd.EtcdClient``: its quorum verdict, plus named members healthy."""

    def check(without: Sequence[str] = (), healthy: Sequence[str] = ()) -> tuple[bool, str]:
        try:
            verdict = client.check(going_down=list(without))
        except CksError as exc:
            # Unreachable or a name etcd does not know: not proven safe (verify polls again).
            return False, exc.msg
        if not verdict.safe:
            return False, verdict.message
        # Without case: node names are lowercase, external etcd members keep the cluster's case.
        members = {m.name.lower(): m for m in verdict.members}
        missing = [name for name in healthy if name.lower() not in members]
        sick = [f"{name} ({members[name.lower()].reason or 'unhealthy'})" for name in healthy
                if name.lower() in members and not members[name.lower()].healthy]
        if missing:
            return False, f"not an etcd member: {', '.join(missing)}; {verdict.message}"
        if sick:
            return False, f"member not healthy yet: {', '.join(sick)}; {verdict.message}"
        return True, verdict.message

    return check
