# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The layers of module_utils, checked from the imports (docs/docsite/rst/architecture.rst draws them).

A module may import from its own layer or a lower one, never a higher one; no import cycle
anywhere; every import of the collection at the top of the file (a lazy import hides a cycle).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "ansible_collections.cloudstack.cks.plugins."
MODULE_UTILS = ROOT / "plugins" / "module_utils"

#: Lowest first. A layer sees only itself and the layers before it.
LAYERS = (
    "module_utils._common",  # errors, deadlines
    "module_utils._model",  # the cluster as VMs joined with nodes, and its loader
    "module_utils._decisions",  # pure: settings, reasons, order, quorum, health, drain, marks
    "module_utils._clients",  # CloudStack, Kubernetes, etcd: all the I/O
    "module_utils._state",  # the lock and the record, kept in the cluster
    "module_utils._rollout",  # the steps of a batch, the release, the validation
    "module_utils._services",  # one per module: options in, result out
    "module_utils.ansible_module",  # AnsibleModule glue: argument specs, failing in one place
    "filter",
    "modules",
    "plugin_utils",  # controller side: running a module in the controller's worker
    "action",  # one per module: where it runs
    "inventory",
)


def layer_of(dotted: str) -> int:
    """The layer of ``plugins.<dotted>`` (a module path below plugins/)."""
    for rank, prefix in enumerate(LAYERS):
        if dotted == prefix or dotted.startswith(prefix + "."):
            return rank
    raise AssertionError(f"{dotted}: in no layer; add its package to LAYERS")


def sources() -> dict[str, Path]:
    found = {}
    for folder in ("module_utils", "modules", "filter", "plugin_utils", "action", "inventory"):
        for path in sorted((ROOT / "plugins" / folder).rglob("*.py")):
            if path.name == "__init__.py":
                continue
            found[".".join(path.relative_to(ROOT / "plugins").with_suffix("").parts)] = path
    return found


def imports(path: Path) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(line, imported module below plugins/) at the top level, and those inside functions or classes."""
    tree = ast.parse(path.read_text())
    top = {id(node) for node in tree.body}
    top_level, nested = [], []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE):
            base = node.module[len(PACKAGE):]
            # ``from pkg import mod``: the module itself is what is imported
            targets = [f"{base}.{a.name}" if (ROOT / "plugins" / Path(*base.split("."), a.name)).with_suffix(".py").exists()
                       else base for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name[len(PACKAGE):] for a in node.names if a.name.startswith(PACKAGE)]
        for target in targets:
            (top_level if id(node) in top else nested).append((node.lineno, target))
    return top_level, nested


SOURCES = sources()


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_imports_only_its_own_layer_or_lower(name: str) -> None:
    mine = layer_of(name)
    top_level, _nested = imports(SOURCES[name])
    wrong = [f"line {line}: {target} ({LAYERS[layer_of(target)]})" for line, target in top_level
             if layer_of(target) > mine]
    assert not wrong, f"{name} ({LAYERS[mine]}) imports from a higher layer: {wrong}"


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_no_import_inside_a_function(name: str) -> None:
    _top_level, nested = imports(SOURCES[name])
    assert not nested, f"{name}: imports inside a function or class (a hidden cycle?): {nested}"


def test_no_import_cycle() -> None:
    graph = {name: {t for _l, t in imports(path)[0] if t in SOURCES and t != name} for name, path in SOURCES.items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


#: The longest a module_utils file may be (the architecture page names it).
MAX_LINES = 550


def test_every_module_utils_file_is_in_a_layer_and_small() -> None:
    too_long = {}
    for path in MODULE_UTILS.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT / "plugins").with_suffix("").parts)
        layer_of(name.removesuffix(".__init__"))
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            too_long[name] = lines
    assert not too_long, f"module_utils files over {MAX_LINES} lines (split them by what they are for): {too_long}"


def test_the_layer_check_catches_an_upward_import(tmp_path: Path) -> None:
    """The check itself can fail: a decision importing a client is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text(f"from {PACKAGE}module_utils._clients.kube import KubeClient\n"
                   f"def f():\n    from {PACKAGE}module_utils._state.record import Lock\n")
    top_level, nested = imports(bad)
    assert [layer_of(t) for _l, t in top_level] == [LAYERS.index("module_utils._clients")]
    assert layer_of("module_utils._decisions.order") < layer_of(top_level[0][1])
    assert nested == [(3, "module_utils._state.record")]


#: What the rollout's code names its clients, the lock and their answers by (the Protocols of
#: _common/protocols.py describe every one of them).
CLIENT_NAMES = re.compile(r"\b(cloud|kube|client|clients|lock|result|answer)\b")


def client_probes(path: Path) -> list[str]:
    """``hasattr``/``getattr`` calls on a client, the lock or an answer of theirs: what the batch needs
    of them belongs in their Protocol, where mypy checks it, not in a probe a rename silently defeats."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr")
                and node.args and CLIENT_NAMES.search(ast.unparse(node.args[0]))):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("path", sorted((MODULE_UTILS / "_rollout").glob("*.py")), ids=lambda p: p.name)
def test_the_rollout_does_not_probe_its_clients(path: Path) -> None:
    assert not client_probes(path), f"{path.name}: {client_probes(path)}"


def test_the_probe_check_catches_a_probe(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f(self, result):\n    if hasattr(self.cloud, 'deadline'):\n        pass\n"
                   "    return getattr(result, 'pdb', None), getattr(self.options, 'force')\n")
    assert [p.split(":")[0] for p in client_probes(bad)] == ["line 2", "line 4"]
