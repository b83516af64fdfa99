"""cks-sim's own shape: no module over ~800 lines, each world's state declared in one place, and
the Kubernetes half's API made of plain objects with no import cycle between its modules.

The two worlds (``KubeWorld``, ``CloudWorld``) are their concerns' mixins over one state class
(``KubeState``, ``CloudState``). A concern that set an attribute of its own would be state nobody
reading the state class sees; this holds every ``self.<name> = ...`` of the worlds' classes to the
names the state class declares.

The in-memory Kubernetes API (kube_store, kube_recorder, kube_pdbs, kube_evictions, kube_verbs,
kube_leases) is objects each handed what it needs: no class there is a base of ``KubeWorld``. The
actors' mixins that remain are named below, so that none is added (and each one moved out is
struck from the list).
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

# The cluster's actors still composed into KubeWorld as mixins (issue 34: to become objects).
ACTOR_MIXINS = {"kube_nodes", "kube_pods", "kube_queries", "kube_workloads"}

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


def test_the_kubernetes_api_is_objects_not_mixins() -> None:
    mixins = {cls.__module__.rsplit(".", 1)[-1] for cls in KubeWorld.__mro__
              if cls not in (KubeWorld, KubeState, object)}
    assert mixins - {"kube_contract"} == ACTOR_MIXINS, "build a concern as an object handed what it needs"


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
