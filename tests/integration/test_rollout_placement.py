"""Whole rollouts (``ansible-playbook playbooks/rollout.yml``) that put workers into a strict host
anti-affinity group the zone has too few hosts for, as CloudStack's deployment planner decides it
(``DeploymentPlanningManagerImpl`` with ``HostAntiAffinityProcessor``: 533 when no host is left).

specs/rollout_placement.yml: 4 workers of the domain admin ``ops`` on 3 hosts, the group ``ops-spread``.
A root admin key lists the hosts, so the change is refused before the lock; a domain admin key
cannot, so the prediction is named as not checked, and the start the planner refuses puts the node
back on its old groups; a rerun once the operator has added a host converges. The starts of a
batch's nodes in one strict group never overlap (the sim's timeline), whatever CloudStack's race
between two starts of one group would allow.
"""

from __future__ import annotations

import copy
import os
import time
from typing import Any

import pytest
import yaml
from rollout_helpers import SPECS

pytestmark = pytest.mark.timeout(900)

SPREAD = {"worker": ["ops-spread"]}
CHANGES = ("stopVirtualMachine", "updateVMAffinityGroup", "changeServiceForVirtualMachine", "startVirtualMachine")
FOUR_HOSTS = [{"name": f"kvm-{i}", "cpu": 64, "memory": 262144} for i in range(1, 5)]


def spec(**top_level: Any) -> dict[str, Any]:
    with open(os.path.join(SPECS, "rollout_placement.yml"), encoding="utf-8") as fh:
        return dict(yaml.safe_load(fh), **top_level)


def ops_key(sim: Any) -> dict[str, str]:
    key = next(k for k in sim.env["keys"] if k["apikey"] == "ops-key")
    return {"CLOUDSTACK_KEY": key["apikey"], "CLOUDSTACK_SECRET": key["secretkey"]}


def vms(sim: Any) -> dict[str, dict[str, Any]]:
    cluster = next(c for c in sim.state()["cloud"]["clusters"] if c["name"] == "ops-k8s")
    return {vm["name"].lower(): vm for vm in cluster["vms"]}


def groups_of(sim: Any, node: str) -> list[str]:
    return sorted(g.name for g in sim.view().node(node).affinity_groups if not g.is_dedication)


def changes_sent(sim: Any, since: float) -> list[str]:
    return [c["command"] for c in sim.calls() if c.get("api") == "cloudstack" and c.get("t", since) >= since
            and c.get("command") in CHANGES]


def test_a_root_admin_key_sees_too_few_hosts_and_is_refused_before_the_lock(rollout_sim: Any) -> None:
    sim = rollout_sim("rollout_placement.yml")
    since = time.time()

    run = sim.rollout(rollout_node_affinity_groups=SPREAD)

    assert run.rc != 0, run.output
    out = run.stdout
    assert "Refused before the lock (nothing changed)" in out, run.output
    assert "affinity group ops-spread" in out and "4 members" in out, run.output
    assert "only 3 Up and Enabled hosts" in out and "add at least 1 Up and Enabled host" in out, run.output
    assert changes_sent(sim, since) == []
    assert all(vm["state"] == "Running" for vm in vms(sim).values())
    status = sim.status()
    assert status["lock_holder"] is None and status["work_left"] == []


def test_a_host_in_maintenance_is_not_counted(rollout_sim: Any) -> None:
    hosts = copy.deepcopy(FOUR_HOSTS)
    hosts[3]["resourcestate"] = "Maintenance"
    sim = rollout_sim("rollout_placement.yml", hosts=hosts)
    since = time.time()

    run = sim.rollout(rollout_node_affinity_groups=SPREAD)

    assert run.rc != 0, run.output
    assert "Refused before the lock (nothing changed)" in run.stdout, run.output
    assert "only 3 Up and Enabled hosts" in run.stdout, run.output
    assert changes_sent(sim, since) == []


def test_a_domain_admin_key_cannot_check_and_the_refused_start_puts_the_node_back(rollout_sim: Any) -> None:
    sim = rollout_sim("rollout_placement.yml")
    workers = sim.names("worker")

    run = sim.rollout(env=ops_key(sim), rollout_node_affinity_groups=SPREAD)

    assert run.rc != 0, run.output
    assert "Not checked: this key cannot list the zone's hosts" in run.stdout, run.output
    last_error = (run.report or {}).get("last_error") or ""
    assert "deployment planner could not place the node with its new affinity groups" in last_error, run.output
    assert "533" in last_error and "previous affinity groups were restored" in last_error, last_error
    assert "add Up and Enabled hosts" in last_error, last_error
    spread = [w for w in workers if "ops-spread" in groups_of(sim, w)]
    refused = [w for w in workers if w not in spread]
    assert len(spread) == 3 and len(refused) == 1, (spread, refused)
    node = refused[0]
    assert node in last_error, last_error
    status = sim.status()
    record = next(n for n in status["nodes"] if n["name"] == node)
    assert record["vm_state"] == "Running" and record["ready"], record
    assert not record["cordoned"] and not record["annotated"], record
    assert groups_of(sim, node) == [] and node in status["out_of_date"], record
    assert status["lock_holder"] is None and status["work_left"] == []
    # Its boot ID is new: it was started again, not left as it was.
    restart = [s for n in (run.report or {}).get("nodes", []) if n["name"] == node for s in n["steps"]]
    assert [s["name"] for s in restart][-4:] == ["restore_affinity_groups", "start", "verify", "uncordon"], restart

    # The operator adds a host; the same rollout again converges.
    sim.admin("POST", "/actions", {"action": "add_host", "name": "kvm-4", "cpu": 64, "memory": 262144})
    rerun = sim.rollout(env=ops_key(sim), rollout_node_affinity_groups=SPREAD)
    assert rerun.rc == 0, rerun.output
    sim.assert_converged()
    assert all(groups_of(sim, w) == ["ops-spread"] for w in workers)
    assert len({vms(sim)[w]["host"] for w in workers}) == 4, vms(sim)


def test_without_put_back_the_node_stays_stopped_and_is_named_as_work_left(rollout_sim: Any) -> None:
    sim = rollout_sim("rollout_placement.yml")

    run = sim.rollout(env=ops_key(sim), rollout_node_affinity_groups=SPREAD, rollout_put_back_on_refusal=False)

    assert run.rc != 0, run.output
    status = sim.status()
    stopped = [n for n in status["nodes"] if n["vm_state"] == "Stopped"]
    assert len(stopped) == 1, status["nodes"]
    node = stopped[0]["name"]
    # Its groups are as set, so it counts as up to date: the work left says what the counts do not.
    assert [e["node"] for e in status["work_left"]] == [node], status["work_left"]
    assert f"Work left: {node} (VM Stopped, cordoned by the rollout)" in run.stdout, run.output
    assert [e["node"] for e in (run.report or {}).get("work_left", [])] == [node], run.report


def test_a_batch_of_three_in_one_strict_group_starts_one_after_another(rollout_sim: Any) -> None:
    sim = rollout_sim("rollout_placement.yml", hosts=FOUR_HOSTS)
    workers = sim.names("worker")
    since = time.time()

    run = sim.rollout(rollout_node_affinity_groups=SPREAD, rollout_max_unavailable=3)

    assert run.rc == 0, run.output
    sim.assert_converged()
    items = [i for i in sim.timeline() if i.get("t", 0) >= since and i.get("node") in workers
             and i.get("event") in ("start_began", "start_ended")]
    # Each start job begins (the planner picks its host) only once the one before it has ended
    # with its VM Running: two at once could both pass the anti-affinity check.
    running: set[str] = set()
    pending: set[str] = set()
    for item in sorted(items, key=lambda i: i["t"]):
        if item["event"] == "start_began":
            assert not pending, (item, pending)
            pending.add(item["node"])
        else:
            assert item.get("ok"), item
            pending.discard(item["node"])
            running.add(item["node"])
    assert running == set(workers), items
    batches = (run.report or {}).get("batches_planned") or []
    assert any(len(b.get("nodes", [])) == 3 for b in batches), batches


def test_a_batch_whose_host_went_into_maintenance_since_the_plan_stops_before_its_cordon(cycle_sim: Any) -> None:
    """The plan counted 4 hosts; before the last worker's batch, kvm-4 goes into Maintenance: the
    batch's preflight counts again and refuses, nothing cordoned or stopped."""
    from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings

    sim = cycle_sim(spec(hosts=FOUR_HOSTS))
    workers = sim.names("worker")
    settings = Settings(worker=TypeSettings(affinity_group_ids=(sim.group_id("ops-spread"),)))
    first = sim.cycle(workers[:3], settings)
    assert first.error is None, first.error
    sim.admin("POST", "/actions", {"action": "set_host", "host": "kvm-4", "resourcestate": "Maintenance"})
    since = time.time()

    last = sim.cycle(workers[3:], settings)

    assert last.error is not None and last.error.step == "preflight", last.error
    assert "affinity group ops-spread" in last.error.msg and "4 members" in last.error.msg, last.error.msg
    assert last.results == [] and changes_sent(sim, since) == []
    node = sim.view().node(workers[3])
    assert node.running and not node.unschedulable and not node.annotated


def test_a_host_dedicated_to_another_account_is_no_room_and_is_named_before_the_lock(rollout_sim: Any) -> None:
    """Three hosts, kvm-3 dedicated (dedicateHost) to the account ``other``: the planner avoids it for
    ops' nodes (DeploymentPlanningManagerImpl.checkForNonDedicatedResources), so three workers in a
    strict host anti-affinity group have two hosts; the root admin key lists the dedication and the
    rollout is refused before the lock, naming the host and its owner, with no node stopped."""
    raw = spec()
    raw["accounts"] = raw["accounts"] + [{"name": "other", "domain": "ROOT", "role": "user"}]
    raw["affinity_groups"] = raw["affinity_groups"] + [
        {"name": "dedicated-other", "type": "ExplicitDedication", "account": "other", "hosts": ["kvm-3"]}]
    raw["clusters"] = [dict(raw["clusters"][0], workers=3)]
    sim = rollout_sim(raw)
    since = time.time()
    assert all(vm["host"] != "kvm-3" for vm in vms(sim).values()), vms(sim)

    run = sim.rollout(rollout_node_affinity_groups=SPREAD)

    assert run.rc != 0, run.output
    out = run.stdout
    assert "Refused before the lock (nothing changed)" in out, run.output
    assert "affinity group ops-spread" in out and "3 members" in out and "only 2 Up and Enabled hosts" in out, out
    assert "host kvm-3 (dedicated to account other of domain ROOT)" in out, out
    assert "release the dedication of host kvm-3" in out, out
    assert changes_sent(sim, since) == []
    assert all(vm["state"] == "Running" for vm in vms(sim).values())
    calls = {c["command"] for c in sim.calls() if c.get("api") == "cloudstack" and c.get("t", since) >= since}
    assert {"listDedicatedHosts", "listDedicatedClusters", "listDedicatedPods", "listDedicatedZones"} <= calls
    status = sim.status()
    assert status["lock_holder"] is None and status["work_left"] == []
