"""Shared fixtures of the integration tests. Add fixtures here; do not replace the file.

``cycle_sim`` (node cycle and release tests): a factory that starts cks-sim in this process
(its HTTP APIs on loopback, real etcd members) and gives the collection's REAL clients for it:

    def test_x(cycle_sim):
        sim = cycle_sim("small.yml")                   # a file under specs/ or tests/sim/examples
        sim = cycle_sim(spec_dict)                     # or a raw spec dict
        sim.cloud, sim.kube, sim.loader                # CloudStackClient, KubeClient, ClusterLoader
        sim.fault(kind="pdb_block", namespace="default", name="web")
        sim.timeline(), sim.calls(), sim.invariants()  # the admin API's journals
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
from typing import Any, Callable, Iterator, Optional, Union

import pytest
import requests
import yaml

from cks_sim.harness import EXAMPLES, InProcessSim

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SPEC_DIRS = (os.path.join(HERE, "specs"), EXAMPLES)
# The sim's werkzeug servers log every request: keep test output readable.
logging.getLogger("werkzeug").setLevel(logging.ERROR)


def load_raw_spec(name: str, time_scale: float = 0.01) -> dict[str, Any]:
    for folder in SPEC_DIRS:
        path = os.path.join(folder, name)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                raw = yaml.safe_load(fh)
            raw["time_scale"] = time_scale
            return raw
    raise FileNotFoundError(name)


class CycleSim:
    """A running in-process cks-sim with the collection's clients pointed at it."""

    def __init__(self, server: Any) -> None:
        from ansible_collections.cloudstack.cks.plugins.module_utils._clients.cloudstack import CloudStackClient, CloudStackOptions
        from ansible_collections.cloudstack.cks.plugins.module_utils._model.loader import ClusterLoader
        from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube import KubeClient, KubeOptions

        self.server = server
        self.env: dict[str, Any] = server.env
        self.cluster_id: str = self.env["cluster_id"]
        self.cloud = CloudStackClient(CloudStackOptions(
            api_url=self.env["cloudstack_endpoint"], api_key=self.env["cloudstack_key"],
            api_secret=self.env["cloudstack_secret"], poll_interval=0.02))
        self.kube = KubeClient.connect(KubeOptions(kubeconfig=self.env["kubeconfig"]))
        self.loader = ClusterLoader(self.cloud, self.kube)

    # -- admin API ---------------------------------------------------------------------------

    def admin(self, method: str, path: str, body: Optional[Any] = None) -> Any:
        response = requests.request(method, self.env["admin_url"].rstrip("/") + path, json=body, timeout=30)
        response.raise_for_status()
        return response.json() if response.content else None

    def fault(self, **fault: Any) -> Any:
        return self.admin("POST", "/faults", fault)

    def clear_faults(self) -> Any:
        return self.admin("DELETE", "/faults")

    def _items(self, path: str, key: str) -> list[dict[str, Any]]:
        answer = self.admin("GET", path)
        return answer.get(key, []) if isinstance(answer, dict) else answer

    def timeline(self) -> list[dict[str, Any]]:
        return self._items("/timeline", "timeline")

    def calls(self) -> list[dict[str, Any]]:
        return self._items("/calls", "calls")

    def invariants(self) -> list[dict[str, Any]]:
        return self._items("/invariants", "violations")

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
        etcd = self.env["etcd"]
        options: dict[str, Any] = {"etcd_endpoints": [m["client_url"] for m in etcd["members"]]}
        if etcd.get("mode") == "stacked":
            options.update(etcd_ca_cert=etcd["ca_cert"], etcd_client_cert=etcd["client_cert"],
                           etcd_client_key=etcd["client_key"])
        return options

    # -- running the collection's node cycle and release directly ------------------------------

    def cycle(self, nodes: list[str], settings: Any, etcd: bool = False, lock: Any = None,
              batch_timeout: float = 120, options: Optional[dict[str, Any]] = None, **drain: Any) -> Any:
        """One batch through ``BatchCycle`` with fast polling; returns the BatchResult.

        ``options``: more ``CycleOptions`` fields (``validation``, ``exclude_from_load_balancers``, ...).
        """
        from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.batch import BatchCycle
        from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.options import CycleOptions
        from ansible_collections.cloudstack.cks.plugins.module_utils._services.cycle import etcd_check_for
        from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.drain import DrainOptions

        cycle_options = CycleOptions(
            batch_timeout=batch_timeout, poll_interval=0.05,
            drain=DrainOptions(**dict({"delete_emptydir_data": True, "eviction_retry_interval": 0.05,
                                       "poll_interval": 0.05}, **drain)), **(options or {}))
        check = etcd_check_for(self.etcd_endpoints()) if etcd else None
        return BatchCycle(self.cloud, self.kube, self.loader, self.cluster_id, settings, nodes,
                          options=cycle_options, etcd_check=check, lock=lock).run()

    def release(self, last_error: Optional[str] = None, skipped: Any = None, lock: Any = None) -> Any:
        from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import RecordStore
        from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.release import Release

        return Release(self.cloud, self.kube, self.loader, self.cluster_id, RecordStore(self.kube),
                       lock).run(last_error=last_error, skipped=skipped)

    def close(self) -> None:
        self.kube.close()


@pytest.fixture
def cycle_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., CycleSim]]:
    with contextlib.ExitStack() as started:

        def start(spec: Union[str, dict[str, Any]] = "small.yml", etcd: bool = True) -> CycleSim:
            raw = load_raw_spec(spec) if isinstance(spec, str) else copy.deepcopy(spec)
            sim = started.enter_context(InProcessSim.start(raw, str(tmp_path_factory.mktemp("cycle-sim")), etcd=etcd))
            handle = CycleSim(sim.server)
            started.callback(handle.close)
            return handle

        yield start


# --- rollout_sim: the whole playbooks/rollout.yml through ansible-playbook ----------------------
#
#     def test_x(rollout_sim):
#         sim = rollout_sim("small.yml")                 # in-process cks-sim, real etcd, fast timings
#         run = sim.rollout(rollout_node_offerings={"worker": "cks-large"}, rollout_max_unavailable=2)
#         assert run.rc == 0, run.output
#         sim.assert_converged()                         # up to date, schedulable, unannotated, lock free
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
        etcd = self.env.get("etcd") or {}
        variables: dict[str, Any] = {
            "rollout_cluster": self.env["cluster_name"],
            # The sim runs ~100x faster than a cloud: poll and retry evictions accordingly.
            "rollout_poll_interval": 0.2,
            "rollout_eviction_retry_interval": 0.3,
            "rollout_delete_emptydir_data": True,
        }
        if etcd.get("members"):
            variables["rollout_etcd_endpoints"] = [m["client_url"] for m in etcd["members"]]
            if etcd.get("mode") == "stacked":
                variables.update(rollout_etcd_ca_cert=etcd["ca_cert"], rollout_etcd_client_cert=etcd["client_cert"],
                                 rollout_etcd_client_key=etcd["client_key"])
        return variables

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
        import subprocess
        import json as _json

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

    def state(self) -> dict[str, Any]:
        return self.admin("GET", "/state")

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


def _rollout_sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., RolloutSim]]:
    with contextlib.ExitStack() as started:

        def start(spec: Union[str, dict[str, Any]] = "small.yml", etcd: bool = True, time_scale: float = 0.01,
                  **overrides: Any) -> RolloutSim:
            raw = load_raw_spec(spec, time_scale) if isinstance(spec, str) else copy.deepcopy(spec)
            raw.update(copy.deepcopy(overrides))
            sim = started.enter_context(InProcessSim.start(raw, str(tmp_path_factory.mktemp("rollout-sim")), etcd=etcd))
            handle = RolloutSim(sim.server, str(tmp_path_factory.mktemp("rollout-run")))
            started.callback(handle.close)
            return handle

        yield start


@pytest.fixture
def rollout_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., RolloutSim]]:
    """A factory: ``rollout_sim(spec="small.yml", etcd=True, time_scale=0.01, **top_level)`` -> RolloutSim."""
    yield from _rollout_sims(tmp_path_factory)


@pytest.fixture(scope="module")
def module_rollout_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., RolloutSim]]:
    """``rollout_sim`` shared by the tests of one module (for tests that must leave the sim unchanged)."""
    yield from _rollout_sims(tmp_path_factory)
