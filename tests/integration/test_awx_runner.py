"""AWX's way of running the collection: ansible-runner (AWX's engine) with extra vars and
environment variables as a job template and a credential give them, and its job events.

Phase 1: a play of the operator's own that sets the connection once, with
``module_defaults: {group/cloudstack.cks.cks: ...}``, and no CLOUDSTACK_* variables at all,
stores the settings (rollout=false). Phase 2: the collection's rollout playbook, run by
ansible-runner with survey-style plain variables, rolls them; its events carry the task names,
the hosts and the module results.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest
import rollout_helpers as rh
from helpers import COLLECTIONS, PYTHON

pytestmark = pytest.mark.timeout(900)

ansible_runner = pytest.importorskip("ansible_runner")

MODULE_DEFAULTS_PLAY = [{
    "name": "Store worker settings with the connection from module_defaults",
    "hosts": "localhost",
    "gather_facts": False,
    "module_defaults": {"group/cloudstack.cks.cks": {
        "api_url": "{{ cs_url }}", "api_key": "{{ cs_key }}", "api_secret": "{{ cs_secret }}",
        "kube_ca_cert": "{{ kube_ca }}",
    }},
    "tasks": [
        {"name": "Store the settings", "cloudstack.cks.cks_node_settings": {
            "cluster": "{{ rollout_cluster }}", "node_offerings": {"worker": "cks-large"}}},
        {"name": "Read them back", "cloudstack.cks.cks_node_outdated": {"cluster": "{{ rollout_cluster }}"},
         "register": "outdated"},
    ],
}]


def _runner_env(tmp: str) -> dict[str, str]:
    return {
        "ANSIBLE_COLLECTIONS_PATH": COLLECTIONS,
        "ANSIBLE_PYTHON_INTERPRETER": PYTHON,
        "ANSIBLE_LOCAL_TEMP": os.path.join(tmp, "ansible-tmp"),
        "ANSIBLE_HOME": os.path.join(tmp, "ansible-home"),
        "ANSIBLE_DEPRECATION_WARNINGS": "0",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
    }


def _run(tmp_path: Any, name: str, project_dir: str, playbook: str, extravars: dict[str, Any],
         envvars: dict[str, str]) -> tuple[Any, list[dict[str, Any]]]:
    data_dir = tmp_path / name
    data_dir.mkdir()
    events: list[dict[str, Any]] = []
    result = ansible_runner.run(private_data_dir=str(data_dir), project_dir=project_dir, playbook=playbook,
                                extravars=extravars, envvars=dict(_runner_env(str(data_dir)), **envvars),
                                event_handler=lambda event: events.append(event) or True, quiet=True)
    return result, events


def test_settings_with_module_defaults_then_rollout_through_ansible_runner(tmp_path: Any,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # ansible-runner shells out to ansible-playbook: the venv's, as an execution environment has it.
    monkeypatch.setenv("PATH", os.path.dirname(PYTHON) + os.pathsep + os.environ.get("PATH", ""))
    for name in ("CLOUDSTACK_ENDPOINT", "CLOUDSTACK_KEY", "CLOUDSTACK_SECRET", "K8S_AUTH_KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)
    with rh.rollout_sim("rollout_small.yml") as sim:
        workers = rh.names(sim, "worker")

        # Phase 1: module_defaults carry the connection; no CLOUDSTACK_* anywhere.
        project = tmp_path / "project"
        project.mkdir()
        (project / "settings.yml").write_text(json.dumps(MODULE_DEFAULTS_PLAY))
        result, events = _run(tmp_path, "job-settings", str(project), "settings.yml", {
            "rollout_cluster": sim.env["cluster_name"], "cs_url": sim.env["cloudstack_endpoint"],
            "cs_key": sim.env["cloudstack_key"], "cs_secret": sim.env["cloudstack_secret"],
            "kube_ca": sim.env["kube_ca"]}, {})
        assert result.rc == 0 and result.status == "successful", [e.get("stdout") for e in events][-20:]
        assert rh.ClusterRecord(sim).settings()["worker"]["offering_id"]
        assert rh.vms(sim)[workers[0]]["offering"] == "cks-medium"
        # The secret never shows up in what AWX would store.
        assert not any(sim.env["cloudstack_secret"] in (e.get("stdout") or "") for e in events)

        # Phase 2: the rollout playbook as an AWX job template runs it; a credential sets the env.
        since = time.time()
        extravars = {"rollout_cluster": sim.env["cluster_name"], "rollout_max_unavailable": 1,
                     "rollout_poll_interval": 0.2, "rollout_eviction_retry_interval": 0.3,
                     "rollout_delete_emptydir_data": True}
        etcd = sim.env["etcd"]
        extravars.update(rollout_etcd_endpoints=[m["client_url"] for m in etcd["members"]],
                         rollout_etcd_ca_cert=etcd["ca_cert"], rollout_etcd_client_cert=etcd["client_cert"],
                         rollout_etcd_client_key=etcd["client_key"])
        credential = {"CLOUDSTACK_ENDPOINT": sim.env["cloudstack_endpoint"], "CLOUDSTACK_KEY": sim.env["cloudstack_key"],
                      "CLOUDSTACK_SECRET": sim.env["cloudstack_secret"], "K8S_AUTH_SSL_CA_CERT": sim.env["kube_ca"]}
        result, events = _run(tmp_path, "job-rollout", rh.PLAYBOOKS, "rollout.yml", extravars, credential)
        assert result.rc == 0 and result.status == "successful", [e.get("stdout") for e in events][-30:]

        # What happened, from the simulator.
        items = rh.timeline(sim, since)
        assert rh.restarted(items) == workers
        assert {rh.vms(sim)[w]["offering"] for w in workers} == {"cks-large"}
        rh.assert_no_invariant_broken(sim)

        # What AWX shows, from the job events: one task per batch with its host and module result.
        batches = [e["event_data"] for e in events if e["event"] == "runner_on_ok"
                   and e["event_data"].get("task", "").startswith("Batch ")]
        assert [b["task"] for b in batches] == [f"Batch {i} of 3" for i in (1, 2, 3)]
        assert [b["host"] for b in batches] == workers
        assert all(b["resolved_action"] == "cloudstack.cks.cks_node_cycle" for b in batches)
        assert [b["res"]["nodes"][0]["name"] for b in batches] == workers
        assert all(b["res"]["nodes"][0]["outcome"] == "done" for b in batches)
        progress = [e["event_data"]["res"]["msg"] for e in events if e["event"] == "runner_on_ok"
                    and e["event_data"].get("task") == "Show the progress"]
        assert len(progress) == 3 and all(isinstance(line, str) and "\n" not in line for line in progress)
        assert progress[-1].startswith("Batch 3/3 worker") and progress[-1].endswith("left 0")
        # Each serial batch is a fresh play start (AWX has no batch event).
        plays = [e for e in events if e["event"] == "playbook_on_play_start"]
        assert len(plays) == 1 + 3 + 1
        assert result.stats["failures"] == {}
        assert not any(sim.env["cloudstack_secret"] in (e.get("stdout") or "") for e in events)
