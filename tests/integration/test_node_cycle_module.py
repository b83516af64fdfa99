"""cks_node_cycle through ansible-playbook (localhost, the venv's Python) against cks-sim: check
mode, a real cycle with the settings from the record, a control node with etcd, a failed drain,
and release."""

from __future__ import annotations

from typing import Any, Callable


from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings, TypeSettings
from ansible_collections.cloudstack.cks.plugins.module_utils._model.loader import CATALOG_FIELDS
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import Lock, Record, RecordStore

from cks_sim.tools import needs
from helpers import ClusterSim
from helpers import run_module

MODULE = "cks_node_cycle"


def module_args(sim: ClusterSim, **args: Any) -> dict[str, Any]:
    base = {
        "api_url": sim.env["cloudstack_endpoint"], "api_key": sim.env["cloudstack_key"],
        "api_secret": sim.env["cloudstack_secret"], "kubeconfig": sim.env["kubeconfig"],
        "cluster": sim.env["cluster_name"], "poll_interval": 0.05, "eviction_retry_interval": 0.05,
        "delete_emptydir_data": True, "batch_timeout": 120,
    }
    base.update(args)
    return base


def store_settings(sim: ClusterSim, settings: Settings) -> None:
    RecordStore(sim.kube).write(Record(settings=settings.to_dict()), None)


def stops(sim: ClusterSim) -> list[dict[str, Any]]:
    return [c for c in sim.calls() if c.get("command") == "stopVirtualMachine"]


def test_check_mode_then_cycle_then_release(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    store_settings(sim, Settings(worker=TypeSettings(sim.offering_id("cks-large"), 30, None)))
    Lock(sim.kube, holder_identity="run-7", duration_seconds=300).acquire()
    node = sim.names("worker")[0]

    preview = run_module(MODULE, module_args(sim, nodes=[node.upper()], lock_holder="run-7"), check=True)
    assert not preview.get("failed"), preview.get("msg")
    assert preview["changed"] is False
    [planned] = preview["nodes"]
    assert planned["outcome"] == "would_cycle"
    assert {s["name"]: s["outcome"] for s in planned["steps"]}["resize_root_disk"] == "would_run"
    assert planned["changes"]["offering"]["to"] == "cks-large"
    assert stops(sim) == [] and not sim.view().node(node).unschedulable

    done = run_module(MODULE, module_args(sim, nodes=[node], lock_holder="run-7"))
    assert not done.get("failed"), done.get("msg")
    assert done["changed"] is True and done["failed_nodes"] == []
    [cycled] = done["nodes"]
    assert cycled["outcome"] == "done" and cycled["changes"]["root_disk_gb"] == {"from": 20, "to": 30}
    assert [s["name"] for s in cycled["steps"]][-1] == "uncordon"
    after = sim.view().node(node)
    assert after.offering_name == "cks-large" and after.root_disk_gb == 30 and not after.unschedulable
    assert sim.env["cloudstack_secret"] not in done["_stdout"]

    released = run_module(MODULE, module_args(sim, mode="release", lock_holder="run-7"))
    assert not released.get("failed"), released.get("msg")
    assert released["release"]["outcome"] == "Running" and released["release"]["lock_released"] is True
    assert RecordStore(sim.kube).read().outcome == "Running"
    # The release judges the cluster against the stored settings, so the role needs no module run
    # of its own to say what is left: the cycled worker is up to date, the other workers are not.
    others = sorted(n for n in sim.names("worker") if n != node)
    after = released["after"]
    assert sorted(after["out_of_date"]) == others and node not in after["out_of_date"]
    assert after["workernodesoutofdate"] == len(others) and after["controlnodesoutofdate"] == 0
    assert after["node_types"]["worker"] == {"nodes": len(others) + 1, "out_of_date": len(others)}
    again = run_module(MODULE, module_args(sim, mode="release", lock_holder="run-7"))
    assert again["changed"] is False and again["release"]["lock_released"] is False
    assert sim.invariants() == []


def test_a_failed_drain_through_the_module_and_its_release(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    store_settings(sim, Settings(worker=TypeSettings(sim.offering_id("cks-large"), None, None)))
    node = next(n for n in sim.names("worker")
                if any(p["metadata"]["name"].startswith("web-") for p in sim.kube.list_pods(n)))
    sim.fault(kind="pdb_block", namespace="default", name="web")

    failed = run_module(MODULE, module_args(sim, nodes=[node], batch_timeout=3))

    assert failed.get("failed") is True
    assert failed["step"] == "drain" and failed["node"] == node
    assert "PodDisruptionBudget default/web" in failed["msg"]
    assert failed["nodes"][0]["outcome"] == "failed"
    assert stops(sim) == []

    for attempt in range(2):
        # The failed run's rollout object: its failed batch is the release's last error.
        released = run_module(MODULE, module_args(sim, mode="release", rollout=failed["rollout"]))
        assert not released.get("failed"), released.get("msg")
        uncordoned = [u["node"] for u in released["release"]["uncordoned"]]
        assert uncordoned == ([node] if attempt == 0 else [])
    view = sim.view()
    assert not view.node(node).unschedulable and not view.node(node).annotated
    assert "default/web" in RecordStore(sim.kube).read().last_error
    assert sim.invariants() == []


@needs("etcd")
def test_a_control_node_with_etcd_checks_through_the_module(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    store_settings(sim, Settings(control=TypeSettings(sim.offering_id("cks-large"), None, None)))
    control, other = sim.names("control")[0], sim.names("control")[1]

    # No etcd options: the quorum is asked through the Kubernetes API (etcdctl in an etcd pod).
    through_api = run_module(MODULE, module_args(sim, nodes=[control]))
    assert not through_api.get("failed"), through_api.get("msg")
    assert through_api["preflight"]["etcd_quorum"] and through_api["preflight"]["readyz_etcd"] == 200
    assert sim.view().node(control).offering_name == "cks-large"

    done = run_module(MODULE, module_args(sim, nodes=[other], **sim.etcd_endpoints()))
    assert not done.get("failed"), done.get("msg")
    assert done["preflight"]["readyz_etcd"] == 200
    assert sim.view().node(other).offering_name == "cks-large"
    assert sim.invariants() == []


CATALOG_LISTS = ("listServiceOfferings", "listDiskOfferings", "listAffinityGroups")


def catalog_lists(sim: ClusterSim) -> int:
    return sum(1 for c in sim.calls() if c.get("command") in CATALOG_LISTS)


def test_a_batch_given_the_plans_catalog_lists_no_offerings_or_groups(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    store_settings(sim, Settings(worker=TypeSettings(sim.offering_id("cks-large"), 30, None)))
    Lock(sim.kube, holder_identity="run-8", duration_seconds=300).acquire()
    node = sim.names("worker")[0]
    outdated_args = {k: v for k, v in module_args(sim).items()
                     if k not in ("poll_interval", "eviction_retry_interval", "delete_emptydir_data", "batch_timeout")}
    planned = run_module("cks_node_outdated", outdated_args)
    assert not planned.get("failed"), planned.get("msg")
    catalog = planned["catalog"]
    assert "cks-large" in [o["name"] for o in catalog["service_offerings"]]
    # Only the fields the view reads travel from run to run.
    assert all(set(o) <= set(CATALOG_FIELDS["service_offerings"]) for o in catalog["service_offerings"])
    assert not any("created" in o or "tags" in o for o in catalog["service_offerings"])

    before = catalog_lists(sim)
    done = run_module(MODULE, module_args(sim, nodes=[node], lock_holder="run-8", catalog=catalog))
    assert not done.get("failed"), done.get("msg")
    assert done["nodes"][0]["outcome"] == "done" and sim.view().node(node).offering_name == "cks-large"
    released = run_module(MODULE, module_args(sim, mode="release", lock_holder="run-8", catalog=catalog))
    assert not released.get("failed"), released.get("msg")
    assert catalog_lists(sim) == before
    assert sim.invariants() == []


def test_a_catalog_that_is_no_catalog_is_refused_before_anything_changes(cycle_sim: Callable[..., ClusterSim]) -> None:
    sim = cycle_sim("small.yml")
    store_settings(sim, Settings(worker=TypeSettings(sim.offering_id("cks-large"), 30, None)))
    Lock(sim.kube, holder_identity="run-9", duration_seconds=300).acquire()
    node = sim.names("worker")[0]
    failed = run_module(MODULE, module_args(sim, nodes=[node], lock_holder="run-9",
                                            catalog={"service_offerings": "cks-large"}))
    assert failed.get("failed") and "catalog" in failed["msg"] and "leave it out" in failed["msg"]
    assert stops(sim) == [] and not sim.view().node(node).unschedulable
