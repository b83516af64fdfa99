# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Writing a private JSON file on the controller, whole or not at all (the rollout report, the fleet's
outcomes and report, the variables a fleet hands each cluster's run)."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Optional


def write_private_json(path: str, data: Any, indent: Optional[int] = 4, sort_keys: bool = True) -> None:
    """Write ``data`` as JSON to ``path``, mode 0600, atomically (as ``write_private_text``)."""
    write_private_text(path, json.dumps(data, indent=indent, sort_keys=sort_keys) + "\n")


def write_private_text(path: str, text: str) -> None:
    """Write ``text`` to ``path``, mode 0600, atomically.

    A reader (a fleet, AWX, a tail) sees the old file or the new one, never half of one: the text
    goes to a file beside it first (same file system, so the rename is atomic), created 0600 so the
    report is never readable by others even for a moment, then synced and renamed over ``path``.
    """
    folder = os.path.dirname(os.path.abspath(path))
    fd, partial = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".part")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), 0o600)
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(partial, path)
    except BaseException:
        try:
            os.unlink(partial)
        except OSError:
            pass
        raise
