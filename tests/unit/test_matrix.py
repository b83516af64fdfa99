"""One list, tests/matrix.txt, says which ansible-core and Python the collection is tested on: the
README's "Tested with" table is generated from it, requires_ansible starts at its oldest core, every
claimed core has its sanity ignore file, and tests/config.yml keeps the modules on the controller."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("cks_matrix", ROOT / "tests" / "ci" / "matrix.py")
matrix = importlib.util.module_from_spec(_spec)
sys.modules["cks_matrix"] = matrix  # dataclasses look their module up while the class is built
_spec.loader.exec_module(matrix)

CELLS = matrix.read_matrix()


def test_the_matrix_covers_each_release_once_from_2_16_to_2_21() -> None:
    releases = [cell.release for cell in CELLS]
    assert releases == ["2.16", "2.17", "2.18", "2.19", "2.20", "2.21"]
    assert all("unit" in cell.runs for cell in CELLS)
    # Sanity on the oldest, the newest and the main venv's release at least.
    assert {c.release for c in CELLS if "sanity" in c.runs} >= {"2.16", "2.19", "2.21"}


# The controller Pythons each ansible-core release supports (its setup's python_requires and
# ansible-test's CONTROLLER_PYTHON_VERSIONS).
CONTROLLER_PYTHONS = {"2.16": ("3.10", "3.11", "3.12"), "2.17": ("3.10", "3.11", "3.12"),
                      "2.18": ("3.11", "3.12", "3.13"), "2.19": ("3.11", "3.12", "3.13"),
                      "2.20": ("3.12", "3.13", "3.14"), "2.21": ("3.12", "3.13", "3.14")}


@pytest.mark.parametrize("cell", CELLS, ids=[c.release for c in CELLS])
def test_each_cell_runs_a_python_its_core_supports(cell: object) -> None:
    assert cell.python in CONTROLLER_PYTHONS[cell.release]


def test_the_readme_table_is_the_generated_one() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert matrix.readme_table(readme) == matrix.render_table(CELLS), (
        "README's Tested with table differs from tests/matrix.txt: run python tests/ci/matrix.py --readme")


def test_requires_ansible_starts_at_the_oldest_tested_core() -> None:
    runtime = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text(encoding="utf-8"))
    oldest = min(Version(cell.core) for cell in CELLS)
    assert runtime["requires_ansible"] == f">={oldest.major}.{oldest.minor}.0"
    spec = SpecifierSet(runtime["requires_ansible"])
    assert all(Version(cell.core) in spec for cell in CELLS)
    assert Version(f"{oldest.major}.{oldest.minor - 1}.99") not in spec


@pytest.mark.parametrize("release", [c.release for c in CELLS])
def test_each_claimed_core_has_its_sanity_ignore_file(release: str) -> None:
    assert (ROOT / "tests" / "sanity" / f"ignore-{release}.txt").is_file()


def test_no_ignore_file_for_a_core_the_matrix_does_not_claim() -> None:
    claimed = {f"ignore-{c.release}.txt" for c in CELLS}
    assert {p.name for p in (ROOT / "tests" / "sanity").glob("ignore-*.txt")} == claimed


def test_the_modules_run_on_controller_pythons_only() -> None:
    config = yaml.safe_load((ROOT / "tests" / "config.yml").read_text(encoding="utf-8"))
    assert config["modules"]["python_requires"] == "controller"


def test_a_cell_s_requirements_are_the_test_pins_with_its_core_and_overrides() -> None:
    oldest = CELLS[0]
    lines = matrix.cell_requirements(oldest).splitlines()
    assert lines[0] == f"ansible-core=={oldest.core}"
    assert not any(line.startswith(("ansible-lint", "molecule", "ansible-runner")) for line in lines)
    for pin in oldest.overrides:
        assert pin in lines
    assert sum(line.startswith("hypothesis==") for line in lines) == 1


def test_a_malformed_line_is_refused_with_its_place(tmp_path: Path) -> None:
    bad = tmp_path / "matrix.txt"
    bad.write_text("ansible-core==2.16.19 3.10 unit lint\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"matrix.txt:1: want"):
        matrix.read_matrix(bad)
