"""cks-sim driven by kubectl, as an operator would drive a real cluster.

kubectl needs what a real API server gives it: the cluster at the root of its own address
(``kubectl get --raw`` and discovery drop any path prefix), the Table form for ``get``
(printers.go columns), SelfSubjectAccessReview for ``auth can-i``, evictions that answer 429
while a PodDisruptionBudget blocks (``kubectl drain`` retries those every 5 s: drain.go
``evictPods``), and exec over websockets (kubectl >= 1.30 tries websockets first).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from typing import Any

import yaml

from cks_sim.tools import binary, needs
from cks_sim.harness import SimHandle, wait_until
from simkit import small_spec

KUBECTL = binary("kubectl")
pytestmark = needs("kubectl")


def kubectl(handle: SimHandle, *args: str, kubeconfig: str | None = None, timeout: float = 90,
            **kwargs: Any) -> subprocess.CompletedProcess:
    return subprocess.run([str(KUBECTL), "--kubeconfig", kubeconfig or handle.env["kubeconfig"], *args],
                          capture_output=True, text=True, timeout=timeout, check=False, **kwargs)


def first_worker_with(handle: SimHandle, app: str) -> str:
    pods = json.loads(kubectl(handle, "get", "pods", "-n", "default", "-l", f"app={app}", "-o", "json").stdout)
    return sorted(p["spec"]["nodeName"] for p in pods["items"])[0]


def test_get_nodes_prints_the_api_servers_columns(sim: SimHandle) -> None:
    out = kubectl(sim, "get", "nodes")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    control = next(name for name in rows if "-control-" in name)
    worker = next(name for name in rows if "-node-" in name)
    assert rows[control][1:3] == ["Ready", "control-plane"] and rows[control][4] == "v1.30.4"
    assert rows[worker][1:3] == ["Ready", "<none>"]
    wide = kubectl(sim, "get", "nodes", "-o", "wide").stdout.splitlines()[0].split()
    assert wide[5:9] == ["INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION"]


def test_get_raw_reaches_the_root_path(sim: SimHandle) -> None:
    """A path prefix in the kubeconfig is dropped by `get --raw`; the root path is where it goes."""
    out = kubectl(sim, "get", "--raw", "/readyz")
    assert out.returncode == 0 and out.stdout == "ok"
    version = json.loads(kubectl(sim, "get", "--raw", "/version").stdout)
    assert version["gitVersion"] == "v1.30.4"


def test_get_pods_in_every_namespace(sim: SimHandle) -> None:
    out = kubectl(sim, "get", "pods", "-A")
    assert out.returncode == 0, out.stderr
    header, *rows = out.stdout.splitlines()
    assert header.split() == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    etcd = [r.split() for r in rows if r.split()[1].startswith("etcd-")]
    assert len(etcd) == 3 and all(r[0] == "kube-system" and r[2:4] == ["1/1", "Running"] for r in etcd)


def test_describe_node_cordon_and_uncordon(sim: SimHandle) -> None:
    node = next(vm["name"].lower() for vm in sim.node_vms("worker"))
    described = kubectl(sim, "describe", "node", node)
    assert described.returncode == 0, described.stderr
    assert f"Name:               {node}" in described.stdout
    assert "Non-terminated Pods:" in described.stdout and "kube-proxy-" in described.stdout
    cordoned = kubectl(sim, "cordon", node)
    assert cordoned.returncode == 0 and cordoned.stdout.strip() == f"node/{node} cordoned"
    row = kubectl(sim, "get", "node", node, "--no-headers").stdout.split()
    assert row[1] == "Ready,SchedulingDisabled"
    assert kubectl(sim, "uncordon", node).stdout.strip() == f"node/{node} uncordoned"


def test_drain_retries_the_budgets_429_until_it_allows(sim: SimHandle) -> None:
    node = first_worker_with(sim, "web")
    fault = sim.admin("POST", "/faults", {"kind": "pdb_block", "namespace": "default", "name": "web"})
    lift = threading.Timer(7.0, lambda: sim.admin("DELETE", f"/faults/{fault['id']}"))
    lift.start()
    try:
        started = time.monotonic()
        out = kubectl(sim, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60s")
        took = time.monotonic() - started
    finally:
        lift.cancel()
    assert out.returncode == 0, out.stderr
    assert "Cannot evict pod as it would violate the pod's disruption budget." in out.stderr
    assert "(will retry after 5s)" in out.stderr
    assert f"node/{node} drained" in out.stdout
    assert took >= 7.0  # it waited for the budget, it did not force anything
    left = json.loads(kubectl(sim, "get", "pods", "-A", "--field-selector", f"spec.nodeName={node}",
                              "-o", "json").stdout)["items"]
    owners = {ref["kind"] for p in left for ref in p["metadata"].get("ownerReferences", [])}
    assert owners <= {"DaemonSet"}


def restricted_kubeconfig(handle: SimHandle, tmp_path: Any, token: str) -> str:
    with open(handle.env["kubeconfig"], encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    config["users"][0]["user"] = {"token": token}
    path = tmp_path / "restricted.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_auth_can_i_asks_the_sims_rbac(sim_factory: Any, tmp_path: Any) -> None:
    rules = [{"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["get", "create"], "namespace": "kube-system"},
             {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}]
    handle = sim_factory(spec=small_spec(kube={"users": [{"name": "roller", "token": "roller-t", "rules": rules}]}))
    admin = kubectl(handle, "auth", "can-i", "create", "pods", "--subresource=exec", "-n", "kube-system")
    assert admin.returncode == 0 and admin.stdout.strip() == "yes"
    cfg = restricted_kubeconfig(handle, tmp_path, "roller-t")

    def ask(*args: str) -> subprocess.CompletedProcess:
        return kubectl(handle, "auth", "can-i", *args, kubeconfig=cfg)

    yes = ask("create", "pods", "--subresource=exec", "-n", "kube-system")
    assert yes.returncode == 0 and yes.stdout.strip() == "yes"
    no = ask("create", "pods", "--subresource=exec", "-n", "default")
    assert no.returncode == 1 and no.stdout.strip() == "no"
    assert ask("patch", "nodes").stdout.strip() == "yes"
    assert ask("delete", "nodes").stdout.strip() == "no"
    # kubectl reads "pods/exec" as the pod named "exec" (can-i TYPE/NAME), as against any cluster.
    assert ask("create", "pods/exec", "-n", "kube-system").stdout.strip() == "no"


@needs("etcd", "etcdctl")
def test_exec_etcdctl_in_an_etcd_pod(sim_factory: Any) -> None:
    handle = sim_factory(etcd=True)
    pod = kubectl(handle, "get", "pods", "-n", "kube-system", "-l", "component=etcd", "-o", "name").stdout.split()[0]
    out = kubectl(handle, "exec", "-n", "kube-system", pod.split("/")[1], "--", "etcdctl",
                  "--cacert=/etc/kubernetes/pki/etcd/ca.crt", "--cert=/etc/kubernetes/pki/etcd/server.crt",
                  "--key=/etc/kubernetes/pki/etcd/server.key", "member", "list", "-w", "json")
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)["members"]) == 3


def test_get_watch_prints_a_change_as_it_happens(sim: SimHandle) -> None:
    """kubectl get -w: a list, then a Table watch (each event a one-row Table, handlers/watch.go
    transforming event objects with the list's table convertor)."""
    proc = subprocess.Popen([str(KUBECTL), "--kubeconfig", sim.env["kubeconfig"], "get", "nodes", "-w"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        world = next(iter(sim.sim.kube.values()))
        name = sorted(world.nodes)[-1]
        wait_until(lambda: len(lines) >= 1 + len(world.nodes), timeout=60)
        with sim.sim.lock:
            world.kubelets.cordon_out_of_band(name)
        wait_until(lambda: any(line.split()[:2] == [name, "Ready,SchedulingDisabled"] for line in lines[1:]),
                   timeout=30)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert lines[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert [line.split()[0] for line in lines[1:]].count(name) == 2
