# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""How a batch runs (timeouts, polls, drain, validation, phase), and what its nodes' cycles share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Protocol

from ansible_collections.cloudstack.cks.plugins.module_utils._common.option_defaults import default_of
from ansible_collections.cloudstack.cks.plugins.module_utils._common.protocols import CloudStackApi, KubernetesApi, NodeWaits
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.drain import DrainOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.node_events import NodeEvent
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.drainer import DaemonSets
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.etcd_check import EtcdCheck
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.start_gates import StartGates
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.steps import PHASE_ALL
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.validation import ValidationOptions

DEFAULT_BATCH_TIMEOUT: float = default_of("batch_timeout")
DEFAULT_JOB_TIMEOUT: float = default_of("job_timeout")
DEFAULT_POLL_INTERVAL: float = default_of("poll_interval")
DEFAULT_EXCLUDE_DELAY: float = default_of("exclude_delay")
DEFAULT_EVICTION_RETRY_INTERVAL: float = default_of("eviction_retry_interval")


@dataclass
class CycleOptions:
    batch_timeout: float = DEFAULT_BATCH_TIMEOUT
    job_timeout: float = DEFAULT_JOB_TIMEOUT  # each async job, cut to what the batch has left
    poll_interval: float = DEFAULT_POLL_INTERVAL
    drain: DrainOptions = field(default_factory=DrainOptions)
    check_mode: bool = False
    validation: ValidationOptions = field(default_factory=ValidationOptions)
    exclude_from_load_balancers: bool = False
    exclude_delay: float = DEFAULT_EXCLUDE_DELAY  # seconds between the drain and the stop
    phase: str = PHASE_ALL
    batch_started: Optional[float] = None  # Unix time the batch's first phase started (None: now)
    #: The workers one batch may take down, clamped as the plan clamps it (None: not checked).
    max_unavailable: Optional[int] = None
    #: A change CloudStack refuses after the stop starts the node again on what it has (off: left Stopped).
    put_back_on_refusal: bool = True
    #: never: every node restarts; auto: a node whose only change CloudStack applies to the running VM
    #: grows live (``_rollout/live_scale.py``), else restarts.
    live_scale: str = "never"
    live_scale_image: str = "busybox:1.36.1"
    live_scale_timeout: float = 120.0  # seconds for the node to report its new size after the kubelet restart


class NodeEventSink(Protocol):
    """Where a batch or a release writes its Events on the nodes (``_clients/node_events.NodeEvents``)."""

    run: Optional[str]  # the rollout the Events name

    def record(self, node: str, uid: Optional[str], event: NodeEvent) -> None:
        """Write (or add to the series of) ``event`` on Node ``node``; never raises."""


class BatchContext(Protocol):
    """What each node's cycle reads from its batch: the clients, the options, the settings, etcd."""

    cloud: CloudStackApi
    kube: KubernetesApi
    options: CycleOptions
    settings: Settings
    etcd_check: Optional[EtcdCheck]
    daemonsets: DaemonSets  # read once for the batch's drains
    node_waits: NodeWaits  # the batch's one watch of its nodes, else the client
    start_gates: StartGates  # starts of nodes sharing a strict affinity group, one after another
    node_events: Optional[NodeEventSink]  # None: the batch writes no Events
