"""Run one module of the collection through ``ansible-playbook`` and read back its result.

Shared by the integration tests: every module is exercised the way an operator runs it (a
playbook on localhost), not by importing it, so argument parsing, check mode, diff and
``fail_json`` go through ansible-core itself.

Also starts and stops cks-sim (``tests/sim/cks-sim serve``) and reads its admin API.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any, Iterator, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV = os.path.join(ROOT, ".venv")
ANSIBLE_PLAYBOOK = os.path.join(VENV, "bin", "ansible-playbook")
PYTHON = os.path.join(VENV, "bin", "python")
COLLECTIONS = os.path.join(VENV, "collections")
SIM = os.path.join(ROOT, "tests", "sim", "cks-sim")
SPECS = os.path.join(ROOT, "tests", "integration", "specs")


class ModuleRunError(AssertionError):
    """ansible-playbook itself broke (syntax, missing module), not the module under test."""


def _playbook(module_name: str, args: dict[str, Any], out_path: str) -> list[dict[str, Any]]:
    # The module's result is registered and written as JSON by a second task, which runs even
    # in check mode and after a failure: this needs no callback plugin and sees exactly what a
    # later task of a real playbook would see.
    fqcn = module_name if "." in module_name else f"cloudstack.cks.{module_name}"
    return [{
        "hosts": "localhost",
        "gather_facts": False,
        "tasks": [
            {"name": "module under test", fqcn: args, "register": "result", "ignore_errors": True},
            {
                "name": "write the result",
                "ansible.builtin.copy": {"content": "{{ result | to_json }}", "dest": out_path},
                "check_mode": False,
                "diff": False,
            },
        ],
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
            json.dump(_playbook(module_name, args, out_path), fh)
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
        })
        run_env.update(env or {})
        cmd = [ANSIBLE_PLAYBOOK, "-i", inventory, playbook]
        if check:
            cmd.append("--check")
        if diff:
            cmd.append("--diff")
        proc = subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=timeout, cwd=work)
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

class SimHandle:
    """A running cks-sim: its env.json and its admin API."""

    def __init__(self, proc: subprocess.Popen, state_dir: str, env: dict[str, Any]) -> None:
        self.proc = proc
        self.state_dir = state_dir
        self.env = env

    def admin(self, method: str, path: str, body: Optional[Any] = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.env["admin_url"].rstrip("/") + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def state(self) -> dict[str, Any]:
        return self.admin("GET", "/state")

    def calls(self, since: float = 0.0) -> list[dict[str, Any]]:
        answer = self.admin("GET", f"/calls?since={since}")
        return answer["calls"] if isinstance(answer, dict) and "calls" in answer else answer

    def action(self, **body: Any) -> Any:
        return self.admin("POST", "/actions", body)

    def fault(self, **body: Any) -> Any:
        return self.admin("POST", "/faults", body)

    def module_env(self) -> dict[str, str]:
        """Environment variables that point the collection's modules at this sim."""
        return {
            "CLOUDSTACK_ENDPOINT": self.env["cloudstack_endpoint"],
            "CLOUDSTACK_KEY": self.env["cloudstack_key"],
            "CLOUDSTACK_SECRET": self.env["cloudstack_secret"],
            "K8S_AUTH_KUBECONFIG": self.env["kubeconfig"],
        }

    def connection_args(self) -> dict[str, Any]:
        """The same as module arguments."""
        return {
            "api_url": self.env["cloudstack_endpoint"],
            "api_key": self.env["cloudstack_key"],
            "api_secret": self.env["cloudstack_secret"],
            "kubeconfig": self.env["kubeconfig"],
        }


@contextlib.contextmanager
def running_sim(spec: str, state_dir: Optional[str] = None, ready_timeout: float = 120) -> Iterator[SimHandle]:
    """Start ``cks-sim serve`` for ``spec`` (a path, or a file name under tests/integration/specs
    or tests/sim/examples) and stop it afterwards."""
    spec_path = _spec_path(spec)
    own_dir = state_dir is None
    state_dir = state_dir or tempfile.mkdtemp(prefix="cks-sim-")
    env_path = os.path.join(state_dir, "env.json")
    log = open(os.path.join(state_dir, "sim.log"), "w", encoding="utf-8")
    proc = subprocess.Popen([PYTHON, SIM, "serve", "--spec", spec_path, "--state-dir", state_dir],
                            stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
    try:
        deadline = time.monotonic() + ready_timeout
        while not os.path.exists(env_path):
            if proc.poll() is not None:
                log.flush()
                with open(log.name, encoding="utf-8") as fh:
                    raise RuntimeError(f"cks-sim exited {proc.returncode}:\n{fh.read()[-4000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"cks-sim did not write {env_path} within {ready_timeout}s")
            time.sleep(0.05)
        # env.json may be seen half-written: read until it parses.
        while True:
            try:
                with open(env_path, encoding="utf-8") as fh:
                    env = json.load(fh)
                break
            except ValueError:
                time.sleep(0.05)
        yield SimHandle(proc, state_dir, env)
    finally:
        _stop(proc, state_dir)
        log.close()
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


def _stop(proc: subprocess.Popen, state_dir: str) -> None:
    if proc.poll() is not None:
        return
    try:
        with open(os.path.join(state_dir, "env.json"), encoding="utf-8") as fh:
            admin_url = json.load(fh)["admin_url"]
        urllib.request.urlopen(urllib.request.Request(admin_url.rstrip("/") + "/shutdown", data=b"{}",
                                                      method="POST"), timeout=10).read()
        proc.wait(timeout=20)
        return
    except Exception:  # the sim is going anyway; fall through to signals
        pass
    # Only our own child (its own session): never anything by name.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


if __name__ == "__main__":  # pragma: no cover - manual use: run a module against a running sim
    print(json.dumps(run_module(sys.argv[1], json.loads(sys.argv[2])), indent=2))
