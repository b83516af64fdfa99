# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The UTC time stamps the collection writes into records, reports, annotations and Events.

One format everywhere (RFC 3339 to the second, ``Z``): an operator compares a rollout record's
``started`` with a node's annotation and an Event's time without converting anything.
"""

from __future__ import annotations

import time
from typing import Optional

RFC3339 = "%Y-%m-%dT%H:%M:%SZ"


def utc_stamp(seconds: Optional[float] = None) -> str:
    """``seconds`` since the epoch (now when None) as ``2026-12-07T15:52:47Z``."""
    return time.strftime(RFC3339, time.gmtime(time.time() if seconds is None else float(seconds)))
