"""The benchmark machinery end to end, tiny: `bench/run.py --smoke` starts cks-sim, rolls
1 control + 3 workers (2 at a time) with playbooks/rollout.yml, plans a 20-node cluster, and must
write a JSON result with the expected keys, a Markdown table and an SVG timeline whose numbers
hang together. Nothing here is timed: speed is what `make bench` reports, not what tests assert.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("bench")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "run.py"), "--smoke", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(out / "latest.json", encoding="utf-8") as fh:
        result = json.load(fh)
    return {"dir": out, "result": result, "stdout": proc.stdout}


@pytest.mark.timeout(900)
def test_rollout_result_adds_up(smoke: dict) -> None:
    result = smoke["result"]
    assert {"time_scale", "rollouts", "concurrency", "planning", "verdicts", "machine", "elapsed"} <= set(result)
    assert len(result["rollouts"]) == 1
    run = result["rollouts"][0]
    assert run["rc"] == 0 and run["invariant_violations"] == 0
    assert run["nodes_rolled"] == 3
    assert [b["nodes"] for b in run["batches"]] == [2, 1]
    cost = run["overhead"]
    assert {"wall", "ideal", "ratio", "overhead_per_batch", "before_batches", "in_batches_per_batch",
            "after_batches", "ratio_at_time_scale_1"} <= set(cost)
    # The simulator's critical path of a node is its timings (62 simulated s) times time_scale:
    # the sum over 2 batches can neither be shorter than that nor longer than the wall.
    node_ideal = result["node_ideal_simulated"] * result["time_scale"]
    assert 2 * node_ideal * 0.9 <= cost["ideal"] < cost["wall"]
    assert cost["ratio"] == pytest.approx(cost["wall"] / cost["ideal"], rel=0.01)
    assert 1.0 < cost["ratio_at_time_scale_1"] < cost["ratio"]
    for segment in ("drain", "stop", "start", "boot"):
        assert run["ideal_segments_mean"][segment] > 0
    # Every pass of the rolling play starts the same role tasks (the load target counts them).
    runs = run["task_runs_per_batch"]
    assert len(runs) == 2 and len(set(runs)) == 1 and runs[0] >= 5
    for batch in run["batches"]:
        # A batch pass holds its cks_node_cycle task, which holds the steps of its nodes.
        assert batch["wall"] >= batch["cycle_task"] >= batch["steps_span"] >= batch["slowest_node"] > 0
        assert batch["ideal"] <= batch["slowest_node"]


@pytest.mark.timeout(900)
def test_calls_and_detection_latency(smoke: dict) -> None:
    run = smoke["result"]["rollouts"][0]
    per_node = run["calls"]["by_command_per_node"]
    # Each rolled node is stopped and started once, and its job results are polled.
    assert per_node["cloudstack:stopVirtualMachine"] == 1
    assert per_node["cloudstack:startVirtualMachine"] == 1
    assert per_node["cloudstack:queryAsyncJobResult"] >= 2
    assert run["calls"]["cloudstack_per_node"] > 0 and run["calls"]["kubernetes_per_node"] > 0
    assert len(run["list_calls_per_batch"]) == 2 and min(run["list_calls_per_batch"]) > 0
    # The catalog is listed by the rollout's first module run only, the others are
    # handed it; evictions and job polls are counted apart from the rest.
    calls = run["calls"]
    assert calls["catalog_reads"] == {"listServiceOfferings": 1, "listDiskOfferings": 1, "listAffinityGroups": 1}
    assert calls["evictions_per_node"] == per_node.get("kubernetes:create pods/eviction", 0)
    assert calls["kubernetes_per_node_besides_evictions"] == pytest.approx(
        calls["kubernetes_per_node"] - calls["evictions_per_node"], abs=0.011)
    assert calls["job_polls_per_node"] == per_node["cloudstack:queryAsyncJobResult"]
    # What a node costs in job polls: its stop, resize and start, each polled at least once.
    assert calls["jobs_per_node"] == per_node["cloudstack:stopVirtualMachine"] + per_node["cloudstack:resizeVolume"] \
        + per_node["cloudstack:startVirtualMachine"] == 3
    assert calls["polls_per_job"] == pytest.approx(calls["job_polls_per_node"] / calls["jobs_per_node"], abs=0.01)
    assert calls["polls_per_job"] >= 1
    latency = run["detection_latency"]
    for kind in ("stopped", "started"):
        assert latency[kind]["n"] == 3
        assert 0 <= latency[kind]["p50"] <= latency[kind]["max"] < 30
    # The jobs' slack: every stop, resize and start of the 3 nodes, as the kinds above say.
    jobs = latency["jobs"]
    assert jobs["n"] == sum(latency[k]["n"] for k in ("stopped", "volume_resized", "started")) == 9
    assert 0 <= jobs["p50"] <= jobs["max"] == max(latency[k]["max"] for k in ("stopped", "volume_resized", "started"))
    # A node's return is watched: the event reaches the rollout on the stream, and
    # no node read follows it to time; only a rollout that fell back to polling has samples.
    assert "ready" not in latency or 0 <= latency["ready"]["p50"] <= latency["ready"]["max"] < 30


@pytest.mark.timeout(900)
def test_concurrency_and_planning_rows(smoke: dict) -> None:
    result = smoke["result"]
    rows = {r["k"]: r for r in result["concurrency"]}
    assert set(rows) == {1, 2}
    for row in rows.values():
        assert row["task_ratio"] >= row["steps_ratio"] >= 1.0
    plan = result["planning"][0]
    assert plan["nodes"] == 20 and plan["out_of_date"] == 17
    assert plan["calls"]["cloudstack"] > 0 and plan["calls"]["kubernetes"] > 0
    assert plan["wall_median"] > 0 and plan["max_rss_mb"] > 10


@pytest.mark.timeout(900)
def test_table_and_timeline_written(smoke: dict) -> None:
    out = smoke["dir"]
    table = (out / "latest.md").read_text(encoding="utf-8")
    assert "| rollout | batches |" in table and "| planning (cks_node_outdated) |" in table
    # Every load target has a verdict: met, missed by how much (with why), or not measured.
    rows = smoke["result"]["load_targets"]
    assert rows and all(r["met"] is not None or r["why"] == "not measured" for r in rows)
    assert all(r["by"] is None if r["met"] else (r["met"] is None or (r["by"] > 0 and r["why"])) for r in rows)
    assert "| rollout | jobs / node | polls / job | polls / node |" in table
    assert "Load targets (what the management servers see):" in table and table.count("| catalog (offerings, disk offerings, groups) reads") == 1
    assert table.strip() in smoke["stdout"]
    tree = ET.parse(out / "timeline.svg")
    rects = tree.getroot().iter(f"{SVG}rect")
    fills = {r.get("fill") for r in rects}
    # Every step kind the cycle ran has its colour: drain, stop, change, start, boot, verify.
    assert {"#4e79a7", "#e15759", "#f28e2b", "#59a14f", "#76b7b2", "#b07aa1"} <= fills
    texts = [t.text or "" for t in tree.getroot().iter(f"{SVG}text")]
    assert sum(1 for t in texts if t.startswith("bench-node-")) == 3
    assert any(t.startswith("batch 2") for t in texts)
