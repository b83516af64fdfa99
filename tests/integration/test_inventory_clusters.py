"""The ``cloudstack.cks.clusters`` inventory plugin, run by ``ansible-inventory`` against cks-sim's fleet
(tests/sim/examples/inventory.yml: 12 clusters of 3 customer accounts and the admin's, in 2 zones).

Every check reads what CloudStack answers with the real ``cs`` client and compares it with what the
plugin listed, so nothing here is a copy of an expected inventory.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from cs import CloudStack

from cks_sim.harness import InProcessSim, SimHandle

from helpers import ROOT, load_raw_spec

ANSIBLE_INVENTORY = os.path.join(ROOT, ".venv", "bin", "ansible-inventory")
ANSIBLE = os.path.join(ROOT, ".venv", "bin", "ansible")
COLLECTIONS = os.path.join(ROOT, ".venv", "collections")
ADMIN = ("fleet-admin-key", "fleet-admin-secret")
ACME = ("acme-key", "acme-secret")


class Fleet(SimHandle):
    """The inventory fleet in this process (the harness's handle) and a work dir for ansible-inventory."""

    def __init__(self, sim: InProcessSim, work: Path) -> None:
        super().__init__(sim.env, sim.server)
        self.work = work

    def cs_as(self, key: tuple[str, str] = ADMIN) -> CloudStack:
        """A ``cs`` client with the API key pair of one of the fleet's accounts."""
        return CloudStack(endpoint=self.env["cloudstack_endpoint"], key=key[0], secret=key[1])

    def clusters(self, key: tuple[str, str] = ADMIN) -> dict[str, dict[str, Any]]:
        return {c["name"]: c for c in self.cs_as(key).listKubernetesClusters(fetch_list=True, listall=True)}

    def cloudstack_calls(self, since: float) -> list[dict[str, Any]]:
        return self.admin("GET", f"/calls?since={since}&api=cloudstack")

    def ansible_env(self, key: tuple[str, str] = ADMIN, **extra: str) -> dict[str, str]:
        home = self.work / "ansible-home"
        environment = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "CLOUDSTACK_", "K8S_AUTH_"))}
        environment.update(ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1", ANSIBLE_HOME=str(home),
                           ANSIBLE_LOCAL_TEMP=str(home / "tmp"), ANSIBLE_DEPRECATION_WARNINGS="0",
                           CLOUDSTACK_ENDPOINT=self.env["cloudstack_endpoint"], CLOUDSTACK_KEY=key[0],
                           CLOUDSTACK_SECRET=key[1])
        environment.update(extra)
        return environment

    def inventory(self, config: dict[str, Any], key: tuple[str, str] = ADMIN, args: tuple[str, ...] = (),
                  name: str = "fleet.cks.yml", check: bool = True, **env: str) -> subprocess.CompletedProcess:
        path = self.work / name
        path.write_text(yaml.safe_dump(dict({"plugin": "cloudstack.cks.clusters"}, **config)))
        run = subprocess.run([ANSIBLE_INVENTORY, "-i", str(path), "--list", *args], capture_output=True, text=True,
                             env=self.ansible_env(key, **env), timeout=600, check=False)
        if check:
            assert run.returncode == 0, run.stderr
        return run


def plain(value: Any) -> Any:
    """ansible-inventory marks strings as unsafe (``{"__ansible_unsafe": ...}``); the values as such."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def listed(run: subprocess.CompletedProcess) -> dict[str, Any]:
    return plain(json.loads(run.stdout))


def members(inventory: dict[str, Any], group: str) -> set[str]:
    return set(inventory.get(group, {}).get("hosts", []))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    raw = load_raw_spec("inventory.yml")
    with InProcessSim.start(raw, str(tmp_path_factory.mktemp("fleet-sim")), etcd=False) as sim:
        yield Fleet(sim, tmp_path_factory.mktemp("fleet-inventory"))


def test_every_cluster_is_a_host_with_cloudstacks_facts_grouped_by_zone_and_account(fleet: Fleet):
    since = time.time()
    inventory = listed(fleet.inventory({
        "keyed_groups": [{"key": "cks_zone", "prefix": "zone"}, {"key": "cks_account", "prefix": "account"}],
        "groups": {"big": "cks_node_counts.worker >= 2"},
        "compose": {"worker_offering": "cks_offerings.worker"},
    }))
    commands = [c["command"] for c in fleet.cloudstack_calls(since)]
    clusters = fleet.clusters()
    assert members(inventory, "cks_clusters") == set(clusters)
    for zone in ("zone-east", "zone-west"):
        group = "zone_" + zone.replace("-", "_")
        assert members(inventory, group) == {n for n, c in clusters.items() if c["zonename"] == zone}, zone
    for account in ("acme", "globex", "initech", "admin"):
        assert members(inventory, f"account_{account}") == {n for n, c in clusters.items() if c["account"] == account}
    assert members(inventory, "big") == {n for n, c in clusters.items() if int(c["size"]) >= 2}
    hostvars = inventory["_meta"]["hostvars"]
    entry = clusters["acme-prod-east"]
    acme = hostvars["acme-prod-east"]
    assert (acme["cks_id"], acme["rollout_cluster"], acme["cks_state"], acme["cks_zone"], acme["cks_zone_id"]) == (
        entry["id"], entry["id"], entry["state"], entry["zonename"], entry["zoneid"])
    assert (acme["cks_account"], acme["cks_domain"], acme["cks_project"]) == ("acme", entry["domain"], None)
    assert acme["cks_kubernetes_version"] == entry["kubernetesversionname"]
    assert acme["cks_node_counts"] == {"control": 1, "worker": 2, "etcd": 0}
    # The per-type offering CKS recorded (4.21+), else the cluster's default; none for a type without nodes.
    assert acme["cks_offerings"] == {"control": entry["serviceofferingname"], "worker": entry["workerofferingname"],
                                     "etcd": None}
    assert acme["worker_offering"] == "cks-large"
    assert hostvars["acme-staging"]["cks_offerings"]["worker"] == "cks-medium"
    # Paged reads, not per cluster: accounts' clusters once, projects' clusters once.
    assert commands == ["listKubernetesClusters", "listKubernetesClusters"], commands


def test_filters_keep_the_clusters_every_condition_holds_for(fleet: Fleet):
    inventory = listed(fleet.inventory({"filters": ["cks_zone == 'zone-west'", "cks_account != 'admin'"]}))
    clusters = fleet.clusters()
    assert members(inventory, "cks_clusters") == {
        n for n, c in clusters.items() if c["zonename"] == "zone-west" and c["account"] != "admin"}
    assert "acme-prod-east" not in inventory["_meta"]["hostvars"]


def test_a_filter_that_cannot_be_evaluated_is_ignored_unless_strict(fleet: Fleet):
    lenient = fleet.inventory({"filters": ["no_such_variable.anything == 1"]})
    assert members(listed(lenient), "cks_clusters") == set(fleet.clusters())
    assert "could not evaluate filter" in lenient.stderr
    strict = fleet.inventory({"filters": ["no_such_variable.anything == 1"], "strict": True}, check=False,
                             ANSIBLE_INVENTORY_UNPARSED_FAILED="1")
    assert strict.returncode != 0
    assert "could not evaluate filter 'no_such_variable.anything == 1'" in strict.stderr


def test_a_customer_key_sees_only_its_own_accounts_clusters(fleet: Fleet):
    inventory = listed(fleet.inventory({"keyed_groups": [{"key": "cks_account", "prefix": "account"}]}, key=ACME))
    own = {n for n, c in fleet.clusters().items() if c["account"] == "acme"}
    assert own == set(fleet.clusters(ACME))
    assert members(inventory, "cks_clusters") == own
    assert [g for g in inventory if g.startswith("account_")] == ["account_acme"]


def test_the_cache_answers_until_it_is_flushed(fleet: Fleet, tmp_path: Path):
    config = {"cache": True, "cache_plugin": "ansible.builtin.jsonfile", "cache_connection": str(tmp_path / "cache"),
              "cache_timeout": 3600}
    first = listed(fleet.inventory(config, name="cached.cks.yml"))
    assert first["_meta"]["hostvars"]["globex-batch"]["cks_state"] == "Running"
    fleet.admin("POST", "/actions", {"action": "set_cluster_state", "cluster": "globex-batch", "state": "Scaling"})
    try:
        since = time.time()
        cached = listed(fleet.inventory(config, name="cached.cks.yml"))
        assert cached["_meta"]["hostvars"]["globex-batch"]["cks_state"] == "Running"
        assert fleet.cloudstack_calls(since) == []
        flushed = listed(fleet.inventory(config, name="cached.cks.yml", args=("--flush-cache",)))
        assert flushed["_meta"]["hostvars"]["globex-batch"]["cks_state"] == "Scaling"
        assert [c["command"] for c in fleet.cloudstack_calls(since)] == ["listKubernetesClusters"] * 2
        # Another key reading the same file has its own cache entry: it never gets the admin's clusters.
        assert members(listed(fleet.inventory(config, name="cached.cks.yml", key=ACME)), "cks_clusters") == set(
            fleet.clusters(ACME))
    finally:
        fleet.admin("POST", "/actions", {"action": "set_cluster_state", "cluster": "globex-batch", "state": "Running"})
    assert not any("fleet-admin-secret" in p.read_text() for p in (tmp_path / "cache").iterdir())


def _store_settings(fleet: Fleet, cluster_id: str, worker_offering: str, holder: str) -> None:
    """cks_node_settings with rollout=true: the settings stored and the lock taken, as a rollout starts."""
    args = json.dumps({"cluster": cluster_id, "node_offerings": {"worker": worker_offering}, "rollout": True,
                       "lock_holder": holder, "lock_duration": 3600})
    run = subprocess.run([ANSIBLE, "localhost", "-m", "cloudstack.cks.cks_node_settings", "-a", args],
                         capture_output=True, text=True, env=fleet.ansible_env(), timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


def test_out_of_date_counts_judge_each_cluster_against_its_stored_settings(fleet: Fleet):
    clusters = fleet.clusters()
    _store_settings(fleet, clusters["globex-staging"]["id"], "cks-large", "inventory-test")
    since = time.time()
    inventory = listed(fleet.inventory({"out_of_date": True, "groups": {"needs_rollout": "cks_out_of_date_total > 0"}}))
    hostvars = inventory["_meta"]["hostvars"]
    # Stored: the workers onto cks-large, so its one cks-medium worker is out of date, and the lock is held.
    assert hostvars["globex-staging"]["cks_out_of_date"] == {"control": 0, "worker": 1, "etcd": 0}
    assert hostvars["globex-staging"]["cks_lock_holder"] == "inventory-test"
    # Nothing stored: judged against the cluster's own settings; one worker was moved to cks-large by hand.
    assert hostvars["globex-prod"]["cks_out_of_date"] == {"control": 0, "worker": 1, "etcd": 0}
    assert hostvars["globex-prod"]["cks_lock_holder"] is None
    assert hostvars["acme-staging"]["cks_out_of_date"] == {"control": 0, "worker": 0, "etcd": 0}
    assert hostvars["acme-dev"]["cks_out_of_date"] is None
    assert hostvars["acme-dev"]["cks_out_of_date_skipped"].startswith("the cluster is Stopped")
    assert members(inventory, "needs_rollout") == {"globex-staging", "globex-prod"}
    calls = fleet.cloudstack_calls(since)
    readable = [c for c in clusters.values() if c["state"] in ("Running", "Alert")]
    configs = [c for c in calls if c["command"] == "getKubernetesClusterConfig"]
    assert len(configs) == len(readable)
    # The documented cost: 2 listings, then per readable cluster its kubeconfig and 5 lists.
    assert len(calls) == 2 + 6 * len(readable), [c["command"] for c in calls]


def test_nodes_are_hosts_reached_through_their_ssh_port_forward(fleet: Fleet):
    inventory = listed(fleet.inventory({"nodes": True, "filters": ["cks_name == 'acme-prod-east'"]}))
    entry = fleet.clusters()["acme-prod-east"]
    rules = fleet.cs_as().listPortForwardingRules(fetch_list=True, listall=True, ipaddressid=entry["ipaddressid"])
    forwards = {r["virtualmachineid"]: (r["ipaddress"], int(r["publicport"])) for r in rules if r["privateport"] == "22"}
    expected = {vm["name"].lower(): vm for vm in entry["virtualmachines"]}
    assert members(inventory, "cks_nodes") == set(expected)
    hostvars = inventory["_meta"]["hostvars"]
    for name, vm in expected.items():
        node = hostvars[name]
        assert (node["ansible_host"], node["ansible_port"]) == forwards[vm["id"]], name
        assert node["cks_cluster"] == "acme-prod-east" and node["cks_vm_id"] == vm["id"]
        assert node["cks_private_ip"] == vm["nic"][0]["ipaddress"]
    assert members(inventory, "cks_control_nodes") == {n for n in expected if "-control-" in n}
    assert len(members(inventory, "cks_worker_nodes")) == 2
    # Nodes of a cluster the filters leave out are left out too.
    assert not any(h.startswith("acme-staging") for h in hostvars)


def test_no_secret_reaches_the_output(fleet: Fleet):
    run = fleet.inventory({"out_of_date": True, "nodes": True})
    output = run.stdout + run.stderr
    secrets = ["fleet-admin-secret"]
    for cluster in fleet.env["clusters"]:
        config = yaml.safe_load(Path(cluster["kubeconfig"]).read_text())
        for user in config.get("users") or []:
            secrets.extend(v for k, v in (user.get("user") or {}).items()
                           if k in ("token", "client-key-data", "password") and v)
    assert len(secrets) > 1
    assert not [s for s in secrets if s in output]


def test_a_missing_secret_is_named_and_nothing_is_listed(fleet: Fleet):
    run = fleet.inventory({}, check=False, ANSIBLE_INVENTORY_UNPARSED_FAILED="1", CLOUDSTACK_SECRET="")
    assert run.returncode != 0
    assert "api_secret=None: not set: give it as a parameter, with its CLOUDSTACK_* environment variable" in run.stderr
