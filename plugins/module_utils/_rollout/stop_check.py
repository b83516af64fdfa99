# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Before a drain: the changes CloudStack would refuse only once the nodes are stopped.

The plan asks it for every node it hands on, and each batch again right before its drain (the
owner's headroom shrinks as earlier batches grow it, and someone may have changed a limit or a
group since the plan). The decisions are ``_decisions.stop_refusals``'; this reads only what they
need: nothing for nodes whose changes need no read.
"""

from __future__ import annotations

from typing import Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.owners import OwnerReads, read_owner
from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import CloudStackApi
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.stop_refusals import StopRefusal, needed_reads, stop_refusals
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import ClusterView, Node


def read_for(cloud: CloudStackApi, view: ClusterView, settings: Settings, nodes: Sequence[Node]) -> OwnerReads:
    """The reads the changes of ``nodes`` need to be judged."""
    needed = needed_reads(view, settings, nodes)
    return read_owner(cloud, view, needed.caller, needed.headroom)


def check_before_stop(cloud: CloudStackApi, view: ClusterView, settings: Settings,
                      nodes: Sequence[Node]) -> tuple[list[StopRefusal], list[str]]:
    """The refusals of ``nodes``' changes (in plan order), and what could not be checked."""
    reads = read_for(cloud, view, settings, nodes)
    return stop_refusals(view, settings, nodes, reads.caller, reads.headroom), reads.notes
