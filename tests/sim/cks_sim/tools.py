"""The programs beside Python that the sim and the tests run: where each one is, and the mark a
test that needs one carries.

cks-sim takes etcd from ``CKS_SIM_ETCD`` (etcdctl from ``CKS_SIM_ETCDCTL``), else the first on PATH,
as ``make etcd-installed`` accepts it. A test that needs a missing one is skipped on a developer's
partial machine, saying what to install; under ``make test`` (``CKS_TESTS_NEED_TOOLS=1``, or ``CI``
set) it fails the run instead, naming what to install, so a suite cannot pass by skipping.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Optional

#: Set by ``make test``: a missing program fails the run instead of skipping its tests.
STRICT_ENV = "CKS_TESTS_NEED_TOOLS"

# name -> (environment variable that names it, what to install)
TOOLS: dict[str, tuple[Optional[str], str]] = {
    "etcd": ("CKS_SIM_ETCD", "Debian's etcd-server (apt-get install etcd-server; `make etcd-installed`), "
                             "or set CKS_SIM_ETCD to an etcd binary"),
    "etcdctl": ("CKS_SIM_ETCDCTL", "Debian's etcd-client (apt-get install etcd-client; `make etcd-installed`), "
                                   "or set CKS_SIM_ETCDCTL to an etcdctl binary"),
    "kubectl": (None, "kubectl (apt-get install kubernetes-client; `make etcd-installed`)"),
    "chromium": (None, "Debian's chromium (apt-get install chromium; `make chromium-installed`)"),
}
_ALSO = {"chromium": ("chromium-browser",)}


class MissingTool(RuntimeError):
    """A program a test needs is not installed, in a run that may not skip it."""


def binary(name: str) -> Optional[str]:
    """The program's path: its environment variable's, else the first on PATH, else None."""
    variable = TOOLS[name][0]
    given = os.environ.get(variable) if variable else None
    if given:
        return given if os.access(given, os.X_OK) else None
    for candidate in (name, *_ALSO.get(name, ())):
        found = shutil.which(candidate)
        if found:
            return found
    return None


def default_binary(name: str) -> str:
    """For the sim: the program's path, or where Debian puts it (its error then names that path)."""
    return binary(name) or f"/usr/bin/{name}"


def strict() -> bool:
    return os.environ.get(STRICT_ENV) == "1" or bool(os.environ.get("CI"))


def missing(*names: str) -> list[str]:
    return [n for n in names if binary(n) is None]


def why(names: list[str]) -> str:
    return "; ".join(f"{n} is not installed: install {TOOLS[n][1]}" for n in names)


def needs(*names: str) -> Any:
    """A test's (or ``pytestmark``'s) mark: skip without ``names`` on a partial machine; under ``make
    test`` raise ``MissingTool`` at collection, which fails the run naming what to install."""
    import pytest  # only tests call this; the sim runs without pytest

    absent = missing(*names)
    if absent and strict():
        raise MissingTool(why(absent) + f" ({STRICT_ENV}=1 or CI is set: this run may not skip these tests)")
    return pytest.mark.skipif(bool(absent), reason=why(absent) or "all installed")
