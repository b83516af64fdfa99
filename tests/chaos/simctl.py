"""Start cks-sim, run the rollout playbook against it, and judge the cluster it leaves.

Shared by the chaos runner (run.py) and its smoke test. Everything goes through what an operator
has: the `cks-sim` executable, `ansible-playbook` with the collection's rollout playbook, the
simulator's admin API, and the real `kubernetes` client for the lock (a Lease).
"""

from __future__ import annotations

import datetime
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for _folder in ("sim", "integration"):  # run.py runs as a script
    if os.path.join(ROOT, "tests", _folder) not in sys.path:
        sys.path.insert(0, os.path.join(ROOT, "tests", _folder))
# SMALL_SPEC is run.py's default spec.
from cks_sim.harness import SMALL_SPEC, SimProcess, admin  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import
from helpers import sim_rollout_vars  # noqa: E402  pylint: disable=wrong-import-position

PLAYBOOK = os.path.join(ROOT, "playbooks", "rollout.yml")
VENV_BIN = os.path.join(ROOT, ".venv", "bin")
ANNOTATION = "cloudstack.apache.org/rollout-boot-id"
LOCK_NAME = "cloudstack-cks-rollout"


def start_sim(spec: str, state_dir: str, time_scale: Optional[float] = None, timeout: float = 120) -> SimProcess:
    """A fresh cks-sim for one trial (``SimStartError`` with its output if it does not get ready)."""
    args = ["--time-scale", str(time_scale)] if time_scale is not None else []
    return SimProcess.start(spec, state_dir, *args, ready_timeout=timeout)


@dataclass
class Target:
    """What the rollout asks for; the same dict goes to the playbook and to the judge."""

    offerings: dict[str, str] = field(default_factory=lambda: {"worker": "cks-large"})
    root_disk_sizes: dict[str, int] = field(default_factory=lambda: {"control": 30, "worker": 30})
    affinity_groups: dict[str, list[str]] = field(default_factory=lambda: {"worker": ["workers-spread"]})
    max_unavailable: int = 2


def rollout_vars(env: dict[str, Any], target: Target, lock_duration: float, report_path: str) -> dict[str, Any]:
    """The integration tests' variables for this sim (``helpers.sim_rollout_vars``: the cluster, its etcd),
    polling faster still, with the target, the lock's duration and the report's path."""
    variables = sim_rollout_vars(env)
    variables.update({
        "rollout_node_offerings": target.offerings,
        "rollout_node_root_disk_sizes": target.root_disk_sizes,
        "rollout_node_affinity_groups": target.affinity_groups,
        "rollout_max_unavailable": target.max_unavailable,
        "rollout_lock_duration": lock_duration,
        "rollout_eviction_retry_interval": 0.2,
        "rollout_poll_interval": 0.1,
        "rollout_report_path": report_path,
    })
    return variables


def playbook_environment(env: dict[str, Any], temp_dir: str) -> dict[str, str]:
    """The environment of ansible-playbook: this checkout's collection first, AWX-style credentials.

    ANSIBLE_LOCAL_TEMP / ANSIBLE_REMOTE_TEMP under ``temp_dir`` mark every module process of
    this run, so processes that outlive a kill of the playbook can be found (by that path).
    """
    return dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".venv", "collections"),
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_LOCAL_TEMP=os.path.join(temp_dir, "local"),
        ANSIBLE_REMOTE_TEMP=os.path.join(temp_dir, "remote"),
        ANSIBLE_RETRY_FILES_ENABLED="0",
        PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""),
        CLOUDSTACK_ENDPOINT=env["cloudstack_endpoint"],
        CLOUDSTACK_KEY=env["cloudstack_key"],
        CLOUDSTACK_SECRET=env["cloudstack_secret"],
        K8S_AUTH_SSL_CA_CERT=env["kube_ca"],
    )


def playbook_command(vars_path: str) -> list[str]:
    return [os.path.join(VENV_BIN, "ansible-playbook"), PLAYBOOK, "-e", f"@{vars_path}"]


def _stat(pid: int) -> Optional[tuple[str, int]]:
    """(state, process group) of a process, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[2])


def group_alive(pgid: int) -> bool:
    """Whether any live (not zombie) process is still in process group ``pgid``."""
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) and stat[1] == pgid and stat[0] != "Z":
            return True
    return False


def processes_under(marker: str, killed_group: int) -> list[int]:
    """Live processes outside ``killed_group`` whose command line mentions ``marker`` (a run's
    private temp dir): module processes that escaped the kill of the playbook's process group."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        stat = _stat(int(entry))
        if marker in cmdline and stat and stat[0] != "Z" and stat[1] != killed_group:
            found.append(int(entry))
    return found


# -- judging the cluster -------------------------------------------------------------------------

def cluster_state(sim: SimProcess) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(cloud cluster, kube world, etcd) of the first cluster from GET /state."""
    state = admin(sim.env, "GET", "/state")
    cluster_id = sim.env["cluster_id"]
    cloud = next(c for c in state["cloud"]["clusters"] if c["id"] == cluster_id)
    return cloud, state["kube"][cluster_id], state.get("etcd", {}).get(cluster_id, {})


def vm_problems(vm: dict[str, Any], target: Target, dedication: set[str]) -> list[str]:
    """Why a VM still differs from the target (empty: up to date)."""
    problems = []
    node_type = vm["node_type"]
    want_offering = target.offerings.get(node_type)
    if want_offering and vm["offering"] != want_offering:
        problems.append(f"offering {vm['offering']} != {want_offering}")
    want_size = target.root_disk_sizes.get(node_type)
    if want_size and vm["root_gb"] < want_size:
        problems.append(f"root disk {vm['root_gb']} GB < {want_size} GB")
    want_groups = target.affinity_groups.get(node_type)
    if want_groups is not None:
        have = sorted(g for g in vm["affinity_groups"] if g not in dedication)
        if have != sorted(want_groups):
            problems.append(f"affinity groups {have} != {sorted(want_groups)}")
    if vm["state"] != "Running":
        problems.append(f"VM {vm['state']}")
    return problems


def read_lease(env: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The rollout Lease as the real kubernetes client reads it (None if absent)."""
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.client.rest import ApiException

    configuration = k8s_client.Configuration()
    k8s_config.load_kube_config(config_file=env["kubeconfig"], client_configuration=configuration,
                                persist_config=False)
    configuration.ssl_ca_cert = env["kube_ca"]
    with k8s_client.ApiClient(configuration) as api:
        try:
            lease = k8s_client.CoordinationV1Api(api).read_namespaced_lease(LOCK_NAME, "kube-system")
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
    spec = lease.spec
    return {"holder": spec.holder_identity, "renew_time": str(spec.renew_time) if spec.renew_time else None,
            "duration": spec.lease_duration_seconds}


def clock_skew_seconds() -> float:
    """How long after renewTime + leaseDurationSeconds the collection counts a lease as expired."""
    collections = os.path.join(ROOT, ".venv", "collections")
    if collections not in sys.path:
        sys.path.insert(0, collections)
    from ansible_collections.cloudstack.cks.plugins.module_utils._state import record

    return float(record.DEFAULT_CLOCK_SKEW_SECONDS)


def lease_expiry(lease: dict[str, Any]) -> float:
    """Epoch seconds after which the collection takes over ``lease`` (with half a second to spare)."""
    renewed = datetime.datetime.fromisoformat(lease["renew_time"]).timestamp()
    return renewed + float(lease["duration"] or 0) + clock_skew_seconds() + 0.5


def judge(sim: SimProcess, target: Target, foreign_cordoned: set[str]) -> dict[str, Any]:
    """Every way the cluster differs from a converged rollout: empty lists mean converged."""
    cloud, kube, etcd = cluster_state(sim)
    dedication = {"dedicated-admin"}
    not_up_to_date = {vm["name"]: p for vm in cloud["vms"] if (p := vm_problems(vm, target, dedication))}
    cordoned, annotated, not_ready = [], [], []
    for node in kube["nodes"]:
        if node["unschedulable"] and node["name"] not in foreign_cordoned:
            cordoned.append(node["name"])
        if ANNOTATION in node.get("annotations", {}):
            annotated.append(node["name"])
        if node["ready"] != "True":
            not_ready.append(node["name"])
    foreign_undone = sorted(n["name"] for n in kube["nodes"]
                            if n["name"] in foreign_cordoned and not n["unschedulable"])
    lease = read_lease(sim.env)
    lock_held = bool(lease and lease["holder"])
    return {
        "not_up_to_date": not_up_to_date,
        "cordoned": sorted(cordoned),
        "annotated": sorted(annotated),
        "not_ready": sorted(not_ready),
        "foreign_cordon_undone": foreign_undone,
        "lock": lease if lock_held else None,
        "cluster_state": cloud["state"],
        "etcd_quorum_lost": bool(etcd.get("quorum_lost")),
        "invariants": admin(sim.env, "GET", "/invariants"),
    }


def converged(verdict: dict[str, Any]) -> bool:
    return not any(verdict[k] for k in ("not_up_to_date", "cordoned", "annotated", "not_ready",
                                        "foreign_cordon_undone", "lock", "etcd_quorum_lost", "invariants"))


def python() -> str:
    return os.path.join(VENV_BIN, "python") if os.path.exists(os.path.join(VENV_BIN, "python")) else sys.executable
