"""A management server restart in the middle of a node's cycle: its API refuses
connections for a while, and the jobs it ran end failed (530, no result:
``AsyncJobManagerImpl.cleanupLeftOverJobs``) while the VM ends wherever the hypervisor left it.
The cycle retries its reads through the outage, re-reads the VM, and carries on."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import pytest
from helpers import ClusterSim, load_raw_spec

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings

OUTAGE_SECONDS = 8.0  # longer than the six tries (3 to 6 s of backoff) a request used to get


def restart_when(sim: ClusterSim, node: str, event: str) -> threading.Thread:
    """Restart the management server as soon as the timeline shows ``event`` for ``node``."""
    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(e.get("node") == node and e.get("event") == event for e in sim.timeline()):
                sim.admin("POST", "/actions", {"action": "restart_management_server", "seconds": OUTAGE_SECONDS})
                return
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


# A restart during the start was tried too; its watcher (60 s) missed the start on the loaded
# test machine, so it is not yet proven here.
@pytest.mark.parametrize("during", ["stop_requested"])
def test_a_management_server_restart_mid_cycle_is_ridden_out(cycle_sim: Callable[..., ClusterSim], during: str) -> None:
    raw: dict[str, Any] = load_raw_spec("small.yml")
    # 3 real seconds each: the job is still running when the server goes down.
    raw["timings"].update(stop=300, start=300)
    sim = cycle_sim(raw)
    node = sim.names("worker")[0]
    before = sim.view().node(node)
    watcher = restart_when(sim, node, during)

    result = sim.cycle([node], Settings(worker=TypeSettings(sim.offering_id("cks-large"), None, None)),
                       batch_timeout=120)

    watcher.join(timeout=5)
    restarts = [e for e in sim.timeline() if e.get("event") == "management_server_restart"]
    assert restarts and restarts[0]["cancelled_jobs"], restarts
    assert result.error is None, result.error
    step = "stop" if during == "stop_requested" else "start"
    detail = next(s.detail for s in result.results[0].steps if s.name == step)
    assert "after all" in detail, detail
    assert result.retries["cloudstack"]["retries"] > 0, result.retries
    after = sim.view().node(node)
    assert after.running and after.ready and not after.unschedulable and after.boot_id != before.boot_id
    assert after.offering_name == "cks-large"
    assert sim.invariants() == []
