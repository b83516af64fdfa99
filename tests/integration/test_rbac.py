"""A whole rollout with exactly the Kubernetes access docs/rbac.yml grants, and no more.

cks-sim enforces RBAC for a restricted bearer token (spec ``kube.users``, cks_sim/rbac.py): the
ClusterRole's rules apply cluster-wide, the Role's in kube-system only, and anything else is 403
Forbidden. The rules are read from docs/rbac.yml itself, so the document cannot drift from what
the collection needs.
"""

from __future__ import annotations

import copy
import os
from typing import Any

import pytest
import yaml
from in_process_sims import WORKERS_LARGER
from kube_access import TOKEN, USER, documented_rules


def restricted_kubeconfig(sim: Any) -> str:
    with open(sim.env["kubeconfig"], encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    config["users"] = [{"name": "cks-rollout", "user": {"token": TOKEN}}]
    for context in config["contexts"]:
        context["context"]["user"] = "cks-rollout"
    path = os.path.join(sim.work_dir, "restricted.kubeconfig")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        yaml.safe_dump(config, fh)
    return path


def start(rollout_sim: Any, rules: list[dict[str, Any]]) -> Any:
    return rollout_sim("faults_small.yml", etcd=False, kube={"users": [{"name": USER, "token": TOKEN, "rules": rules}]})


def test_rollout_with_exactly_the_documented_rbac(rollout_sim: Any) -> None:
    sim = start(rollout_sim, documented_rules())
    run = sim.rollout(env={"K8S_AUTH_KUBECONFIG": restricted_kubeconfig(sim)}, **WORKERS_LARGER)
    assert run.rc == 0, run.output
    sim.assert_converged()
    kube_calls = [c for c in sim.calls() if c.get("api") == "kubernetes"]
    restricted = [c for c in kube_calls if c.get("user") == USER]
    # Every kind of access was used with the restricted token, and nothing was refused.
    assert {c["verb"] for c in restricted} >= {"get", "list", "watch", "patch", "create", "update"}
    # (poddisruptionbudgets: listed only to name the budgets behind a failed drain.)
    assert {c["resource"] for c in restricted} >= {"nodes", "pods", "pods/eviction", "daemonsets", "leases",
                                                   "configmaps", "events"}
    assert any(c["path"].endswith("/readyz/etcd") or "/readyz" in c["path"] for c in restricted) or not any(
        "/readyz" in c["path"] for c in kube_calls)
    assert [c for c in kube_calls if c.get("status") in (401, 403)] == []
    # The role handed the lease's version on: the second batch renewed the lock in one patch.
    assert [c for c in restricted if (c["verb"], c["resource"], c["status"]) == ("patch", "leases", 200)]


@pytest.mark.parametrize("taken_away", ["pods/eviction"])
def test_a_missing_permission_stops_cleanly_with_forbidden(rollout_sim: Any, taken_away: str) -> None:
    rules = copy.deepcopy(documented_rules())
    for rule in rules:
        if taken_away in rule.get("resources", []):
            rule["resources"] = [r for r in rule["resources"] if r != taken_away]
    sim = start(rollout_sim, [r for r in rules if r.get("resources") or r.get("nonResourceURLs")])
    run = sim.rollout(env={"K8S_AUTH_KUBECONFIG": restricted_kubeconfig(sim)}, **WORKERS_LARGER)
    assert run.rc != 0, run.output
    last_error = sim.status()["last_error"]
    assert "403" in last_error or "forbidden" in last_error.lower(), last_error
    assert taken_away in last_error, last_error
    # Nothing was stopped, nothing is left cordoned, the lock is free.
    assert not [e for e in sim.timeline() if e.get("event") == "stop_requested"]
    status = sim.status()
    assert status["lock_holder"] is None
    assert all(n["vm_state"] == "Running" and not n["cordoned"] for n in status["nodes"]), status["nodes"]
    assert sim.invariants() == []


def test_a_role_without_patch_on_leases_renews_the_lock_by_read_and_update(rollout_sim: Any) -> None:
    """An older Role (update on leases, no patch): each batch's conditional renewal is refused once and
    the lock is renewed by a read and an update, as before the patch; the rollout is the same."""
    rules = copy.deepcopy(documented_rules())
    for rule in rules:
        if "leases" in rule.get("resources", []):
            rule["verbs"] = [v for v in rule["verbs"] if v != "patch"]
    sim = start(rollout_sim, rules)
    run = sim.rollout(env={"K8S_AUTH_KUBECONFIG": restricted_kubeconfig(sim)}, **WORKERS_LARGER)
    assert run.rc == 0, run.output
    sim.assert_converged()
    leases = [c for c in sim.calls() if c.get("api") == "kubernetes" and c.get("resource") == "leases"
              and c.get("user") == USER]
    refused = [c for c in leases if c["verb"] == "patch"]
    assert refused and {c["status"] for c in refused} == {403}, refused
    assert [c for c in leases if c["verb"] == "update" and c["status"] == 200], leases
    assert sim.status()["lock_holder"] is None
    assert sim.invariants() == []


def test_without_events_rbac_the_rollout_completes_with_a_warning(rollout_sim: Any) -> None:
    """The nodes' Events are information: a role without create/patch on events is warned at the plan
    and in each batch, the Events are counted as not written, and the rollout is the same."""
    rules = [r for r in copy.deepcopy(documented_rules()) if "events" not in r.get("resources", [])]
    sim = start(rollout_sim, rules)
    run = sim.rollout(env={"K8S_AUTH_KUBECONFIG": restricted_kubeconfig(sim)}, **WORKERS_LARGER)
    assert run.rc == 0, run.output
    sim.assert_converged()
    output = " ".join(run.output.split())
    assert "the rollout may not create or patch events in default: it runs" in output, run.output
    assert "Kubernetes Event(s) about the nodes could not be written (grant create and patch on events" in output
    events = [c for c in sim.calls() if c.get("api") == "kubernetes" and c.get("resource") == "events"]
    # One refused create per batch run, then nothing more is sent in that run.
    assert events and {(c["verb"], c["status"]) for c in events} == {("create", 403)}, events
    assert len(events) <= 2


CONTROL_LARGER: dict[str, Any] = {"rollout_node_offerings": {"control": "cks-large"}, "rollout_etcd_endpoints": []}


def start_stacked(rollout_sim: Any, rules: list[dict[str, Any]]) -> Any:
    """3 stacked control nodes with real etcd members, asked only through pods/exec (no etcd variable)."""
    return rollout_sim("small.yml", etcd=True, kube={"users": [{"name": USER, "token": TOKEN, "rules": rules}]})


def test_control_plane_rollout_with_exactly_the_documented_rbac_through_pods_exec(rollout_sim: Any) -> None:
    sim = start_stacked(rollout_sim, documented_rules())
    run = sim.rollout(env={"K8S_AUTH_KUBECONFIG": restricted_kubeconfig(sim)}, **CONTROL_LARGER)
    assert run.rc == 0, run.output
    sim.assert_converged()
    restricted = [c for c in sim.calls() if c.get("api") == "kubernetes" and c.get("user") == USER]
    execs = [c for c in restricted if c.get("resource") == "pods/exec"]
    assert execs and all(c.get("status") == 101 for c in execs)
    assert any(c.get("resource") == "selfsubjectaccessreviews" for c in restricted)
    assert [c for c in restricted if c.get("status") in (401, 403)] == []
    assert all(n["offering"] == "cks-large" for n in sim.status()["nodes"] if n["node_type"] == "control")


def test_without_pods_exec_a_control_rollout_is_refused_before_the_lock(rollout_sim: Any) -> None:
    rules = [r for r in copy.deepcopy(documented_rules()) if "pods/exec" not in r.get("resources", [])]
    sim = start_stacked(rollout_sim, rules)
    run = sim.rollout(env={"K8S_AUTH_KUBECONFIG": restricted_kubeconfig(sim)}, **CONTROL_LARGER)
    assert run.rc != 0
    assert "Refused before the lock" in run.output and "may not exec into etcd-" in run.output
    assert "grant pods/exec on the etcd pods (docs/rbac.yml), or give etcd_endpoints" in run.output
    calls = sim.calls()
    # Nothing was taken or touched: no lease written, no node patched, no exec tried.
    assert not [c for c in calls if c.get("api") == "kubernetes" and c.get("verb") in ("create", "update", "patch")
                and c.get("resource") in ("leases", "configmaps", "nodes")]
    assert not [c for c in calls if c.get("resource") == "pods/exec"]
    assert sim.lease() is None or not (sim.lease().get("spec") or {}).get("holderIdentity")
