"""A cluster whose Kubernetes API endpoint is its first control node (a shared network without a
load balancer: CKS's admin.conf points at that node). While that VM restarts, nothing
listens at the endpoint (connection refused): the batch's reads and its lock renewal wait for it
until the batch deadline instead of failing after a few tries."""

from __future__ import annotations

from typing import Any, Callable

from helpers import ClusterSim, load_raw_spec

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import Lock


def endpoint_on_first_control_node(start_seconds: float) -> dict[str, Any]:
    raw = load_raw_spec("small.yml")
    raw["clusters"][0]["api_endpoint"] = "first_control_node"
    # A start of start_seconds simulated seconds: at time_scale 0.01 the endpoint refuses for
    # longer than the six tries (about 3 to 6 s of backoff) a read used to get.
    raw["timings"]["start"] = start_seconds
    return raw


def first_control_node(sim: ClusterSim) -> str:
    """The first control node CloudStack created (listVirtualMachines answers in creation order)."""
    vms = sim.cloud.list("listVirtualMachines", listall=True)
    return next(str(vm["name"]).lower() for vm in vms if "-control-" in str(vm["name"]))


def test_the_restart_of_the_endpoint_node_is_ridden_out_by_reads_and_the_lock_renewal(
        cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim(endpoint_on_first_control_node(1000))
    node = first_control_node(sim)
    before = sim.view().node(node)
    # Renewed every second: several renewals fall while the endpoint refuses connections.
    lock = Lock(sim.kube, "refuse13b-endpoint", duration_seconds=3)
    lock.acquire()

    result = sim.cycle([node], Settings(control=TypeSettings(sim.offering_id("cks-large"), None, None)),
                       etcd=True, lock=lock, batch_timeout=120)

    assert result.error is None, (result.error, [s.to_dict() for s in result.results[0].steps],
                                  [e for e in sim.timeline() if "api_endpoint" in str(e.get("event"))],
                                  result.retries)
    assert "lock_renewal" not in result.preflight, result.preflight
    events = [e["event"] for e in sim.timeline() if str(e.get("event", "")).startswith("api_endpoint_")]
    assert events[:2] == ["api_endpoint_refusing", "api_endpoint_listening"], events
    refused = [r for r in result.retries["kubernetes"]["recent"] if "cannot connect" in r["cause"]]
    assert refused, result.retries
    after = sim.view().node(node)
    assert after.running and after.ready and not after.unschedulable and after.boot_id != before.boot_id
    assert after.offering_name == "cks-large"
    assert Lock(sim.kube).read().holder == "refuse13b-endpoint"
    assert sim.invariants() == []


def test_an_endpoint_down_past_the_batch_deadline_is_named_unreachable(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim(endpoint_on_first_control_node(3000))
    node = first_control_node(sim)
    lock = Lock(sim.kube, "refuse13b-endpoint", duration_seconds=3)
    lock.acquire()

    result = sim.cycle([node], Settings(control=TypeSettings(sim.offering_id("cks-large"), None, None)),
                       etcd=True, lock=lock, batch_timeout=15)

    assert result.error is not None
    assert "unreachable" in result.preflight.get("lock_renewal", ""), result.preflight
