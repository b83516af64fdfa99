"""Bad input to the rollout (``ansible-playbook playbooks/rollout.yml``), one table row each.

Every row must fail with a message that names what to fix (the parameter, the value or the node)
and change nothing: the simulator's world is byte-for-byte the same before and after, and no
CloudStack call that changes something was made.

What "the same" compares: ``GET /state`` without ``time`` (the wall clock of the answer, the only
field that moves by itself at rest: the VMs do not change state, the kube side keeps no
heartbeats, and its ``resource_version`` moves only with a write) and without ``faults`` (the
tests' own doing, not the world's); plus the ``kube-system`` ConfigMaps and Leases read through
the Kubernetes API (the rollout record and lock are not in ``/state``), with their
resourceVersions.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import uuid
from typing import Any, Callable, Optional

import pytest
import yaml

SPEC = "faults_small.yml"
READ_ONLY_PREFIXES = ("list", "query", "get")
MUTATING_KUBE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


class LockLeftHeld(AssertionError):
    """A refused rollout exited with the lock still held."""


@dataclasses.dataclass
class Case:
    id: str
    variables: dict[str, Any]
    expect: tuple[str, ...]  # every one must be in the failure output
    env: Callable[[Any], dict[str, str]] = lambda sim: {}
    setup: Optional[Callable[[Any], Callable[[], None]]] = None  # returns the undo
    bug: Optional[str] = None  # a known bug elsewhere: the row is a strict xfail until it is fixed


#: Ports bound and never listened on, kept so for the whole module: a connection to one is refused.
#: A port closed again could be taken meanwhile by a simulator of another test worker (it was: the
#: "unreachable" CloudStack then answered 401).
_REFUSING: list[socket.socket] = []


def _closed_port() -> int:
    sock = socket.socket()  # pylint: disable=consider-using-with
    sock.bind(("127.0.0.1", 0))
    _REFUSING.append(sock)
    return sock.getsockname()[1]


def _kubeconfig_variant(sim: Any, name: str, change: Callable[[dict[str, Any]], None]) -> str:
    with open(sim.env["kubeconfig"], encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    change(config)
    path = os.path.join(sim.work_dir, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        yaml.safe_dump(config, fh)
    return path


def _wrong_token(config: dict[str, Any]) -> None:
    user = config["users"][0]["user"]
    user.pop("client-certificate-data", None)
    user.pop("client-key-data", None)
    user["token"] = "not-the-token"


def _unreachable_kube(config: dict[str, Any]) -> None:
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{_closed_port()}/clusters/x"


def _malformed_kubeconfig(sim: Any) -> dict[str, str]:
    path = os.path.join(sim.work_dir, "malformed-kubeconfig")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("apiVersion: v1\nclusters: [ {name: broken\n  users: : :\n")
    return {"K8S_AUTH_KUBECONFIG": path}


def _other_ca(sim: Any) -> dict[str, str]:
    from cks_sim.tls import make_tls

    other = make_tls(os.path.join(sim.work_dir, "other-ca"))
    return {"K8S_AUTH_SSL_CA_CERT": other["ca_cert"]}


def _cluster_state(state: str) -> Callable[[Any], Callable[[], None]]:
    def setup(sim: Any) -> Callable[[], None]:
        sim.admin("POST", "/actions", {"action": "set_cluster_state", "cluster": sim.cluster_id, "state": state})
        return lambda: sim.admin("POST", "/actions", {"action": "set_cluster_state", "cluster": sim.cluster_id,
                                                      "state": "Running"})
    return setup


def _lock_held(sim: Any) -> Callable[[], None]:
    from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import Lock

    lock = Lock(sim.kube, "rollout-of-someone-else", duration_seconds=600)
    lock.acquire()
    return lock.release


WORKERS = {"rollout_node_offerings": {"worker": "cks-large"}}

CASES = [
    # max_unavailable
    Case("max-unavailable-zero", dict(WORKERS, rollout_max_unavailable=0), ("max_unavailable", "0", "at least 1")),
    Case("max-unavailable-negative", dict(WORKERS, rollout_max_unavailable=-2), ("max_unavailable", "-2")),
    Case("max-unavailable-text", dict(WORKERS, rollout_max_unavailable="two"), ("rollout_max_unavailable", "two")),
    # offerings
    Case("offering-unknown", {"rollout_node_offerings": {"worker": "cks-huge"}}, ("worker", "cks-huge")),
    Case("offering-ambiguous", {"rollout_node_offerings": {"worker": "cks-twin"}}, ("worker", "cks-twin")),
    Case("offering-too-small", {"rollout_node_offerings": {"worker": "cks-small"}}, ("cks-small", "2048")),
    Case("offering-strict-disk", {"rollout_node_offerings": {"worker": "cks-strict"}}, ("cks-strict", "strict")),
    Case("offering-not-a-dict", {"rollout_node_offerings": "cks-large"}, ("rollout_node_offerings",)),
    # the settings as a survey's text field gives them: read as YAML, judged as a mapping would be
    Case("offering-text-not-yaml", {"rollout_node_offerings": "worker: [cks-large"},
         ("rollout_node_offerings=", "not JSON or YAML text")),
    Case("offering-yaml-text-unknown", {"rollout_node_offerings": "worker: cks-huge"}, ("worker", "cks-huge")),
    # node types
    Case("node-type-unknown", {"rollout_node_offerings": {"gpu": "cks-large"}}, ("gpu",)),
    Case("single-control-node", {"rollout_node_offerings": {"control": "cks-large"}}, ("control",)),
    # root disks
    Case("disk-shrinks", {"rollout_node_root_disk_sizes": {"worker": 10}}, ("worker", "10", "shrink")),
    Case("disk-zero", {"rollout_node_root_disk_sizes": {"worker": 0}}, ("worker", "0")),
    Case("disk-text", {"rollout_node_root_disk_sizes": {"worker": "big"}}, ("big",)),
    Case("disk-fixed-by-offering", {"rollout_node_offerings": {"worker": "cks-fixed-root"},
                                    "rollout_node_root_disk_sizes": {"worker": 60}}, ("cks-fixed-root",)),
    # affinity groups
    Case("group-unknown", {"rollout_node_affinity_groups": {"worker": ["no-such-group"]}}, ("no-such-group",)),
    Case("group-ambiguous", {"rollout_node_affinity_groups": {"worker": ["twin-group"]}}, ("twin-group",)),
    Case("group-dedication", {"rollout_node_affinity_groups": {"worker": ["dedicated-admin"]}},
         ("dedicated-admin", "ExplicitDedication")),
    # the cluster
    Case("cluster-unknown", dict(WORKERS, rollout_cluster="no-such-cluster"), ("no-such-cluster",)),
    Case("cluster-empty", dict(WORKERS, rollout_cluster=""), ("cluster=''", "no CKS cluster")),
    Case("cluster-destroying", WORKERS, ("Destroying",), setup=_cluster_state("Destroying")),
    Case("cluster-scaling", WORKERS, ("Scaling",), setup=_cluster_state("Scaling")),
    Case("lock-held", WORKERS, ("rollout-of-someone-else",), setup=_lock_held),
    # connections and trust
    Case("kubeconfig-malformed", WORKERS, ("kubeconfig",), env=_malformed_kubeconfig),
    Case("cloudstack-wrong-secret", WORKERS, ("401", "credentials"),
         env=lambda sim: {"CLOUDSTACK_SECRET": "wrong-secret"}),
    Case("kube-wrong-token", WORKERS, ("401", "Unauthorized"),
         env=lambda sim: {"K8S_AUTH_KUBECONFIG": _kubeconfig_variant(sim, "wrong-token", _wrong_token)}),
    Case("cloudstack-unreachable", WORKERS, ("127.0.0.1",),
         env=lambda sim: {"CLOUDSTACK_ENDPOINT": f"http://127.0.0.1:{_closed_port()}/client/api"}),
    Case("kube-unreachable", WORKERS, ("127.0.0.1",),
         env=lambda sim: {"K8S_AUTH_KUBECONFIG": _kubeconfig_variant(sim, "unreachable", _unreachable_kube)}),
    Case("kube-wrong-ca", WORKERS, ("certificate verify failed",), env=_other_ca),
    # batch options are validated by the plan entry point too, before the lock is taken
    Case("batch-timeout-text", dict(WORKERS, rollout_batch_timeout="soon"), ("rollout_batch_timeout", "float")),
]


def _duplicate(sim: Any) -> None:
    """A second offering and a second affinity group with an existing name, as another admin may create."""
    cloud = sim.server.sim.cloud
    with sim.server.sim.lock:
        twin = next(o for o in cloud.service_offerings.values() if o.name == "cks-twin")
        copy = dataclasses.replace(twin, id=str(uuid.UUID(int=1)))
        cloud.service_offerings[copy.id] = copy
        group = next(g for g in cloud.affinity_groups.values() if g.name == "twin-group")
        other = dataclasses.replace(group, id=str(uuid.UUID(int=2)), type="non-strict host anti-affinity")
        cloud.affinity_groups[other.id] = other


@pytest.fixture(scope="module")
def bad_input_sim(module_rollout_sim: Any) -> Any:
    sim = module_rollout_sim(SPEC, etcd=False)
    _duplicate(sim)
    return sim


def world(sim: Any) -> str:
    state = {k: v for k, v in sim.state().items() if k not in ("time", "faults")}
    kube_objects = {}
    for kind, lister in (("configmaps", sim.kube.get_configmap), ("leases", sim.kube.get_lease)):
        kube_objects[kind] = lister("kube-system", "cloudstack-cks-rollout")
    return json.dumps({"state": state, "kube-system": kube_objects}, sort_keys=True)


def _free_lock(sim: Any) -> Optional[str]:
    """Give back a lock a failed case left held (so the next case starts clean); its holder."""
    from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import Lock

    info = Lock(sim.kube).read()
    if info is None or not info.held:
        return None
    Lock(sim.kube, info.holder).release()
    return info.holder


@pytest.mark.parametrize("case", [
    pytest.param(c, id=c.id, marks=[pytest.mark.xfail(strict=True, raises=LockLeftHeld, reason=c.bug)] if c.bug else [])
    for c in CASES])
def test_bad_input_fails_clearly_and_changes_nothing(bad_input_sim: Any, case: Case) -> None:
    sim = bad_input_sim
    undo = case.setup(sim) if case.setup else None
    try:
        before = world(sim)
        since = sim.admin("GET", "/state")["time"]
        run = sim.rollout(env=case.env(sim), **case.variables)
        after = world(sim)
        calls = sim.admin("GET", f"/calls?since={since}")
    finally:
        if undo is not None:
            undo()
        left = _free_lock(sim)
    if left is not None:
        raise LockLeftHeld(f"the lock was left held by {left!r}")
    assert run.rc != 0, run.output
    failure = run.stdout + run.stderr
    for text in case.expect:
        assert text in failure, f"{text!r} not in the failure:\n{run.output}"
    calls = calls.get("calls", calls) if isinstance(calls, dict) else calls
    mutating = [c for c in calls if (c.get("api") == "cloudstack" and not str(c.get("command", "")).lower()
                                     .startswith(READ_ONLY_PREFIXES))
                or (c.get("api") == "kubernetes" and c.get("verb") in MUTATING_KUBE_VERBS)]
    assert mutating == [], mutating
    assert after == before
