"""The architecture page (docs/docsite/rst/architecture.rst) names files and the functions, classes and
methods in them that a reader follows: each must still be there, so the page cannot drift from the
code unnoticed. Written ``file.py`` ``symbol`` (or ``Class.member``), as the page writes them."""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path
from typing import Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "docsite" / "rst" / "architecture.rst"
#: Where a path the page names may start (it writes module_utils paths from their package, a role's
#: task file or a unit test by its name once the text says whose it is).
BASES = (ROOT, ROOT / "plugins" / "module_utils", ROOT / "plugins", ROOT / "roles" / "rollout",
         ROOT / "roles" / "rollout" / "tasks", ROOT / "tests" / "unit", ROOT / "plugins" / "module_utils" / "_rollout",
         ROOT / "tests" / "sim" / "cks_sim")
PATH = re.compile(r"``([\w./-]+\.(?:py|yml|rst))``")
#: A file, then the symbols right after it: ``f.py`` ``a``, ``b`` (a blank or a comma between them).
FILE_AND_SYMBOLS = re.compile(r"``([\w./-]+\.py)``((?:,?\s+``[A-Za-z_][\w.]*``)+)")
SYMBOL = re.compile(r"``([A-Za-z_][\w.]*)``")


def resolve(path: str) -> Optional[Path]:
    for base in BASES:
        if (base / path).is_file():
            return base / path
    return None


@lru_cache(maxsize=None)
def defined_in(path: Path) -> dict[str, set[str]]:
    """The names a file defines at its top (functions, classes, assignments), each with its class's members."""
    names: dict[str, set[str]] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = set()
        elif isinstance(node, ast.ClassDef):
            members = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    members.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    members.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    members.update(t.id for t in item.targets if isinstance(t, ast.Name))
            names[node.name] = members
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        names[name.id] = set()
    return names


def resolves(symbol: str, names: dict[str, set[str]]) -> bool:
    head, _dot, member = symbol.partition(".")
    return head in names and (not member or member in names[head])


TEXT = PAGE.read_text()
PATHS = sorted(set(PATH.findall(TEXT)))
NAMED = sorted({(path, symbol) for path, tail in FILE_AND_SYMBOLS.findall(TEXT) for symbol in SYMBOL.findall(tail)
                if not symbol.endswith((".py", ".yml"))})
MEMBERS = sorted(set(re.findall(r"``([A-Z]\w+\.\w+)``", TEXT)))


def test_the_page_names_files_and_symbols() -> None:
    # The page's own shape, so a change of how it writes names does not make the tests below empty.
    assert len(PATHS) > 40 and len(NAMED) > 40 and len(MEMBERS) > 10


@pytest.mark.parametrize("path", PATHS)
def test_every_file_the_page_names_exists(path: str) -> None:
    assert resolve(path) is not None, f"architecture.rst names {path}, which is no file"


@pytest.mark.parametrize("path, symbol", NAMED)
def test_every_symbol_the_page_names_is_in_its_file(path: str, symbol: str) -> None:
    found = resolve(path)
    assert found is not None, f"architecture.rst names {path}, which is no file"
    assert resolves(symbol, defined_in(found)), f"architecture.rst names {symbol} in {path}, which does not define it"


@pytest.mark.parametrize("symbol", MEMBERS)
def test_every_class_member_the_page_names_is_defined(symbol: str) -> None:
    files = [*(ROOT / "plugins").rglob("*.py"), *(ROOT / "tests" / "sim" / "cks_sim").glob("*.py")]
    assert any(resolves(symbol, defined_in(f)) for f in files), f"architecture.rst names {symbol}, defined nowhere"


def test_a_symbol_gone_from_its_file_is_caught(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("class Drainer:\n    def drain(self): ...\n\nSTEPS = ()\n")
    names = defined_in(module)
    assert resolves("Drainer.drain", names) and resolves("STEPS", names)
    assert not resolves("Drainer.select", names) and not resolves("put_back", names)
