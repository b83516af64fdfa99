"""The execution environment definition (extensions/awx/execution-environment.yml) turns into a
build context with `ansible-builder create` (no image is built: that needs a container engine and
registries), and that context installs what the collection and its tests need: the collection's
own requirements.txt and bindep.txt, and the ansible-core and ansible-runner the tests run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
DEFINITION = ROOT / "extensions" / "awx" / "execution-environment.yml"
BUILDER = Path(sys.executable).parent / "ansible-builder"


def _pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            out[req.name.lower()] = str(req.specifier)
    return out


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not BUILDER.exists():
        pytest.fail(f"{BUILDER} is missing: requirements-test.txt pins ansible-builder; run make setup")
    out = tmp_path_factory.mktemp("ee") / "context"
    proc = subprocess.run([str(BUILDER), "create", "-f", str(DEFINITION), "-c", str(out), "--output-filename",
                           "Containerfile"], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_the_definition_is_ansible_builder_version_3() -> None:
    assert yaml.safe_load(DEFINITION.read_text(encoding="utf-8"))["version"] == 3


def test_the_context_carries_the_collections_python_and_system_requirements(context: Path) -> None:
    build = context / "_build"
    assert (build / "requirements.txt").read_text(encoding="utf-8") == (ROOT / "requirements.txt").read_text(encoding="utf-8")
    assert (build / "bindep.txt").read_text(encoding="utf-8") == (ROOT / "bindep.txt").read_text(encoding="utf-8")
    galaxy = yaml.safe_load((build / "requirements.yml").read_text(encoding="utf-8"))
    assert [c["name"] for c in galaxy["collections"]] == ["cloudstack.cks"]


def test_the_image_gets_the_ansible_core_and_runner_the_tests_run(context: Path) -> None:
    containerfile = (context / "Containerfile").read_text(encoding="utf-8")
    tested = _pins(ROOT / "requirements-test.txt")
    assert f'ANSIBLE_INSTALL_REFS="ansible-core{tested["ansible-core"]} ansible-runner{tested["ansible-runner"]}"' in containerfile
    # A Python that ansible-core supports on the controller (the matrix's 2.19 cell runs 3.11).
    assert 'ARG PYCMD="/usr/bin/python3.11"' in containerfile


def test_bindep_installs_nothing_for_the_modules() -> None:
    # Every bindep entry is for tests only: an execution environment needs no system package.
    entries = [line for line in (ROOT / "bindep.txt").read_text(encoding="utf-8").splitlines()
               if line.strip() and not line.startswith("#")]
    assert entries and all("test" in line.split("[", 1)[1] for line in entries), entries
