"""The rollout playbook run against an in-process cks-sim, and the judging of the cluster after it;
the fixtures that start sims are in conftest.py (``cycle_sim``, ``rollout_sim``, ``module_rollout_sim``),
the one handle and the one way to start a sim in helpers.py (``ClusterSim``, ``start_sim``).

``cycle_sim`` gives the handle itself (node cycle and release tests):

    def test_x(cycle_sim):
        sim = cycle_sim("small.yml")                   # a file under specs/ or tests/sim/examples
        sim = cycle_sim(spec_dict)                     # or a raw spec dict
        sim.cloud, sim.kube, sim.loader                # CloudStackClient, KubeClient, ClusterLoader
        sim.fault(kind="pdb_block", namespace="default", name="web")
        sim.timeline(), sim.calls(), sim.invariants()  # the admin API's journals

``rollout_sim`` gives a ``RolloutSim``: the handle, also running the whole playbooks/rollout.yml
through ansible-playbook and judging the cluster after it:

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
import functools
import os
import threading
from typing import Any, Callable, Iterator, Optional, Union

import pytest
from helpers import ClusterSim, sim_rollout_vars, start_sim

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


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


class RolloutSim(ClusterSim):
    """The sim's handle (``ClusterSim``) that also runs the rollout playbook and judges the cluster after it."""

    def __init__(self, env: dict[str, Any], server: Any = None, process: Any = None, work_dir: str = "") -> None:
        super().__init__(env, server=server, process=process)
        self.work_dir = work_dir
        self.runs = 0
        # Rollouts may run side by side (two racing for the Lease): each takes its own run number,
        # which names its vars and report files.
        self._numbering = threading.Lock()

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

        with self._numbering:
            self.runs += 1
            number = self.runs
        report_path = os.path.join(self.work_dir, f"report-{number}.json")
        merged = dict(self.base_vars(), rollout_report_path=report_path)
        merged.update(variables)
        for name in drop_vars:
            merged.pop(name, None)
        vars_path = os.path.join(self.work_dir, f"vars-{number}.json")
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
        from ansible_collections.cloudstack.cks.plugins.module_utils._services.outdated import outdated_report
        from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import Lock, RecordStore

        return outdated_report(self.view(), RecordStore(self.kube).read(), Lock(self.kube).read())

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
        broken = [v for v in self.invariants() if not allowed(v)]
        assert broken == [], broken
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


def named_worker(sim: ClusterSim, text: str) -> str:
    """The one worker a message names."""
    named = [n for n in sim.names("worker") if n in text.lower()]
    assert len(named) == 1, text
    return named[0]


# --- starting them (the fixtures' factories) --------------------------------------------------------

def cycle_sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., ClusterSim]]:
    """Yields ``start(spec="small.yml", etcd=True)`` -> ClusterSim (``start_sim`` in process); every sim
    started is stopped after."""
    with contextlib.ExitStack() as started:

        def start(spec: Union[str, dict[str, Any]] = "small.yml", etcd: bool = True) -> ClusterSim:
            return started.enter_context(start_sim(spec, etcd=etcd, state_dir=str(tmp_path_factory.mktemp("cycle-sim"))))

        yield start


def rollout_sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., RolloutSim]]:
    """Yields ``start(spec="small.yml", etcd=True, time_scale=0.01, kube_backend=None, **top_level)`` ->
    RolloutSim (``start_sim`` in process; ``kube_backend="real"``: a real control plane, see
    cks_sim.real_kube); every sim started is stopped after."""
    with contextlib.ExitStack() as started:

        def start(spec: Union[str, dict[str, Any]] = "small.yml", etcd: bool = True, time_scale: float = 0.01,
                  kube_backend: Optional[str] = None, **overrides: Any) -> RolloutSim:
            handle = functools.partial(RolloutSim, work_dir=str(tmp_path_factory.mktemp("rollout-run")))
            return started.enter_context(start_sim(spec, etcd=etcd, time_scale=time_scale, kube_backend=kube_backend,
                                                   state_dir=str(tmp_path_factory.mktemp("rollout-sim")),
                                                   handle=handle, **overrides))

        yield start
