"""cks-sim's own shape: no module over ~800 lines, the CloudStack world's state declared in one
place, and the Kubernetes half made of plain objects with no import cycle between its modules.

``CloudWorld`` is its concerns' mixins over one state class (``CloudState``). A concern that set an
attribute of its own would be state nobody reading the state class sees; this holds every
``self.<name> = ...`` of the world's classes to the names the state class declares.

``KubeWorld`` is a composition root: its API (kube_store, kube_recorder, kube_pdbs, ...) and its
actors (kube_nodes, kube_pods, ...) are objects each handed what it needs, none a mixin.
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


@pytest.mark.parametrize("world, state", [(CloudWorld, CloudState)], ids=["cloud"])
def test_every_attribute_a_world_sets_is_declared_by_its_state(world: type, state: type) -> None:
    declared = _self_assignments(state) | set(getattr(state, "__annotations__", {}))
    assert declared, f"{state.__name__} declares no state"
    strays = {cls.__name__: sorted(_self_assignments(cls) - declared)
              for cls in world.__mro__ if cls not in (state, object) and cls.__module__.startswith("cks_sim")}
    assert not {name: attrs for name, attrs in strays.items() if attrs}, strays


def test_the_kubernetes_half_has_no_mixin() -> None:
    """No class of the kube modules derives from another of them (a concern mixed into another), and
    ``KubeWorld`` composes its objects rather than inheriting them."""
    assert KubeWorld.__mro__ == (KubeWorld, object)
    classes = {path.stem: [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)]
               for path in SIM.glob("kube*.py")}
    ours = {c.name for found in classes.values() for c in found}
    derived = {f"{module}.{c.name}": sorted(bases) for module, found in classes.items() for c in found
               if (bases := {ast.unparse(b).rsplit(".", 1)[-1] for b in c.bases} & ours)}
    assert not derived, f"build these as objects handed what they need, not as subclasses: {derived}"


def _runtime_imports(path: Path) -> set[str]:
    """The cks_sim modules ``path`` imports when it runs (not those only a type checker reads)."""
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and id(node) not in typing_only:
            found.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
    return found


def test_no_import_cycle_between_the_kubernetes_modules() -> None:
    graph = {path.stem: _runtime_imports(path) for path in SIM.glob("kube*.py")}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, set()) - seen:
            seen.add(nxt)
            if nxt == goal or reaches(nxt, goal, seen):
                return True
        return False

    cyclic = sorted(mod for mod in graph if reaches(mod, mod, set()))
    assert not cyclic, f"these import each other, directly or around a circle: {cyclic}"
