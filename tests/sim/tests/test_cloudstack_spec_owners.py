"""Bad owner, key, limit and storage input in a spec is refused naming the field to change."""

from __future__ import annotations

import os

import pytest

from cks_sim.spec import SpecError, load_spec, normalize

from simkit import small_spec

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def _refused(raw: dict) -> str:
    with pytest.raises(SpecError) as caught:
        normalize(raw)
    return str(caught.value)


def test_the_examples_load_and_normalise_twice_to_the_same():
    for name in ("tenants.yml", "page-size-100.yml"):
        spec = load_spec(os.path.join(EXAMPLES, name))
        assert normalize(spec) == spec
    tenants = load_spec(os.path.join(EXAMPLES, "tenants.yml"))
    assert [c["dedication_group"] for c in tenants["clusters"]] == ["dedicated-alice", "dedicated-platform"]
    assert [(c["account"], c["project"]) for c in tenants["clusters"]] == [("alice", None), (None, "platform")]


def test_owner_mistakes_name_the_field():
    raw = small_spec(accounts=[{"name": "alice", "domain": "nowhere"}])
    assert _refused(raw) == "accounts[0].domain: no domain named 'nowhere'"
    raw = small_spec(accounts=[{"name": "alice", "role": "superuser"}])
    assert _refused(raw) == "accounts[0].role must be one of admin, domainadmin, user"
    raw = small_spec(accounts=[{"name": "alice", "apikey": "k"}])
    assert _refused(raw) == "accounts[0]: apikey and secretkey go together"
    raw = small_spec(accounts=[{"name": "admin"}])
    assert _refused(raw) == "accounts: duplicate name 'admin'"
    raw = small_spec(projects=[{"name": "p", "accounts": ["ghost"]}])
    assert _refused(raw) == "projects[0].accounts: no account named 'ghost'"
    raw = small_spec()
    raw["clusters"][0]["account"] = "ghost"
    assert _refused(raw) == "clusters[0].account: no account named 'ghost'"
    raw = small_spec(accounts=[{"name": "alice"}], projects=[{"name": "p"}])
    raw["clusters"][0].update(account="alice", project="p")
    assert _refused(raw) == "clusters[0]: account and project are mutually exclusive; give one owner"
    raw = small_spec(domains=[{"name": "t", "parent": "later"}, {"name": "later"}])
    assert _refused(raw) == "domains[0].parent: no domain named 'later' listed before it"


def test_limit_and_storage_mistakes_name_the_field():
    raw = small_spec(accounts=[{"name": "alice", "limits": {"cpu": "many"}}])
    assert _refused(raw) == "accounts[0].limits.cpu must be an integer >= -1 (-1: unlimited), got 'many'"
    raw = small_spec(accounts=[{"name": "alice", "limits": {"gpus": 1}}])
    assert _refused(raw) == "accounts[0].limits: unknown field(s) gpus"
    raw = small_spec(storage_pools=[{"name": "p", "scope": "nfs"}])
    assert _refused(raw) == "storage_pools[0].scope must be one of shared, local, got 'nfs'"
    raw = small_spec()
    raw["clusters"][0]["storage_pool"] = "elsewhere"
    assert _refused(raw) == "clusters[0].storage_pool: no storage pool named 'elsewhere'"
    raw = small_spec()
    raw["service_offerings"][4]["tags"] = "ssd"  # cks-strict links fixed-50
    assert _refused(raw) == ("service_offerings[4]: storagetype and tags come from its diskoffering 'fixed-50';"
                             " set them there")
