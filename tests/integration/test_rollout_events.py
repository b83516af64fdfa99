"""The rollout's story on the nodes it restarted, read as an on-call engineer reads it: with kubectl.

After a whole rollout through ansible-playbook, ``kubectl describe node <a restarted worker>`` and
``kubectl get events --field-selector involvedObject.name=<it>`` show the rollout's Events
(events.k8s.io/v1, reported by cloudstack.cks/rollout) in order, between the kubelet's own, and a
PodDisruptionBudget that refused an eviction several times is one EvictionBlocked Event whose
series counts the refusals (the pod related), not one Event per retry.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any, Callable

import pytest

from cks_sim.tools import binary, needs

KUBECTL = binary("kubectl")
pytestmark = [pytest.mark.timeout(900), needs("kubectl")]

# An Event lives an hour of simulated time, 36 real seconds at the sim's 100x: a slow run must not
# lose the start of its story before kubectl reads it.
LONG_LIVED_EVENTS = {"event_ttl": 360000}
STORY = ["CordonedForRollout", "DrainStarted", "Drained", "VMStopped", "ServiceOfferingChanged", "VMStarted",
         "BackReady", "Uncordoned"]


def kubectl(sim: Any, *args: str) -> str:
    out = subprocess.run([str(KUBECTL), "--kubeconfig", sim.env["kubeconfig"], *args], capture_output=True, text=True,
                         timeout=90, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout


def in_order(found: list[str], wanted: list[str]) -> bool:
    positions = [found.index(reason) for reason in wanted if reason in found]
    return len(positions) == len(wanted) and positions == sorted(positions)


def test_describe_node_tells_the_rollouts_story(rollout_sim: Callable[..., Any]) -> None:
    sim = rollout_sim("faults_small.yml", etcd=False, kube=LONG_LIVED_EVENTS)
    run = sim.rollout(rollout_node_offerings={"worker": "cks-large"}, rollout_max_unavailable=2)
    assert run.rc == 0, run.output
    sim.assert_converged()
    worker = sim.names("worker")[0]

    described = kubectl(sim, "describe", "node", worker)
    events = described.split("\nEvents:", 1)[1]
    lines = [line.split() for line in events.splitlines() if line.strip().startswith(("Normal", "Warning"))]
    reasons = [line[1] for line in lines]
    assert set(STORY) <= set(reasons) and "NodeReady" in reasons, events
    ours = [line for line in lines if line[1] in STORY]
    assert all(line[3] == "cloudstack.cks/rollout" for line in ours), ours
    assert "Cordoned for rollout" in events and "Service offering changed: cks-medium -> cks-large" in events
    assert "Back: Ready with new boot ID" in events
    # kubectl describe sorts a Node's Events by lastTimestamp (seconds): the story is in that order.
    stamps = {e["reason"]: e["lastTimestamp"] for e in json.loads(kubectl(
        sim, "get", "events", "--field-selector", f"involvedObject.name={worker}", "-o", "json"))["items"]}
    for first, then in zip(STORY, STORY[1:]):
        assert stamps[first] <= stamps[then], (first, then, stamps)
        if stamps[first] < stamps[then]:
            assert reasons.index(first) < reasons.index(then), events

    table = kubectl(sim, "get", "events", "--field-selector", f"involvedObject.name={worker}").splitlines()
    assert table[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    listed = [row.split()[2] for row in table[1:] if f"node/{worker}" in row]
    assert in_order(listed, STORY), listed

    # A refused eviction is one Event per pod with a series, reported on the node, the pod related.
    raw = json.loads(kubectl(sim, "get", "--raw", "/apis/events.k8s.io/v1/namespaces/default/events?fieldSelector="
                                                  "reason%3DEvictionBlocked"))
    for event in raw["items"]:
        assert event["regarding"]["kind"] == "Node" and event["related"]["kind"] == "Pod"
        assert event["reportingController"] == "cloudstack.cks/rollout" and event["action"] == "Evict"
    keys = [(e["regarding"]["name"], e["related"]["uid"]) for e in raw["items"]]
    assert len(keys) == len(set(keys))  # never one Event per retry


def test_a_refused_eviction_repeats_as_a_series(rollout_sim: Callable[..., Any]) -> None:
    sim = rollout_sim("faults_small.yml", etcd=False, kube=LONG_LIVED_EVENTS)
    # The guarded Deployment's budget refuses every eviction: the drain retries until the deadline.
    sim.fault(kind="pdb_block", namespace="default", name="web")
    run = sim.rollout(rollout_batch_timeout=12, rollout_node_offerings={"worker": "cks-large"},
                      rollout_max_unavailable=2)
    assert run.rc != 0, run.output
    raw = json.loads(kubectl(sim, "get", "--raw", "/apis/events.k8s.io/v1/namespaces/default/events?fieldSelector="
                                                  "reason%3DEvictionBlocked"))
    assert raw["items"], "no eviction was refused"
    # Refused every eviction_retry_interval: one Event per pod, its series counting the refusals (a pod
    # first refused right at the deadline of a slow run may have been refused once only).
    assert any((e.get("series") or {}).get("count", 1) >= 2 for e in raw["items"]), raw["items"]
    keys = [(e["regarding"]["name"], e["related"]["uid"]) for e in raw["items"]]
    assert len(keys) == len(set(keys)), keys
    event = raw["items"][0]
    assert event["type"] == "Warning" and event["note"].startswith(
        f"Eviction of pod default/{event['related']['name']} blocked by PodDisruptionBudget default/web")
    node = event["regarding"]["name"]
    table = kubectl(sim, "get", "events", "--field-selector", f"involvedObject.name={node}", "-o", "wide").splitlines()
    rows = [row.split() for row in table[1:]]
    blocked = [row for row in rows if row[2] == "EvictionBlocked"]
    # One row per pod, its COUNT the refusals seen (kubectl reads the series).
    counts = {e["related"]["name"]: (e.get("series") or {}).get("count", 1) for e in raw["items"]
              if e["regarding"]["name"] == node}
    assert blocked and sorted(int(row[-2]) for row in blocked) == sorted(counts.values()), (blocked, counts)
    reasons = [row[2] for row in rows]
    assert in_order(reasons, ["CordonedForRollout", "DrainStarted", "EvictionBlocked", "DrainFailed", "LeftCordoned",
                              "Uncordoned"]), reasons
    # The release took the node back (it never went down) and said so.
    released = [" ".join(row) for row in rows if row[2] == "Uncordoned"]
    assert released and "Uncordoned by the release of rollout" in released[-1], released
