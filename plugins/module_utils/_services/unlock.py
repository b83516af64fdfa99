# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The service behind cks_node_cycle (mode=unlock): take over the lock of a holder the operator names
as gone, and release its rollout.

A holder whose host is gone cannot release, and nobody elsewhere can prove it gone: only its lease's
expiry says so, a minute or two later. The operator who knows (the host is down, the AWX job's pod is
deleted) names the holder, and the lock is taken at once - unless the lease is still being renewed: a
batch at work renews it every third of its duration, so the lease is watched that long (plus
``WATCH_MARGIN_SECONDS``) and a renewal meanwhile refuses the unlock. A rollout between two batches
(no renewal then) that is unlocked fails its next batch's renewal and stops there, touching nothing.

The takeover is one write conditional on the version watched (a renewal since makes it fail), and
then the release runs as after any rollout: the nodes that are back are uncordoned, the others
stay cordoned with why, the outcome and why are recorded, the lock is given back.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from typing import Any, Callable, Mapping

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, InvalidInput, LockHeld
from ansible_collections.cloudstack.cks.plugins.module_utils._services.release import node_release
from ansible_collections.cloudstack.cks.plugins.module_utils._services.session import ClusterSession
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import Lock, LockInfo, format_microtime, utcnow
from ansible_collections.cloudstack.cks.plugins.module_utils._state.settings_store import lock_dict

#: Past a third of the lease's duration (the renewer's period): a renewal's own round trip.
WATCH_MARGIN_SECONDS = 2.0


def watch_seconds(info: LockInfo) -> float:
    """How long a lease must stay unrenewed before its holder counts as not renewing it."""
    return max(1.0, info.duration_seconds / 3) + WATCH_MARGIN_SECONDS


def node_unlock(session: ClusterSession, params: Mapping[str, Any], check_mode: bool = False,
                sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    holder = params.get("lock_holder")
    if not holder:
        raise InvalidInput("lock_holder", holder, "names the holder to unlock, as the refusal or the status playbook gives it")
    unlocker = Lock(session.kube, holder_identity=f"unlock-{uuid.uuid4().hex[:8]}")
    info = unlocker.read()
    if info is None or not info.holder:
        return {"changed": False, "lock": lock_dict(info),
                "msg": "the lock is free: nothing to unlock; the next rollout starts at once"}
    if info.holder != holder:
        raise CksError(f"the lock is held by {info.who()}, not by {holder}: nothing was unlocked; name the holder "
                       f"the refusal or the status playbook gives", holder=info.holder)
    watched = 0.0
    if not info.expired:
        watched = watch_seconds(info)
        if check_mode:
            return {"changed": True, "lock": lock_dict(info),
                    "msg": f"would watch the lock of {info.who()} for {watched:g}s and take it if it is not renewed meanwhile"}
        sleep(watched)
        again = unlocker.read()
        if again is None or again.holder != holder:
            return {"changed": False, "lock": lock_dict(again),
                    "msg": f"the lock of {holder} was released or taken meanwhile: nothing to unlock"}
        if again.resource_version != info.resource_version:
            raise LockHeld(f"not unlocked: the lock of {again.who()} is still being renewed (last at {again.renew_time}, "
                           f"while this watched it for {watched:g}s): its rollout is running. Cancel it instead "
                           f"(ansible-playbook cloudstack.cks.cancel -e rollout_cluster=<cluster>: it stops before its next "
                           f"batch), or wait for it to end", holder=again.holder, renew_time=again.renew_time)
    elif check_mode:
        return {"changed": True, "lock": lock_dict(info),
                "msg": f"would take the lock of {info.who()} ({info.gone or 'its lease expired'}) and release its rollout"}
    # Judged gone now; the write is conditional on the version judged, so a renewal since still wins.
    taken = unlocker.acquire(seen=replace(info, expired=True))
    why = info.gone or ("its lease expired" if watched == 0.0 else f"its lease was not renewed for {watched:g}s")
    batch = info.summary().get("batch")
    last_error = (f"the rollout {info.who()} stopped without its release{(' during ' + batch) if batch else ''} "
                  f"({why}); unlocked by the operator at {format_microtime(utcnow())}: run the rollout again to resume")
    released = node_release(session, {"cluster": params.get("cluster"), "project_id": params.get("project_id"),
                                      "lock_holder": unlocker.holder_identity,
                                      "rollout": {"run_id": unlocker.holder_identity, "last_error": last_error,
                                                  "ended": f"stopped without release{(' during ' + batch) if batch else ''}; "
                                                           "unlocked"}})
    return {"changed": True, "lock": lock_dict(taken), "unlocked": info.summary(), "release": released["release"],
            "after": released.get("after"), "msg": f"unlocked the lock of {info.who()} and released its rollout: {last_error}"}
