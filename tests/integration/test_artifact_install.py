"""The README's install steps, from a clean directory: build the collection artifact, install it
into an empty collections path, check its Python requirements, and run the status playbook from
that install (and nothing else) against cks-sim.

A checkout can hide what the artifact leaves out (a build_ignore'd file the playbooks need, a
requirement not declared): here the collection Ansible loads is the tarball's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement

pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _run(cmd: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def _clean_env(home: Path) -> dict[str, str]:
    """No collection path, config or Ansible home that could point back at the checkout."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANSIBLE_", "CLOUDSTACK_", "K8S_AUTH_")) and k != "PYTHONPATH"}
    env.update(ANSIBLE_HOME=str(home), ANSIBLE_NOCOLOR="1", ANSIBLE_CONFIG=str(home / "none.cfg"),
               PATH=str(BIN) + os.pathsep + os.environ.get("PATH", ""))
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("artifact")
    env = _clean_env(work / "home")
    version = yaml.safe_load((ROOT / "galaxy.yml").read_text(encoding="utf-8"))["version"]
    build = _run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(work / "dist"), str(ROOT)],
                 env, work)
    assert build.returncode == 0, build.stderr
    tarball = work / "dist" / f"cloudstack-cks-{version}.tar.gz"
    assert tarball.is_file(), build.stdout
    collections = work / "collections"
    install = _run([str(BIN / "ansible-galaxy"), "collection", "install", str(tarball), "-p", str(collections)],
                   env, work)
    assert install.returncode == 0, install.stdout + install.stderr
    return {"work": work, "env": env, "collections": collections, "version": version,
            "path": collections / "ansible_collections" / "cloudstack" / "cks"}


def test_the_install_is_the_artifact_not_a_link_to_the_checkout(installed: dict[str, Any]) -> None:
    path: Path = installed["path"]
    assert path.is_dir() and not path.is_symlink()
    manifest = json.loads((path / "MANIFEST.json").read_text(encoding="utf-8"))
    assert manifest["collection_info"]["version"] == installed["version"]
    env = dict(installed["env"], ANSIBLE_COLLECTIONS_PATH=str(installed["collections"]))
    listed = _run([str(BIN / "ansible-galaxy"), "collection", "list", "cloudstack.cks", "--format", "json"],
                  env, installed["work"])
    assert listed.returncode == 0, listed.stderr
    assert list(json.loads(listed.stdout)) == [str(installed["collections"] / "ansible_collections")]


def test_the_installed_python_requirements_are_declared_and_met(installed: dict[str, Any]) -> None:
    # The README's `pip install -r .../cloudstack/cks/requirements.txt`: the file ships, and this
    # Python (the one the modules run on here) satisfies every line of it.
    text = (installed["path"] / "requirements.txt").read_text(encoding="utf-8")
    requirements = [Requirement(line.split("#", 1)[0].strip()) for line in text.splitlines()
                    if line.split("#", 1)[0].strip()]
    assert {r.name.lower() for r in requirements} >= {"cs", "kubernetes", "jmespath", "pyyaml"}
    for requirement in requirements:
        assert metadata.version(requirement.name) in requirement.specifier, requirement


def test_the_status_playbook_runs_from_the_install(installed: dict[str, Any], rollout_sim: Any) -> None:
    sim = rollout_sim("small.yml", etcd=False)
    env = dict(installed["env"], ANSIBLE_COLLECTIONS_PATH=str(installed["collections"]),
               ANSIBLE_LOCAL_TEMP=str(installed["work"] / "tmp"),
               CLOUDSTACK_ENDPOINT=sim.env["cloudstack_endpoint"], CLOUDSTACK_KEY=sim.env["cloudstack_key"],
               CLOUDSTACK_SECRET=sim.env["cloudstack_secret"], K8S_AUTH_SSL_CA_CERT=sim.env["kube_ca"])
    inventory = installed["work"] / "inventory.ini"
    inventory.write_text(f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n",
                         encoding="utf-8")
    run = _run([str(BIN / "ansible-playbook"), "-i", str(inventory), "cloudstack.cks.status",
                "-e", f"rollout_cluster={sim.env['cluster_name']}"], env, installed["work"])
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert f"Cluster {sim.env['cluster_name']}: CKS state Running" in run.stdout
    assert "Out of date: control 0" in run.stdout
    # It asked the simulated cloud (the kubeconfig was fetched from CloudStack, as on a real cloud).
    commands = {call.get("command") for call in sim.calls()}
    assert "getKubernetesClusterConfig" in commands, sorted(c for c in commands if c)
    assert sim.env["cloudstack_secret"] not in run.stdout + run.stderr
