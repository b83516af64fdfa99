"""One way to run cks-sim for everything that needs one: the test suites, chaos, bench, the demo and
Molecule's create/destroy.

    from cks_sim.harness import InProcessSim, SimHandle, SimProcess, admin, wait_until

    with SimProcess.start(SMALL_SPEC, state_dir, "--time-scale", "0.01") as sim:   # cks-sim serve
        sim.env["admin_url"]                    # env.json as a dict, whatever keys the sim writes
        wait_until(lambda: admin(sim.env, "GET", "/state")["cloud"], 20, "the cloud")

    sim = InProcessSim.start(raw_spec, state_dir, etcd=True)                       # SimServer here
    ...
    sim.stop()

A subprocess runs in a session of its own, so a test run's Ctrl-C is not the sim's to see, and a sim
that hangs in its shutdown can be killed with everything it started in that group. Its stdout and
stderr go to one log, whose end is the message of the ``SimStartError`` when the sim dies before it
is ready.

``python -m cks_sim.harness start|stop`` (cwd tests/sim) does the same from a playbook: ``start``
returns once the sim is ready and leaves it running, its pid in a file; ``stop`` ends it.

``SimHandle`` is how a test talks to a running sim, whichever way it was started: the admin API
(``admin``, ``fault``, ``action``, the journals, ``state``), a ``cs`` client, the VMs and offerings.
The integration tests' one handle (``helpers.ClusterSim``, started by ``helpers.start_sim``) builds on it.

Only the standard library is imported here (``SimServer`` lazily, for in-process sims, and ``cs`` only
when a handle makes a client), so the chaos runner, the benchmarks and the demo import it without the
simulator's dependencies loaded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, TypeVar

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .server import SimServer

SIM_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CKS_SIM = os.path.join(SIM_DIR, "cks-sim")
EXAMPLES = os.path.join(SIM_DIR, "examples")
SMALL_SPEC = os.path.join(EXAMPLES, "small.yml")
ENV_FILE = "env.json"
LOG_FILE = "cks-sim.log"
# How much of the sim's log a start error quotes: a traceback fits, a long run's log does not.
LOG_TAIL_CHARS = 6000

Process = TypeVar("Process", bound="SimProcess")


class SimStartError(RuntimeError):
    """cks-sim exited, or did not get ready in time, before it wrote env.json."""


class WaitTimeout(AssertionError):
    """What a test waited for did not happen in time (an AssertionError, so pytest shows it as a failure)."""


def wait_until(predicate: Callable[[], Any], timeout: float = 20.0, what: Optional[str] = None,
               interval: float = 0.02) -> Any:
    """Call ``predicate`` every ``interval`` seconds until it returns something truthy and return that.

    The timeout bounds a hang; it is no assertion on speed. The message names ``what`` (or the
    predicate) and the last value seen, so a failed wait says how far things got. The default interval
    sees a state the sim (at time_scale 0.01) holds for two simulated seconds; a wait that reads a lot
    (GET /state, etcd health) polls slower and leaves the CPU to the sim.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise WaitTimeout(f"timed out after {timeout}s waiting for {what or _describe(predicate)}"
                              f" (last seen: {_short(value)})")
        time.sleep(interval)


def _describe(predicate: Callable[[], Any]) -> str:
    code = getattr(predicate, "__code__", None)
    name = getattr(predicate, "__qualname__", repr(predicate))
    return f"{name} ({code.co_filename}:{code.co_firstlineno})" if code else name


def _short(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def env_path(state_dir: str) -> str:
    return os.path.join(state_dir, ENV_FILE)


def read_env(state_dir: str) -> dict[str, Any]:
    """env.json of a sim that is ready (FileNotFoundError while it is not)."""
    with open(env_path(state_dir), encoding="utf-8") as handle:
        env: dict[str, Any] = json.load(handle)
    return env


def admin(env: dict[str, Any], method: str, path: str, body: Any = None, timeout: float = 30.0) -> Any:
    """One request to the sim's admin API; the answer's JSON (None for an empty answer).

    An error status raises ``urllib.error.HTTPError``.
    """
    request = urllib.request.Request(env["admin_url"].rstrip("/") + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        raw = answer.read()
    return json.loads(raw) if raw else None


def _log_tail(path: str, limit: int = LOG_TAIL_CHARS) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError as exc:
        return f"(no log: {exc})"
    return text if len(text) <= limit else "...\n" + text[-limit:]


class SimProcess:
    """``tests/sim/cks-sim serve`` as a child process, ready (env.json read) once ``start`` returns."""

    def __init__(self, proc: subprocess.Popen, state_dir: str, env: dict[str, Any], log_path: str,
                 startup_seconds: float) -> None:
        self.proc = proc
        self.state_dir = state_dir
        self.env = env
        self.log_path = log_path
        self.startup_seconds = startup_seconds

    @classmethod
    def start(cls: type[Process], spec_path: str, state_dir: str, *args: str, ready_timeout: float = 120.0,
              log_path: Optional[str] = None, python: str = sys.executable) -> Process:
        """Start the sim on ``spec_path`` with more ``cks-sim serve`` arguments ``args``.

        Raises ``SimStartError`` (with the end of its log) if it exits or is not ready within
        ``ready_timeout`` seconds; a sim that is not ready in time is stopped first.
        """
        state_dir = os.path.abspath(state_dir)
        os.makedirs(state_dir, exist_ok=True)
        # One left by an earlier run would look ready before the new sim has even started.
        with contextlib.suppress(FileNotFoundError):
            os.remove(env_path(state_dir))
        log_path = log_path or os.path.join(state_dir, LOG_FILE)
        command = [python, CKS_SIM, "serve", "--spec", spec_path, "--state-dir", state_dir, *args]
        started = time.monotonic()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,  # pylint: disable=consider-using-with
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        handle = cls(proc, state_dir, {}, log_path, 0.0)
        try:
            handle.env = handle._wait_ready(started + ready_timeout, ready_timeout)
        except BaseException:
            handle.stop(timeout=10)
            raise
        handle.startup_seconds = time.monotonic() - started
        return handle

    def _wait_ready(self, deadline: float, ready_timeout: float) -> dict[str, Any]:
        while True:
            if self.proc.poll() is not None:
                raise SimStartError(f"cks-sim exited with {self.proc.returncode} before writing "
                                    f"{env_path(self.state_dir)}; its output ({self.log_path}):\n"
                                    f"{_log_tail(self.log_path)}")
            # The sim renames env.json into place, so it parses once it is there; one that does not
            # (some other writer's) is not taken for ready.
            with contextlib.suppress(FileNotFoundError, ValueError):
                return read_env(self.state_dir)
            if time.monotonic() > deadline:
                raise SimStartError(f"cks-sim did not write {env_path(self.state_dir)} within {ready_timeout}s; "
                                    f"its output ({self.log_path}):\n{_log_tail(self.log_path)}")
            time.sleep(0.05)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        """The end of the sim's stdout and stderr."""
        return _log_tail(self.log_path)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (the sim stops its servers and etcd members, removes env.json and exits 0); its
        process group is killed only if it has not exited within ``timeout``. Its exit code."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                return self.proc.wait(10)
        return self.proc.returncode

    def __enter__(self: Process) -> Process:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class InProcessSim:
    """The sim's ``SimServer`` in this process (its objects at hand), ready once ``start`` returns."""

    def __init__(self, server: SimServer) -> None:
        self.server = server
        self.sim = server.sim
        self.state_dir: str = server.state_dir
        self.env: dict[str, Any] = server.env

    @classmethod
    def start(cls, raw_spec: dict[str, Any], state_dir: str, etcd: bool = True, kube: Optional[str] = None) -> InProcessSim:
        """``raw_spec`` as a spec file holds it (normalised here); ``etcd``: real etcd members; ``kube``:
        "memory" (cks-sim's own Kubernetes API) or "real" (a real control plane); by default the
        CKS_SIM_KUBE environment variable's, else "memory"."""
        from .server import SimServer  # pylint: disable=import-outside-toplevel
        from .spec import normalize  # pylint: disable=import-outside-toplevel

        server = SimServer(normalize(raw_spec), state_dir, with_etcd=etcd,
                           kube=kube or os.environ.get("CKS_SIM_KUBE") or "memory")
        server.start()
        return cls(server)

    def stop(self) -> None:
        self.server.stop()

    def __enter__(self) -> InProcessSim:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def etcd_options(env: dict[str, Any]) -> dict[str, Any]:
    """The modules' etcd options for a sim's first cluster (its env.json): its members' endpoints when
    it has some, and the client certificate of a stacked control plane's etcd."""
    etcd = env.get("etcd") or {}
    options: dict[str, Any] = {}
    if etcd.get("members"):
        options["etcd_endpoints"] = [m["client_url"] for m in etcd["members"]]
    if etcd.get("mode") == "stacked":
        options.update(etcd_ca_cert=etcd["ca_cert"], etcd_client_cert=etcd["client_cert"],
                       etcd_client_key=etcd["client_key"])
    return options


# -- talking to a running sim ---------------------------------------------------------------------------

# VM names by node type, as CKS names them.
NODE_NAME_MARKERS = {"control": "-control-", "worker": "-node-", "etcd": "-etcd-"}


class SimHandle:
    """A running cks-sim and the ways a test talks to it: ``env`` (env.json as a dict) and, for a sim
    in this process, ``server`` (``SimServer``) and ``sim`` (its ``Sim``)."""

    def __init__(self, env: dict[str, Any], server: Optional[SimServer] = None) -> None:
        self.env = env
        self.server = server
        self.sim = server.sim if server is not None else None

    # -- the admin API --------------------------------------------------------------------------------

    def admin(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> Any:
        """One admin API request (``admin``): the answer's JSON; an error status raises HTTPError."""
        return admin(self.env, method, path, body, timeout)

    def fault(self, **fault: Any) -> Any:
        return self.admin("POST", "/faults", fault)

    def clear_faults(self) -> Any:
        return self.admin("DELETE", "/faults")

    def action(self, **body: Any) -> Any:
        return self.admin("POST", "/actions", body)

    def state(self) -> dict[str, Any]:
        """GET /state: the whole simulated world (``time`` is the sim's clock)."""
        state: dict[str, Any] = self.admin("GET", "/state")
        return state

    def _journal(self, path: str, key: str, since: Optional[float]) -> list[dict[str, Any]]:
        answer = self.admin("GET", path if since is None else f"{path}?since={since}")
        items: list[dict[str, Any]] = answer.get(key, []) if isinstance(answer, dict) else answer
        return items

    def timeline(self, since: Optional[float] = None) -> list[dict[str, Any]]:
        return self._journal("/timeline", "timeline", since)

    def calls(self, since: Optional[float] = None) -> list[dict[str, Any]]:
        return self._journal("/calls", "calls", since)

    def invariants(self, since: Optional[float] = None) -> list[dict[str, Any]]:
        return self._journal("/invariants", "violations", since)

    # -- the CloudStack API, through a real ``cs`` client ---------------------------------------------

    def cs(self, **kwargs: Any) -> Any:
        """A ``cs.CloudStack`` client for this sim (fast job polling); ``kwargs`` override its options."""
        from cs import CloudStack  # pylint: disable=import-outside-toplevel

        options = {"endpoint": self.env["cloudstack_endpoint"], "key": self.env["cloudstack_key"],
                   "secret": self.env["cloudstack_secret"], "poll_interval": 0.02, "job_timeout": 30}
        options.update(kwargs)
        return CloudStack(**options)

    def cks_cluster(self, cluster_id: Optional[str] = None) -> dict[str, Any]:
        """listKubernetesClusters' answer for a cluster (the first one by default)."""
        answer = self.cs().listKubernetesClusters(id=cluster_id or self.env["cluster_id"])
        found: dict[str, Any] = answer["kubernetescluster"][0]
        return found

    def vms(self, **filters: Any) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.cs().listVirtualMachines(fetch_list=True, **filters)
        return found

    def vm(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.cs().listVirtualMachines(name=name)["virtualmachine"][0]
        return found

    def node_vms(self, node_type: str) -> list[dict[str, Any]]:
        marker = NODE_NAME_MARKERS[node_type]
        return [vm for vm in self.vms() if marker in vm["name"]]

    def offering(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.cs().listServiceOfferings(name=name)["serviceoffering"][0]
        return found

    def group(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.cs().listAffinityGroups(name=name)["affinitygroup"][0]
        return found


# -- from a playbook: start and leave running, stop by pid file --------------------------------------

def _pid_of_sim(pid_file: str, state_dir: str) -> Optional[int]:
    """The pid in ``pid_file`` if that process is still the cks-sim serving ``state_dir``: a pid
    reused by some other process since must never be signalled."""
    try:
        with open(pid_file, encoding="utf-8") as handle:
            pid = int(handle.read().strip())
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().split(b"\0")
    except (OSError, ValueError):
        return None
    wanted = os.path.abspath(state_dir).encode()
    return pid if any(arg.endswith(b"cks-sim") for arg in argv) and wanted in argv else None


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def stop_detached(pid_file: str, state_dir: str, timeout: float = 30.0) -> str:
    """Stop a sim ``start --pid-file`` left running; what happened, in words."""
    pid = _pid_of_sim(pid_file, state_dir)
    with contextlib.suppress(FileNotFoundError):
        os.remove(pid_file)
    if pid is None:
        return "no cks-sim running for this state dir"
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if not _alive(pid):
        return f"cks-sim {pid} stopped"
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    return f"cks-sim {pid} killed: it had not stopped within {timeout}s"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m cks_sim.harness", allow_abbrev=False,
                                     description="Start cks-sim for a playbook and leave it running, or stop it.",
                                     epilog="start passes any other arguments on to cks-sim serve")
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", allow_abbrev=False, help="start cks-sim, wait until it is ready, leave it running")
    start.add_argument("--spec", required=True)
    start.add_argument("--state-dir", required=True)
    start.add_argument("--pid-file", required=True)
    start.add_argument("--log", help=f"its stdout and stderr (default STATE_DIR/{LOG_FILE})")
    start.add_argument("--ready-timeout", type=float, default=120.0)
    stop = sub.add_parser("stop", allow_abbrev=False, help="stop the cks-sim that start left running")
    stop.add_argument("--state-dir", required=True)
    stop.add_argument("--pid-file", required=True)
    stop.add_argument("--timeout", type=float, default=30.0)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args, serve_args = _parser().parse_known_args(argv)
    if args.command == "stop":
        if serve_args:
            print(f"cks_sim.harness stop: unknown arguments {serve_args}", file=sys.stderr)
            return 2
        print(stop_detached(args.pid_file, args.state_dir, args.timeout))
        return 0
    try:
        sim = SimProcess.start(args.spec, args.state_dir, *serve_args, ready_timeout=args.ready_timeout,
                               log_path=args.log)
    except SimStartError as exc:
        print(exc, file=sys.stderr)
        return 1
    with open(args.pid_file, "w", encoding="utf-8") as handle:
        handle.write(f"{sim.pid}\n")
    print(f"cks-sim {sim.pid} ready: {env_path(sim.state_dir)}")
    # Leaving without stop() is the point: the sim (its own session) outlives this command.
    return 0


if __name__ == "__main__":
    sys.exit(main())
