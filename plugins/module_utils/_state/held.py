# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The rollout lock as a batch's module run holds it: the run that took it handed on its holder and
the lease's version (``lock_version``), and each batch renews from them."""

from __future__ import annotations

from typing import Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import StateApi
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import Lock


def held_lock(kube: StateApi, holder: Optional[str], version: Optional[str] = None) -> Optional[Lock]:
    """The rollout lock as held by ``holder`` (None: no lock is checked), keeping its duration.

    ``version``: the lease's resourceVersion as this holder's previous module run last wrote it
    (its ``lock_version``). Then nothing is read: the batch's renewal is one write conditional on
    that version, and a lease anyone wrote since is read and judged as without it.
    """
    if not holder:
        return None
    if version:
        unread = Lock(kube, holder_identity=holder)
        unread.written_version = str(version)
        return unread

    probe = Lock(kube, holder_identity=holder)
    lease = kube.get_lease(probe.namespace, probe.name)
    current = probe._info(lease) if lease is not None else None
    duration = current.duration_seconds if current is not None and current.duration_seconds > 0 else None
    lock = Lock(kube, holder_identity=holder, duration_seconds=duration) if duration else Lock(kube, holder_identity=holder)
    # The batch's first renewal judges this read instead of reading the lease again.
    lock.just_read = lease
    return lock
