"""Matching etcd members to nodes (a member's name keeps the VM's case, a node's is lower case): by name without case, else by peer address."""

from __future__ import annotations

from typing import Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.etcd_members import match_members, peer_addresses
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.quorum import Member, quorum_verdict
from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.etcd_check import etcd_check_from


def member(name: str, peer: Optional[str] = None, healthy: bool = True, member_id: str = "1") -> Member:
    return Member(id=member_id, name=name, peer_urls=(peer,) if peer else (), healthy=healthy,
                  reason="" if healthy else "/health HTTP 503: health=false")


# CKS's external etcd: member Prod-etcd-1-<hex> on http://<guest IP>:2380 (getInitialEtcdClusterDetails).
CKS = [member("Prod-etcd-1-18c", "http://10.1.1.11:2380", member_id="1"),
       member("Prod-etcd-2-18c", "http://10.1.1.12:2380", member_id="2"),
       member("Prod-etcd-3-18c", "http://10.1.1.13:2380", member_id="3")]


def test_names_match_without_case_and_keep_the_members_spelling() -> None:
    match = match_members(CKS, ["prod-etcd-2-18c", "Prod-etcd-3-18c"])
    assert match.members == {"prod-etcd-2-18c": "Prod-etcd-2-18c", "Prod-etcd-3-18c": "Prod-etcd-3-18c"}
    assert match.unknown == {}


def test_a_node_whose_name_no_member_bears_matches_by_its_peer_address() -> None:
    match = match_members(CKS, ["prod-etcd-2-99a"], {"prod-etcd-2-99a": "10.1.1.12"})
    assert match.members == {"prod-etcd-2-99a": "Prod-etcd-2-18c"}


def test_a_name_match_wins_over_an_address_that_points_elsewhere() -> None:
    # The node's address is member 1's peer address, but a member bears the node's own name.
    match = match_members(CKS, ["prod-etcd-3-18c"], {"prod-etcd-3-18c": "10.1.1.11"})
    assert match.members == {"prod-etcd-3-18c": "Prod-etcd-3-18c"}


@pytest.mark.parametrize("addresses, why", [
    ({}, "no member has this name (and no node address"),
    ({"x": None}, "no member has this name"),
    ({"x": "10.1.1.99"}, "no member has this name or a peer URL with its address 10.1.1.99"),
    ({"x": "not-an-ip"}, "no member has this name"),
])
def test_a_node_matching_neither_name_nor_address_is_unknown(addresses: dict[str, Optional[str]], why: str) -> None:
    match = match_members(CKS, ["x"], addresses)
    assert match.members == {}
    assert why in match.unknown["x"]


def test_two_members_on_one_address_match_neither() -> None:
    members = [member("a", "http://10.1.1.5:2380"), member("b", "http://10.1.1.5:2381")]
    match = match_members(members, ["n"], {"n": "10.1.1.5"})
    assert match.members == {}
    assert "several members have peer address 10.1.1.5: a, b" in match.unknown["n"]


def test_a_member_named_after_another_node_is_never_taken_by_address() -> None:
    # n1's member is named n1 but sits on n2's old address: n2 must not be counted as n1's member.
    members = [member("n1", "http://10.1.1.2:2380")]
    match = match_members(members, ["n2"], {"n1": "10.1.1.1", "n2": "10.1.1.2"})
    assert match.members == {}
    assert "n2" in match.unknown


def test_two_nodes_on_one_member_by_address_match_neither() -> None:
    members = [member("old-name", "http://10.1.1.7:2380")]
    match = match_members(members, ["n1", "n2"], {"n1": "10.1.1.7", "n2": "10.1.1.7"})
    assert match.members == {}
    assert set(match.unknown) == {"n1", "n2"}


def test_an_unstarted_member_never_matches() -> None:
    unstarted = Member(id="77", name="", peer_urls=("http://10.1.1.8:2380",))
    assert match_members([unstarted], ["n"], {"n": "10.1.1.8"}).members == {}


@pytest.mark.parametrize("url, expected", [
    ("http://10.1.1.5:2380", {"10.1.1.5"}),
    ("https://[fd00::0001]:2380", {"fd00::1"}),
    ("http://etcd-1.example:2380", set()),  # a host name proves no address
    ("http://[::1", set()),  # unparsable
])
def test_peer_addresses(url: str, expected: set[str]) -> None:
    assert peer_addresses(member("m", url)) == expected


def test_an_ipv6_node_address_in_another_spelling_matches() -> None:
    members = [member("m", "https://[fd00::1]:2380")]
    assert match_members(members, ["n"], {"n": "fd00:0:0::1"}).members == {"n": "m"}


@given(st.lists(st.integers(min_value=1, max_value=250), min_size=1, max_size=7, unique=True), st.data())
def test_renamed_members_match_their_nodes_by_address_one_to_one(octets: list[int], data: st.DataObject) -> None:
    members = [member(f"Member-{o}", f"http://10.2.0.{o}:2380", member_id=str(o)) for o in octets]
    nodes = {f"node-{o}": f"10.2.0.{o}" for o in octets}
    asked = data.draw(st.lists(st.sampled_from(sorted(nodes)), unique=True))
    match = match_members(members, asked, nodes)
    assert match.unknown == {}
    assert match.members == {n: f"Member-{n.split('-')[1]}" for n in asked}


def test_the_verdict_counts_a_member_matched_by_address_as_going_down() -> None:
    members = [member("Prod-etcd-1-18c", "http://10.1.1.11:2380"), *CKS[1:2],
               member("Prod-etcd-3-18c", "http://10.1.1.13:2380", healthy=False)]
    verdict = quorum_verdict(members, ["renamed-1"], ready=True, addresses={"renamed-1": "10.1.1.11"})
    assert verdict.going_down == ("Prod-etcd-1-18c",)
    assert verdict.safe is False  # 1 of 3 healthy without it


def test_the_verdict_refuses_a_node_matched_by_nothing_naming_why() -> None:
    with pytest.raises(InvalidInput) as caught:
        quorum_verdict(CKS, ["ghost"], ready=True, addresses={"ghost": "10.9.9.9"})
    assert "ghost: no member has this name or a peer URL with its address 10.9.9.9" in caught.value.msg


class _Client:
    def __init__(self, members: list[Member]) -> None:
        self.members = members

    def check(self, going_down: list[str], addresses: Optional[dict[str, Optional[str]]] = None) -> object:
        return quorum_verdict(self.members, going_down, ready=True, addresses=addresses)


def test_the_batch_check_finds_a_member_back_by_its_nodes_address() -> None:
    check = etcd_check_from(_Client(CKS))
    assert check(healthy=["renamed-2"], addresses={"renamed-2": "10.1.1.12"})[0] is True
    ok, why = check(healthy=["renamed-2"])
    assert ok is False and why.startswith("not an etcd member: renamed-2")
    sick = etcd_check_from(_Client([*CKS[:2], member("Prod-etcd-3-18c", "http://10.1.1.13:2380", healthy=False)]))
    ok, why = sick(healthy=["renamed-3"], addresses={"renamed-3": "10.1.1.13"})
    assert ok is False and why.startswith("member not healthy yet: renamed-3 (/health HTTP 503")
