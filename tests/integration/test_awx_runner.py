"""AWX's way of running the collection: ansible-runner (AWX's engine) with extra vars and
environment variables as a job template and a credential give them, and its job events.

Phase 1: a play of the operator's own that sets the connection once, with
``module_defaults: {group/cloudstack.cks.cks: ...}``, and no CLOUDSTACK_* variables at all,
stores the settings (rollout=false). Phase 2: the wrapper project an AWX job template points at
(extensions/awx/project/rollout.yml), run by ansible-runner as AWX runs a job: the survey's
answers as AWX sends them (the settings as YAML or JSON text, the canary as a choice string), AWX's
own job variables (``awx_job_id``), and the environment, files and extra vars that the shipped
credential types (extensions/awx/credential_types/) inject, rendered from their injector
templates. Its events carry the task names, the hosts and the module results.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest
import rollout_helpers as rh
import yaml
from helpers import COLLECTIONS, PYTHON, ROOT
from jinja2.sandbox import ImmutableSandboxedEnvironment
from kube_access import awx_bearer_env

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


AWX = Path(ROOT) / "extensions" / "awx"
PROJECT = AWX / "project"


def inject(credential_type: str, inputs: dict[str, str], private_dir: Path) -> tuple[dict[str, str], dict[str, str]]:
    """What AWX injects for a credential of a custom type: each ``file`` template written to a
    private file (0600) whose path is ``tower.filename.<name>``, then the ``env`` and
    ``extra_vars`` templates rendered with the inputs (a field left empty renders as "")."""
    definition = yaml.safe_load((AWX / "credential_types" / credential_type).read_text(encoding="utf-8"))
    fields = definition["inputs"]["fields"]
    missing = [name for name in definition["inputs"].get("required", []) if not inputs.get(name)]
    assert not missing, f"AWX refuses a {definition['name']} credential without {missing}"
    namespace: dict[str, Any] = {field["id"]: "" for field in fields}
    namespace.update(inputs)
    jinja = ImmutableSandboxedEnvironment()
    files = {}
    for key, template in (definition["injectors"].get("file") or {}).items():
        path = private_dir / f"cred-{key.split('.', 1)[1]}"
        path.write_text(jinja.from_string(template).render(**namespace), encoding="utf-8")
        path.chmod(stat.S_IRUSR | stat.S_IWUSR)
        files[key.split(".", 1)[1]] = str(path)
    namespace["tower"] = {"filename": files}

    def render(section: str) -> dict[str, str]:
        return {k: jinja.from_string(v).render(**namespace) for k, v in (definition["injectors"].get(section) or {}).items()}
    return render("env"), render("extra_vars")


def survey_answers(answers: dict[str, Any]) -> dict[str, Any]:
    """The extra vars AWX makes of a survey: every question's answer, its default where none was given."""
    spec = json.loads((PROJECT / "survey_rollout.json").read_text(encoding="utf-8"))["spec"]
    out = {}
    for question in spec:
        value = answers.get(question["variable"], question.get("default"))
        if question["type"] == "multiplechoice":
            assert value in question["choices"], (question["variable"], value)
        if question["type"] == "integer":
            assert isinstance(value, int) and question["min"] <= value <= question["max"], (question["variable"], value)
        assert not question["required"] or value not in (None, ""), question["variable"]
        out[question["variable"]] = value
    assert set(answers) <= set(out), f"no such survey questions: {sorted(set(answers) - set(out))}"
    return out


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
    with rh.running_rollout_sim("rollout_small.yml") as sim:
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

        # Phase 2: the wrapper project as an AWX job template runs it, with the survey's answers
        # as text and the credentials' injections.
        since = time.time()
        private = tmp_path / "awx-private"
        private.mkdir()
        cloud_env, cloud_vars = inject("cloudstack_api.yml", {
            "endpoint": sim.env["cloudstack_endpoint"], "api_key": sim.env["cloudstack_key"],
            "api_secret": sim.env["cloudstack_secret"]}, private)
        etcd = sim.env["etcd"]
        etcd_env, etcd_vars = inject("etcd_client_certificate.yml", {
            "ca_cert": Path(etcd["ca_cert"]).read_text(encoding="utf-8"),
            "client_cert": Path(etcd["client_cert"]).read_text(encoding="utf-8"),
            "client_key": Path(etcd["client_key"]).read_text(encoding="utf-8")}, private)
        assert cloud_env["CLOUDSTACK_VERIFY"] == "" and not cloud_vars and not etcd_env
        report_path = tmp_path / "report.json"
        extravars = survey_answers({
            "rollout_cluster": sim.env["cluster_name"],
            "rollout_node_offerings": '{"worker": "cks-large"}',      # JSON text
            "rollout_node_root_disk_sizes": "worker: 30\n",           # YAML text
            "rollout_node_affinity_groups": "",                       # left blank
            "rollout_canary": "false"})
        # The job template's own extra vars, then what AWX adds to every job.
        extravars.update(rollout_poll_interval=0.2, rollout_eviction_retry_interval=0.3,
                         rollout_delete_emptydir_data=True, rollout_report_path=str(report_path),
                         rollout_etcd_endpoints=[m["client_url"] for m in etcd["members"]])
        extravars.update(etcd_vars)
        extravars.update(awx_job_id=4242, awx_job_template_name="CKS rollout", tower_job_id=4242)
        # AWX's built-in bearer-token credential with its CA field filled: the cluster's token.
        kubeconfig = yaml.safe_load(Path(sim.env["kubeconfig"]).read_text(encoding="utf-8"))
        ca_file = private / "k8s-ca.pem"
        ca_file.write_text(Path(sim.env["kube_ca"]).read_text(encoding="utf-8"), encoding="utf-8")
        kube_token = kubeconfig["users"][0]["user"]["token"]
        credential = dict(cloud_env, **awx_bearer_env(kubeconfig["clusters"][0]["cluster"]["server"], kube_token,
                                                      True, str(ca_file)))
        result, events = _run(tmp_path, "job-rollout", str(PROJECT), "rollout.yml", extravars, credential)
        assert result.rc == 0 and result.status == "successful", [e.get("stdout") for e in events][-30:]
        report = json.loads(report_path.read_text(encoding="utf-8"))
        assert report["run_id"] == "awx-job-4242"
        assert rh.ClusterRecord(sim).settings()["worker"]["root_disk_gb"] == 30
        assert rh.ClusterRecord(sim).holder() is None
        # The kubeconfig was not fetched from CloudStack: the bearer-token credential was the connection.
        assert "getKubernetesClusterConfig" not in {c.get("command") for c in sim.calls(since)}

        # What happened, from the simulator.
        items = sim.timeline(since)
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
        assert all(b["res"]["nodes"][0]["changes"]["root_disk_gb"] == {"from": 20, "to": 30} for b in batches)
        assert all(b["res"]["nodes"][0]["outcome"] == "done" for b in batches)
        progress = [e["event_data"]["res"]["msg"] for e in events if e["event"] == "runner_on_ok"
                    and e["event_data"].get("task") == "Show the progress"]
        assert len(progress) == 3 and all(isinstance(line, str) and "\n" not in line for line in progress)
        assert progress[-1].startswith("Batch 3/3 worker") and progress[-1].endswith("left 0")
        # Each serial batch is a fresh play start (AWX has no batch event); the plan, the three batches,
        # the plan of the nodes a cluster autoscaler added and their play (no hosts here), the release.
        plays = [e["event_data"]["play"] for e in events if e["event"] == "playbook_on_play_start"]
        assert plays == (["Store the node settings and plan the rollout"]
                         + ["Restart the out-of-date nodes, batch by batch"] * 3
                         + ["Plan the nodes the cluster autoscaler added during the rollout",
                            "Restart the nodes the cluster autoscaler added, batch by batch",
                            "Release the rollout and report"]), plays
        assert result.stats["failures"] == {}
        client_key = Path(etcd["client_key"]).read_text(encoding="utf-8").strip().splitlines()[1]
        assert not any(secret in (e.get("stdout") or "") for e in events
                       for secret in (sim.env["cloudstack_secret"], client_key, kube_token))
