# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""What a node's verify waits for: the Node Ready with a new boot ID, its etcd member healthy, and
the wait for the load balancers after its drain. Each takes what it reads as arguments."""

from __future__ import annotations

import time
from typing import Any, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import DeadlineExceeded, StepFailed
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline, wait_for
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node import node_is_back
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import Node
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.options import BatchContext


def wait_until_back(batch: BatchContext, node: Node, old_boot_ids: Sequence[Optional[str]],
                    since: Optional[dict[str, Any]], deadline: Deadline) -> tuple[dict[str, Any], str]:
    """Ready with a boot ID other than every one in ``old_boot_ids``: a stale Ready is not enough.
    Returns the Node as it came back and why it counts as back."""
    last = {"why": ""}

    def back(current: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
        if current is None:
            last["why"] = "the Node is not in the API"
            return None
        ok, why = node_is_back(current, list(old_boot_ids))
        last["why"] = why
        return current if ok else None

    try:
        # A watch: the node's next status post arrives as an event, not at the next poll.
        # From the stop annotation's answer (``since``): every status the node posts after it is an
        # event. The batch's one watch of its nodes, where there is one.
        found = batch.node_waits.await_node(node.name, back, deadline, batch.options.poll_interval,
                                            what=f"node {node.name} to come back", since=since)
    except DeadlineExceeded:
        raise StepFailed(node.name, "verify", f"not back by the batch deadline: {last['why']}")
    return found, last["why"]


def wait_for_etcd(batch: BatchContext, node: Node, deadline: Deadline) -> str:
    """Until the node's etcd member is healthy, through the batch's etcd check."""
    check = batch.etcd_check
    if check is None:
        raise StepFailed(node.name, "verify", "no etcd check configured to prove the member is back")
    last = {"why": ""}

    def etcd_back() -> bool:
        ok, why = check(healthy=[node.name], addresses={node.name: node.ip_address})
        last["why"] = why
        return ok

    try:
        wait_for(etcd_back, deadline, batch.options.poll_interval, what=f"etcd member {node.name}")
    except DeadlineExceeded:
        raise StepFailed(node.name, "verify", f"etcd not healthy by the batch deadline: {last['why']}")
    return f"etcd healthy: {last['why']}"


def wait_for_load_balancers(node: Node, delay_seconds: float, deadline: Deadline) -> str:
    """The wait after the drain for the load balancers to drop the node, refused up front when the
    batch deadline leaves less."""
    delay = max(0.0, float(delay_seconds))
    if deadline.remaining() < delay:
        raise StepFailed(node.name, "lb_wait", f"the batch deadline leaves {deadline.remaining():.0f}s, "
                         f"less than the {delay:g}s to wait for the load balancers")
    time.sleep(delay)
    return f"waited {delay:g}s after the drain for the load balancers to drop the node"
