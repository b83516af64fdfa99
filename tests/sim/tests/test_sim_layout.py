"""cks-sim's own shape: no module over ~800 lines, and each world's state declared in one place.

The two worlds (``KubeWorld``, ``CloudWorld``) are their concerns' mixins over one state class
(``KubeState``, ``CloudState``). A concern that set an attribute of its own would be state nobody
reading the state class sees; this holds every ``self.<name> = ...`` of the worlds' classes to the
names the state class declares.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

import pytest
from cks_sim.cloud import CloudWorld
from cks_sim.cloud_state import CloudState
from cks_sim.kube import KubeWorld
from cks_sim.kube_state import KubeState

SIM = Path(__file__).resolve().parent.parent / "cks_sim"
MOST_LINES = 800


def test_no_module_of_the_simulator_is_over_800_lines() -> None:
    long = {path.name: n for path in SIM.rglob("*.py") if (n := len(path.read_text().splitlines())) > MOST_LINES}
    assert not long, f"split these along their concerns: {long}"


def _self_assignments(cls: type) -> set[str]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    names: set[str] = set()
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            for part in ast.walk(target):
                if (isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and part.value.id == "self"
                        and isinstance(part.ctx, ast.Store)):
                    names.add(part.attr)
    return names


@pytest.mark.parametrize("world, state", [(KubeWorld, KubeState), (CloudWorld, CloudState)],
                         ids=["kube", "cloud"])
def test_every_attribute_a_world_sets_is_declared_by_its_state(world: type, state: type) -> None:
    declared = _self_assignments(state) | set(getattr(state, "__annotations__", {}))
    assert declared, f"{state.__name__} declares no state"
    strays = {cls.__name__: sorted(_self_assignments(cls) - declared)
              for cls in world.__mro__ if cls not in (state, object) and cls.__module__.startswith("cks_sim")}
    assert not {name: attrs for name, attrs in strays.items() if attrs}, strays
