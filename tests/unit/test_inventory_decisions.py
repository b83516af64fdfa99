"""The pure part of the ``cloudstack.cks.clusters`` inventory: host names (and clashes), counts,
offerings per type, SSH forwards and node hosts, from listKubernetesClusters-shaped entries."""

from __future__ import annotations

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.inventory import (
    InventoryHost,
    cluster_hostvars,
    host_names,
    node_counts,
    node_hosts,
    ssh_forwards,
    type_offerings,
)


def _vm(name: str, vm_id: str, ip: str, **extra: object) -> dict:
    return dict({"id": vm_id, "name": name, "state": "Running", "nic": [{"isdefault": True, "ipaddress": ip}]}, **extra)


def _cluster(cluster_id: str, name: str, account: str = "acme", project: str | None = None, **extra: object) -> dict:
    entry = {"id": cluster_id, "name": name, "account": account, "state": "Running", "serviceofferingname": "medium",
             "virtualmachines": [_vm(f"{name}-control-1a", f"{cluster_id}-c", "10.0.0.10"),
                                 _vm(f"{name}-node-1b", f"{cluster_id}-w", "10.0.0.11")]}
    if project:
        entry["project"] = project
    entry.update(extra)
    return entry


def test_a_name_seen_once_is_the_host_name():
    names, clashes = host_names([_cluster("1", "prod"), _cluster("2", "dev")])
    assert names == {"1": "prod", "2": "dev"}
    assert clashes == []


def test_a_clashing_name_qualifies_every_cluster_that_has_it_by_its_owner():
    names, clashes = host_names([_cluster("1", "prod", "acme"), _cluster("2", "prod", "ops", project="platform"),
                                 _cluster("3", "dev")])
    assert names == {"1": "prod@acme", "2": "prod@platform", "3": "dev"}
    assert clashes == ["2 clusters are named 'prod' (prod@acme, prod@platform): each is listed under its qualified name"]


def test_the_same_account_name_in_two_domains_falls_back_to_the_id():
    names, _warnings = host_names([_cluster("1", "prod", "acme"), _cluster("2", "prod", "acme")])
    assert names == {"1": "prod@1", "2": "prod@2"}


def test_counts_come_from_the_vms_and_offerings_from_the_per_type_record_else_the_default():
    entry = _cluster("1", "prod", workerofferingname="large", controlnodes=3, size=9)
    entry["virtualmachines"].append(_vm("prod-etcd-1-1c", "1-e", "10.0.0.12", isetcdnode=True))
    entry["virtualmachines"].append(_vm("added", "1-x", "10.0.0.13", isexternalnode=True))
    assert node_counts(entry) == {"control": 1, "worker": 2, "etcd": 1}
    assert type_offerings(entry) == {"control": "medium", "worker": "large", "etcd": "medium"}
    bare = _cluster("2", "new", controlnodes="3", size="2", etcdnodes=0, virtualmachines=[])
    assert node_counts(bare) == {"control": 3, "worker": 2, "etcd": 0}
    assert type_offerings(_cluster("3", "x"))["etcd"] is None


def test_cluster_hostvars_carry_what_the_playbooks_take_and_no_secret():
    hostvars = cluster_hostvars(_cluster("1", "prod", projectid="p-1", project="platform", zonename="east"))
    assert (hostvars["rollout_cluster"], hostvars["rollout_project_id"], hostvars["cks_zone"]) == ("1", "p-1", "east")
    assert all(key.startswith(("cks_", "rollout_")) for key in hostvars)


def test_nodes_reach_ssh_through_the_port_forward_else_the_private_ip():
    entry = _cluster("1", "Prod")
    rules = [{"virtualmachineid": "1-c", "ipaddress": "203.0.113.5", "publicport": "2222", "privateport": "22"},
             {"virtualmachineid": "1-c", "ipaddress": "203.0.113.5", "publicport": "6443", "privateport": "6443"}]
    hosts = node_hosts(entry, "prod", ssh_forwards(rules))
    by_name = {h.name: h for h in hosts}
    assert set(by_name) == {"prod-control-1a", "prod-node-1b"}
    control = by_name["prod-control-1a"].hostvars
    assert (control["ansible_host"], control["ansible_port"], control["cks_node_type"]) == ("203.0.113.5", 2222, "control")
    worker = by_name["prod-node-1b"].hostvars
    assert (worker["ansible_host"], worker["ansible_port"], worker["cks_ssh_public_ip"]) == ("10.0.0.11", 22, None)
    assert by_name["prod-node-1b"].groups == ["cks_nodes", "cks_worker_nodes"]
    assert InventoryHost.from_dict(by_name["prod-node-1b"].to_dict()) == by_name["prod-node-1b"]
