"""The control plane's own Leases in kube-system, as a kubeadm cluster shows them.

- ``kube-controller-manager`` and ``kube-scheduler``: leader election (client-go
  tools/leaderelection, kubeadm's defaults: leaseDurationSeconds 15, renewed every 2 s by the leader).
  The holder is ``<node>_<uuid>`` (the component's ``--leader-elect`` identity: hostname + "_" + a new
  uuid per process start). The leader's node down, the lease expires after its duration and a
  component on another running control node takes it: new holder, ``acquireTime``,
  ``leaseTransitions`` + 1, and the component's ``LeaderElection`` Event "<holder> became leader".
- ``apiserver-<hash>``: each kube-apiserver's identity lease (pkg/controlplane/apiserver
  ``IdentityLeaseComponentLabelKey``; the name is "apiserver-" + the lowercase unpadded base32 of the
  first 16 bytes of sha256(hostname)), labels ``apiserver.kubernetes.io/identity: kube-apiserver`` and
  ``kubernetes.io/hostname``, leaseDurationSeconds 3600, renewed every 10 s while its node runs.

Renewals are written lazily, when someone reads leases, as often as the components would have by then.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
from typing import Any, Optional

from .kube_hidden import NodeState
from .kube_recorder import Recorder
from .kube_store import ObjectStore

NAMESPACE = "kube-system"
LEADER_LEASES = ("kube-controller-manager", "kube-scheduler")
LEADER_DURATION = 15  # simulated seconds (leaseDurationSeconds)
LEADER_RENEW = 2.0
APISERVER_DURATION = 3600
APISERVER_RENEW = 10.0
IDENTITY_LABEL = "apiserver.kubernetes.io/identity"


def _micro() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def apiserver_lease_name(hostname: str) -> str:
    digest = hashlib.sha256(hostname.encode()).digest()[:16]
    return "apiserver-" + base64.b32encode(digest).decode().rstrip("=").lower()


def is_control_plane_lease(name: str) -> bool:
    """A Lease of kube-system that the control plane's components write (not an operator's)."""
    return name in LEADER_LEASES or name.startswith("apiserver-")


class LeaderLeases:
    """The control plane's leases of one cluster, written to ``store`` with their Events through
    ``recorder``; the components run on the control ``nodes`` whose kubelet posts (``NodeState``).
    ``refresh()`` under sim.lock."""

    def __init__(self, store: ObjectStore, recorder: Recorder, clock: Any, nodes: dict[str, NodeState]) -> None:
        self.store = store
        self.recorder = recorder
        self.clock = clock
        self.nodes = nodes
        self.renewed: dict[str, float] = {}  # lease name -> sim.clock time of its last renewal
        self.identities: dict[str, str] = {}  # node -> "<node>_<uuid>" per component start

    def _running_controls(self) -> list[str]:
        return sorted(n.name for n in self.nodes.values() if n.node_type == "control" and n.kubelet_posting)

    def refresh(self) -> None:
        now = self.clock.now()
        running = self._running_controls()
        for name in LEADER_LEASES:
            self._leader(name, running, now)
        for node in sorted(n.name for n in self.nodes.values() if n.node_type == "control"):
            self._apiserver(node, node in running, now)

    def _identity(self, component: str, node: str) -> str:
        key = f"{component}/{node}/{self.nodes[node].boot_id}"  # a new process per boot
        if key not in self.identities:
            self.identities[key] = f"{node}_{self.store.new_uid()}"
        return self.identities[key]

    def _leader(self, name: str, running: list[str], now: float) -> None:
        lease: Optional[dict[str, Any]] = self.store.read("leases", NAMESPACE, name)
        holder_node = None
        if lease is not None:
            holder_node = str((lease["spec"].get("holderIdentity") or "").rsplit("_", 1)[0])
        if lease is not None and holder_node in running:
            if now - self.renewed.get(name, 0.0) >= self.clock.real(LEADER_RENEW):
                lease["spec"]["renewTime"] = _micro()
                self.store.put("leases", lease)
                self.renewed[name] = now
            return
        if not running:
            return  # no component runs to take it; the old holder's record stays
        if lease is not None and now - self.renewed.get(name, now) < self.clock.real(LEADER_DURATION):
            return  # not expired yet: the others wait out the lease duration
        node = running[0]
        holder = self._identity(name, node)
        stamp = _micro()
        if lease is None:
            lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": self.store.new_meta(name, NAMESPACE),
                     "spec": {"holderIdentity": holder, "leaseDurationSeconds": LEADER_DURATION,
                              "acquireTime": stamp, "renewTime": stamp, "leaseTransitions": 0}}
        else:
            lease["spec"].update({"holderIdentity": holder, "acquireTime": stamp, "renewTime": stamp,
                                  "leaseTransitions": int(lease["spec"].get("leaseTransitions") or 0) + 1})
        self.store.put("leases", lease)
        self.renewed[name] = now
        meta = lease["metadata"]
        self.recorder.record(NAMESPACE, {"kind": "Lease", "namespace": NAMESPACE, "name": name, "uid": meta["uid"],
                                         "apiVersion": "coordination.k8s.io/v1", "resourceVersion": meta["resourceVersion"]},
                             "Normal", "LeaderElection", f"{holder} became leader", name)

    def _apiserver(self, node: str, running: bool, now: float) -> None:
        name = apiserver_lease_name(node)
        lease: Optional[dict[str, Any]] = self.store.read("leases", NAMESPACE, name)
        if lease is None:
            stamp = _micro()
            self.store.put("leases", {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": self.store.new_meta(name, NAMESPACE, labels={IDENTITY_LABEL: "kube-apiserver",
                                                                         "kubernetes.io/hostname": node}),
                "spec": {"holderIdentity": f"{name}_{self.store.new_uid()}", "leaseDurationSeconds": APISERVER_DURATION,
                         "acquireTime": stamp, "renewTime": stamp}})
            self.renewed[name] = now
            return
        if running and now - self.renewed.get(name, 0.0) >= self.clock.real(APISERVER_RENEW):
            lease["spec"]["renewTime"] = _micro()
            self.store.put("leases", lease)
            self.renewed[name] = now
