"""The seed's rules of issue 14 left after test_seed_rules.py, through the real playbook or module against cks-sim.

Each test fails without its fix; the simulator's invariants are checked after each.
"""

from __future__ import annotations

from typing import Any

import pytest

from conftest import load_raw_spec

pytestmark = pytest.mark.timeout(900)


# -- 4. an etcd member whose name no node bears is its node's by its peer address ------------------

def test_an_etcd_member_renamed_by_hand_is_matched_to_its_node_by_peer_address_and_rolled(rollout_sim: Any) -> None:
    raw = load_raw_spec("rollout_extetcd.yml")
    # A loopback guest network: the sim's members listen on their VM's IP, so peer URLs carry it as on CKS.
    raw["clusters"][0]["guest_cidr"] = "127.0.31.0/24"
    raw["clusters"][0]["nodes"] = [{"type": "etcd", "index": 1, "etcd_member_name": "etcd-replaced-by-hand"}]
    sim = rollout_sim(raw)
    members = {m["name"] for m in sim.env["etcd"]["members"]}
    etcd_nodes = {n.lower() for n in sim.names("etcd")}
    assert "etcd-replaced-by-hand" in members and "etcd-replaced-by-hand" not in etcd_nodes
    renamed = sorted(etcd_nodes - {m.lower() for m in members})
    assert len(renamed) == 1, (members, etcd_nodes)

    run = sim.rollout(rollout_node_offerings={"etcd": "cks-large"})

    # Matched by name only, the renamed node's batch was refused ("not etcd member name(s)").
    assert run.rc == 0, run.output
    rolled = [n for b in run.report["batches"] for n in b["nodes"]]
    assert sorted(rolled) == sorted(etcd_nodes), rolled
    sim.assert_converged()
    assert sim.invariants() == []
