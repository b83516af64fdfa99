"""The test harness exists once: every test suite talks to cks-sim through ``cks_sim.harness``, waits
with its one ``wait_until``, and fakes time with ``tests/unit/clock.py``; helpers live in plain
modules, never in conftest.py (pytest loads each folder's conftest as the module ``conftest``, so an
import of it means whichever folder's came first) nor in another test module (importing one runs
its tests' module code twice and ties two test files together).

The scan reads every Python file under tests/ with ``ast``, so code quoted in a string (as in the
samples below) is not taken for code.
"""

from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTS = os.path.join(ROOT, "tests")
# ansible-test's working folder (tests/output) holds copies, not the tests.
SKIPPED_DIRS = {"__pycache__", ".pytest_cache", "output"}

HARNESS = "tests/sim/cks_sim/harness.py"
# The unit tests' fake clock, and the simulator's own clock (part of the simulated product).
CLOCKS = {"tests/unit/clock.py", "tests/sim/cks_sim/core.py"}
WAIT_HELPERS = {"wait_until", "eventually", "wait_for"}


def violations(path: str, source: str) -> list[str]:
    """What in ``source`` (the file at ``path``, relative to the checkout, with /) breaks the harness's rules."""
    found = []
    for node in ast.walk(ast.parse(source, filename=path)):
        where = f"{path}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
        else:
            modules = []
        for module in modules:
            last = module.rsplit(".", 1)[-1]
            if last == "conftest":
                found.append(f"{where}: imports conftest (put what it needs in a plain module)")
            elif last.startswith("test_"):
                found.append(f"{where}: imports the test module {module} (move what it shares to a helper module)")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name == "admin" and path != HARNESS:
                found.append(f"{where}: defines admin() (cks_sim.harness.admin or SimHandle.admin is the one)")
            elif node.name in WAIT_HELPERS and path != HARNESS:
                found.append(f"{where}: defines the wait helper {node.name}() (cks_sim.harness.wait_until is the one)")
        if isinstance(node, ast.ClassDef) and node.name.endswith("Clock") and path not in CLOCKS:
            found.append(f"{where}: defines the clock class {node.name} (tests/unit/clock.py's FakeClock is the one)")
    return found


def python_files() -> list[str]:
    files = []
    for folder, dirs, names in os.walk(TESTS):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        files += [os.path.relpath(os.path.join(folder, name), ROOT).replace(os.sep, "/")
                  for name in sorted(names) if name.endswith(".py")]
    return files


def test_no_file_under_tests_breaks_the_harness_rules() -> None:
    files = python_files()
    assert HARNESS in files and "tests/unit/clock.py" in files and len(files) > 100, files
    found = []
    for path in files:
        with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
            found += violations(path, handle.read())
    assert found == []


# -- each rule fails on a violation (and lets the allowed through) ---------------------------------

@pytest.mark.parametrize("path, source, message", [
    ("tests/integration/test_x.py", "from conftest import ClusterSim\n", "imports conftest"),
    ("tests/integration/test_x.py", "import conftest\n", "imports conftest"),
    ("tests/integration/test_x.py", "def f():\n    from conftest import load_raw_spec\n", "imports conftest"),
    ("tests/integration/helpers.py", "def admin(env, method, path):\n    pass\n", "defines admin()"),
    ("tests/integration/test_x.py", "class Sim:\n    def admin(self, method, path):\n        pass\n", "defines admin()"),
    ("tests/sim/tests/test_x.py", "def wait_until(check, timeout=10):\n    pass\n", "defines the wait helper wait_until()"),
    ("tests/integration/test_x.py", "def eventually(check):\n    pass\n", "defines the wait helper eventually()"),
    ("tests/sim/tests/simkit.py", "class H:\n    def wait_for(self, predicate):\n        pass\n",
     "defines the wait helper wait_for()"),
    ("tests/unit/test_x.py", "class Clock:\n    pass\n", "defines the clock class Clock"),
    ("tests/unit/test_x.py", "class FakeClock:\n    pass\n", "defines the clock class FakeClock"),
    ("tests/sim/cks_sim/kube.py", "class WallClock:\n    pass\n", "defines the clock class WallClock"),
    ("tests/unit/test_x.py", "from test_record import FakeKube\n", "imports the test module test_record"),
    ("tests/integration/test_x.py", "import test_fleet\n", "imports the test module test_fleet"),
    ("tests/integration/fleet_helpers.py", "from test_fleet import inventory\n", "imports the test module test_fleet"),
    ("tests/unit/test_x.py", "from tests.unit.test_record import FakeKube\n", "imports the test module tests.unit.test_record"),
])
def test_each_rule_finds_its_violation(path: str, source: str, message: str) -> None:
    found = violations(path, source)
    assert len(found) == 1 and message in found[0] and found[0].startswith(f"{path}:"), found


@pytest.mark.parametrize("path, source", [
    (HARNESS, "def admin(env, method, path):\n    pass\n\n\ndef wait_until(predicate):\n    pass\n"),
    (HARNESS, "class SimHandle:\n    def admin(self, method, path):\n        pass\n"),
    ("tests/unit/clock.py", "class FakeClock:\n    pass\n"),
    ("tests/sim/cks_sim/core.py", "class Clock:\n    pass\n"),
    ("tests/integration/test_x.py", "def wait_for_vm_state(sim, vm, state):\n    pass\n"),
    ("tests/integration/test_x.py", "from cks_sim.harness import admin, wait_until\nfrom helpers import ClusterSim\n"),
    ("tests/unit/test_x.py", "from clock import FakeClock\nfrom fakes import FakeKube\nimport testinfra\n"),
    ("tests/unit/test_x.py", "SAMPLE = 'from conftest import x; def admin(): pass; class Clock: pass'\n"),
])
def test_what_the_rules_allow(path: str, source: str) -> None:
    assert violations(path, source) == []
