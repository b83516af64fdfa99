"""The collection's watches (KubeClient.await_node / await_pods) against cks-sim's watch endpoints,
through the real ``kubernetes`` client over HTTPS: a dropped stream, a 410, a deadline reached while
watching, the fallback to polling, and a batch that converges with fewer Kubernetes calls."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.node_watch import NodeWatch
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import DeadlineExceeded
from ansible_collections.cloudstack.cks.plugins.module_utils._common.waiting import Deadline
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings

from helpers import ClusterSim, load_raw_spec


def _node_watch(sim: ClusterSim, deadline: Deadline) -> NodeWatch:
    """A batch's shared watch, started from a list of the nodes as the batch's view is."""
    listed = sim.kube.list_nodes_at()
    watch = NodeWatch.for_batch(sim.kube, deadline, {n["metadata"]["name"]: n for n in listed.items},
                                listed.version, 0.05)
    assert watch is not None
    return watch


def _labelled(value: str) -> Callable[[Optional[dict[str, Any]]], Optional[dict[str, Any]]]:
    def check(node: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
        labels = ((node or {}).get("metadata") or {}).get("labels") or {}
        return node if labels.get("watched") == value else None
    return check


def _label_later(sim: ClusterSim, node: str, value: str, after: float = 0.3) -> threading.Timer:
    timer = threading.Timer(after, sim.kube.patch_node, args=(node, {"metadata": {"labels": {"watched": value}}}))
    timer.start()
    return timer


def _watches(sim: ClusterSim, resource: str = "nodes") -> list[dict[str, Any]]:
    return [c for c in sim.calls() if c.get("api") == "kubernetes" and c.get("verb") == "watch"
            and c.get("resource") == resource]


def test_a_dropped_stream_is_watched_again_from_the_last_version(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml", etcd=False)
    node = sim.names("worker")[0]
    # The stream is cut when the awaited event would be sent: it is only seen after the reconnect.
    sim.fault(kind="watch_drop", resource="nodes", after_events=0, count=1)
    timer = _label_later(sim, node, "one")
    found = sim.kube.await_node(node, _labelled("one"), Deadline(20), 0.05, what="the label")
    timer.join()
    assert found["metadata"]["labels"]["watched"] == "one"
    log = sim.kube.watcher.log
    assert (log.reconnects, log.lists, log.relists_after_gone) == (1, 1, 0)
    watches = _watches(sim)
    assert len(watches) == 2


def test_a_410_lists_again_and_goes_on(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml", etcd=False)
    node = sim.names("worker")[1]
    sim.fault(kind="watch_expired", resource="nodes", count=1)
    timer = _label_later(sim, node, "two", after=0.5)
    found = sim.kube.await_node(node, _labelled("two"), Deadline(20), 0.05, what="the label")
    timer.join()
    assert found["metadata"]["labels"]["watched"] == "two"
    log = sim.kube.watcher.log
    assert (log.relists_after_gone, log.lists) == (1, 2)
    # The relist may already show the label (a loaded machine): then no second stream is needed.
    assert 1 <= len(_watches(sim)) <= 2


def test_a_compacted_cache_is_a_410_too(cycle_sim: Callable[..., ClusterSim]) -> None:
    raw = load_raw_spec("small.yml")
    raw["kube"] = {"watch_cache_size": 2}
    sim = cycle_sim(raw, etcd=False)
    node, other = sim.names("worker")[:2]
    original = sim.kube.watcher._list

    def list_then_busy(path: str, query: Any) -> Any:
        # Between the list and the watch, three other changes push the list's version out of the window.
        answer = original(path, query)
        if sim.kube.watcher.log.lists == 1:
            for i in range(3):
                sim.kube.patch_node(other, {"metadata": {"labels": {"busy": str(i)}}})
        return answer

    sim.kube.watcher._list = list_then_busy  # type: ignore[method-assign]
    timer = _label_later(sim, node, "three", after=0.6)
    found = sim.kube.await_node(node, _labelled("three"), Deadline(20), 0.05, what="the label")
    timer.join()
    assert found is not None
    assert sim.kube.watcher.log.relists_after_gone == 1


def test_the_deadline_is_kept_while_watching(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml", etcd=False)
    node = sim.names("worker")[2]
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded) as caught:
        sim.kube.await_node(node, _labelled("never"), Deadline(1.5), 0.05, what=f"node {node} to come back")
    took = time.monotonic() - started
    assert 1.4 <= took < 2.6, took
    assert caught.value.msg.startswith(f"gave up waiting for node {node} to come back after ")
    # Watched, not polled: one list and one or two streams, no reads of the node.
    kube = [c for c in sim.calls() if c.get("api") == "kubernetes"]
    assert len([c for c in kube if c.get("verb") == "get" and c.get("name") == node]) == 0
    assert 1 <= len(_watches(sim)) <= 2


def test_a_server_without_watch_is_polled(cycle_sim: Callable[..., ClusterSim]) -> None:
    raw = load_raw_spec("small.yml")
    raw["kube"] = {"watch": False}
    sim = cycle_sim(raw, etcd=False)
    node = sim.names("worker")[0]
    timer = _label_later(sim, node, "polled")
    found = sim.kube.await_node(node, _labelled("polled"), Deadline(20), 0.05, what="the label")
    timer.join()
    assert found["metadata"]["labels"]["watched"] == "polled"
    assert sim.kube.watch_supported is False
    reads = [c for c in sim.calls() if c.get("api") == "kubernetes" and c.get("verb") == "get" and c.get("name") == node]
    assert reads and not _watches(sim)[1:]  # one refused watch, then reads


@pytest.mark.parametrize("watch", [True, False], ids=["watch", "poll"])
def test_a_batch_converges_and_counts_its_kubernetes_calls(cycle_sim: Callable[..., ClusterSim], watch: bool,
                                                           record_property: Any) -> None:
    raw = load_raw_spec("small.yml")
    raw["invariants"] = {"max_unavailable": {"control": 1, "etcd": 1, "worker": 2}}
    raw["kube"] = {"watch": watch}
    sim = cycle_sim(raw)
    nodes = sim.names("worker")[:2]
    before = len(sim.calls())
    settings = Settings(worker=TypeSettings(sim.offering_id("cks-large"), None, None))
    result = sim.cycle(nodes, settings)
    assert result.error is None, result.error
    assert [r.outcome for r in result.results] == ["done", "done"]
    assert all(sim.view().node(n).offering_name == "cks-large" for n in nodes)
    assert not sim.invariants()
    calls = [c for c in sim.calls()[before:] if c.get("api") == "kubernetes"]
    evictions = [c for c in calls if "eviction" in (c.get("path") or "")]
    per_node = (len(calls) - len(evictions)) / len(nodes)
    record_property("kube_calls_per_node_besides_evictions", per_node)
    record_property("evictions_per_node", len(evictions) / len(nodes))
    print(f"\nwatch={watch}: {per_node:.1f} Kubernetes calls per node besides "
          f"{len(evictions) / len(nodes):.1f} evictions; verbs: "
          f"{sorted({c.get('verb') for c in calls})}")
    if watch:
        # Both waits of each node went through the watcher: its pods' from the drain's list, a
        # stream per node; its return through the batch's one watch of the nodes, from the view's
        # list. No list of their own.
        log = sim.kube.watcher.log
        assert sim.kube.watch_supported and log.lists == 0 and log.streams == len(nodes) + 1
        assert len(_watches(sim, "nodes")) == 1 and len(_watches(sim, "pods")) == len(nodes)
        # Evicted pods are waited for by the watch, not read one by one per poll: a pod is read
        # only after an eviction a PodDisruptionBudget refused (429), to see whether it is gone.
        reads = [c for c in calls if c.get("verb") == "get" and c.get("resource") == "pods"]
        refused = [c for c in evictions if c.get("status") == 429]
        assert len(reads) <= len(refused), (len(reads), [(c.get("path"), c.get("status")) for c in evictions])


def test_a_rollout_converges_through_dropped_and_expired_watches(rollout_sim: Callable[..., Any]) -> None:
    """The playbook as an operator runs it, with watches broken on the way: still converged."""
    raw = load_raw_spec("small.yml")
    raw["invariants"] = {"max_unavailable": {"control": 1, "etcd": 1, "worker": 2}}
    sim = rollout_sim(raw)
    sim.fault(kind="watch_drop", resource="nodes", after_events=0, count=2)
    sim.fault(kind="watch_expired", resource="nodes", count=1)
    sim.fault(kind="watch_drop", resource="pods", after_events=0, count=1)
    run = sim.rollout(rollout_node_offerings={"worker": "cks-large"}, rollout_max_unavailable=2)
    assert run.rc == 0, run.output
    sim.assert_converged()
    assert _watches(sim, "nodes"), "the rollout never watched a node"
    fired = {f["kind"] for f in sim.admin("GET", "/faults")}
    # Faults still listed did not fire all their shots; the node watches' ones must have.
    assert "watch_expired" not in fired


def test_one_shared_watch_serves_the_waits_of_several_nodes(cycle_sim: Callable[..., ClusterSim]) -> None:
    """Three threads wait on three nodes through one watch: one stream, from the list it was given."""
    sim = cycle_sim("small.yml", etcd=False)
    nodes = sim.names("worker")[:3]
    watch = _node_watch(sim, Deadline(20))
    found: dict[str, Any] = {}

    def wait(node: str) -> None:
        found[node] = watch.await_node(node, _labelled(node), Deadline(20), 0.05, what=f"{node}'s label")

    try:
        waiters = [threading.Thread(target=wait, args=(n,)) for n in nodes]
        for waiter in waiters:
            waiter.start()
        timers = [_label_later(sim, n, n, after=0.2 + 0.1 * i) for i, n in enumerate(nodes)]
        for thread in waiters + timers:
            thread.join()
    finally:
        watch.stop()
    assert {n: v["metadata"]["labels"]["watched"] for n, v in found.items()} == {n: n for n in nodes}
    assert len(_watches(sim)) == 1 and sim.kube.watcher.log.lists == 0
    # The validation's view: every node, once the watch shows the last write made.
    written = sim.kube.patch_node(nodes[0], {"metadata": {"labels": {"validated": "yes"}}})
    assert watch.nodes_after({nodes[0]: written["metadata"]["resourceVersion"]}) is None  # stopped: list instead


def test_a_shared_watch_rides_out_a_drop_and_a_410_for_every_node(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml", etcd=False)
    first, second = sim.names("worker")[:2]
    # The first stream is refused with a 410 (it takes one drop fault too, unused); the one after
    # the relist is cut before its first event; the reconnect goes on from where it was.
    sim.fault(kind="watch_drop", resource="nodes", after_events=0, count=2)
    sim.fault(kind="watch_expired", resource="nodes", count=1)
    watch = _node_watch(sim, Deadline(20))
    try:
        timer = _label_later(sim, first, "one")
        assert watch.await_node(first, _labelled("one"), Deadline(20), 0.05, what="the label") is not None
        timer.join()
        # After the first wait the watch goes on, past the drop and the 410, for the next one.
        written = sim.kube.patch_node(second, {"metadata": {"labels": {"watched": "two"}}})
        assert watch.await_node(second, _labelled("two"), Deadline(20), 0.05, what="the label") is not None
        nodes = watch.nodes_after({second: written["metadata"]["resourceVersion"]})
        assert nodes is not None and {n["metadata"]["name"] for n in nodes} == {n.name for n in sim.view().nodes if n.is_kubernetes_node}
    finally:
        watch.stop()
    log = sim.kube.watcher.log
    assert (log.reconnects, log.relists_after_gone, log.lists) == (1, 1, 1)
    assert len(_watches(sim)) == 3  # the refused one (410), the dropped one, the reconnect
    assert not sim.admin("GET", "/faults")  # every fault fired


def test_a_deadline_reached_while_the_shared_watch_waits(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml", etcd=False)
    node = sim.names("worker")[0]
    watch = _node_watch(sim, Deadline(20))
    started = time.monotonic()
    try:
        with pytest.raises(DeadlineExceeded) as caught:
            watch.await_node(node, _labelled("never"), Deadline(1.5), 0.05, what=f"node {node} to come back")
    finally:
        watch.stop()
    took = time.monotonic() - started
    assert 1.4 <= took < 2.6, took
    assert caught.value.msg.startswith(f"gave up waiting for node {node} to come back after ")
    assert len(_watches(sim)) == 1 and not [c for c in sim.calls() if c.get("verb") == "get" and c.get("name") == node]


def test_a_stopped_shared_watch_ends_its_stream_at_once(cycle_sim: Callable[..., ClusterSim]) -> None:
    """The batch is done long before its deadline: its watch must not stay open (nor reconnect) until then."""
    sim = cycle_sim("small.yml", etcd=False)
    watch = _node_watch(sim, Deadline(600))
    node = sim.names("worker")[0]
    timer = _label_later(sim, node, "up", after=0.1)
    watch.await_node(node, _labelled("up"), Deadline(20), 0.05, what="the label")
    timer.join()
    watch.stop()
    assert not watch._thread.is_alive()
    assert len(_watches(sim)) == 1 and sim.kube.watcher.log.reconnects == 0
