"""Control nodes and etcd: one at a time, and the preflight's refusals, against real etcd members."""

from __future__ import annotations

from typing import Any, Callable


from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings

from cks_sim.tools import needs
from helpers import ClusterSim, load_raw_spec

pytestmark = needs("etcd")

STOPPING = ("stopVirtualMachine",)


def stops(sim: ClusterSim) -> list[dict[str, Any]]:
    return [c for c in sim.calls() if c.get("api") == "cloudstack" and c.get("command") in STOPPING]


def powered_off_at_once(sim: ClusterSim, names: set[str]) -> int:
    """The most of ``names`` that were powered off at the same time, from the timeline."""
    down: set[str] = set()
    most = 0
    for event in sim.timeline():
        if event.get("node") in names and event.get("event") == "powered_off":
            down.add(event["node"])
        elif event.get("node") in names and event.get("event") == "powered_on":
            down.discard(event["node"])
        most = max(most, len(down))
    return most


def test_control_nodes_one_at_a_time_on_a_stacked_control_plane(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    controls = sim.names("control")
    assert len(controls) == 3
    settings = Settings(control=TypeSettings(sim.offering_id("cks-large"), None, None))

    # Two at once is refused before anything changes.
    refused = sim.cycle(controls[:2], settings, etcd=True)
    assert refused.error is not None and refused.error.step == "preflight"
    assert "one at a time" in refused.error.msg
    assert stops(sim) == []

    for name in controls:
        result = sim.cycle([name], settings, etcd=True)
        assert result.error is None, result.error
        assert result.preflight["readyz_etcd"] == 200
        assert "healthy" in result.preflight["etcd_quorum"]
        verify = next(s for s in result.results[0].steps if s.name == "verify")
        assert "etcd healthy" in verify.detail

    assert powered_off_at_once(sim, set(controls)) == 1
    view = sim.view()
    assert all(n.offering_name == "cks-large" and n.ready and not n.unschedulable for n in view.nodes_of("control"))
    assert sim.invariants() == []


def test_unhealthy_etcd_member_refuses_a_control_node(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    controls = sim.names("control")
    vm_names = {n.name: n.vm_name for n in sim.view().nodes}
    sim.fault(kind="etcd_kill", vm=vm_names[controls[1]])
    settings = Settings(control=TypeSettings(sim.offering_id("cks-large"), None, None))

    result = sim.cycle([controls[0]], settings, etcd=True)

    assert result.error is not None and result.error.step == "preflight"
    assert "quorum" in result.error.msg and controls[1] in result.error.msg
    assert stops(sim) == []
    node = sim.view().node(controls[0])
    assert not node.unschedulable and not node.annotated
    # Workers do not need etcd: they still roll.
    worker = sim.names("worker")[0]
    ok = sim.cycle([worker], Settings(worker=TypeSettings(sim.offering_id("cks-large"), None, None)))
    assert ok.error is None, ok.error
    assert sim.invariants() == []


def test_two_node_stacked_control_plane_is_never_taken_down(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("two-control.yml")
    controls = sim.names("control")
    assert len(controls) == 2
    settings = Settings(control=TypeSettings(sim.offering_id("cks-large"), None, None))

    result = sim.cycle([controls[0]], settings, etcd=True)

    assert result.error is not None and result.error.step == "preflight"
    assert "none can go down" in result.error.msg
    assert stops(sim) == []
    assert sim.invariants() == []


def test_single_control_node_is_refused_while_its_workers_roll(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("single-control.yml")
    [control] = sim.names("control")
    settings = Settings(control=TypeSettings(sim.offering_id("cks-large"), None, None),
                        worker=TypeSettings(sim.offering_id("cks-large"), None, None))

    refused = sim.cycle([control], settings, etcd=True)
    assert refused.error is not None and refused.error.step == "preflight"
    assert "single control node" in refused.error.msg
    assert stops(sim) == []

    for worker in sim.names("worker"):
        result = sim.cycle([worker], settings)
        assert result.error is None, result.error
    view = sim.view()
    assert all(n.offering_name == "cks-large" for n in view.nodes_of("worker"))
    assert view.node(control).offering_name == "cks-medium"
    assert sim.invariants() == []


def test_external_etcd_nodes_and_control_nodes(cycle_sim: Callable[..., ClusterSim]) -> None:
    raw = load_raw_spec("two-etcd.yml")
    raw["clusters"][0]["etcd_nodes"] = 3
    sim = cycle_sim(raw)
    etcd_nodes = sim.names("etcd")
    controls = sim.names("control")
    assert len(etcd_nodes) == 3 and len(controls) == 2
    large = sim.offering_id("cks-large")
    settings = Settings(etcd=TypeSettings(large, None, None), control=TypeSettings(large, None, None))

    for name in etcd_nodes:
        result = sim.cycle([name], settings, etcd=True)
        assert result.error is None, result.error
        # etcd nodes are not Kubernetes nodes: no cordon, no drain.
        assert [s.name for s in result.results[0].steps][0] == "stop"
    # With external etcd, a control node needs another control node serving the API.
    result = sim.cycle([controls[0]], settings, etcd=True)
    assert result.error is None, result.error
    assert "etcd_quorum" not in result.preflight

    assert powered_off_at_once(sim, set(etcd_nodes)) == 1
    view = sim.view()
    assert all(n.offering_name == "cks-large" for n in view.nodes_of("etcd"))
    assert sim.invariants() == []
