"""The rendered collection docsite (``make docs`` writes it to out/docs) as a browser shows it.

Each page is opened in headless Chromium and read back from the DOM it built, so what is checked
is what an operator's browser shows, not the RST antsibull-docs wrote. What a module page must
show comes from ansible-doc (the modules' DOCUMENTATION and RETURN), not from the pages.
"""

from __future__ import annotations

import json
import os
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest
import yaml
from headless_chromium import dump_dom

ROOT = Path(__file__).resolve().parents[2]
DOCSITE = ROOT / "out" / "docs"
COLLECTION = "cloudstack.cks"


class OptionTable(HTMLParser):
    """The option and return value rows of a rendered plugin page, and every link on it.

    antsibull-docs gives each row an anchor ``parameter-<path>`` or ``return-<path>`` (the path of
    a suboption joined with ``/``), one more for each alias, followed by the row's title showing
    the name.
    """

    def __init__(self) -> None:
        super().__init__()
        self.titles: dict[str, str] = {}
        self.links: set[str] = set()
        self._anchors: list[str] = []
        self._in_title = False
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, Optional[str]]]) -> None:
        attr = {k: v or "" for k, v in attrs}
        classes = attr.get("class", "").split()
        if tag == "a" and attr.get("href"):
            self.links.add(attr["href"])
        if "ansibleOptionAnchor" in classes:
            self._anchors.append(attr.get("id", ""))
        elif "ansible-option-title" in classes and self._anchors:
            self._in_title, self._text = True, ""

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "p" and self._in_title:
            self.titles.update(dict.fromkeys(self._anchors, self._text.strip()))
            self._in_title, self._anchors = False, []


def rendered(page: Path) -> OptionTable:
    """The DOM Chromium built for ``page`` (after its scripts ran), parsed."""
    if not page.is_file():
        pytest.fail(f"{page} does not exist: `make docs` renders the docsite first")
    run = dump_dom(page.as_uri())
    assert run.returncode == 0 and "</html>" in run.stdout, f"chromium could not show {page}: {run.stderr[-2000:]}"
    table = OptionTable()
    table.feed(run.stdout)
    return table


def ansible_doc(*args: str) -> Any:
    env = dict(os.environ, ANSIBLE_NOCOLOR="1")
    run = subprocess.run([str(ROOT / ".venv" / "bin" / "ansible-doc"), "--json", *args],
                         capture_output=True, text=True, timeout=300, check=True, env=env)
    return json.loads(run.stdout)


def paths(entries: Optional[dict[str, Any]], nested: str, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(path, name) of every entry and its nested entries (``suboptions`` or ``contains``)."""
    for name, spec in (entries or {}).items():
        path = f"{prefix}{name}"
        yield path, name
        yield from paths((spec or {}).get(nested), nested, f"{path}/")


@pytest.fixture(scope="module")
def module_docs() -> dict[str, Any]:
    names = sorted(ansible_doc("-t", "module", "--list", COLLECTION))
    assert names, "ansible-doc lists no module of the collection"
    return dict(ansible_doc("-t", "module", *names))


def test_every_module_page_shows_every_option_and_return_value(module_docs: dict[str, Any]) -> None:
    for full_name, doc in module_docs.items():
        short = full_name.rsplit(".", 1)[-1]
        page = rendered(DOCSITE / f"{short}_module.html")
        expected = {f"parameter-{p}": n for p, n in paths(doc["doc"].get("options"), "suboptions")}
        expected |= {f"return-{p}": n for p, n in paths(doc.get("return"), "contains")}
        assert expected, f"{full_name} documents no option and no return value"
        missing = sorted(anchor for anchor in expected if anchor not in page.titles)
        assert not missing, f"{short}_module.html does not show: {missing}"
        wrong = {a: page.titles[a] for a, name in expected.items() if page.titles[a] != name}
        assert not wrong, f"{short}_module.html shows other names than ansible-doc: {wrong}"


def test_role_page_shows_every_entry_point_option() -> None:
    specs = yaml.safe_load((ROOT / "roles" / "rollout" / "meta" / "argument_specs.yml").read_text())
    page = rendered(DOCSITE / "rollout_role.html")
    expected = {f"parameter-{entry}--{p}": n for entry, spec in specs["argument_specs"].items()
                for p, n in paths(spec.get("options"), "options")}
    missing = sorted(anchor for anchor in expected if page.titles.get(anchor) != expected[anchor])
    assert not missing, f"rollout_role.html does not show: {missing}"


def test_index_links_every_plugin_role_and_guide(module_docs: dict[str, Any]) -> None:
    index = rendered(DOCSITE / "index.html")
    pages = {f"{name.rsplit('.', 1)[-1]}_module.html" for name in module_docs}
    for kind in ("inventory", "filter", "callback"):
        listed = ansible_doc("-t", kind, "--list", COLLECTION)
        assert listed, f"ansible-doc lists no {kind} plugin of the collection"
        pages |= {f"{name.rsplit('.', 1)[-1]}_{kind}.html" for name in listed}
    pages.add("rollout_role.html")
    extra = yaml.safe_load((ROOT / "docs" / "docsite" / "extra-docs.yml").read_text())
    guides = {f"docsite/{doc}.html" for section in extra["sections"] for doc in section["toctree"]}
    missing = sorted(p for p in pages | guides if p not in index.links)
    assert not missing, f"index.html does not link: {missing}"
    for guide in sorted(guides):
        assert (DOCSITE / guide).is_file(), f"{guide} was not rendered"


def test_index_links_the_collection_home_galaxy_names() -> None:
    # antsibull-docs links galaxy.yml's repository and issues on the index (not documentation).
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    index = rendered(DOCSITE / "index.html")
    for key in ("repository", "issues"):
        assert galaxy.get(key), f"galaxy.yml sets no {key}"
        assert galaxy[key] in index.links, f"index.html does not link galaxy.yml's {key} {galaxy[key]}"
