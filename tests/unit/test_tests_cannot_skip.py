# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""`make test` cannot pass by skipping (issue 33): a missing etcd, etcdctl, kubectl or Chromium fails
it naming what to install (cks_sim/tools.py), a suite that collects nothing fails, and the skips a
suite saw are printed (the Makefile's pytest macro)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from cks_sim import tools

ROOT = Path(__file__).resolve().parents[2]


def executable(folder: Path, name: str) -> Path:
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def bare_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH with nothing on it but what a test puts there, and no program named by variable."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    for variable in ("CKS_SIM_ETCD", "CKS_SIM_ETCDCTL", tools.STRICT_ENV, "CI"):
        monkeypatch.delenv(variable, raising=False)
    return folder


def test_etcd_anywhere_on_path_is_found_as_make_etcd_installed_accepts_it(bare_path: Path) -> None:
    assert tools.binary("etcd") is None
    found = executable(bare_path, "etcd")
    assert tools.binary("etcd") == str(found)
    assert tools.default_binary("etcd") == str(found)


def test_the_sims_variable_names_the_program_first(bare_path: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    executable(bare_path, "etcd")
    elsewhere = executable(tmp_path, "etcd-3.5")
    monkeypatch.setenv("CKS_SIM_ETCD", str(elsewhere))
    assert tools.binary("etcd") == str(elsewhere)
    # A variable naming nothing runnable is a missing program, not the one on PATH.
    monkeypatch.setenv("CKS_SIM_ETCD", str(tmp_path / "nowhere"))
    assert tools.binary("etcd") is None


def test_on_a_partial_machine_a_test_that_needs_a_missing_program_is_skipped_saying_what_to_install(
        bare_path: Path) -> None:
    executable(bare_path, "etcdctl")
    mark = tools.needs("etcd", "etcdctl")
    assert mark.args == (True,)
    assert mark.kwargs["reason"].startswith("etcd is not installed: install Debian's etcd-server")
    assert "etcdctl" not in mark.kwargs["reason"].split(":")[0]
    assert tools.needs("etcdctl").args == (False,)


@pytest.mark.parametrize("variable, value", [(tools.STRICT_ENV, "1"), ("CI", "true")])
def test_under_make_test_a_missing_program_fails_naming_what_to_install(bare_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                        variable: str, value: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(tools.MissingTool) as missing:
        tools.needs("etcd", "kubectl")
    text = str(missing.value)
    assert "etcd is not installed: install Debian's etcd-server" in text and "CKS_SIM_ETCD" in text
    assert "kubectl is not installed: install kubectl (apt-get install kubernetes-client" in text
    executable(bare_path, "etcd")
    executable(bare_path, "kubectl")
    assert tools.needs("etcd", "kubectl").args == (False,)


def run_macro(folder: Path) -> subprocess.CompletedProcess[str]:
    """The Makefile's pytest macro on ``folder``, as every suite of `make test` runs it."""
    probe = f"sweep-probe:; $(call pytest,$(BIN)/python,probe,{folder})"
    return subprocess.run(["make", "-s", "-C", str(ROOT), "--eval", probe, "sweep-probe"], capture_output=True,
                          text=True, timeout=120, check=False,
                          env={k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS")})


def test_a_suite_that_collects_nothing_fails(tmp_path: Path) -> None:
    empty = tmp_path / "suite"
    empty.mkdir()
    (empty / "test_nothing.py").write_text('"""No tests."""\n')
    run = run_macro(empty)
    assert run.returncode != 0, run.stdout
    assert "no tests collected" in run.stdout and "a suite that runs nothing fails" in run.stdout
    missing = run_macro(tmp_path / "gone")
    assert missing.returncode != 0 and "does not exist" in missing.stdout


def test_a_suite_prints_the_skips_it_saw(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_one.py").write_text(
        "import pytest\n\n\ndef test_runs():\n    assert True\n\n\n"
        "@pytest.mark.skip(reason='etcd is not installed')\ndef test_skipped():\n    pass\n")
    run = run_macro(suite)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SKIPPED [1]" in run.stdout and "etcd is not installed" in run.stdout
