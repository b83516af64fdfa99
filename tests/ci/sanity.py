"""Run ``ansible-test sanity --local`` on this checkout from a throw-away collection tree.

ansible-test only runs from inside ``ansible_collections/NS/NAME`` and lists files through git,
so the files that would ship (git-tracked plus untracked-but-not-ignored, minus galaxy.yml's
build_ignore) are copied into ``<tmp>/ansible_collections/cloudstack/cks`` and staged in a fresh
git repository there. That keeps what ansible-lint or Molecule leave in the checkout (``.ansible/``,
installed collection copies) out of the test.

``--local`` still installs each sanity test's requirements into venvs under
``~/.ansible/test/venv`` from the package index, but first fetches a pip bootstrap script from a
host that is not a package index. The script is seeded here with a stand-in that installs pip from
the wheel that the ordinary pip client downloads.

Usage: ``.venv/bin/python tests/ci/sanity.py [--python 3.11] [--keep] [ansible-test args...]``
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

NAMESPACE = "cloudstack"
NAME = "cks"

# Written to ~/.ansible/test/cache/get_pip_<ver>.py. ansible-test runs it (through runpy, as
# __main__) with pip's install arguments plus get-pip's own --no-setuptools/--no-wheel flags.
BOOTSTRAP_TEMPLATE = '''"""Stand-in for get-pip.py written by tests/ci/sanity.py: installs pip from a local wheel."""

import sys

WHEEL = {wheel!r}
GET_PIP_ONLY = ("--no-setuptools", "--no-wheel")

sys.path.insert(0, WHEEL)

from pip._internal.cli.main import main  # noqa: E402  pylint: disable=wrong-import-position

args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY]
sys.exit(main(["install", "--no-index", "--find-links", {wheel_dir!r}] + args))
'''
BOOTSTRAP_MARKER = "Stand-in for get-pip.py written by tests/ci/sanity.py"


class SanityError(Exception):
    """The sanity run could not be set up."""


def run(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """Run a set-up command and return its stdout; a failure is a SanityError with its stderr."""
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SanityError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def repo_root() -> Path:
    """The checkout this script belongs to."""
    here = Path(__file__).resolve().parent
    return Path(run(["git", "rev-parse", "--show-toplevel"], cwd=here).strip())


def build_ignore(root: Path) -> list[str]:
    """galaxy.yml's build_ignore patterns: what the artifact leaves out, sanity leaves out too."""
    galaxy = yaml.safe_load((root / "galaxy.yml").read_text(encoding="utf-8")) or {}
    return [str(pattern) for pattern in galaxy.get("build_ignore") or []]


def ignored(path: str, patterns: list[str]) -> bool:
    """Match like ansible-galaxy build: a pattern hits the file or any folder above it."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(fnmatch.fnmatch(prefix, pattern) for prefix in prefixes for pattern in patterns)


def collection_files(root: Path) -> list[str]:
    """Tracked plus untracked-but-not-ignored files that still exist, minus build_ignore."""
    out = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root)
    patterns = build_ignore(root)
    files = sorted({name for name in out.split("\0") if name})
    return [name for name in files if os.path.lexists(root / name) and not ignored(name, patterns)]


def copy_tree(root: Path, files: list[str], dest: Path) -> None:
    """Copy files keeping modes and symlinks (the symlinks and shebang tests look at both)."""
    for name in files:
        src = root / name
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), target)
        elif src.is_file():
            shutil.copy2(src, target)


def drop_ignores_for_missing_files(tree: Path) -> None:
    """Keep the ignore files' entries for modules that are planned but not written yet from
    failing the ``ignores`` test; tests/unit/test_collection_meta.py keeps the lists honest."""
    for ignore_file in sorted((tree / "tests" / "sanity").glob("ignore-*.txt")):
        lines = ignore_file.read_text(encoding="utf-8").splitlines()
        kept = [line for line in lines if (tree / line.split()[0]).exists()]
        if len(kept) != len(lines):
            print(f"sanity: {ignore_file.name}: {len(lines) - len(kept)} entries for files not written yet left out",
                  flush=True)
            ignore_file.write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")


def git_stage(tree: Path) -> None:
    """ansible-test asks git for the file list; staged files are enough, no commit needed."""
    run(["git", "init", "-q"], cwd=tree)
    run(["git", "add", "-A"], cwd=tree)


def bootstrap_packages() -> dict[str, str]:
    """What this ansible-test bootstraps its sanity venvs with: pip 24.2 alone for 2.19, pip,
    setuptools and wheel for 2.16 (its ``default_packages``)."""
    spec = importlib.util.find_spec("ansible_test")
    if spec is None or not spec.submodule_search_locations:
        raise SanityError("ansible_test is not importable: run this with the venv's python")
    source_path = Path(list(spec.submodule_search_locations)[0]) / "_internal" / "python_requirements.py"
    match = re.search(r"default_packages = dict\((.*?)\)", source_path.read_text(encoding="utf-8"), re.S)
    packages = dict(re.findall(r"(\w+)='([0-9.]+)'", match.group(1))) if match else {}
    if "pip" not in packages:
        raise SanityError(f"cannot find the pip bootstrap version in {source_path}")
    return packages


def seed_pip_bootstrap(python: str, packages: dict[str, str]) -> Path:
    """Write the get-pip stand-in unless a real (or earlier) script is already cached, with the
    wheels of every bootstrap package next to it."""
    pip_version = packages["pip"]
    cache = Path.home() / ".ansible" / "test" / "cache"
    script = cache / f"get_pip_{pip_version.replace('.', '_')}.py"
    wheel_dir = cache / f"pip-{pip_version}-wheel"
    wheel_dir.mkdir(parents=True, exist_ok=True)
    if script.exists() and BOOTSTRAP_MARKER not in script.read_text(encoding="utf-8"):
        return script
    for name, version in packages.items():
        if not list(wheel_dir.glob(f"{name}-{version}-*.whl")):
            run([python, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                 "--dest", str(wheel_dir), f"{name}=={version}"])
    wheels = sorted(wheel_dir.glob(f"pip-{pip_version}-*.whl"))
    if not wheels:
        raise SanityError(f"pip download left no pip {pip_version} wheel in {wheel_dir}")
    script.write_text(BOOTSTRAP_TEMPLATE.format(wheel=str(wheels[0]), wheel_dir=str(wheel_dir)),
                      encoding="utf-8")
    return script


def stdlib_shadows() -> list[Path]:
    """Stray ``<stdlib module>.py`` files in the system temp dir.

    ansible-test's requirement installer runs its pip helper as a script from the system temp dir
    (its children get only a fixed set of environment variables, so TMPDIR does not reach them);
    a stray struct.py there once broke every pip install. Only reported: they are not ours.
    """
    system_tmp = Path(os.environ.get("TMPDIR") or "/tmp")
    names = getattr(sys, "stdlib_module_names", frozenset())
    return sorted(path for path in system_tmp.glob("*.py") if path.stem in names)


def sanity_env(tmpdir: Path) -> dict[str, str]:
    """A private TMPDIR for ansible-test itself, and no collection path pointing back at the
    checkout (ansible-doc would otherwise load the checkout instead of the copied tree)."""
    env = dict(os.environ)
    for name in ("ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_PATHS", "PYTHONPATH"):
        env.pop(name, None)
    env["TMPDIR"] = str(tmpdir)
    return env


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=f"{sys.version_info.major}.{sys.version_info.minor}",
                        help="controller Python version for ansible-test (default: this one)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary tree")
    return parser.parse_known_args(argv)


def main(argv: list[str]) -> int:
    options, extra = parse_args(argv)
    ansible_test = Path(sys.executable).parent / "ansible-test"
    if not ansible_test.exists():
        raise SanityError(f"{ansible_test} not found: run this with the venv's python")
    root = repo_root()
    started = time.monotonic()
    for path in stdlib_shadows():
        print(f"sanity: WARNING: {path} shadows a stdlib module for ansible-test's pip helper",
              file=sys.stderr)
    seed_pip_bootstrap(sys.executable, bootstrap_packages())

    work = Path(tempfile.mkdtemp(prefix="cks-sanity-"))
    tree = work / "ansible_collections" / NAMESPACE / NAME
    tmpdir = work / "tmp"
    tmpdir.mkdir()
    keep = options.keep
    try:
        files = collection_files(root)
        copy_tree(root, files, tree)
        drop_ignores_for_missing_files(tree)
        git_stage(tree)
        print(f"sanity: {len(files)} files from {root} in {tree}", flush=True)
        cmd = [str(ansible_test), "sanity", "--local", "--python", options.python, "-v", *extra]
        rc = subprocess.run(cmd, cwd=tree, env=sanity_env(tmpdir), check=False).returncode
        elapsed = time.monotonic() - started
        if rc != 0:
            where = f"tree kept at {tree}" if keep else "--keep keeps the tree for a look"
            print(f"sanity: FAILED (rc {rc}) after {elapsed:.0f}s; {where}", flush=True)
        else:
            print(f"sanity: passed on Python {options.python} in {elapsed:.0f}s", flush=True)
        return rc
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except SanityError as exc:
        print(f"sanity: set-up failed: {exc}", file=sys.stderr)
        sys.exit(2)
