"""How many Kubernetes calls a batch makes, counted in cks-sim's call log (each is load on the API server).

The bound is per call kind, so that a regression names what came back: a node read before the
cordon (the batch's list is the first look), a second patch for the cordon (one write with the
annotation), a list before each wait (the pods' watch follows on from the drain's list), a watch
of the nodes per node (one per batch, from the view's list, serving every node's return), a second
list of the nodes for the validation (the batch's watch shows them once it has shown the batch's
last writes), a DaemonSet read per node (one per batch), a lease read and replace at the batch's
start (the renewal is one write conditional on the version the previous batch's run left, which
the role hands on; only a lease written by someone since is read).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

from helpers import ClusterSim, load_raw_spec

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings
from ansible_collections.cloudstack.cks.plugins.module_utils._state.held import held_lock
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import LOCK_NAME, NAMESPACE, Lock

HOLDER = "run-kube-calls"

#: A node's own calls besides its evictions: the annotate-and-cordon write, the drain's list of
#: its pods, the watch of them going, the stop annotation, the uncordon. (It was 6 with a watch of
#: its own return.)
PER_NODE = 5
#: The batch's: the lock's renewal (one conditional patch, the proof it is still held), the view's
#: list of nodes, the one watch of the nodes (every node's return, then the validation's nodes)
#: and /readyz; besides one read per DaemonSet the drains meet. (It was 5 with the lease read and
#: replaced, then 4 with the validation's own list of the nodes and no watch counted here.)
PER_BATCH = 4


def _kind(call: dict[str, Any]) -> str:
    return f"{call.get('verb')} {call.get('resource') or call.get('path')}"


def _batch(sim: ClusterSim, nodes: list[str], handed_on: bool = True) -> tuple[Counter, list[dict[str, Any]]]:
    """One batch, its lock as the role hands it on (``handed_on``: the version the lease was left at)."""
    settings = Settings(worker=TypeSettings(sim.offering_id("cks-large"), None, None))
    taken = Lock(sim.kube, holder_identity=HOLDER).acquire()
    before = len(sim.calls())
    lock = held_lock(sim.kube, HOLDER, taken.resource_version if handed_on else None)
    assert lock is not None
    result = sim.cycle(nodes, settings, lock=lock)
    assert result.error is None, result.error
    assert [r.outcome for r in result.results] == ["done"] * len(nodes)
    # The cuts keep every check: the boot ID annotation went on with the cordon, the node came
    # back with a new boot ID and was uncordoned, the cluster was validated.
    for node in result.results:
        steps = {s.name: s for s in node.steps}
        assert steps["annotate"].outcome == steps["cordon"].outcome == "ok"
        assert "new boot ID" in steps["verify"].detail or "boot ID" in steps["verify"].detail, steps["verify"].detail
        assert steps["uncordon"].outcome == "ok"
    assert result.validation is not None and result.validation.ok
    assert not sim.invariants()
    calls = [c for c in sim.calls()[before:] if c.get("api") == "kubernetes"]
    # What the module hands on to the next batch: the lease as this batch's renewal left it.
    assert lock.written_version == Lock(sim.kube).read().resource_version
    return Counter(_kind(c) for c in calls if "eviction" not in str(c.get("path") or "")), calls


def test_one_node_batch_stays_within_its_kubernetes_calls(cycle_sim: Callable[..., ClusterSim]) -> None:
    raw = load_raw_spec("small.yml")
    sim = cycle_sim(raw, etcd=False)
    node = sim.names("worker")[0]
    kinds, calls = _batch(sim, [node])
    print(f"\none node's batch: {sum(kinds.values())} Kubernetes calls besides evictions: {dict(kinds)}")
    assert kinds["get nodes"] == 0, kinds  # the view's list is the first look
    assert kinds["patch nodes"] == 3, kinds  # annotate+cordon, stop annotation, uncordon
    assert kinds["list pods"] == 1 and kinds["watch pods"] == 1, kinds
    # The view's list, then one watch from its version: the node's return and the validation's nodes.
    assert kinds["list nodes"] == 1 and kinds["watch nodes"] == 1, kinds
    # Renewed at the batch's start (what lies between two batches, a pause of up to half the
    # duration, needs the full margin a fresh write gives) in one write, conditional on the
    # version the previous batch left: no read of the lease.
    assert kinds["patch leases"] == 1 and kinds["get leases"] == kinds["update leases"] == 0, kinds
    assert not [c for c in calls if c.get("verb") == "get" and c.get("resource") == "pods"]
    daemonsets = kinds["get daemonsets"]
    assert daemonsets == 2, kinds  # calico-node and kube-proxy run on the node
    assert sum(kinds.values()) <= PER_NODE + PER_BATCH + daemonsets, kinds
    # The first write carries both the annotation and the cordon, on the version listed.
    first = [c for c in calls if c.get("verb") == "patch" and c.get("resource") == "nodes"][0]
    assert first.get("name") == node


def test_the_daemonsets_are_read_once_per_batch(cycle_sim: Callable[..., ClusterSim]) -> None:
    raw = load_raw_spec("small.yml")
    raw["invariants"] = {"max_unavailable": {"control": 1, "etcd": 1, "worker": 2}}
    sim = cycle_sim(raw, etcd=False)
    nodes = sim.names("worker")[:2]
    kinds, calls = _batch(sim, nodes)
    print(f"\ntwo nodes' batch: {sum(kinds.values())} Kubernetes calls besides evictions: {dict(kinds)}")
    read = Counter(str(c.get("path")) for c in calls if c.get("resource") == "daemonsets")
    # calico-node and kube-proxy run on both nodes: each read once for the batch.
    assert len(read) == 2 and set(read.values()) == {1}, read
    assert kinds["patch nodes"] == 3 * len(nodes) and kinds["get nodes"] == 0, kinds
    assert kinds["list nodes"] == 1 and kinds["watch nodes"] == 1 and kinds["list pods"] == len(nodes), kinds
    # Reads of a pod only follow an eviction a PodDisruptionBudget refused (429), to see it gone.
    refused = [c for c in calls if "eviction" in str(c.get("path") or "") and c.get("status") == 429]
    assert kinds["get pods"] <= len(refused), (kinds, len(refused))
    assert sum(kinds.values()) - kinds["get pods"] <= PER_NODE * len(nodes) + PER_BATCH + len(read), kinds


def test_a_batch_with_no_version_handed_on_reads_the_lease_once(cycle_sim: Callable[..., ClusterSim]) -> None:
    """The rollout's first batch (or a direct call without lock_version): one read proves the lock
    held and the renewal replaces from it, no second read."""
    raw = load_raw_spec("small.yml")
    sim = cycle_sim(raw, etcd=False)
    kinds, _calls = _batch(sim, [sim.names("worker")[0]], handed_on=False)
    assert kinds["get leases"] == 1 and kinds["update leases"] == 1 and kinds["patch leases"] == 0, kinds


def test_a_lease_written_since_is_read_and_the_batch_still_runs(cycle_sim: Callable[..., ClusterSim]) -> None:
    """The version handed on is stale (someone labelled the lease meanwhile, its holder unchanged):
    the conditional write is refused with 409, the lease is read and judged still ours, and renewed."""
    raw = load_raw_spec("small.yml")
    sim = cycle_sim(raw, etcd=False)
    settings = Settings(worker=TypeSettings(sim.offering_id("cks-large"), None, None))
    taken = Lock(sim.kube, holder_identity=HOLDER).acquire()
    sim.kube.patch_lease(NAMESPACE, LOCK_NAME, {"metadata": {"labels": {"someone": "was-here"}}})
    before = len(sim.calls())
    lock = held_lock(sim.kube, HOLDER, taken.resource_version)
    result = sim.cycle([sim.names("worker")[0]], settings, lock=lock)
    assert result.error is None, result.error
    leases = [(c.get("verb"), c.get("status")) for c in sim.calls()[before:] if c.get("resource") == "leases"]
    assert leases == [("patch", 409), ("get", 200), ("update", 200)], leases
    assert Lock(sim.kube).read().holder == HOLDER


def test_a_five_node_batch_stays_within_its_kubernetes_calls(cycle_sim: Callable[..., ClusterSim]) -> None:
    """The bench's batch of 5 (c3-w10-mu5): the batch's fixed calls once, the nodes' own five times."""
    raw = load_raw_spec("small.yml")
    raw["clusters"][0]["workers"] = 8
    raw["invariants"] = {"max_unavailable": {"control": 1, "etcd": 1, "worker": 5}}
    sim = cycle_sim(raw, etcd=False)
    nodes = sim.names("worker")[:5]
    kinds, calls = _batch(sim, nodes)
    print(f"\nfive nodes' batch: {sum(kinds.values())} Kubernetes calls besides evictions: {dict(kinds)}")
    assert kinds["patch leases"] == 1 and kinds["get leases"] == kinds["update leases"] == 0, kinds
    assert kinds["patch nodes"] == 3 * len(nodes) and kinds["get nodes"] == 0, kinds
    # Every node's return seen through one watch of the nodes, from the view's list; the validation
    # answered from it: no second list. (It was 2 lists and 5 watches.)
    assert kinds["list nodes"] == 1 and kinds["watch nodes"] == 1, kinds
    # The drain's list of each node's pods and the watch of them going stay per node: a field
    # selector takes one node, and a watch of every pod of the cluster costs more than five.
    assert kinds["list pods"] == kinds["watch pods"] == len(nodes), kinds
    daemonsets = kinds["get daemonsets"]
    assert daemonsets == 2, kinds  # read once for the batch, not once per node
    refused = [c for c in calls if "eviction" in str(c.get("path") or "") and c.get("status") == 429]
    assert kinds["get pods"] <= len(refused), (kinds, len(refused))
    assert sum(kinds.values()) - kinds["get pods"] <= PER_NODE * len(nodes) + PER_BATCH + daemonsets, kinds
