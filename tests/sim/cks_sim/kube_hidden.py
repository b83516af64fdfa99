"""What the API cannot see about one cluster: a node's VM power and kubelet boots, and the spec's
workloads the controllers keep.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass
class NodeState:
    """What the API cannot see about a node: its VM's power and the kubelet's boots."""

    name: str
    node_type: str
    index: int
    cpu: int
    memory_mb: int
    vm_running: bool
    kubelet_posting: bool  # a kubelet of the current boot posts status and renews the lease
    boot_id: str
    machine_id: str
    system_uuid: str
    foreign_cordon: bool = False
    ready: str = "Unknown"  # the Ready condition's status as stored (cached for the scheduler)
    boot_timer: Optional[int] = None
    lease_renewed_at: float = 0.0  # real monotonic-ish wall time of the last lease renewal
    status_posted_at: float = 0.0  # ... and of the kubelet's last NodeStatus post
    # cpu / memory_mb are what the guest has online; the Node shows what its kubelet saw when it
    # started (a boot, or a `systemctl restart kubelet`), so a live scale shows only after a restart.
    kubelet_restart_timer: Optional[int] = None

    @property
    def ip(self) -> str:
        # .10 to .249 of each /24, then the next one: a valid address for any number of nodes.
        return f"10.1.{self.index // 240}.{10 + self.index % 240}"

    @property
    def pod_cidr_prefix(self) -> str:
        """The first three octets of its pods' /24, as the node IPAM gives each node one of a /14 (10.244-247.x)."""
        return f"10.{244 + self.index // 256}.{self.index % 256}"


@dataclass
class Workload:
    """A controller from the spec: Deployment, StatefulSet, DaemonSet, or a bare Pod."""

    kind: str
    namespace: str
    name: str
    replicas: int
    labels: dict[str, str]
    empty_dir: bool
    uid: str
    node: Optional[str] = None  # bare pods may be pinned
    rs_name: str = ""
    rs_uid: str = ""
    template_hash: str = ""
    grace_seconds: int = 30
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)
