"""The collection's metadata agrees with its content: modules vs. action group, galaxy version vs.
changelog, requires_ansible vs. the ansible-core under test, pins vs. the runtime ranges."""

from __future__ import annotations

import fnmatch
import re
from importlib import import_module
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ansible.release import __version__ as ansible_core_version
from ansible_collections.cloudstack.cks.plugins.module_utils import ansible_module as glue

ROOT = Path(__file__).resolve().parents[2]
GROUP = "cks"
FRAGMENT_SECTIONS_EXTRA = {"release_summary", "trivial"}


def load_yaml(relpath: str) -> dict:
    with open(ROOT / relpath, encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    assert isinstance(data, dict), f"{relpath} is not a mapping"
    return data


def module_names() -> set[str]:
    return {path.stem for path in (ROOT / "plugins" / "modules").glob("*.py") if path.stem != "__init__"}


def group_members() -> list[str]:
    return load_yaml("meta/runtime.yml")["action_groups"][GROUP]


def build_ignored(path: str, patterns: list[str]) -> bool:
    """ansible-galaxy build's rule: a pattern matches the path or one of its parent folders."""
    parts = path.split("/")
    return any(fnmatch.fnmatch("/".join(parts[: i + 1]), pattern)
               for i in range(len(parts)) for pattern in patterns)


def pins(relpath: str) -> dict[str, Requirement]:
    reqs = {}
    for line in (ROOT / relpath).read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            reqs[req.name.lower()] = req
    return reqs


# --- meta/runtime.yml ---------------------------------------------------------------------------

def takes_connection_options(module: str) -> bool:
    text = (ROOT / "plugins" / "modules" / f"{module}.py").read_text(encoding="utf-8")
    return "cloudstack.cks.cloudstack" in text and "cloudstack.cks.kubernetes" in text


def test_the_action_group_is_exactly_the_modules_with_connection_options() -> None:
    # module_defaults for the group sets api_url & co.: a member without those options would refuse them.
    connected = {m for m in module_names() if takes_connection_options(m)}
    assert connected == set(group_members()), (
        f"action_groups.{GROUP} must list the modules that extend the connection fragments: {sorted(connected)}"
    )
    # It asks etcd through the cluster's Kubernetes API when given no etcd_endpoints (etcdctl in the etcd pods: nothing but the kubeconfig).
    assert "cks_etcd_quorum" in connected


@pytest.mark.parametrize("member", group_members())
def test_module_defaults_of_the_group_mean_the_same_to_every_member(member: str) -> None:
    # One group/cloudstack.cks.cks entry feeds every member: a connection option must not mean
    # something else to one of them (cks_etcd_quorum's etcd validate_certs became etcd_validate_certs).
    spec = import_module(f"ansible_collections.cloudstack.cks.plugins.modules.{member}").argument_spec()
    shared = dict(glue.cloudstack_argument_spec(), **glue.kubernetes_argument_spec())
    assert {name: spec.get(name) for name in shared} == shared
    assert spec["cluster"]["type"] == "str" and "etcd_endpoints" in spec or member == "cks_node_settings"


@pytest.mark.parametrize("member", group_members())
def test_every_action_group_member_is_a_module(member: str) -> None:
    assert (ROOT / "plugins" / "modules" / f"{member}.py").is_file(), (
        f"action_groups.{GROUP} lists {member}, but plugins/modules/{member}.py does not exist"
    )


def test_action_group_has_no_duplicates_or_qualified_names() -> None:
    members = group_members()
    assert len(members) == len(set(members))
    # Short names resolve inside this collection; a dotted name would point elsewhere.
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", member) for member in members)


def test_requires_ansible_parses_and_admits_the_core_under_test() -> None:
    spec = SpecifierSet(load_yaml("meta/runtime.yml")["requires_ansible"])
    assert Version("2.16.0") in spec
    assert Version("2.15.99") not in spec
    assert Version(ansible_core_version) in spec


# --- galaxy.yml ---------------------------------------------------------------------------------

def test_galaxy_identity() -> None:
    galaxy = load_yaml("galaxy.yml")
    assert (galaxy["namespace"], galaxy["name"]) == ("cloudstack", "cks")
    assert galaxy["license"] == ["Apache-2.0"]
    assert not galaxy.get("dependencies")
    assert re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?", str(galaxy["version"]))
    assert (ROOT / galaxy["readme"]).is_file()
    assert (ROOT / "LICENSE").is_file()


def test_galaxy_home_is_the_one_the_readme_names() -> None:
    # The README's install section and galaxy.yml (which the docsite's index links) name one home.
    galaxy = load_yaml("galaxy.yml")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    install = readme[readme.index("## Install"):readme.index("## Minimal example")]
    repository = galaxy["repository"]
    assert f"ansible-galaxy collection install git+{repository}.git" in install
    assert f"`{repository}`" in install
    assert galaxy["issues"] == f"{repository}/issues" and "`/issues`" in install
    assert galaxy["documentation"].startswith(f"{repository}/")
    assert f"`{galaxy['documentation'][len(repository):]}`" in install


@pytest.mark.parametrize("path", [
    "plugins/modules/cks_node_cycle.py", "meta/runtime.yml", "meta/execution-environment.yml",
    "requirements.txt", "bindep.txt", "README.md", "CHANGELOG.rst", "changelogs/changelog.yaml",
    "LICENSE", "tests/unit/test_collection_meta.py",
])
def test_build_ignore_keeps_collection_content(path: str) -> None:
    # ansible-builder reads requirements.txt, bindep.txt and meta/ from the artifact.
    assert not build_ignored(path, load_yaml("galaxy.yml")["build_ignore"])


@pytest.mark.parametrize("path", [
    ".venv/bin/python", ".venv-k35/pyvenv.cfg", ".venv-2.21/pyvenv.cfg", ".ansible/collections/x",
    "tests/output/junit/a.xml", ".ci/run", ".pytest_cache/v/x", "cloudstack-cks-0.1.0.tar.gz",
    "bench/results.json",
])
def test_build_ignore_drops_the_harness(path: str) -> None:
    assert build_ignored(path, load_yaml("galaxy.yml")["build_ignore"])


def test_galaxy_build_ships_the_collection_and_not_the_harness(tmp_path: Path) -> None:
    galaxy_cli = Path(sys.executable).parent / "ansible-galaxy"
    proc = subprocess.run([str(galaxy_cli), "collection", "build", "--output-path", str(tmp_path), str(ROOT)],
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    version = load_yaml("galaxy.yml")["version"]
    with tarfile.open(tmp_path / f"cloudstack-cks-{version}.tar.gz") as artifact:
        names = set(artifact.getnames())
    assert {"MANIFEST.json", "meta/runtime.yml", "meta/execution-environment.yml", "requirements.txt",
            "bindep.txt", "README.md", "LICENSE", "CHANGELOG.rst"} <= names
    harness = [name for name in names
               if name.split("/")[0] in (".ansible", ".ci", "bench") or name.startswith((".venv", "tests/output/"))]
    assert not harness, f"artifact carries harness files: {sorted(harness)[:5]}"


def test_execution_environment_files_exist() -> None:
    deps = load_yaml("meta/execution-environment.yml")["dependencies"]
    for key in ("python", "system"):
        assert (ROOT / deps[key]).is_file(), f"meta/execution-environment.yml {key}: {deps[key]}"


# --- sanity ignores -----------------------------------------------------------------------------

GPL_IGNORE = "validate-modules:missing-gplv3-license"


@pytest.mark.parametrize("ignore_file", sorted(p.name for p in (ROOT / "tests" / "sanity").glob("ignore-*.txt")))
def test_sanity_ignores_are_only_the_license_exemption_for_each_module(ignore_file: str) -> None:
    # The collection is Apache-2.0; validate-modules asks every module (and every inventory and
    # callback plugin, which it checks too) for a GPLv3 header. That is the one ignore ansible-lint's
    # production profile permits here, and it is the only one used.
    entries = {}
    for line in (ROOT / "tests" / "sanity" / ignore_file).read_text(encoding="utf-8").splitlines():
        path, test = line.split("#", 1)[0].split()
        entries[path] = test
    assert set(entries.values()) == {GPL_IGNORE}
    expected = {f"plugins/modules/{name}.py" for name in module_names() | set(group_members())}
    expected |= {f"plugins/{kind}/{path.name}" for kind in ("inventory", "callback")
                 for path in (ROOT / "plugins" / kind).glob("*.py")}
    assert set(entries) == expected


# --- changelog ----------------------------------------------------------------------------------

def fragments() -> list[Path]:
    return sorted(p for p in (ROOT / "changelogs" / "fragments").iterdir()
                  if p.suffix in (".yml", ".yaml"))


def test_galaxy_version_is_released_or_has_fragments() -> None:
    version = Version(str(load_yaml("galaxy.yml")["version"]))
    releases = load_yaml("changelogs/changelog.yaml").get("releases") or {}
    latest = max((Version(str(v)) for v in releases), default=None)
    if latest is not None and version == latest:
        return
    assert latest is None or version > latest, f"galaxy.yml {version} is older than release {latest}"
    assert fragments(), f"galaxy.yml {version} is unreleased but changelogs/fragments/ has no fragment"


def test_fragments_use_configured_sections() -> None:
    config = load_yaml("changelogs/config.yaml")
    sections = {name for name, _title in config["sections"]} | FRAGMENT_SECTIONS_EXTRA
    for path in fragments():
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert isinstance(data, dict) and data, f"{path.name} is empty"
        assert set(data) <= sections, f"{path.name}: unknown sections {sorted(set(data) - sections)}"
        for section, entries in data.items():
            if section == "release_summary":
                assert isinstance(entries, str) and entries.strip()
            else:
                assert isinstance(entries, list) and all(isinstance(e, str) and e for e in entries), (
                    f"{path.name}: {section} must be a list of strings"
                )


# --- Python pins --------------------------------------------------------------------------------

def test_test_pins_are_exact() -> None:
    loose = [str(req) for req in pins("requirements-test.txt").values()
             if [spec.operator for spec in req.specifier] != ["=="]]
    assert not loose, f"requirements-test.txt entries without an exact pin: {loose}"


def test_test_pins_satisfy_the_runtime_ranges() -> None:
    runtime = pins("requirements.txt")
    tested = pins("requirements-test.txt")
    for name, req in runtime.items():
        assert name in tested, f"{name} is a runtime dependency but not pinned for tests"
        pinned = Version(next(iter(tested[name].specifier)).version)
        assert pinned in req.specifier, f"{name}=={pinned} is outside requirements.txt's {req.specifier}"


def test_client_ends_target_is_the_range_floor() -> None:
    # `make client-ends` re-runs the kube tests with this version: it must be one users may have.
    match = re.search(r"^KUBE_OLDEST := (\S+)$", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M)
    assert match, "Makefile has no KUBE_OLDEST"
    oldest = Requirement(match.group(1))
    allowed = pins("requirements.txt")["kubernetes"].specifier
    version = Version(next(iter(oldest.specifier)).version)
    assert version in allowed
    # ...and it is the oldest: the range's lower bound.
    lower = [Version(spec.version) for spec in allowed if spec.operator == ">="]
    assert lower == [version], f"kubernetes lower bound {lower} vs. KUBE_OLDEST {version}"


@pytest.mark.parametrize("module", sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "plugins" / "modules").glob("cks_*.py")))
def test_a_modules_description_stays_under_3000_characters(module: str) -> None:
    # What ansible-doc shows first: the detail belongs in the options and the docsite.
    documentation = yaml.safe_load(import_module(f"ansible_collections.cloudstack.cks.plugins.modules.{module}").DOCUMENTATION)
    assert sum(len(part) for part in documentation["description"]) < 3000
