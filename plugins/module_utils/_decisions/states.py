# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The CKS cluster states that allow a rollout, and those in which another operation holds the cluster."""

from __future__ import annotations

#: A rollout starts from these CKS states (and tolerates the Alert it causes itself).
ROLLOUT_STATES = frozenset({"Running", "Alert"})


#: CKS states in which another operation holds the cluster, or it is going away.
BUSY_STATES = frozenset({"Starting", "Stopping", "Scaling", "ScalingStoppedCluster", "Upgrading",
                         "Importing", "RemovingNodes", "Recovering", "Destroying", "Destroyed"})
