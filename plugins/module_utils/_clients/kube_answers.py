# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""What the Eviction API's answers mean: accepted, blocked by a PodDisruptionBudget (and which),
covered by more than one, gone, or failed."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional


@dataclass(frozen=True)
class EvictionResult:
    """What the Eviction API said about one pod.

    ``outcome``: ``evicted`` (accepted; the pod still has to go away), ``blocked`` (429: a PDB
    does not allow it now, retry later; ``pdb`` names it when the server said), ``multiple_pdbs``
    (500: more than one PDB covers the pod, retrying does not help), ``gone`` (404), ``failed``.
    """

    outcome: str
    status: int
    message: str = ""
    pdb: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.outcome in ("evicted", "gone")


def eviction_result(status_code: int, status: Mapping[str, Any]) -> EvictionResult:
    """Classify an Eviction API answer (``status`` is the Status body)."""
    message = str(status.get("message") or "")
    if 200 <= status_code < 300:
        return EvictionResult("evicted", status_code, message)
    if status_code == 404:
        return EvictionResult("gone", status_code, message)
    if status_code == 429:
        pdb = None
        causes = (status.get("details") or {}).get("causes") or []
        for cause in causes:
            if cause.get("reason") == "DisruptionBudget":
                message = str(cause.get("message") or message)
                found = re.search(r"disruption budget (\S+)", message, re.IGNORECASE)
                if found:
                    pdb = found.group(1)
                break
        return EvictionResult("blocked", status_code, message, pdb)
    if status_code == 500 and "more than one" in message.lower():
        return EvictionResult("multiple_pdbs", status_code, message)
    return EvictionResult("failed", status_code, message)
