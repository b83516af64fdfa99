# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Where the collection's modules run (plugins/plugin_utils/in_process.py), through ansible-playbook
against cks-sim: on a local connection in the controller's worker (no AnsiballZ payload written),
with the task's ``environment`` applied; with ``async`` shipped as any module is. Both give the
same result, and neither shows the API secret."""

from __future__ import annotations

import glob
import json
import os
import subprocess
from typing import Any, Iterator

import pytest
import yaml

from helpers import ANSIBLE_PLAYBOOK, COLLECTIONS, PYTHON, ClusterSim, running_sim

pytestmark = pytest.mark.timeout(600)

#: What a plan is judged on, equal wherever the module ran.
PLAN_KEYS = ("out_of_date", "plan", "serial", "settings", "controlnodesoutofdate", "workernodesoutofdate", "etcdnodesoutofdate")


@pytest.fixture(scope="module")
def sim() -> Iterator[ClusterSim]:
    with running_sim("settings.yml") as handle:
        yield handle


def _play(sim: ClusterSim, out: str) -> list[dict[str, Any]]:
    connection = sim.connection_args("alpha")
    outdated = {"cluster": "alpha", "node_offerings": {"worker": "cks-large"}}
    by_environment = {"CLOUDSTACK_ENDPOINT": connection["api_url"], "CLOUDSTACK_KEY": connection["api_key"],
                      "CLOUDSTACK_SECRET": connection["api_secret"], "K8S_AUTH_KUBECONFIG": connection["kubeconfig"]}
    return [{
        "hosts": "localhost",
        "gather_facts": False,
        "tasks": [
            {"name": "in the controller", "cloudstack.cks.cks_node_outdated": dict(connection, **outdated),
             "register": "here"},
            {"name": "shipped (async)", "cloudstack.cks.cks_node_outdated": dict(connection, **outdated),
             "async": 120, "poll": 1, "register": "shipped"},
            {"name": "in the controller, connected by the task's environment only",
             "cloudstack.cks.cks_node_outdated": outdated, "environment": by_environment, "register": "by_env"},
            {"name": "keep the results", "ansible.builtin.copy": {
                "content": "{{ {'here': here, 'shipped': shipped, 'by_env': by_env} | to_json }}", "dest": out}},
        ],
    }]


def test_modules_run_in_the_controller_unless_shipped_and_give_the_same_result(sim: ClusterSim, tmp_path: Any) -> None:
    out = str(tmp_path / "results.json")
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump(_play(sim, out)))
    inventory = tmp_path / "inventory.ini"
    inventory.write_text(f"localhost ansible_connection=local ansible_python_interpreter={PYTHON}\n")
    remote = tmp_path / "remote"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLOUDSTACK_", "K8S_AUTH_"))}
    env.update(ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1", ANSIBLE_KEEP_REMOTE_FILES="1",
               ANSIBLE_REMOTE_TMP=str(remote), ANSIBLE_LOCAL_TEMP=str(tmp_path / "local"),
               ANSIBLE_HOME=str(tmp_path / "home"), ANSIBLE_ASYNC_DIR=str(tmp_path / "async"))
    proc = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(inventory), "-vvv", str(playbook)], env=env, capture_output=True,
                          text=True, timeout=300, cwd=str(tmp_path), check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    results = json.loads((tmp_path / "results.json").read_text())
    for name, result in results.items():
        assert not result.get("failed"), (name, result.get("msg"))
    # Only the async task shipped the module: its payload is the one written.
    payloads = glob.glob(str(remote / "*" / "AnsiballZ_cks_node_outdated.py"))
    assert len(payloads) == 1, payloads
    # -vvv says where each ran.
    assert proc.stdout.count("cloudstack.cks.cks_node_outdated: run in the controller's worker") == 2, proc.stdout[-4000:]
    assert "cloudstack.cks.cks_node_outdated: shipped as a module (async)" in proc.stdout
    assert results["here"]["workernodesoutofdate"] > 0
    for key in PLAN_KEYS:
        assert results["here"][key] == results["shipped"][key] == results["by_env"][key], key
    secret = sim.connection_args("alpha")["api_secret"]
    assert secret not in proc.stdout and secret not in json.dumps(results)
