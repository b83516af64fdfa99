"""The simulator harness (cks_sim.harness) that the tests, chaos, bench, the demo and Molecule start
and stop cks-sim with: ready means env.json read, stopped means env.json gone and nothing listening,
a sim that dies or hangs before it is ready is an error carrying its own output, and a wait that
times out says what it waited for."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from cks_sim import harness
from cks_sim.harness import InProcessSim, SimProcess, SimStartError, WaitTimeout, wait_until
from simkit import SIM_DIR, SMALL_SPEC, small_spec

FAST = ("--no-etcd", "--time-scale", "0.01")


def _listening(url: str) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname, parsed.port), timeout=1):
            return True
    except OSError:
        return False


def _bad_spec(tmp_path: Any) -> str:
    path = tmp_path / "bad.yml"
    path.write_text(yaml.safe_dump({"clusters": [{"name": "x", "offering": "nope"}],
                                    "service_offerings": [{"name": "a", "cpu": 2, "memory": 2048}]}))
    return str(path)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


# -- a subprocess ---------------------------------------------------------------------------------

def test_a_subprocess_is_ready_with_env_json_and_stops_without_it(tmp_path: Any) -> None:
    state_dir = str(tmp_path / "state")
    sim = SimProcess.start(SMALL_SPEC, state_dir, *FAST)
    try:
        # Ready: env.json is there and is what the handle holds, and the APIs it names answer.
        assert sim.env == harness.read_env(state_dir)
        assert sim.env["state_dir"] == state_dir and sim.startup_seconds > 0
        assert harness.admin(sim.env, "GET", "/state")["cloud"]["clusters"][0]["name"] == "demo"
        assert sim.proc.poll() is None
    finally:
        rc = sim.stop()
    assert rc == 0, sim.log()
    assert not os.path.exists(harness.env_path(state_dir))
    assert not _listening(sim.env["admin_url"]) and not _listening(sim.env["cloudstack_endpoint"])
    assert "cks-sim: stopped" in sim.log()
    assert sim.stop() == 0  # stopping a stopped sim is its exit code again, no signal


def test_an_env_json_left_by_an_earlier_run_is_not_taken_for_ready(tmp_path: Any) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    (state_dir / "env.json").write_text(json.dumps({"admin_url": "http://127.0.0.1:9", "stale": True}))
    with SimProcess.start(SMALL_SPEC, str(state_dir), *FAST) as sim:
        assert "stale" not in sim.env and sim.env["admin_url"] != "http://127.0.0.1:9"
        assert harness.admin(sim.env, "GET", "/faults") == []


def test_a_sim_that_dies_before_it_is_ready_is_reported_with_its_stderr(tmp_path: Any) -> None:
    state_dir = str(tmp_path / "state")
    with pytest.raises(SimStartError) as failure:
        SimProcess.start(_bad_spec(tmp_path), state_dir, ready_timeout=60)
    message = str(failure.value)
    # The sim's exit code and its own words (stderr) about what to change in the spec.
    assert "cks-sim exited with 2 before writing" in message
    assert "cks-sim: bad spec:" in message and "clusters[0].offering" in message and "nope" in message
    assert os.path.join(state_dir, harness.LOG_FILE) in message


def test_a_sim_not_ready_in_time_is_an_error_and_is_stopped(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def recording_popen(*args: Any, **kwargs: Any) -> subprocess.Popen:
        proc = real_popen(*args, **kwargs)
        started.append(proc)
        return proc

    monkeypatch.setattr(harness.subprocess, "Popen", recording_popen)
    with pytest.raises(SimStartError, match=r"did not write .*env\.json within 0\.0s"):
        SimProcess.start(SMALL_SPEC, str(tmp_path / "state"), *FAST, ready_timeout=0.0)
    # Not left running behind the error.
    assert len(started) == 1 and started[0].poll() is not None


def test_the_log_goes_where_it_is_asked_to(tmp_path: Any) -> None:
    log_path = str(tmp_path / "elsewhere.log")
    with SimProcess.start(SMALL_SPEC, str(tmp_path / "state"), *FAST, log_path=log_path) as sim:
        assert sim.log_path == log_path
    with open(log_path, encoding="utf-8") as fh:
        assert "cks-sim: CloudStack http://127.0.0.1:" in fh.read()
    assert not os.path.exists(tmp_path / "state" / harness.LOG_FILE)


# -- in-process -------------------------------------------------------------------------------------

def test_an_in_process_sim_writes_env_json_and_removes_it_on_stop(tmp_path: Any) -> None:
    state_dir = str(tmp_path / "state")
    with InProcessSim.start(small_spec(), state_dir, etcd=False) as sim:
        assert sim.env == harness.read_env(state_dir) and sim.env["pid"] == os.getpid()
        assert sim.sim is sim.server.sim and sim.state_dir == state_dir
        assert _listening(sim.env["admin_url"])
    assert not os.path.exists(harness.env_path(state_dir))
    assert not _listening(sim.env["admin_url"])


# -- the admin API ------------------------------------------------------------------------------------

def test_admin_raises_on_an_error_status(sim: Any) -> None:
    with pytest.raises(urllib.error.HTTPError) as failure:
        harness.admin(sim.env, "POST", "/faults", {"kind": "no-such-fault"})
    assert failure.value.code == 400
    fault = harness.admin(sim.env, "POST", "/faults", {"kind": "latency", "api": "kubernetes", "seconds": 0})
    assert harness.admin(sim.env, "GET", "/faults") == [fault]


# -- wait_until ---------------------------------------------------------------------------------------

def test_wait_until_returns_the_first_truthy_value() -> None:
    answers = iter([None, [], 0, ["ready"], ["later"]])
    assert wait_until(lambda: next(answers), timeout=5, interval=0.001) == ["ready"]
    assert next(answers) == ["later"]  # not called again once it held


def test_wait_until_says_what_it_waited_for_and_what_it_saw_last() -> None:
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as failure:
        wait_until(lambda: [], timeout=0.2, what="batch 1 to start", interval=0.01)
    assert time.monotonic() - started >= 0.2
    assert str(failure.value) == "timed out after 0.2s waiting for batch 1 to start (last seen: [])"
    assert isinstance(failure.value, AssertionError)  # pytest reports it as a failed assertion


def test_wait_until_names_the_predicate_when_told_nothing() -> None:
    def cluster_is_running() -> bool:
        return False

    with pytest.raises(WaitTimeout, match=r"waiting for .*cluster_is_running \(.*test_harness\.py:\d+\) "
                                          r"\(last seen: False\)"):
        wait_until(cluster_is_running, timeout=0.05, interval=0.01)


def test_wait_until_cuts_a_long_last_value_short() -> None:
    class NotYet:
        """A falsy answer whose repr is long (a whole API response, say)."""

        def __bool__(self) -> bool:
            return False

        def __repr__(self) -> str:
            return "x" * 1000

    with pytest.raises(WaitTimeout) as failure:
        wait_until(NotYet, timeout=0.01, what="w", interval=0.005)
    assert str(failure.value) == f"timed out after 0.01s waiting for w (last seen: {'x' * 200}...)"


# -- from a playbook (Molecule's create and destroy) -------------------------------------------------

def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cks_sim.harness", *args], cwd=SIM_DIR, capture_output=True,
                          text=True, timeout=120, check=False)


def test_the_cli_starts_a_sim_that_outlives_it_and_stops_it_by_its_pid_file(tmp_path: Any) -> None:
    state_dir, pid_file = str(tmp_path / "sim"), str(tmp_path / "sim.pid")
    started = _cli("start", "--spec", SMALL_SPEC, "--state-dir", state_dir, "--pid-file", pid_file, *FAST)
    assert started.returncode == 0, started.stderr
    with open(pid_file, encoding="utf-8") as fh:
        pid = int(fh.read())
    try:
        env = harness.read_env(state_dir)
        assert env["pid"] == pid and not _gone(pid)
        assert harness.admin(env, "GET", "/state")["cloud"]["clusters"][0]["name"] == "demo"
        assert "ready" in started.stdout and harness.env_path(state_dir) in started.stdout
    finally:
        stopped = _cli("stop", "--state-dir", state_dir, "--pid-file", pid_file)
    assert stopped.returncode == 0 and stopped.stdout.strip() == f"cks-sim {pid} stopped", stopped
    assert _gone(pid) and not os.path.exists(harness.env_path(state_dir)) and not os.path.exists(pid_file)
    assert not _listening(env["admin_url"])
    again = _cli("stop", "--state-dir", state_dir, "--pid-file", pid_file)
    assert again.returncode == 0 and again.stdout.strip() == "no cks-sim running for this state dir"


def test_the_cli_never_signals_a_pid_that_is_not_this_state_dirs_sim(tmp_path: Any) -> None:
    # A pid file naming some other process (here a sleeper we own) - as after a reboot reused the pid.
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        pid_file = tmp_path / "sim.pid"
        pid_file.write_text(f"{sleeper.pid}\n")
        stopped = _cli("stop", "--state-dir", str(tmp_path / "sim"), "--pid-file", str(pid_file))
        assert stopped.stdout.strip() == "no cks-sim running for this state dir", stopped
        assert sleeper.poll() is None and not pid_file.exists()
    finally:
        sleeper.kill()
        sleeper.wait(10)


def test_the_cli_reports_a_sim_that_died_and_leaves_no_pid_file(tmp_path: Any) -> None:
    pid_file = tmp_path / "sim.pid"
    started = _cli("start", "--spec", _bad_spec(tmp_path), "--state-dir", str(tmp_path / "sim"),
                   "--pid-file", str(pid_file))
    assert started.returncode == 1
    assert "cks-sim exited with 2" in started.stderr and "clusters[0].offering" in started.stderr
    assert not pid_file.exists()
