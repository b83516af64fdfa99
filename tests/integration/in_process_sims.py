"""In-process cks-sims for the integration tests, with the collection's real clients pointed at them
(the fixtures that start them are in conftest.py: ``cycle_sim``, ``rollout_sim``, ``module_rollout_sim``).

``CycleSim`` (node cycle and release tests): ``cks_sim.harness.SimHandle`` (admin API, journals,
faults, ``cs`` client) plus the collection's clients and one batch or release run directly:

    def test_x(cycle_sim):
        sim = cycle_sim("small.yml")                   # a file under specs/ or tests/sim/examples
        sim = cycle_sim(spec_dict)                     # or a raw spec dict
        sim.cloud, sim.kube, sim.loader                # CloudStackClient, KubeClient, ClusterLoader
        sim.fault(kind="pdb_block", namespace="default", name="web")
        sim.timeline(), sim.calls(), sim.invariants()  # the admin API's journals

``RolloutSim``: a CycleSim that runs the whole playbooks/rollout.yml through ansible-playbook and
judges the cluster after it:

    def test_x(rollout_sim):
        sim = rollout_sim("small.yml")                 # in-process cks-sim, real etcd, fast timings
        run = sim.rollout(rollout_node_offerings={"worker": "cks-large"}, rollout_max_unavailable=2)
        assert run.rc == 0, run.output
        sim.assert_converged()                         # up to date, schedulable, unannotated, lock free

A plain module (not conftest.py) so test files import these classes by a name no other test folder's
conftest shadows.
"""

from __future__ import annotations

import contextlib
import copy
import os
from typing import Any, Callable, Iterator, Optional, Union

import pytest
import yaml
from cks_sim.harness import EXAMPLES, InProcessSim, SimHandle
from helpers import etcd_options, sim_rollout_vars

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SPEC_DIRS = (os.path.join(HERE, "specs"), EXAMPLES)


def load_raw_spec(name: str, time_scale: float = 0.01) -> dict[str, Any]:
    """A spec file under specs/ or tests/sim/examples as a raw dict, at ``time_scale``."""
    for folder in SPEC_DIRS:
        path = os.path.join(folder, name)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                raw = yaml.safe_load(fh)
            raw["time_scale"] = time_scale
            return raw
    raise FileNotFoundError(name)


class CycleSim(SimHandle):
    """A running in-process cks-sim (the harness's handle: admin API, journals, faults) with the
    collection's clients pointed at it."""

    def __init__(self, server: Any) -> None:
        from ansible_collections.cloudstack.cks.plugins.module_utils._clients.cloudstack import CloudStackClient, CloudStackOptions
        from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube import KubeClient, KubeOptions
        from ansible_collections.cloudstack.cks.plugins.module_utils._model.loader import ClusterLoader

        super().__init__(server.env, server)
        self.cluster_id: str = self.env["cluster_id"]
        self.cloud = CloudStackClient(CloudStackOptions(
            api_url=self.env["cloudstack_endpoint"], api_key=self.env["cloudstack_key"],
            api_secret=self.env["cloudstack_secret"], poll_interval=0.02))
        self.kube = KubeClient.connect(KubeOptions(kubeconfig=self.env["kubeconfig"]))
        self.loader = ClusterLoader(self.cloud, self.kube)

    # -- reading the cluster ---------------------------------------------------------------------

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

    # -- running the collection's node cycle and release directly ------------------------------

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
        from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.release import Release
        from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import RecordStore

        return Release(self.cloud, self.kube, self.loader, self.cluster_id, RecordStore(self.kube),
                       lock).run(last_error=last_error, skipped=skipped)

    def close(self) -> None:
        self.kube.close()


# --- RolloutSim: the whole playbooks/rollout.yml through ansible-playbook ---------------------------
#
# The playbook runs as an operator runs it (demo.py's way: CLOUDSTACK_* and K8S_AUTH_* in the
# environment, variables in an -e @file), against the in-process sim's HTTP APIs.

ANSIBLE_PLAYBOOK = os.path.join(ROOT, ".venv", "bin", "ansible-playbook")
ROLLOUT_PLAYBOOK = os.path.join(ROOT, "playbooks", "rollout.yml")
ANNOTATIONS = ("cloudstack.apache.org/rollout-boot-id", "cloudstack.apache.org/rollout-stop-sent")


class RolloutRun:
    """One ansible-playbook run: exit code, output, the report it wrote (if any)."""

    def __init__(self, rc: int, stdout: str, stderr: str, report: Optional[dict[str, Any]]) -> None:
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.report = report

    @property
    def output(self) -> str:
        return f"--- rc {self.rc}\n--- stdout\n{self.stdout[-12000:]}\n--- stderr\n{self.stderr[-4000:]}"


class RolloutSim(CycleSim):
    """A CycleSim that also runs the rollout playbook and judges the cluster after it."""

    def __init__(self, server: Any, work_dir: str) -> None:
        super().__init__(server)
        self.work_dir = work_dir
        self.runs = 0

    def base_vars(self) -> dict[str, Any]:
        return sim_rollout_vars(self.env)

    def ansible_env(self, **extra: str) -> dict[str, str]:
        home = os.path.join(self.work_dir, "ansible-home")
        environment = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "CLOUDSTACK_", "K8S_AUTH_"))}
        environment.update(
            ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".venv", "collections"),
            ANSIBLE_NOCOLOR="1",
            ANSIBLE_RETRY_FILES_ENABLED="0",
            ANSIBLE_HOME=home,
            ANSIBLE_LOCAL_TEMP=os.path.join(home, "tmp"),
            ANSIBLE_DEPRECATION_WARNINGS="0",
            ANSIBLE_PIPELINING="1",
            PATH=os.path.dirname(ANSIBLE_PLAYBOOK) + os.pathsep + os.environ.get("PATH", ""),
            CLOUDSTACK_ENDPOINT=self.env["cloudstack_endpoint"],
            CLOUDSTACK_KEY=self.env["cloudstack_key"],
            CLOUDSTACK_SECRET=self.env["cloudstack_secret"],
            K8S_AUTH_KUBECONFIG=self.env["kubeconfig"],
            K8S_AUTH_SSL_CA_CERT=self.env["kube_ca"],
        )
        environment.update(extra)
        return environment

    def rollout(self, env: Optional[dict[str, str]] = None, args: tuple[str, ...] = (), timeout: float = 600,
                drop_env: tuple[str, ...] = (), playbook: str = ROLLOUT_PLAYBOOK, drop_vars: tuple[str, ...] = (),
                **variables: Any) -> RolloutRun:
        """Run the rollout playbook once with the base variables (less ``drop_vars``) plus ``variables``."""
        import json as _json
        import subprocess

        self.runs += 1
        report_path = os.path.join(self.work_dir, f"report-{self.runs}.json")
        merged = dict(self.base_vars(), rollout_report_path=report_path)
        merged.update(variables)
        for name in drop_vars:
            merged.pop(name, None)
        vars_path = os.path.join(self.work_dir, f"vars-{self.runs}.json")
        with open(vars_path, "w", encoding="utf-8") as fh:
            _json.dump(merged, fh)
        environment = self.ansible_env(**(env or {}))
        for name in drop_env:
            environment.pop(name, None)
        inventory = os.path.join(self.work_dir, "inventory.ini")
        with open(inventory, "w", encoding="utf-8") as fh:
            fh.write(f"localhost ansible_connection=local ansible_python_interpreter={os.path.join(ROOT, '.venv', 'bin', 'python')}\n")
        cmd = [ANSIBLE_PLAYBOOK, "-i", inventory, playbook, "-e", f"@{vars_path}", *args]
        proc = subprocess.run(cmd, env=environment, capture_output=True, text=True, timeout=timeout, cwd=self.work_dir,
                              check=False)
        report = None
        if os.path.exists(report_path):
            with open(report_path, encoding="utf-8") as fh:
                report = _json.load(fh)
        return RolloutRun(proc.returncode, proc.stdout, proc.stderr, report)

    # -- judging --------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """What cks_node_outdated would return now (read in-process with the collection's code)."""
        from ansible_collections.cloudstack.cks.plugins.module_utils._services.outdated import report
        from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import Lock, RecordStore

        return report(self.view(), RecordStore(self.kube).read(), Lock(self.kube).read())

    def lease(self) -> Optional[dict[str, Any]]:
        return self.kube.get_lease("kube-system", "cloudstack-cks-rollout")

    def assert_converged(self, allowed: Callable[[dict[str, Any]], bool] = lambda violation: False) -> dict[str, Any]:
        """Every node up to date, Running, Ready, schedulable, unannotated; lock free; no invariant broken.

        ``allowed`` excuses violations a test caused itself (e.g. the quorum an injected etcd kill lost).
        """
        status = self.status()
        assert status["out_of_date"] == [], status["out_of_date"]
        assert status["lock_holder"] is None, status["lock"]
        for node in status["nodes"]:
            assert node["vm_state"] == "Running", node
            if node["node_type"] != "etcd":
                assert node["ready"] and not node["cordoned"] and not node["annotated"], node
        for raw in self.kube.list_nodes():
            annotations = (raw.get("metadata") or {}).get("annotations") or {}
            assert not set(ANNOTATIONS) & set(annotations), raw["metadata"]["name"]
        assert [v for v in self.invariants() if not allowed(v)] == []
        return status


# --- judging a rollout that met faults ----------------------------------------------------------------
# Every rollout against faults ends in success or a clean stop whose last error says what went wrong;
# either way no node is lost, no PodDisruptionBudget broken, the lock not left held, and a rerun
# without the faults converges.

# Workers to a larger offering, two at a time (three workers: batches of 2 and 1).
WORKERS_LARGER: dict[str, Any] = {"rollout_node_offerings": {"worker": "cks-large"}, "rollout_max_unavailable": 2}


def nothing_excused(violation: dict[str, Any]) -> bool:
    """No invariant violation is excused (``allowed`` of assert_converged)."""
    return False


def stopped_cleanly(sim: RolloutSim, run: RolloutRun, allowed: Callable[[dict[str, Any]], bool] = nothing_excused) -> str:
    """A failed rollout stopped cleanly: nodes kept, lock free, no invariant broken. Returns the last error."""
    assert run.rc != 0, run.output
    status = sim.status()
    assert status["lock_holder"] is None, status["lock"]
    assert [v for v in sim.invariants() if not allowed(v)] == []
    last_error = status["last_error"]
    assert last_error, status
    # The record and the report agree on why it stopped (a rollout that stopped while planning
    # writes no report: no batch ran).
    if run.report is not None:
        assert run.report["last_error"] == last_error
    else:
        assert last_error.startswith("planning failed"), last_error
    return last_error


def rerun_converges(sim: RolloutSim, allowed: Callable[[dict[str, Any]], bool] = nothing_excused,
                    **variables: Any) -> dict[str, Any]:
    sim.clear_faults()
    run = sim.rollout(**variables)
    assert run.rc == 0, run.output
    status = sim.assert_converged(allowed)
    assert status["last_error"] is None
    assert run.report["outcome"] == "Running" and run.report["last_error"] in (None, "")
    return status


def named_worker(sim: CycleSim, text: str) -> str:
    """The one worker a message names."""
    named = [n for n in sim.names("worker") if n in text.lower()]
    assert len(named) == 1, text
    return named[0]


# --- starting them (the fixtures' factories) --------------------------------------------------------

def cycle_sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., CycleSim]]:
    """Yields ``start(spec="small.yml", etcd=True)`` -> CycleSim; every sim started is stopped after."""
    with contextlib.ExitStack() as started:

        def start(spec: Union[str, dict[str, Any]] = "small.yml", etcd: bool = True) -> CycleSim:
            raw = load_raw_spec(spec) if isinstance(spec, str) else copy.deepcopy(spec)
            sim = started.enter_context(InProcessSim.start(raw, str(tmp_path_factory.mktemp("cycle-sim")), etcd=etcd))
            handle = CycleSim(sim.server)
            started.callback(handle.close)
            return handle

        yield start


def rollout_sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., RolloutSim]]:
    """Yields ``start(spec="small.yml", etcd=True, time_scale=0.01, kube_backend=None, **top_level)`` ->
    RolloutSim (``kube_backend="real"``: a real control plane, see cks_sim.real_kube); every sim started
    is stopped after."""
    with contextlib.ExitStack() as started:

        def start(spec: Union[str, dict[str, Any]] = "small.yml", etcd: bool = True, time_scale: float = 0.01,
                  kube_backend: Optional[str] = None, **overrides: Any) -> RolloutSim:
            raw = load_raw_spec(spec, time_scale) if isinstance(spec, str) else copy.deepcopy(spec)
            raw.update(copy.deepcopy(overrides))
            sim = started.enter_context(InProcessSim.start(raw, str(tmp_path_factory.mktemp("rollout-sim")), etcd=etcd,
                                                           kube=kube_backend))
            handle = RolloutSim(sim.server, str(tmp_path_factory.mktemp("rollout-run")))
            started.callback(handle.close)
            return handle

        yield start
