"""Run one module of the collection through ``ansible-playbook`` and read back its result.

Shared by the integration tests: every module is exercised the way an operator runs it (a
playbook on localhost), not by importing it, so argument parsing, check mode, diff and
``fail_json`` go through ansible-core itself.

Also runs cks-sim (``tests/sim/cks-sim serve``, through ``cks_sim.harness``) for a test:
``running_sim`` gives a ``ClusterSim``, the harness's ``SimHandle`` (admin API, journals, faults)
with the clusters env.json names and the collection's clients and module arguments for them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Iterator, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if os.path.join(ROOT, "tests", "sim") not in sys.path:  # run as a script, without the root conftest.py
    sys.path.insert(0, os.path.join(ROOT, "tests", "sim"))
from cks_sim import harness  # noqa: E402  pylint: disable=wrong-import-position
from cks_sim.harness import etcd_options  # noqa: E402  pylint: disable=wrong-import-position
VENV = os.path.join(ROOT, ".venv")
ANSIBLE_PLAYBOOK = os.path.join(VENV, "bin", "ansible-playbook")
PYTHON = os.path.join(VENV, "bin", "python")
COLLECTIONS = os.path.join(VENV, "collections")
SPECS = os.path.join(ROOT, "tests", "integration", "specs")


class ModuleRunError(AssertionError):
    """ansible-playbook itself broke (syntax, missing module), not the module under test."""


# A callback plugin that writes the result of the task under test as JSON: a second task to
# write it would cost another module run (seconds on a loaded machine).
_CALLBACK = '''
from __future__ import annotations

import json
import os

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "cks_result"
    CALLBACK_NEEDS_ENABLED = True

    def _write(self, result, **extra):
        data = {k: v for k, v in dict(result._result).items() if not k.startswith("_ansible")}
        data.update(extra)
        with open(os.environ["CKS_RESULT_PATH"], "w", encoding="utf-8") as fh:
            json.dump(data, fh, default=str)

    def v2_runner_on_ok(self, result, **kwargs):
        self._write(result, failed=False)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._write(result, failed=True)

    def v2_runner_on_skipped(self, result):
        self._write(result, failed=False, skipped=True)

    def v2_runner_on_unreachable(self, result):
        self._write(result, failed=True, unreachable=True)
'''


def _playbook(module_name: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    fqcn = module_name if "." in module_name else f"cloudstack.cks.{module_name}"
    return [{
        "hosts": "localhost",
        "gather_facts": False,
        "tasks": [{"name": "module under test", fqcn: args}],
    }]


def run_module(module_name: str, args: dict[str, Any], env: Optional[dict[str, str]] = None,
               check: bool = False, diff: bool = False, timeout: float = 300) -> dict[str, Any]:
    """Run ``module_name`` (short name or FQCN) once on localhost; return its result dict.

    ``env`` is added to the environment of ansible-playbook (e.g. CLOUDSTACK_* variables).
    A failed module returns its result with ``failed: true``; a broken playbook raises
    ``ModuleRunError`` with ansible-playbook's output.
    """
    work = tempfile.mkdtemp(prefix="cks-run-")
    try:
        out_path = os.path.join(work, "result.json")
        playbook = os.path.join(work, "play.yml")
        with open(playbook, "w", encoding="utf-8") as fh:
            # JSON is YAML: no quoting surprises for the arguments.
            json.dump(_playbook(module_name, args), fh)
        callbacks = os.path.join(work, "callback_plugins")
        os.makedirs(callbacks)
        with open(os.path.join(callbacks, "cks_result.py"), "w", encoding="utf-8") as fh:
            fh.write(_CALLBACK)
        inventory = os.path.join(work, "inventory.ini")
        with open(inventory, "w", encoding="utf-8") as fh:
            fh.write(f"localhost ansible_connection=local ansible_python_interpreter={PYTHON}\n")
        run_env = dict(os.environ)
        run_env.update({
            "ANSIBLE_COLLECTIONS_PATH": COLLECTIONS,
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_RETRY_FILES_ENABLED": "0",
            "ANSIBLE_LOCAL_TEMP": os.path.join(work, "tmp"),
            "ANSIBLE_HOME": os.path.join(work, "home"),
            "ANSIBLE_DEPRECATION_WARNINGS": "0",
            "ANSIBLE_CALLBACK_PLUGINS": callbacks,
            "ANSIBLE_CALLBACKS_ENABLED": "cks_result",
            "ANSIBLE_PIPELINING": "1",
            "CKS_RESULT_PATH": out_path,
        })
        run_env.update(env or {})
        cmd = [ANSIBLE_PLAYBOOK, "-i", inventory, playbook]
        if check:
            cmd.append("--check")
        if diff:
            cmd.append("--diff")
        proc = subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=timeout, cwd=work, check=False)
        if not os.path.exists(out_path):
            raise ModuleRunError(
                f"ansible-playbook exited {proc.returncode} without a result\n"
                f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")
        with open(out_path, encoding="utf-8") as fh:
            result = json.load(fh)
        result["_stdout"] = proc.stdout
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --- cks-sim ----------------------------------------------------------------------------------

def sim_rollout_vars(env: dict[str, Any]) -> dict[str, Any]:
    """The rollout role's variables for a sim's first cluster (its env.json): polling and eviction retries
    fast, as the sim runs 50-100x faster than a cloud, and its etcd (``etcd_options``) as the role names it."""
    variables: dict[str, Any] = {
        "rollout_cluster": env["cluster_name"],
        "rollout_poll_interval": 0.2,
        "rollout_eviction_retry_interval": 0.3,
        "rollout_delete_emptydir_data": True,
    }
    variables.update({f"rollout_{name}": value for name, value in etcd_options(env).items()})
    return variables


class ClusterSim(harness.SimHandle):
    """``cks-sim serve`` as a subprocess (``running_sim``): the harness's handle (admin API, journals,
    faults, ``cs`` client) plus the clusters env.json names and the collection's clients and module
    arguments for them."""

    def __init__(self, process: harness.SimProcess) -> None:
        super().__init__(process.env)
        self.process = process
        self.proc = process.proc
        self.state_dir = process.state_dir

    def cluster(self, name: Optional[str] = None) -> dict[str, Any]:
        """env.json's entry of a cluster ({id, name, kubeconfig, etcd}); the first one by default."""
        clusters = self.env.get("clusters") or [{"id": self.env["cluster_id"], "name": self.env["cluster_name"],
                                                 "kubeconfig": self.env["kubeconfig"]}]
        if name is None:
            return clusters[0]
        return next(c for c in clusters if name in (c["name"], c["id"]))

    def cloud_client(self) -> Any:
        """The collection's CloudStack client, pointed at this sim (for setting up and reading back)."""
        from ansible_collections.cloudstack.cks.plugins.module_utils._clients.cloudstack import CloudStackClient, CloudStackOptions

        return CloudStackClient(CloudStackOptions(api_url=self.env["cloudstack_endpoint"],
                                                  api_key=self.env["cloudstack_key"],
                                                  api_secret=self.env["cloudstack_secret"]))

    def kube_client(self, cluster: Optional[str] = None) -> Any:
        """The collection's Kubernetes client for one cluster of this sim; close it when done."""
        from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube import KubeClient, KubeOptions

        return KubeClient.connect(KubeOptions(kubeconfig=self.cluster(cluster)["kubeconfig"]))

    def world(self) -> dict[str, Any]:
        """GET /state without the clock: equal before and after means nothing changed anywhere."""
        state = self.state()
        return {key: value for key, value in state.items() if key not in ("time", "faults")}

    def module_env(self) -> dict[str, str]:
        """Environment variables that point the collection's modules at this sim."""
        return {
            "CLOUDSTACK_ENDPOINT": self.env["cloudstack_endpoint"],
            "CLOUDSTACK_KEY": self.env["cloudstack_key"],
            "CLOUDSTACK_SECRET": self.env["cloudstack_secret"],
            "K8S_AUTH_KUBECONFIG": self.env["kubeconfig"],
        }

    def connection_args(self, cluster: Optional[str] = None) -> dict[str, Any]:
        """The same as module arguments (with the named cluster's kubeconfig)."""
        return {
            "api_url": self.env["cloudstack_endpoint"],
            "api_key": self.env["cloudstack_key"],
            "api_secret": self.env["cloudstack_secret"],
            "kubeconfig": self.cluster(cluster)["kubeconfig"],
        }


@contextlib.contextmanager
def running_sim(spec: str, state_dir: Optional[str] = None, ready_timeout: float = 120) -> Iterator[ClusterSim]:
    """Start ``cks-sim serve`` for ``spec`` (a path, or a file name under tests/integration/specs
    or tests/sim/examples) and stop it afterwards."""
    spec_path = _spec_path(spec)
    own_dir = state_dir is None
    state_dir = state_dir or tempfile.mkdtemp(prefix="cks-sim-")
    try:
        with harness.SimProcess.start(spec_path, state_dir, ready_timeout=ready_timeout) as process:
            yield ClusterSim(process)
    finally:
        if own_dir:
            shutil.rmtree(state_dir, ignore_errors=True)


def _spec_path(spec: str) -> str:
    if os.path.isabs(spec) or os.path.exists(spec):
        return os.path.abspath(spec)
    for folder in (SPECS, os.path.join(ROOT, "tests", "sim", "examples")):
        candidate = os.path.join(folder, spec)
        if os.path.exists(candidate):
            return candidate
    raise FileNotFoundError(spec)


if __name__ == "__main__":  # pragma: no cover - manual use: run a module against a running sim
    print(json.dumps(run_module(sys.argv[1], json.loads(sys.argv[2])), indent=2))
