"""Validation between batches: what fails a round (nodes, /readyz, etcd), the rounds until enough
consecutive ones pass or the timeout, one round's reads, and the options as the module takes them."""

from __future__ import annotations

from typing import Any, Optional

import pytest
from clock import FakeClock
from fakes import FakeKube

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput, KubernetesError
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.health import etcd_problems, node_problems, readyz_problems, round_problems
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.validation import ClusterReader, ValidationOptions, validate
from ansible_collections.cloudstack.cks.plugins.module_utils._services.cycle import validation_options


def node(name: str, ready: Optional[str] = "True", reason: str = "KubeletReady",
         taints: tuple[str, ...] = ()) -> dict[str, Any]:
    conditions = [{"type": "MemoryPressure", "status": "False"}]
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready, "reason": reason})
    return {"metadata": {"name": name}, "spec": {"taints": [{"key": k, "effect": "NoSchedule"} for k in taints]},
            "status": {"conditions": conditions}}


NODE_CASES = [
    ("all Ready", [node("a"), node("b")], []),
    ("Ready Unknown names the node and the reason", [node("a"), node("b", "Unknown", "NodeStatusUnknown")],
     ["node b not Ready (Ready=Unknown, NodeStatusUnknown)"]),
    ("Ready False", [node("a", "False", "KubeletNotReady")], ["node a not Ready (Ready=False, KubeletNotReady)"]),
    ("no Ready condition", [node("a", None)], ["node a not Ready (Ready=missing)"]),
    ("Ready but unreachable", [node("a", taints=("node.kubernetes.io/unreachable",))],
     ["node a not Ready (tainted node.kubernetes.io/unreachable)"]),
    ("Ready but not-ready", [node("a", taints=("node.kubernetes.io/not-ready",))],
     ["node a not Ready (tainted node.kubernetes.io/not-ready)"]),
    ("cordoned, control-plane and our own taints are healthy",
     [node("a", taints=("node.kubernetes.io/unschedulable", "node-role.kubernetes.io/control-plane",
                        "cloudstack.apache.org/rollout-pending"))], []),
    ("sorted by name", [node("z", "Unknown", ""), node("a", "Unknown", "")],
     ["node a not Ready (Ready=Unknown)", "node z not Ready (Ready=Unknown)"]),
    ("no nodes", [], []),
]


@pytest.mark.parametrize("description,nodes,expected", NODE_CASES, ids=[c[0] for c in NODE_CASES])
def test_node_problems(description: str, nodes: list[dict[str, Any]], expected: list[str]) -> None:
    assert node_problems(nodes) == expected


@pytest.mark.parametrize("status,text,expected", [
    (200, "ok", []),
    (500, "[+]ping ok\n[-]etcd failed: reason withheld\n[+]log ok\nreadyz check failed\n",
     ["API server /readyz HTTP 500: [-]etcd failed: reason withheld"]),
    (503, "the server is currently   unable\nto handle the request", [
        "API server /readyz HTTP 503: the server is currently unable to handle the request"]),
    (500, "", ["API server /readyz HTTP 500: no answer text"]),
    (0, "cannot reach the Kubernetes API at https://x: refused", [
        "API server /readyz: cannot reach the Kubernetes API at https://x: refused"]),
])
def test_readyz_problems(status: int, text: str, expected: list[str]) -> None:
    assert readyz_problems(status, text) == expected


def test_etcd_problems() -> None:
    assert etcd_problems(None) == []
    assert etcd_problems((True, "3 of 3 voting members healthy")) == []
    assert etcd_problems((True, "2 of 3 voting members healthy; unhealthy: m3")) == []  # quorum holds
    assert etcd_problems((False, "etcd would lose quorum (now)")) == ["etcd: etcd would lose quorum (now)"]


def test_round_problems_joins_all_three() -> None:
    problems = round_problems([node("a", "Unknown", "NodeStatusUnknown")], (500, "[-]etcd failed"),
                              (False, "no quorum"))
    assert problems == ["node a not Ready (Ready=Unknown, NodeStatusUnknown)",
                        "API server /readyz HTTP 500: [-]etcd failed", "etcd: no quorum"]
    assert round_problems([node("a")], (200, "ok")) == []


# --- the rounds ----------------------------------------------------------------------------------

def rounds_of(answers: list[list[str]], clock: FakeClock, round_takes: float = 0.0) -> Any:
    """A read that answers ``answers`` in turn, each round taking ``round_takes`` seconds of ``clock``."""
    answers = list(answers)
    starts: list[float] = []

    def read() -> tuple[list[str], str]:
        starts.append(clock.now)
        clock.advance(round_takes)
        return (answers.pop(0) if answers else ["still failing"]), ""

    read.starts = starts  # type: ignore[attr-defined]
    return read


def run(answers: list[list[str]], count: int, interval: float, timeout: float, round_takes: float = 0.0) -> Any:
    clock = FakeClock()
    read = rounds_of(answers, clock, round_takes)
    result = validate(read, ValidationOptions(count, interval, timeout), clock=clock, sleep=clock.sleep,
                      wall=clock)
    return result, read.starts  # type: ignore[attr-defined]


def test_one_passing_round_is_enough_by_default() -> None:
    result, starts = run([[]], count=1, interval=10, timeout=300)
    assert result.ok and result.passes == 1 and len(result.rounds) == 1 and starts == [100.0]


def test_count_consecutive_passes_each_interval_apart() -> None:
    result, starts = run([[], [], []], count=3, interval=10, timeout=300, round_takes=0.5)
    assert result.ok and result.passes == 3
    assert starts == [100.0, 110.5, 121.0]  # the pause counts from a round's end


def test_a_failed_round_starts_the_count_again() -> None:
    result, starts = run([[], ["node b not Ready"], [], []], count=2, interval=5, timeout=300)
    assert result.ok and [r.ok for r in result.rounds] == [True, False, True, True]
    assert starts == [100.0, 105.0, 110.0, 115.0]
    assert result.last_problems == ["node b not Ready"]


def test_timeout_fails_naming_the_last_problems() -> None:
    result, starts = run([["node b not Ready (Ready=Unknown)"]] * 10, count=1, interval=10, timeout=25)
    assert not result.ok and result.passes == 0
    assert starts == [100.0, 110.0, 120.0]  # a round at 130 would start after the timeout
    message = result.message()
    assert "did not validate within 25s" in message and "0 of 1 consecutive passes in 3 rounds" in message
    assert message.endswith("node b not Ready (Ready=Unknown)")


def test_passing_at_the_end_but_not_enough_of_them_still_fails() -> None:
    result, _starts = run([["etcd: no quorum"], [], []], count=3, interval=10, timeout=20)
    assert not result.ok and result.passes == 2
    assert "2 of 3 consecutive passes" in result.message() and "etcd: no quorum" in result.message()


def test_the_first_round_runs_whatever_the_timeout() -> None:
    result, starts = run([[]], count=1, interval=10, timeout=0)
    assert result.ok and starts == [100.0]
    result, starts = run([[], []], count=2, interval=10, timeout=0)
    assert not result.ok and starts == [100.0]


def test_count_zero_is_off() -> None:
    result, starts = run([[]], count=0, interval=10, timeout=300)
    assert result.ok and starts == [] and result.rounds == []
    assert not ValidationOptions(0).enabled and ValidationOptions().enabled


def test_result_as_returned() -> None:
    result, _starts = run([["x"], []], count=1, interval=1, timeout=10)
    data = result.to_dict()
    assert (data["count"], data["interval"], data["timeout"], data["ok"], data["passes"]) == (1, 1, 10, True, 1)
    assert [r["ok"] for r in data["rounds"]] == [False, True] and data["rounds"][0]["problems"] == ["x"]


# --- one round's reads ------------------------------------------------------------------------------


def test_reader_healthy_with_an_etcd_member_down_notes_it() -> None:
    asked: list[Any] = []

    def etcd(without: Any = (), healthy: Any = ()) -> tuple[bool, str]:
        asked.append(list(without))
        return True, "2 of 3 voting members healthy; 2 needed; unhealthy: m3 (/health HTTP 503)"

    kube = FakeKube(nodes=[node("a")], readyz=(200, "ok"))
    problems, notes = ClusterReader(kube, etcd)()
    assert problems == [] and "unhealthy: m3" in notes
    assert kube.paths == ["/readyz"] and asked == [[]]


def test_reader_turns_failed_reads_into_problems() -> None:
    kube = FakeKube(nodes=KubernetesError("list nodes", "boom", status=503), readyz=KubernetesError("GET /readyz", "no answer"))
    problems, notes = ClusterReader(kube)()
    assert problems == ["cannot list the nodes: Kubernetes list nodes failed (HTTP 503): boom",
                        "API server /readyz: Kubernetes GET /readyz failed: no answer"]
    assert notes == ""


def test_reader_etcd_without_quorum_fails() -> None:
    kube = FakeKube(nodes=[node("a")], readyz=(200, "ok"))
    problems, _notes = ClusterReader(kube, lambda without=(), healthy=(): (False, "etcd would lose quorum"))()
    assert problems == ["etcd: etcd would lose quorum"]


# --- options ------------------------------------------------------------------------------------------

def test_validation_options_from_the_module_parameters() -> None:
    assert validation_options({}) == ValidationOptions(1, 10.0, 300.0)
    assert validation_options({"validate_count": 3, "validate_interval": 2, "validate_timeout": 60}) == \
        ValidationOptions(3, 2.0, 60.0)
    assert not validation_options({"validate_count": 0}).enabled
    for bad in ({"validate_count": -1}, {"validate_interval": -1}, {"validate_timeout": -5}):
        with pytest.raises(InvalidInput):
            validation_options(bad)
