"""The pure parts of the etcd quorum client: the verdict, the member list, the health answers."""

from __future__ import annotations

from typing import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import EtcdError, InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd import EtcdClient
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.quorum import Member, judge_health, parse_members, quorum_verdict


def members(healthy: Sequence[bool], learners: Sequence[bool] = ()) -> list[Member]:
    """m1..mN voters with the given health, then l1..lK learners."""
    out = [Member(id=str(1000 + i), name=f"m{i + 1}", client_urls=(f"http://127.0.0.1:{2379 + i}",),
                  healthy=h, reason="" if h else "/health HTTP 503: health=false")
           for i, h in enumerate(healthy)]
    out += [Member(id=str(9000 + i), name=f"l{i + 1}", learner=True, healthy=h,
                   reason="" if h else "connection refused") for i, h in enumerate(learners)]
    return out


# (voters, healthy now, going down) -> safe. All going-down members healthy.
@pytest.mark.parametrize("voters,going_down,safe", [
    (1, 0, True), (1, 1, False),
    (2, 0, True), (2, 1, False),
    (3, 1, True), (3, 2, False),
    (4, 1, True), (4, 2, False),
    (5, 1, True), (5, 2, True), (5, 3, False),
    (6, 2, True), (6, 3, False),
    (7, 3, True), (7, 4, False),
])
def test_all_healthy_by_size(voters: int, going_down: int, safe: bool) -> None:
    verdict = quorum_verdict(members([True] * voters), [f"m{i + 1}" for i in range(going_down)])
    assert verdict.safe is safe
    assert verdict.voters == voters
    assert verdict.quorum == voters // 2 + 1
    assert verdict.healthy == voters
    assert verdict.healthy_after == voters - going_down
    assert verdict.tolerates == voters - going_down - (voters // 2 + 1)


# Health of m1..mN, who goes down -> safe. Members already down use up the tolerance first.
@pytest.mark.parametrize("health,going_down,safe", [
    ([True, True, False], ["m1"], False),        # 3: one already down, none more
    ([True, True, False], ["m3"], True),         # ... but the one that is down may "go down"
    ([True, True, False], [], True),             # and quorum holds now
    ([True, False, False], [], False),           # 1 of 3: no quorum now
    ([True, True, True, True, False], ["m1"], True),         # 5: one down, one more is fine
    ([True, True, True, True, False], ["m1", "m2"], False),  # ... two more is not
    ([True, True, True, False, False], ["m1"], False),       # 5: two down, none more
    ([True, True, True, False, False], ["m4", "m5"], True),  # the down ones themselves
    ([False, True, True, True], ["m1"], True),   # 4: q=3, m1 already down
    ([False, True, True, True], ["m2"], False),
    ([True, True, True, True, True, True, False], ["m1", "m2"], True),  # 7: q=4, 4 remain
    ([True, True, True, True, True, False, False], ["m1", "m2"], False),
])
def test_already_unhealthy_members(health: list[bool], going_down: list[str], safe: bool) -> None:
    verdict = quorum_verdict(members(health), going_down)
    assert verdict.safe is safe
    leaving = set(going_down)
    expected_after = sum(1 for i, h in enumerate(health) if h and f"m{i + 1}" not in leaving)
    assert verdict.healthy_after == expected_after


def test_learners_do_not_vote() -> None:
    # 3 voters + 2 learners: a quorum of 2, whatever the learners do.
    verdict = quorum_verdict(members([True, True, True], learners=[False, True]), ["m1"])
    assert (verdict.voters, verdict.quorum, verdict.healthy, verdict.safe) == (3, 2, 3, True)
    assert "learners not counted: l1, l2" in verdict.message
    assert "unhealthy" not in verdict.message  # an unhealthy learner is no unhealthy voter

    # A learner going down changes nothing; a voter more would.
    assert quorum_verdict(members([True, True, False], learners=[True]), ["l1"]).safe
    assert not quorum_verdict(members([True, True, False], learners=[True]), ["l1", "m1"]).safe


def test_unstarted_member_counts_as_a_down_voter() -> None:
    # Added but never started: the gateway gives it no name and no client URLs.
    unstarted = Member(id="777", name="", healthy=False, reason="never started (no client URL)")
    verdict = quorum_verdict([*members([True, True]), unstarted], [])
    assert (verdict.voters, verdict.quorum, verdict.healthy) == (3, 2, 2)
    assert verdict.safe
    assert "unstarted member 777 (never started (no client URL))" in verdict.message
    assert not quorum_verdict([*members([True, True]), unstarted], ["m1"]).safe


def test_message_names_arithmetic_and_unhealthy_members() -> None:
    ok = quorum_verdict(members([True, True, True]), ["m2"])
    assert ok.message == "2 of 3 voting members healthy without m2; 2 needed"

    bad = quorum_verdict(members([True, True, False]), ["m2"])
    assert bad.message == ("etcd would lose quorum (m2 going down); 1 of 3 voting members healthy without m2; "
                           "2 needed; unhealthy: m3 (/health HTTP 503: health=false)")
    assert [m.name for m in bad.unhealthy] == ["m3"]


def test_not_ready_is_unsafe_only_when_required() -> None:
    verdict = quorum_verdict(members([True, True, True]), ["m1"], ready=False, ready_reason="read timed out")
    assert not verdict.safe
    assert verdict.message.endswith("etcd is not ready: read timed out")
    relaxed = quorum_verdict(members([True, True, True]), ["m1"], ready=False, require_ready=False)
    assert relaxed.safe


def test_going_down_names_are_checked_and_deduplicated() -> None:
    with pytest.raises(InvalidInput) as err:
        quorum_verdict(members([True, True, True]), ["m1", "k-control-typo"])
    assert err.value.parameter == "going_down"
    assert "k-control-typo" in err.value.msg and "m1, m2, m3" in err.value.msg

    verdict = quorum_verdict(members([True, True, True]), ["m1", "m1"])
    assert verdict.going_down == ("m1",) and verdict.safe


def test_only_learners_is_an_error() -> None:
    with pytest.raises(EtcdError):
        quorum_verdict(members([], learners=[True]), [])


def test_result_dict_is_json_shaped() -> None:
    result = quorum_verdict(members([True, False, True]), ["m1"]).to_dict()
    assert set(result) == {"members", "going_down", "voters", "quorum", "healthy", "healthy_after",
                           "tolerates", "ready", "safe", "msg"}
    assert result["members"][1] == {"name": "m2", "id": "1001", "client_urls": ["http://127.0.0.1:2380"],
                                    "peer_urls": [], "learner": False, "healthy": False,
                                    "reason": "/health HTTP 503: health=false"}


health_lists = st.lists(st.booleans(), min_size=1, max_size=9)


@given(health=health_lists, picks=st.lists(st.integers(min_value=0, max_value=8), max_size=9),
       extra=st.integers(min_value=0, max_value=8))
def test_more_going_down_never_makes_it_safer(health: list[bool], picks: list[int], extra: int) -> None:
    names = [f"m{i + 1}" for i in range(len(health))]
    going = [names[p % len(names)] for p in picks]
    more = going + [names[extra % len(names)]]
    if not quorum_verdict(members(health), going).safe:
        assert not quorum_verdict(members(health), more).safe


@given(health=health_lists, learner_health=st.lists(st.booleans(), max_size=3),
       picks=st.lists(st.integers(min_value=0, max_value=8), max_size=4))
def test_learners_never_change_the_answer(health: list[bool], learner_health: list[bool], picks: list[int]) -> None:
    names = [f"m{i + 1}" for i in range(len(health))]
    going = [names[p % len(names)] for p in picks]
    without = quorum_verdict(members(health), going)
    with_learners = quorum_verdict(members(health, learner_health), going)
    assert (without.safe, without.quorum, without.healthy_after) == (
        with_learners.safe, with_learners.quorum, with_learners.healthy_after)


# --- the member list as the v3 JSON gateway renders it -----------------------------------------

def test_parse_members_reads_gateway_json() -> None:
    answer = {
        "header": {"cluster_id": "14841639068965178418", "member_id": "10276657743932975437", "raft_term": "2"},
        "members": [
            {"ID": "10276657743932975437", "name": "k-control-1", "peerURLs": ["https://10.1.1.11:2380"],
             "clientURLs": ["https://10.1.1.11:2379"]},
            {"ID": "9048707997721485459", "name": "k-control-2", "peerURLs": ["https://10.1.1.12:2380"],
             "clientURLs": ["https://10.1.1.12:2379"], "isLearner": True},
            {"ID": "3", "peerURLs": ["https://10.1.1.13:2380"]},  # added, never started
        ],
    }
    parsed = parse_members(answer)
    assert [(m.id, m.name, m.learner, m.started) for m in parsed] == [
        ("10276657743932975437", "k-control-1", False, True),
        ("9048707997721485459", "k-control-2", True, True),
        ("3", "", False, False),
    ]
    assert parsed[0].client_urls == ("https://10.1.1.11:2379",)
    assert parsed[2].client_urls == ()
    assert parsed[2].label == "unstarted member 3"


def test_parse_members_keeps_big_ids_exact() -> None:
    # etcdctl -w json prints IDs as numbers beyond 2**53; they must not go through a float.
    parsed = parse_members({"members": [{"ID": 17179559303424445672, "name": "a"}]})
    assert parsed[0].id == "17179559303424445672"


@pytest.mark.parametrize("answer", [{}, {"members": []}, {"members": "x"}])
def test_parse_members_without_members_is_an_error(answer: dict) -> None:
    with pytest.raises(EtcdError):
        parse_members(answer)


# --- health answers ----------------------------------------------------------------------------

@pytest.mark.parametrize("path,status,body,healthy,reason", [
    ("/health", 200, b'{"health":"true"}', True, ""),
    ("/health", 503, b'{"health":"false"}', False, "/health HTTP 503: health=false"),
    ("/health", 503, b'{"health":"false","reason":"RAFT NO LEADER"}', False,
     "/health HTTP 503: health=false (RAFT NO LEADER)"),
    ("/health", 200, b'{"health":"false"}', False, "/health HTTP 200: health=false"),
    ("/health", 200, b"<html>proxy</html>", False, "/health HTTP 200: not JSON: <html>proxy</html>"),
    ("/readyz", 200, b"ok", True, ""),
    ("/readyz", 503, b"[+]data_corruption ok\n[-]linearizable_read failed: etcdserver: leader changed\nreadyz check failed",
     False, "/readyz HTTP 503: [-]linearizable_read failed: etcdserver: leader changed"),
])
def test_judge_health(path: str, status: int, body: bytes, healthy: bool, reason: str) -> None:
    assert judge_health(path, status, body) == (healthy, reason)


# --- options -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,parameter", [
    ({"endpoints": []}, "endpoints"),
    ({"endpoints": ["127.0.0.1:2379"]}, "endpoints"),
    ({"endpoints": ["https://127.0.0.1:2379"], "client_cert": "/x.crt"}, "client_key"),
    ({"endpoints": ["https://127.0.0.1:2379"], "client_key": "/x.key"}, "client_cert"),
    ({"endpoints": ["https://127.0.0.1:2379"], "timeout": 0}, "timeout"),
    ({"endpoints": ["https://127.0.0.1:2379"], "ca_cert": "/nonexistent/ca.crt"}, "ca_cert"),
    ({"endpoints": ["https://127.0.0.1:2379"], "client_cert": "/nonexistent/c.crt", "client_key": "/nonexistent/c.key"},
     "client_cert"),
])
def test_client_refuses_bad_options(kwargs: dict, parameter: str) -> None:
    with pytest.raises(InvalidInput) as err:
        EtcdClient(**kwargs)
    assert err.value.parameter == parameter
