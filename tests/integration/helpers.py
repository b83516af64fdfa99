"""Run one module of the collection through ``ansible-playbook`` and read back its result.

Shared by the integration tests: every module is exercised the way an operator runs it (a
playbook on localhost), not by importing it, so argument parsing, check mode, diff and
``fail_json`` go through ansible-core itself.

Also starts cks-sim for a test, the one way (``start_sim``: in this process or as ``cks-sim serve``,
by a parameter) with the one handle (``ClusterSim``: the harness's ``SimHandle`` - admin API,
journals, faults - with the collection's clients, module arguments and environment for its clusters).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Callable, Iterator, Optional, TypeVar, Union

import yaml

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
    """The one handle a test has on a running cks-sim, in or out of this process (``start_sim``): the
    harness's ``SimHandle`` (admin API, journals, faults, ``cs`` client) plus the collection's REAL
    clients for its first cluster (``cloud``, ``kube``, ``loader``, built on first use), the module
    arguments and environment for any of its clusters, and one batch or release run directly."""

    def __init__(self, env: dict[str, Any], server: Any = None, process: Optional[harness.SimProcess] = None) -> None:
        super().__init__(env, server)
        self.process = process
        self.state_dir: str = process.state_dir if process is not None else server.state_dir
        self.cluster_id: str = self.env["cluster_id"]

    @functools.cached_property
    def cloud(self) -> Any:
        """The collection's CloudStack client, polling jobs fast as the sim runs them."""
        from ansible_collections.cloudstack.cks.plugins.module_utils._clients.cloudstack import CloudStackClient
        from ansible_collections.cloudstack.cks.plugins.module_utils._clients.cloudstack_options import CloudStackOptions

        return CloudStackClient(CloudStackOptions(api_url=self.env["cloudstack_endpoint"],
                                                  api_key=self.env["cloudstack_key"],
                                                  api_secret=self.env["cloudstack_secret"], poll_interval=0.02))

    @functools.cached_property
    def kube(self) -> Any:
        """The collection's Kubernetes client for the first cluster (closed by ``close``)."""
        from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube import KubeClient
        from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube_options import KubeOptions

        return KubeClient.connect(KubeOptions(kubeconfig=self.env["kubeconfig"]))

    @functools.cached_property
    def loader(self) -> Any:
        from ansible_collections.cloudstack.cks.plugins.module_utils._model.loader import ClusterLoader

        return ClusterLoader(self.cloud, self.kube)

    def close(self) -> None:
        if "kube" in self.__dict__:
            self.kube.close()

    # -- its clusters, as modules and playbooks reach them -------------------------------------------

    def cluster(self, name: Optional[str] = None) -> dict[str, Any]:
        """env.json's entry of a cluster ({id, name, kubeconfig, etcd}); the first one by default."""
        clusters = self.env.get("clusters") or [{"id": self.env["cluster_id"], "name": self.env["cluster_name"],
                                                 "kubeconfig": self.env["kubeconfig"]}]
        if name is None:
            return clusters[0]
        return next(c for c in clusters if name in (c["name"], c["id"]))

    def kube_client(self, cluster: Optional[str] = None) -> Any:
        """A Kubernetes client of its own for one cluster of this sim; close it when done."""
        from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube import KubeClient
        from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube_options import KubeOptions

        return KubeClient.connect(KubeOptions(kubeconfig=self.cluster(cluster)["kubeconfig"]))

    def world(self) -> dict[str, Any]:
        """GET /state without the clock, nor the real backend's measure of its own kubelets' heartbeats
        (how late a lease renewal came, which moves while nothing changes): equal before and after
        means nothing changed anywhere."""
        state = self.state()
        world = {key: value for key, value in state.items() if key not in ("time", "faults")}
        if isinstance(world.get("kube"), dict):
            world["kube"] = {cluster: {k: v for k, v in kube.items() if k != "heartbeats"} if isinstance(kube, dict) else kube
                             for cluster, kube in world["kube"].items()}
        return world

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

    # -- reading the first cluster through the collection's code ---------------------------------------

    def view(self) -> Any:
        return self.loader.load(self.cluster_id)

    def offering_id(self, name: str) -> str:
        return next(o.id for o in self.view().offerings.values() if o.name == name)

    def group_id(self, name: str) -> str:
        return next(g.id for g in self.view().affinity_groups.values() if g.name == name)

    def names(self, node_type: str) -> list[str]:
        return sorted(n.name for n in self.view().nodes_of(node_type))

    def etcd_endpoints(self) -> dict[str, Any]:
        """Module-style etcd options for the first cluster's members."""
        return etcd_options(self.env)

    # -- running the collection's node cycle and release directly --------------------------------------

    def cycle(self, nodes: list[str], settings: Any, etcd: bool = False, lock: Any = None,
              batch_timeout: float = 120, options: Optional[dict[str, Any]] = None, **drain: Any) -> Any:
        """One batch through ``BatchCycle`` with fast polling; returns the BatchResult.

        ``options``: more ``CycleOptions`` fields (``validation``, ``exclude_from_load_balancers``, ...).
        """
        from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.drain import DrainOptions
        from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.batch import BatchCycle
        from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.options import CycleOptions
        from ansible_collections.cloudstack.cks.plugins.module_utils._services.cycle import etcd_check_for

        cycle_options = CycleOptions(
            batch_timeout=batch_timeout, poll_interval=0.05,
            drain=DrainOptions(**dict({"delete_emptydir_data": True, "eviction_retry_interval": 0.05,
                                       "poll_interval": 0.05}, **drain)), **(options or {}))
        check = etcd_check_for(self.etcd_endpoints()) if etcd else None
        return BatchCycle(self.cloud, self.kube, self.loader, self.cluster_id, settings, nodes,
                          options=cycle_options, etcd_check=check, lock=lock).run()

    def release(self, last_error: Optional[str] = None, skipped: Any = None, lock: Any = None) -> Any:
        from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.release_steps import Release
        from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import RecordStore

        return Release(self.cloud, self.kube, self.loader, self.cluster_id, RecordStore(self.kube),
                       lock).run(last_error=last_error, skipped=skipped)


Handle = TypeVar("Handle", bound=ClusterSim)


@contextlib.contextmanager
def start_sim(spec: Union[str, dict[str, Any]] = "small.yml", in_process: bool = True, etcd: bool = True,
              time_scale: Optional[float] = None, state_dir: Optional[str] = None,
              handle: Callable[..., Handle] = ClusterSim, ready_timeout: float = 120,
              kube_backend: Optional[str] = None, **overrides: Any) -> Iterator[Handle]:
    """The one way a test starts cks-sim: ``spec`` (a file under tests/integration/specs or
    tests/sim/examples, a path, or a raw spec dict) in this process (``in_process``: its objects at hand,
    real etcd members unless ``etcd`` is False, ``time_scale`` 0.01 unless given, top-level ``overrides``)
    or as ``cks-sim serve`` (the spec file as it is, ``time_scale`` when given). ``kube_backend``: "memory"
    (cks-sim's own Kubernetes API) or "real" (a real control plane), by default CKS_SIM_KUBE's. Yields ``handle`` (a
    ``ClusterSim`` or a subclass) for it; stops the sim and removes a state directory it made after."""
    own_dir = state_dir is None
    state_dir = state_dir or tempfile.mkdtemp(prefix="cks-sim-")
    try:
        if in_process:
            raw = load_raw_spec(spec, time_scale if time_scale is not None else 0.01) if isinstance(spec, str) \
                else copy.deepcopy(spec)
            raw.update(copy.deepcopy(overrides))
            with harness.InProcessSim.start(raw, state_dir, etcd=etcd, kube=kube_backend) as sim:
                started = handle(sim.env, server=sim.server)
                try:
                    yield started
                finally:
                    started.close()
        else:
            if overrides or not etcd or not isinstance(spec, str):
                raise ValueError("cks-sim serve runs a spec file as it is: no overrides, no etcd=False, no spec dict")
            args = (("--time-scale", str(time_scale)) if time_scale is not None else ()) + \
                (("--kube", kube_backend) if kube_backend else ())
            with harness.SimProcess.start(_spec_path(spec), state_dir, *args, ready_timeout=ready_timeout) as process:
                started = handle(process.env, process=process)
                try:
                    yield started
                finally:
                    started.close()
    finally:
        if own_dir:
            shutil.rmtree(state_dir, ignore_errors=True)


def running_sim(spec: str, state_dir: Optional[str] = None, ready_timeout: float = 120) -> contextlib.AbstractContextManager[ClusterSim]:
    """``start_sim`` out of process: ``cks-sim serve`` for ``spec`` (its timings as the file has them)."""
    return start_sim(spec, in_process=False, state_dir=state_dir, ready_timeout=ready_timeout)


def load_raw_spec(name: str, time_scale: float = 0.01) -> dict[str, Any]:
    """A spec file under specs/ or tests/sim/examples as a raw dict, at ``time_scale``."""
    with open(_spec_path(name), encoding="utf-8") as fh:
        raw = yaml.safe_load(fh)
    raw["time_scale"] = time_scale
    return raw


def _spec_path(spec: str) -> str:
    for folder in (SPECS, harness.EXAMPLES):
        candidate = os.path.join(folder, spec)
        if os.path.exists(candidate):
            return candidate
    if os.path.isabs(spec) or os.path.exists(spec):
        return os.path.abspath(spec)
    raise FileNotFoundError(spec)


if __name__ == "__main__":  # pragma: no cover - manual use: run a module against a running sim
    print(json.dumps(run_module(sys.argv[1], json.loads(sys.argv[2])), indent=2))
