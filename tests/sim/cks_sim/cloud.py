"""The CloudStack world of cks-sim: zone, hosts, offerings, affinity groups, VMs, volumes,
CKS clusters, async jobs, placement and the CKS state scanner.

The rules follow the management server (``UserVmManagerImpl``, ``VolumeApiServiceImpl``,
``AffinityGroupServiceImpl``, ``KubernetesClusterManagerImpl`` of apache/cloudstack 4.22): a rule
that refuses something here refuses it there.
Everything runs under ``sim.lock``; the HTTP layer (``cloudstack_api``) takes the lock, calls a
method, and renders what it gets back with the ``*_view`` methods.

``CloudWorld`` is composed of mixins, one concern each, over the one declaration of the state
(``cloud_state.CloudState``): lookups and owners (``cloud_lookups``), jobs (``cloud_jobs``), VMs
and power (``cloud_power``; the planner is ``placement``), construction from the spec
(``cloud_build``), offering changes (``cloud_offerings``), volumes (``cloud_volumes``), affinity
(``cloud_affinity``), tags (``cloud_tags``), CKS operations and the scanner (``cloud_cks``), autoscaling and node removal
(``cloud_cks_nodes``; the autoscaler itself is ``autoscaler``) and the
API's views (``cloud_views``). The records are in ``cloud_entities``, the error in
``cloud_errors``; the names other modules import from here still are.
"""

from __future__ import annotations

from typing import Any

from .cloud_affinity import CloudAffinity
from .cloud_cks_nodes import CloudCksNodes
from .cloud_entities import GB, VM, Host, Job
from .cloud_errors import CS_SERVER_API, CloudError, param_error
from .cloud_tags import CloudTags
from .cloud_volumes import CloudVolumes
from .core import Sim

# What other modules import from here: the records and errors live in cloud_entities and cloud_errors.
__all__ = ["CS_SERVER_API", "GB", "VM", "CloudError", "CloudWorld", "Host", "Job", "param_error"]


class CloudWorld(CloudCksNodes, CloudAffinity, CloudVolumes, CloudTags):
    """All CloudStack state of the sim, with the rules of the commands that change it."""

    def __init__(self, sim: Sim, spec: dict[str, Any]) -> None:
        super().__init__(sim, spec)
        self._build(spec)
