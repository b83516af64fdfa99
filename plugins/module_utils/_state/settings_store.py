# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The settings and max_unavailable as the rollout record stores them."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, InvalidInput, LockHeld
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, initial_settings
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import WORKER, ClusterView
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import (
    LOCK_NAME,
    NAMESPACE,
    RECORD_NAME,
    LockInfo,
    Record,
    held_refusal,
    parse_microtime,
)

#: The worker batch size is kept in the worker type's entry: TypeSettings.from_dict ignores keys
#: it does not know, so every reader of the record still reads it with plan.Settings.from_dict.
MAX_UNAVAILABLE_KEY = "max_unavailable"


def stored_settings(record: Optional[Record]) -> Optional[Settings]:
    """The settings the record holds, or None before first use."""
    if record is None or not record.settings:
        return None
    try:
        return Settings.from_dict(record.settings)
    except InvalidInput as exc:
        raise CksError(f"the rollout record {NAMESPACE}/{RECORD_NAME} holds settings that cannot "
                       f"be read ({exc.msg}); store the settings again or delete the ConfigMap")


def stored_max_unavailable(record: Optional[Record]) -> Optional[int]:
    worker = (record.settings or {}).get(WORKER) if record is not None else None
    value = worker.get(MAX_UNAVAILABLE_KEY) if isinstance(worker, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def settings_data(settings: Settings, max_unavailable: Optional[int]) -> dict[str, Any]:
    data = settings.to_dict()
    if max_unavailable is not None:
        data[WORKER][MAX_UNAVAILABLE_KEY] = max_unavailable
    return data


def effective_settings(view: ClusterView, record: Optional[Record]) -> tuple[Settings, bool]:
    """The settings the nodes are judged against, and whether they are recorded.

    Before first use they are the ones copied from the cluster (``_decisions.settings.initial_settings``).
    """
    stored = stored_settings(record)
    if stored is not None:
        return stored, True
    return initial_settings(view), False


def lock_dict(info: Optional[LockInfo]) -> Optional[dict[str, Any]]:
    if info is None:
        return None
    return {"holder": info.holder, "held": info.held, "acquire_time": info.acquire_time,
            "renew_time": info.renew_time, "duration_seconds": info.duration_seconds,
            "expired": info.expired, "taken_over_from": info.taken_over_from, **_holder_fields(info)}


def _holder_fields(info: LockInfo) -> dict[str, Any]:
    """Who holds it (controller, batch) and when it ends, as status and the refusals show them."""
    summary = info.summary()
    summary.pop("holder")
    return summary


def lock_held_error(info: LockInfo) -> LockHeld:
    return held_refusal(info, f"{NAMESPACE}/{LOCK_NAME}")


def cancel_older_than_lock(updated: Optional[str], acquired: Optional[str]) -> bool:
    """Whether the record was last written before the lock was taken."""
    if not updated or not acquired:
        return True
    try:
        return parse_microtime(updated) < parse_microtime(acquired)
    except ValueError:
        return True
