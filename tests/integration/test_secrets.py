"""Secrets and trust: nothing secret leaks, TLS is verified by default, kubeconfig files stay private.

The secrets are read from the simulator itself: the CloudStack API secret (env.json) and the
kubeconfig's bearer token, client key and client certificate (the kubeconfig file, the same one
getKubernetesClusterConfig hands out). None of them may appear in ansible-playbook's output at
``-vvv`` with ``ANSIBLE_DEBUG=1``, in the report, in the rollout record (the ConfigMap, read
through the Kubernetes API and via GET /state) or in the simulator's log of what the clients sent
(``/calls``: parameters as received, the signature and api key stripped by the sim itself).
"""

from __future__ import annotations

import base64
import glob
import json
import os
import re
import stat
import threading
from typing import Any

import yaml

from helpers import run_module

SPEC = "faults_small.yml"


def secrets_of(sim: Any) -> dict[str, str]:
    with open(sim.env["kubeconfig"], encoding="utf-8") as fh:
        user = yaml.safe_load(fh)["users"][0]["user"]
    key_pem = base64.b64decode(user["client-key-data"]).decode()
    key_body = "".join(line for line in key_pem.splitlines() if not line.startswith("-----"))
    secrets = {
        "api secret": sim.env["cloudstack_secret"],
        "kube token": user["token"],
        "client key (base64 of the PEM)": user["client-key-data"],
        # Any 48 characters of the key itself, wherever a line break falls in a copy.
        "client key (PEM body)": key_body[16:64],
        "client key (PEM body, end)": key_body[-64:-16],
        "client certificate (base64)": user["client-certificate-data"][100:160],
    }
    assert all(len(v) >= 16 for v in secrets.values()), "a secret too short to search for"
    return secrets


class KubeconfigDirWatcher:
    """Polls TMPDIR for the collection's private kubeconfig directories while a run goes on."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.seen: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            for folder in glob.glob(os.path.join(self.root, "cks-kubeconfig-*")):
                for path in [folder] + glob.glob(os.path.join(folder, "*")):
                    try:
                        self.seen.setdefault(path, stat.S_IMODE(os.stat(path).st_mode))
                    except FileNotFoundError:
                        pass
            self._stop.wait(0.002)

    def __enter__(self) -> "KubeconfigDirWatcher":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(5)


def test_no_secret_in_output_report_record_or_calls_at_vvv_with_debug(rollout_sim: Any, tmp_path: Any) -> None:
    sim = rollout_sim(SPEC, etcd=False)
    secrets = secrets_of(sim)
    watched = tmp_path / "tmp"
    watched.mkdir()
    # No K8S_AUTH_KUBECONFIG: every module fetches the kubeconfig with getKubernetesClusterConfig,
    # so it holds the admin credentials in memory and writes its certificates to a private dir.
    with KubeconfigDirWatcher(str(watched)) as watcher:
        run = sim.rollout(args=("-vvv",), env={"ANSIBLE_DEBUG": "1", "TMPDIR": str(watched)},
                          drop_env=("K8S_AUTH_KUBECONFIG",),
                          rollout_node_offerings={"worker": "cks-large"}, rollout_max_unavailable=2)
    assert run.rc == 0, run.output
    sim.assert_converged()
    assert "getKubernetesClusterConfig" in [c.get("command") for c in sim.calls()]
    # -vvv and ANSIBLE_DEBUG really were on (the output would show a secret if anything printed one).
    output = run.stdout + run.stderr
    # -vvv: each module's result shows its invocation, every option given (the modules run in the
    # controller's worker, so no connection is established to show instead).
    assert '"module_args"' in output
    assert re.search(r"^ *\d+ \d+\.\d+: ", output, re.MULTILINE)  # ANSIBLE_DEBUG's "<pid> <time>: ..." lines
    assert len(output) > 100_000

    with open(os.path.join(sim.work_dir, f"report-{sim.runs}.json"), encoding="utf-8") as fh:
        report_text = fh.read()
    record = sim.kube.get_configmap("kube-system", "cloudstack-cks-rollout")
    assert record is not None
    places = {
        "stdout": run.stdout,
        "stderr": run.stderr,
        "report": report_text,
        "record (kube API)": json.dumps(record),
        "state (GET /state)": json.dumps(sim.state()),
        "calls (GET /calls)": json.dumps(sim.admin("GET", "/calls")),
    }
    leaks = {(what, place) for place, text in places.items() for what, secret in secrets.items() if secret in text}
    assert leaks == set(), sorted(leaks)

    # The private kubeconfig files: a 0700 directory with 0600 files, all removed afterwards.
    files = {p: m for p, m in watcher.seen.items() if not os.path.basename(p).startswith("cks-kubeconfig-")}
    folders = {p: m for p, m in watcher.seen.items() if p not in files}
    assert files, "no kubeconfig file was seen: the watcher proves nothing"
    assert set(folders.values()) == {0o700}, folders
    assert set(files.values()) == {0o600}, files
    assert glob.glob(str(watched / "cks-kubeconfig-*")) == []


def _module_env(sim: Any, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in sim.ansible_env().items() if k.startswith(("CLOUDSTACK_", "K8S_AUTH_"))}
    env.update(extra)
    return env


def test_tls_verified_by_default_and_a_wrong_ca_fails_closed(rollout_sim: Any, tmp_path: Any) -> None:
    from cks_sim.tls import make_tls

    sim = rollout_sim(SPEC, etcd=False)
    before = json.dumps({k: v for k, v in sim.state().items() if k != "time"}, sort_keys=True)
    args = {"cluster": sim.env["cluster_name"]}

    # Kubernetes, a CA that did not sign the API server's certificate.
    other = make_tls(str(tmp_path / "other"))
    result = run_module("cks_node_outdated", args, env=_module_env(sim, K8S_AUTH_SSL_CA_CERT=other["ca_cert"]))
    assert result["failed"] and "CERTIFICATE_VERIFY_FAILED" in result["msg"].upper(), result["msg"]

    # Kubernetes, no CA at all (the kubeconfig's inline CA removed): the system CAs do not know
    # the sim's CA, so it fails too: no silent fallback to not verifying.
    with open(sim.env["kubeconfig"], encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    del config["clusters"][0]["cluster"]["certificate-authority-data"]
    no_ca = tmp_path / "no-ca.yaml"
    no_ca.write_text(yaml.safe_dump(config))
    env = _module_env(sim, K8S_AUTH_KUBECONFIG=str(no_ca))
    env.pop("K8S_AUTH_SSL_CA_CERT")
    result = run_module("cks_node_outdated", args, env=env)
    assert result["failed"] and "CERTIFICATE_VERIFY_FAILED" in result["msg"].upper(), result["msg"]

    # CloudStack, over HTTPS to a server whose certificate the system CAs do not trust (the sim's
    # Kubernetes port: any TLS server will do, the handshake fails before any request).
    https = sim.env["kube_url"] + "/client/api"
    result = run_module("cks_node_outdated", args, env=_module_env(sim, CLOUDSTACK_ENDPOINT=https))
    assert result["failed"] and "CERTIFICATE_VERIFY_FAILED" in result["msg"].upper(), result["msg"]
    assert sim.env["cloudstack_secret"] not in result["msg"]

    after = json.dumps({k: v for k, v in sim.state().items() if k != "time"}, sort_keys=True)
    assert after == before
