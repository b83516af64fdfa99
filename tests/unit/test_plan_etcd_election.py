"""The plan's reading of etcd's member health during a leader election (``_services.outdated.member_health``)."""

from __future__ import annotations

import dataclasses

import pytest
from fakes import FakeQuorumClient

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import EtcdError
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.quorum import Member, quorum_verdict
from ansible_collections.cloudstack.cks.plugins.module_utils._services.outdated import member_health

UP = [Member(id=str(i), name=f"c{i}", client_urls=(f"https://10.0.0.{i}:2379",), healthy=True) for i in (1, 2, 3)]
ELECTING = [dataclasses.replace(m, healthy=False, reason="/health HTTP 503: RAFT NO LEADER") for m in UP]
C3_LOST = [UP[0], UP[1], dataclasses.replace(UP[2], healthy=False, reason="connection refused")]


def test_no_voter_healthy_is_every_voter_down_learners_aside() -> None:
    assert quorum_verdict(ELECTING).no_voter_healthy
    assert not quorum_verdict(C3_LOST).no_voter_healthy
    assert not quorum_verdict(UP).no_voter_healthy
    learner = dataclasses.replace(UP[0], id="9", name="l9", learner=True)
    assert quorum_verdict([*ELECTING, learner]).no_voter_healthy  # a learner does not vote, nor lead


def test_a_reading_taken_during_an_election_is_taken_again_until_a_voter_is_healthy() -> None:
    client = FakeQuorumClient(quorum_verdict(ELECTING), quorum_verdict(ELECTING), quorum_verdict(C3_LOST))
    verdict = member_health(client, seconds=5)
    assert [m.name for m in verdict.unhealthy] == ["c3"]
    assert client.asked == [([], False)] * 3  # no member going down, no quorum read: health alone


def test_a_healthy_reading_is_asked_once() -> None:
    client = FakeQuorumClient(quorum_verdict(C3_LOST), quorum_verdict(UP))
    assert [m.name for m in member_health(client).unhealthy] == ["c3"]
    assert len(client.asked) == 1


def test_a_quorum_lost_for_good_is_planned_as_read_once_the_time_is_up() -> None:
    client = FakeQuorumClient(quorum_verdict(ELECTING))
    verdict = member_health(client, seconds=0)
    assert verdict.no_voter_healthy and len(client.asked) == 1


def test_an_etcd_that_cannot_be_asked_is_not_asked_again() -> None:
    client = FakeQuorumClient(EtcdError("no etcd endpoint answered"), quorum_verdict(UP))
    with pytest.raises(EtcdError):
        member_health(client)
    assert len(client.asked) == 1
