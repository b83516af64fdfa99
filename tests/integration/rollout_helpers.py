"""Running the collection's playbooks (rollout, settings, status, cancel) against cks-sim, and
reading back what happened to the simulated cloud: VMs, Kubernetes nodes, the rollout record and
lock, the timeline, the call log and the invariants.

Scenario tests assert on the simulator, not on the playbook's own output: the playbook's exit
code and text are kept only to explain a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from helpers import ANSIBLE_PLAYBOOK, COLLECTIONS, PYTHON, ROOT, ClusterSim, running_sim, sim_rollout_vars

PLAYBOOKS = os.path.join(ROOT, "playbooks")
SPECS = os.path.join(ROOT, "tests", "integration", "specs")
ANNOTATION = "cloudstack.apache.org/rollout-boot-id"
RECORD = ("kube-system", "cloudstack-cks-rollout")
# What the sim journals for one VM going down and coming back (see tests/sim/README.md).
DOWN_EVENTS = ("stop_requested",)
UP_EVENTS = ("started",)
# The interval of a ``cks_sim.harness.wait_until`` that reads the sim's admin API while a playbook
# runs: slow enough to leave the rollout the CPU.
ADMIN_POLL = 0.2


# --- running playbooks --------------------------------------------------------------------------

@dataclass
class PlaybookRun:
    rc: int
    stdout: str
    stderr: str
    report: Optional[dict[str, Any]]

    def explain(self) -> str:
        return f"rc={self.rc}\n--- stdout (end)\n{self.stdout[-6000:]}\n--- stderr (end)\n{self.stderr[-2000:]}"


def playbook_env(sim: ClusterSim, work: str, credential: bool = True) -> dict[str, str]:
    """What an AWX CloudStack credential would set (without ``credential``: no CLOUDSTACK_* at all);
    the kubeconfig is fetched from CloudStack."""
    env = dict(os.environ)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": COLLECTIONS,
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_LOCAL_TEMP": os.path.join(work, "tmp"),
        "ANSIBLE_HOME": os.path.join(work, "home"),
        "ANSIBLE_DEPRECATION_WARNINGS": "0",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
        "ANSIBLE_PIPELINING": "1",
        "ANSIBLE_PYTHON_INTERPRETER": PYTHON,
        "PATH": os.path.dirname(ANSIBLE_PLAYBOOK) + os.pathsep + os.environ.get("PATH", ""),
        "CLOUDSTACK_ENDPOINT": sim.env["cloudstack_endpoint"],
        "CLOUDSTACK_KEY": sim.env["cloudstack_key"],
        "CLOUDSTACK_SECRET": sim.env["cloudstack_secret"],
        "K8S_AUTH_SSL_CA_CERT": sim.env["kube_ca"],
    })
    env.pop("K8S_AUTH_KUBECONFIG", None)
    if not credential:
        for name in ("CLOUDSTACK_ENDPOINT", "CLOUDSTACK_KEY", "CLOUDSTACK_SECRET"):
            env.pop(name)
    return env


def rollout_vars(sim: ClusterSim, **overrides: Any) -> dict[str, Any]:
    """The rollout's variables for this sim (``sim_rollout_vars``), each batch given 300 s, then ``overrides``."""
    variables = sim_rollout_vars(sim.env)
    variables.setdefault("rollout_etcd_endpoints", [])
    variables["rollout_batch_timeout"] = 300
    variables.update(overrides)
    return variables


class PlaybookProcess:
    """ansible-playbook started in its own process group (so a test can SIGKILL the whole controller)."""

    def __init__(self, sim: ClusterSim, playbook: str, variables: dict[str, Any], credential: bool = True,
                 args: tuple[str, ...] = ()) -> None:
        self.work = tempfile.mkdtemp(prefix="cks-rollout-")
        self.report_path = os.path.join(self.work, "report.json")
        variables = dict(variables)
        if "rollout_report_path" not in variables and playbook == "rollout.yml":
            variables["rollout_report_path"] = self.report_path
        self.report_path = variables.get("rollout_report_path", self.report_path)
        vars_path = os.path.join(self.work, "vars.json")
        with open(vars_path, "w", encoding="utf-8") as fh:
            json.dump(variables, fh)
        self.stdout_path = os.path.join(self.work, "stdout")
        self.stderr_path = os.path.join(self.work, "stderr")
        self._out = open(self.stdout_path, "w", encoding="utf-8")
        self._err = open(self.stderr_path, "w", encoding="utf-8")
        command = [ANSIBLE_PLAYBOOK, os.path.join(PLAYBOOKS, playbook), "-e", f"@{vars_path}", *args]
        self.proc = subprocess.Popen(command, env=playbook_env(sim, self.work, credential), cwd=self.work, stdout=self._out,
                                     stderr=self._err, start_new_session=True)

    def output(self) -> str:
        self._out.flush()
        with open(self.stdout_path, encoding="utf-8") as fh:
            return fh.read()

    def wait(self, timeout: float = 900) -> PlaybookRun:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            rc = -9
        self._out.close()
        self._err.close()
        with open(self.stdout_path, encoding="utf-8") as fh:
            stdout = fh.read()
        with open(self.stderr_path, encoding="utf-8") as fh:
            stderr = fh.read()
        report = None
        if os.path.exists(self.report_path):
            with open(self.report_path, encoding="utf-8") as fh:
                report = json.load(fh)
        shutil.rmtree(self.work, ignore_errors=True)
        return PlaybookRun(rc, stdout, stderr, report)

    def kill(self) -> None:
        """SIGKILL the controller as a crash would: ansible-playbook, its workers and the modules they
        run. Ansible starts each module in a session of its own, so the process group is not enough:
        every descendant of our ansible-playbook is killed too (and nothing else)."""
        victims = [self.proc.pid] + descendants(self.proc.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


def command_lines(pids: list[int]) -> list[str]:
    out = []
    for pid in pids:
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                out.append(fh.read().replace(b"\0", b" ").decode(errors="replace"))
    return out


def descendants(root: int) -> list[int]:
    """The pids below ``root`` in the process tree (read from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as fh:
                stat = fh.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def run_playbook(sim: ClusterSim, playbook: str, variables: dict[str, Any], timeout: float = 900,
                 args: tuple[str, ...] = ()) -> PlaybookRun:
    """Run a playbook to its end; ``args`` go on ansible-playbook's command line (e.g. ``--check``)."""
    return PlaybookProcess(sim, playbook, variables, args=args).wait(timeout=timeout)


# --- reading the simulator ----------------------------------------------------------------------------

def vms(sim: ClusterSim, cluster: int = 0) -> dict[str, dict[str, Any]]:
    """The cluster's VMs from GET /state, by lowercase name."""
    return {vm["name"].lower(): vm for vm in sim.state()["cloud"]["clusters"][cluster]["vms"]}


def cluster_state(sim: ClusterSim, cluster: int = 0) -> str:
    return sim.state()["cloud"]["clusters"][cluster]["state"]


def kube_nodes(sim: ClusterSim) -> dict[str, dict[str, Any]]:
    """The first cluster's Kubernetes nodes from GET /state, by name."""
    kube = sim.state()["kube"]
    return {node["name"]: node for node in kube[sim.env["cluster_id"]]["nodes"]}


def names(sim: ClusterSim, node_type: str) -> list[str]:
    """The nodes of a type in creation order (the sim lists VMs in that order)."""
    return [name for name, vm in vms(sim).items() if vm["node_type"] == node_type]


def sim_time(sim: ClusterSim) -> float:
    """The simulator's clock (the timestamps of its journals)."""
    return float(sim.state()["time"])


def events(items: list[dict[str, Any]], event: str, node: Optional[str] = None) -> list[dict[str, Any]]:
    return [i for i in items if i.get("event") == event and (node is None or i.get("node") == node)]


def restarted(items: list[dict[str, Any]]) -> list[str]:
    """The nodes stopped by a stop request, in the order of their first stop request."""
    seen: list[str] = []
    for item in items:
        if item.get("event") == "stop_requested" and item["node"] not in seen:
            seen.append(item["node"])
    return seen


def max_down_at_once(items: list[dict[str, Any]], nodes: list[str]) -> int:
    """The most of ``nodes`` whose VM was down (stop requested .. started) at the same time."""
    down: set[str] = set()
    most = 0
    for item in sorted(items, key=lambda i: i["t"]):
        if item.get("node") not in nodes:
            continue
        if item.get("event") in DOWN_EVENTS:
            down.add(item["node"])
            most = max(most, len(down))
        elif item.get("event") in UP_EVENTS:
            down.discard(item["node"])
    return most


def max_cordoned_at_once(items: list[dict[str, Any]], nodes: list[str]) -> int:
    """The most of ``nodes`` out of service (cordoned .. uncordoned) at the same time."""
    out: set[str] = set()
    most = 0
    for item in sorted(items, key=lambda i: i["t"]):
        if item.get("node") not in nodes:
            continue
        if item.get("event") == "cordoned":
            out.add(item["node"])
            most = max(most, len(out))
        elif item.get("event") == "uncordoned":
            out.discard(item["node"])
    return most


def batches_seen(items: list[dict[str, Any]], nodes: list[str]) -> list[list[str]]:
    """The batches as the cluster lived them: ``nodes`` grouped by overlapping cordoned .. uncordoned
    intervals (a batch's nodes are out of service together, the next batch only after), in time order."""
    spans: dict[str, list[float]] = {}
    for item in sorted(items, key=lambda i: i["t"]):
        node = item.get("node")
        if node not in nodes:
            continue
        if item.get("event") == "cordoned" and node not in spans:
            spans[node] = [item["t"], float("inf")]
        elif item.get("event") == "uncordoned" and node in spans:
            spans[node][1] = item["t"]
    groups: list[list[str]] = []
    end = float("-inf")
    for node, (start, stop) in sorted(spans.items(), key=lambda kv: kv[1][0]):
        if groups and start < end:
            groups[-1].append(node)
            end = max(end, stop)
        else:
            groups.append([node])
            end = stop
    return [sorted(g) for g in groups]


def down_intervals(items: list[dict[str, Any]], node: str) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    start: Optional[float] = None
    for item in sorted(items, key=lambda i: i["t"]):
        if item.get("node") != node:
            continue
        if item.get("event") in DOWN_EVENTS and start is None:
            start = item["t"]
        elif item.get("event") in UP_EVENTS and start is not None:
            out.append((start, item["t"]))
            start = None
    if start is not None:
        out.append((start, float("inf")))
    return out


def mutating_calls(sim: ClusterSim, since: float = 0.0) -> list[dict[str, Any]]:
    """CloudStack calls that change something, and Kubernetes writes (not reads), since ``since``."""
    reads = ("list", "get", "query")
    out = []
    for call in sim.calls(since=since):
        if call.get("api") == "cloudstack":
            if not str(call.get("command", "")).lower().startswith(reads):
                out.append(call)
        elif str(call.get("verb", "get")).lower() not in ("get", "list", "watch"):
            out.append(call)
    return out


class ClusterRecord:
    """The rollout record (ConfigMap) and lock (Lease), read with the real Kubernetes client."""

    def __init__(self, sim: ClusterSim) -> None:
        self.sim = sim

    def _read(self, what: str) -> Optional[dict[str, Any]]:
        kube = self.sim.kube_client()
        try:
            return kube.get_configmap(*RECORD) if what == "configmap" else kube.get_lease(*RECORD)
        finally:
            kube.close()

    def data(self) -> dict[str, Any]:
        configmap = self._read("configmap")
        return dict((configmap or {}).get("data") or {})

    def settings(self) -> dict[str, Any]:
        return json.loads(self.data().get("settings") or "{}")

    def lease(self) -> dict[str, Any]:
        return dict(((self._read("lease") or {}).get("spec")) or {})

    def holder(self) -> Optional[str]:
        return self.lease().get("holderIdentity") or None

    def lease_object(self) -> dict[str, Any]:
        """The whole Lease (metadata with its annotations too)."""
        return dict(self._read("lease") or {})


def node_settled(sim: ClusterSim, node: dict[str, Any]) -> bool:
    """A Kubernetes node that is Ready, schedulable and carries no rollout annotation."""
    annotations = node.get("annotations") or {}
    return (node.get("ready") == "True" and not node.get("unschedulable")
            and ANNOTATION not in annotations and "cloudstack.apache.org/rollout-stop-sent" not in annotations)


@contextlib.contextmanager
def running_rollout_sim(spec: str, max_unavailable: Optional[dict[str, int]] = None) -> Iterator[ClusterSim]:
    """cks-sim for one of tests/integration/specs/rollout_*.yml; ``max_unavailable`` tells its
    invariant checker how many nodes of a type the rollout may take down at once."""
    with running_sim(spec) as sim:
        if max_unavailable:
            sim.action(action="set_config", max_unavailable=max_unavailable)
        yield sim


def assert_no_invariant_broken(sim: ClusterSim) -> None:
    broken = sim.invariants()
    assert broken == [], f"the simulator saw invariants broken: {broken}"
