"""The rollout's timeline picture beside its report, opened as an operator opens it: in a browser.

A rollout through ansible-playbook with ``rollout_report_path`` leaves ``<report>.svg`` beside the
report, drawn from the report alone. Headless Chromium (Debian's, as the docsite test runs it, with
the closed-network flags) loads the picture inline in a page whose script lists every text it
actually drew (a bounding box with a size) and every wait marker's width; the test reads that list
from ``--dump-dom``: the batches, each node with its path, and the PodDisruptionBudget the drain
waited for.
"""

from __future__ import annotations

import copy
import html
import json
import os
import re
from typing import Any, Callable

import pytest
from headless_chromium import dump_dom
from helpers import load_raw_spec

pytestmark = pytest.mark.timeout(900)

# What the page's script finds drawn: each <text> with a box of some size, and each wait marker.
LIST_DRAWN = """
<script>
const lines = [];
for (const t of document.querySelectorAll('svg text')) {
  const box = t.getBBox();
  if (box.width > 0 && box.height > 0) lines.push('text ' + t.textContent);
}
for (const r of document.querySelectorAll('svg rect')) {
  const title = r.querySelector('title');
  if (title && title.textContent.startsWith('waited for') && r.getBBox().width > 0) lines.push('wait ' + title.textContent);
}
document.getElementById('drawn').textContent = JSON.stringify(lines);
</script>
"""


def dump(page: str) -> str:
    run = dump_dom("file://" + page)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def drawn(svg_path: str, work: str) -> list[str]:
    """What Chromium drew of the picture: ``text <words>`` and ``wait <title>`` lines."""
    with open(svg_path, encoding="utf-8") as fh:
        svg = fh.read()
    page = os.path.join(work, "timeline.html")
    with open(page, "w", encoding="utf-8") as fh:
        fh.write(f"<!DOCTYPE html><html><body>{svg}<pre id='drawn'></pre>{LIST_DRAWN}</body></html>")
    found = re.search(r"<pre id=\"drawn\">(.*?)</pre>", dump(page), re.S)
    assert found, "the page's script did not run"
    return json.loads(html.unescape(found.group(1)))


def test_the_report_has_its_timeline_picture_beside_it(rollout_sim: Callable[..., Any], tmp_path: Any) -> None:
    spec = copy.deepcopy(load_raw_spec("faults_small.yml"))
    # Three web pods, one per worker, of which two must stay available: of a batch of two workers, one
    # eviction waits until the other's replacement is Ready elsewhere (the budget refuses it meanwhile).
    spec["pdbs"] = [{"namespace": "default", "name": "web", "selector": {"app": "web"}, "minAvailable": 2}]
    sim = rollout_sim(spec, etcd=False)
    report_path = str(tmp_path / "prod-rollout.json")
    run = sim.rollout(rollout_node_offerings={"worker": "cks-large"}, rollout_max_unavailable=2,
                      rollout_eviction_retry_interval=1, rollout_report_path=report_path)
    assert run.rc == 0, run.output
    sim.assert_converged()
    picture = str(tmp_path / "prod-rollout.svg")
    assert os.path.isfile(picture) and oct(os.stat(picture).st_mode & 0o777) == "0o600"

    # The picture alone, as a browser opens the file: an SVG document, no XML error.
    standalone = dump(picture)
    assert "<svg" in standalone and "parsererror" not in standalone and "error on line" not in standalone

    lines = drawn(picture, str(tmp_path))
    texts = [line[5:] for line in lines if line.startswith("text ")]
    with open(report_path, encoding="utf-8") as fh:
        report = json.load(fh)
    assert f"Rollout {report['run_id']} of cluster rel: Running" in texts
    batches = report["batches"]
    for batch in batches:
        count = len(batch["nodes"])
        assert f"batch {batch['batch']}: worker, {count} node{'s' if count != 1 else ''}, done" in texts, texts
    for node in report["nodes"]:
        assert f"{node['name']} · restart" in texts, texts
    # The drain that a budget held back says so, on the node's row and as a marker on the time axis.
    waited = {n["name"]: (n["changes"].get("drain") or {}).get("waited_for") for n in report["nodes"]}
    held = [name for name, waits in waited.items() if waits]
    assert held, waited  # the spec makes one of the first batch's evictions wait for the budget
    assert any(t.startswith("waited for PodDisruptionBudget default/web ") for t in texts), texts
    assert any(line.startswith("wait waited for PodDisruptionBudget default/web: ") for line in lines), lines
