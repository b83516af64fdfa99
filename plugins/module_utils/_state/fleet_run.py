# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The fleet run's folder on the controller: one sub-folder per cluster, its outcome, and the fleet report.

The clusters of a fleet run end in processes of their own (one ``cks_fleet_rollout`` each), and after a
cancel of the fleet's job each of them rewrites the fleet report from the outcomes in the folder. Two
clusters ending at the same moment would race: A reads the outcomes before B wrote its own, B writes the
report with both, A's replace lands last and the report lacks B. So "write my outcome, read every outcome,
write the report" is done under an exclusive lock on a file of the folder (``fcntl.flock``): the last
writer sees every outcome written before it. A cluster that ends by itself after a cancel rewrote the
report (its run ended before it could be asked to stop) rewrites it too, so no outcome is left out.
"""

from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.report_file import write_private_json

OUTCOME_FILE = "outcome.json"
#: Taken around each outcome written and each fleet report rewritten (not a cluster's folder: no name clash).
LOCK_FILE = ".fleet.lock"
#: Left by the first cluster that rewrote the fleet report after a cancel: the clusters ending later rewrite it too.
CANCELLED_MARK = ".fleet-cancelled"

#: Builds the fleet report from the outcomes written so far.
ReportBuilder = Callable[[Sequence[Mapping[str, Any]]], Mapping[str, Any]]


def read_json(path: str) -> Optional[dict[str, Any]]:
    """The JSON object in ``path`` (None: missing, unreadable or not an object)."""
    try:
        with open(path, encoding="utf-8") as fh:
            found = json.load(fh)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


class FleetRunFolder:
    """The fleet run's folder: one sub-folder per cluster, each with its outcome once it ended."""

    def __init__(self, path: str) -> None:
        self.path = path

    def cluster_folder(self, folder_name: str) -> str:
        folder = os.path.join(self.path, folder_name)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        return folder

    def outcomes(self) -> list[dict[str, Any]]:
        found = []
        for entry in sorted(os.listdir(self.path)):
            outcome = read_json(os.path.join(self.path, entry, OUTCOME_FILE))
            if outcome is not None:
                found.append(outcome)
        return found

    def failed_clusters(self) -> list[str]:
        return [str(found.get("cluster")) for found in self.outcomes() if found.get("outcome") == "failed"]

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive among the clusters of this fleet run (every process on this controller); released on close."""
        fd = os.open(os.path.join(self.path, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def end_cluster(self, folder_name: str, outcome: Mapping[str, Any], cancelled: bool, report_path: str,
                    build_report: ReportBuilder) -> bool:
        """Write a cluster's outcome; after a cancel, rewrite the fleet report with every outcome.

        ``cancelled``: this cluster's run was going on when the fleet's job was cancelled. Whether the report was written.
        """
        mark = os.path.join(self.path, CANCELLED_MARK)
        with self.locked():
            write_private_json(os.path.join(self.cluster_folder(folder_name), OUTCOME_FILE), outcome, indent=2, sort_keys=False)
            if not cancelled and not os.path.exists(mark):
                return False
            write_private_json(report_path, build_report(self.outcomes()), indent=2, sort_keys=False)
            if not os.path.exists(mark):
                os.close(os.open(mark, os.O_WRONLY | os.O_CREAT, 0o600))
            return True
