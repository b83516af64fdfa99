"""Whole rollouts (``ansible-playbook playbooks/rollout.yml``) against what a real cloud does after
a node's VM was stopped (a rule checked only then): a change refused then, and a cloud whose ``default.page.size``
is below the 500 a page that ``cs`` and the collection ask for."""

from __future__ import annotations

from typing import Any

from in_process_sims import WORKERS_LARGER, named_worker, rerun_converges, stopped_cleanly

LIMIT_TEXT = "Maximum number of resources of type 'cpu' for account name=admin in domain id=1 has been exceeded."


def refuse_one_offering_change(sim: Any) -> None:
    # UpgradeVMCmd answers a ResourceAllocationException with RESOURCE_ALLOCATION_ERROR (535).
    sim.fault(kind="cloudstack_error", command="changeServiceForVirtualMachine", code=535, errortext=LIMIT_TEXT,
              count=1)


def test_a_change_refused_after_the_stop_leaves_the_node_in_service(rollout_sim: Any) -> None:
    sim = rollout_sim("faults_small.yml")
    refuse_one_offering_change(sim)

    run = sim.rollout(**WORKERS_LARGER)

    last_error = stopped_cleanly(sim, run)
    node = named_worker(sim, last_error)
    assert "535" in last_error and LIMIT_TEXT in last_error and "change_offering" in last_error, last_error
    assert "stays out of date" in last_error, last_error
    status = sim.status()
    record = next(n for n in status["nodes"] if n["name"] == node)
    assert record["vm_state"] == "Running" and record["ready"], record
    assert not record["cordoned"] and not record["annotated"], record
    assert node in status["out_of_date"], status["out_of_date"]
    rerun_converges(sim, **WORKERS_LARGER)


def test_a_rollout_on_a_cloud_whose_page_size_is_100(rollout_sim: Any) -> None:
    """250 workers and 3 control nodes behind a default.page.size of 100: every list is refused at
    500 (BaseListCmd.getPageSize), so the collection must learn 100 and page with it. The control
    nodes are rolled (every plan, batch and release lists all 253 VMs, volumes and nodes); rolling
    the 250 workers 50 at a time overloaded the in-process simulator's Kubernetes API on the shared
    test machine (reads timed out after 20 s), so they are left out here."""
    sim = rollout_sim("page-size-100.yml", time_scale=0.02)
    assert len(sim.names("worker")) == 250

    run = sim.rollout(rollout_node_offerings={"control": "cks-large"}, timeout=1500)

    assert run.rc == 0, (run.report or {}).get("last_error") or run.output[-3000:]
    sim.assert_converged()
    assert {sim.view().node(n).offering_name for n in sim.names("control")} == {"cks-large"}
    lists = [c for c in sim.calls() if c.get("api") == "cloudstack" and str(c.get("command", "")).startswith("list")]
    refused = [c for c in lists if c.get("errorcode") == 431]
    # Each module run is a new client: it is refused once at 500, then asks for 100.
    assert refused and all(str(c["params"].get("pagesize")) == "500" for c in refused), refused[:3]
    assert any(str(c["params"].get("pagesize")) == "100" and str(c["params"].get("page")) == "3" for c in lists)
