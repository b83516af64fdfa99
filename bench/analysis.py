# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Pure functions over what a rollout left behind: the simulator's timeline and call log, the
bench_timer task events and the rollout report. No I/O, so the smoke test can check them.

The ideal of a node is its critical path as the simulator timed it: drain (first accepted
eviction to the last evicted pod gone) + stop (stop requested to Stopped) + change (the
simulated duration of each change job that ran: resize, affinity; an offering change is
synchronous) + start (start requested to Running) + boot (Running to node Ready). A batch's
ideal is its slowest node; the rollout's ideal is the sum over batches. Everything else -
Ansible, module start-up, cluster reads, preflight, polling slack - is overhead.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Sequence

#: The timeline events that end a CloudStack job (detection_latency times the poll that saw each).
JOB_EVENTS = ("stopped", "volume_resized", "started")
STEP_EVENTS = {"stop": ("stop_requested", "stopped"), "start": ("start_requested", "started")}
CHANGE_TIMINGS = {"volume_resized": "resize", "affinity_updated": "affinity"}
SEGMENTS = ("drain", "stop", "change", "start", "boot")


@dataclass
class NodePath:
    """One node's critical path as the simulator timed it (real seconds) and when it happened."""

    node: str
    segments: dict[str, tuple[float, float]] = field(default_factory=dict)  # name -> (start, end), Unix time

    def seconds(self, name: str) -> float:
        start, end = self.segments.get(name, (0.0, 0.0))
        return max(0.0, end - start)

    @property
    def ideal(self) -> float:
        return sum(self.seconds(name) for name in SEGMENTS)


def node_paths(timeline: Sequence[dict[str, Any]], timings: dict[str, float], time_scale: float) -> dict[str, NodePath]:
    """Critical path of every node that was stopped and came back in ``timeline``."""
    by_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in sorted(timeline, key=lambda e: e["t"]):
        if event.get("node"):
            by_node[event["node"]].append(event)
    paths: dict[str, NodePath] = {}
    for node, events in by_node.items():
        first = {}
        for event in events:
            first.setdefault(event["event"], event["t"])
        if "stop_requested" not in first or "ready" not in events_after(events, "ready", first.get("started", 0)):
            continue
        path = NodePath(node)
        evicted = [e for e in events if e["event"] == "eviction" and e.get("result") == "accepted" and not e.get("dry_run")]
        if evicted:
            pods = {e["pod"] for e in evicted}
            gone = [e["t"] for e in events if e["event"] == "pod_deleted" and e.get("pod") in pods
                    and e["t"] >= evicted[0]["t"] and e["t"] <= first["stop_requested"]]
            if gone:
                path.segments["drain"] = (evicted[0]["t"], max(gone))
        for name, (begin, end) in STEP_EVENTS.items():
            start = first.get(begin)
            finish = next((e["t"] for e in events if e["event"] == end and start is not None and e["t"] >= start), None)
            if start is not None and finish is not None:
                path.segments[name] = (start, finish)
        stopped = path.segments.get("stop", (first["stop_requested"],) * 2)[1]
        change = sum(timings.get(CHANGE_TIMINGS[e["event"]], 0.0) * time_scale for e in events
                     if e["event"] in CHANGE_TIMINGS and e["t"] >= stopped)
        if change:
            # The change jobs ran between Stopped and the start request; their length is the
            # simulator's own timing, placed just before the start request.
            start_req = path.segments.get("start", (stopped, stopped))[0]
            path.segments["change"] = (start_req - change, start_req)
        started = path.segments.get("start", (0.0, first.get("started", 0.0)))[1]
        ready = next((e["t"] for e in events if e["event"] == "ready" and e["t"] >= started), None)
        if ready is not None:
            path.segments["boot"] = (started, ready)
        paths[node] = path
    return paths


def events_after(events: Iterable[dict[str, Any]], name: str, t: float) -> list[str]:
    return [e["event"] for e in events if e["event"] == name and e["t"] >= t]


@dataclass
class Batch:
    number: int
    nodes: list[str]
    node_type: str
    started: float = 0.0  # first task of the batch's pass (bench_timer)
    ended: float = 0.0  # first task of the next pass / of the release play
    cycle_started: float = 0.0  # the cks_node_cycle task
    cycle_ended: float = 0.0
    ideal: float = 0.0  # slowest node's critical path
    slowest_node: float = 0.0  # slowest node's own cycle (first step start to last step end, module's clock)
    steps_span: float = 0.0  # first step start to last step end over the batch's nodes

    @property
    def wall(self) -> float:
        return self.ended - self.started

    @property
    def cycle_wall(self) -> float:
        return self.cycle_ended - self.cycle_started


def task_spans(tasks: Sequence[dict[str, Any]], end: float) -> list[dict[str, Any]]:
    """Each task start with its duration (to the next task start or play start, the linear strategy's order)."""
    marks = [e for e in tasks if e["event"] in ("task", "play", "end")]
    spans = []
    for index, mark in enumerate(marks):
        if mark["event"] != "task":
            continue
        following = marks[index + 1]["t"] if index + 1 < len(marks) else end
        spans.append({"name": mark["name"], "action": mark.get("action"), "t": mark["t"], "seconds": following - mark["t"]})
    return spans


def _play_end(tasks: Sequence[dict[str, Any]], started: float, release: float) -> float:
    """When the play of the pass that started at ``started`` gave way to another play (the plan of the
    nodes the cluster autoscaler added, the release): the last pass ends there, not at the release."""
    plays = [e for e in tasks if e["event"] == "play"]
    own = [e["name"] for e in plays if e["t"] <= started]
    if not own:
        return release
    later = [e["t"] for e in plays if e["t"] > started and e["name"] != own[-1]]
    return min([release] + later)


def batches_of(report: dict[str, Any], tasks: Sequence[dict[str, Any]], paths: dict[str, NodePath],
               end: float) -> list[Batch]:
    """The report's batches, timed by the task events, with their ideal and their nodes' own times."""
    plan = report.get("batches") or []
    spans = task_spans(tasks, end)
    passes = [s for s in spans if s["name"].endswith("Record the nodes of this batch")]
    cycles = [s for s in spans if s["action"] and s["action"].endswith("cks_node_cycle") and s["name"].split(" : ")[-1].startswith("Batch ")]
    release = next((s["t"] for s in spans if s["name"] == "Release"), end)
    results = {n["name"]: n for n in report.get("nodes") or []}
    out = []
    for index, entry in enumerate(plan):
        nodes = [n.lower() for n in entry.get("nodes") or []]
        batch = Batch(number=index + 1, nodes=nodes, node_type=str(entry.get("node_type", "")))
        if index < len(passes):
            # The pass starts with the include_role and argument validation just before "Record".
            batch.started = _pass_start(spans, passes[index]["t"])
            batch.ended = (_pass_start(spans, passes[index + 1]["t"]) if index + 1 < len(passes)
                           else _play_end(tasks, batch.started, release))
        if index < len(cycles):
            batch.cycle_started = cycles[index]["t"]
            batch.cycle_ended = cycles[index]["t"] + cycles[index]["seconds"]
        batch.ideal = max((paths[n].ideal for n in nodes if n in paths), default=0.0)
        own = []
        firsts, lasts = [], []
        for n in nodes:
            steps = [s for s in (results.get(n) or {}).get("steps") or []
                     if isinstance(s.get("started"), (int, float)) and isinstance(s.get("ended"), (int, float))]
            if steps:
                first, last = min(s["started"] for s in steps), max(s["ended"] for s in steps)
                own.append(last - first)
                firsts.append(first)
                lasts.append(last)
        batch.slowest_node = max(own, default=0.0)
        batch.steps_span = (max(lasts) - min(firsts)) if firsts else 0.0
        out.append(batch)
    return out


def _pass_start(spans: Sequence[dict[str, Any]], record_t: float) -> float:
    """The include_role ("Roll the batch") and the argument validation run just before "Record"."""
    before = [s for s in spans if s["t"] < record_t]
    start = record_t
    for span in reversed(before[-2:]):
        if span["name"] == "Roll the batch" or "Validating arguments" in span["name"]:
            start = span["t"]
    return start


def overhead(wall: float, batches: Sequence[Batch], rollout_started: float, rollout_ended: float) -> dict[str, Any]:
    ideal = sum(b.ideal for b in batches)
    count = max(1, len(batches))
    first = batches[0].started if batches and batches[0].started else rollout_started
    last = batches[-1].ended if batches and batches[-1].ended else rollout_ended
    in_batches = sum(b.wall - b.ideal for b in batches)
    return {
        "batches": len(batches),
        "wall": round(wall, 3),
        "ideal": round(ideal, 3),
        "ratio": round(wall / ideal, 3) if ideal else None,
        "overhead_per_batch": round((wall - ideal) / count, 3),
        # Where it goes: before the first batch (start-up, settings, plan), inside the batch
        # passes (above each batch's ideal), after the last (release, report).
        "before_batches": round(first - rollout_started, 3),
        "in_batches_per_batch": round(in_batches / count, 3),
        "after_batches": round(rollout_ended - last, 3),
    }


def task_costs(tasks: Sequence[dict[str, Any]], end: float, batches: Sequence[Batch]) -> list[dict[str, Any]]:
    """Seconds per task name, summed over the run, per batch pass for the rolling play's tasks."""
    spans = task_spans(tasks, end)
    total: dict[str, float] = defaultdict(float)
    runs: Counter = Counter()
    for span in spans:
        name = span["name"].split(" : ")[-1]
        if name.startswith("Batch ") and " of " in name:
            name = "Batch N of M (cks_node_cycle)"
        total[name] += span["seconds"]
        runs[name] += 1
    return sorted(({"task": k, "seconds": round(v, 3), "runs": runs[k], "per_run": round(v / runs[k], 3)}
                   for k, v in total.items()), key=lambda r: -r["seconds"])


def task_runs_per_batch(tasks: Sequence[dict[str, Any]], batches: Sequence[Batch]) -> list[int]:
    """The task starts (skipped ones too: each costs Ansible its own work) in each batch's pass."""
    starts = [e["t"] for e in tasks if e["event"] == "task"]
    return [sum(1 for t in starts if b.started <= t < b.ended) for b in batches if b.started and b.ended]


def cycle_breakdown(batches: Sequence[Batch]) -> dict[str, float]:
    """Inside the cks_node_cycle task, per batch: module start-up + preflight before the first
    step, the steps' own span above the ideal, and the time after the last step (result, exit)."""
    rows = [b for b in batches if b.cycle_wall and b.steps_span]
    if not rows:
        return {}
    count = len(rows)
    return {
        "cycle_task": round(sum(b.cycle_wall for b in rows) / count, 3),
        "steps_span": round(sum(b.steps_span for b in rows) / count, 3),
        "ideal": round(sum(b.ideal for b in rows) / count, 3),
        "outside_steps": round(sum(b.cycle_wall - b.steps_span for b in rows) / count, 3),
        "steps_above_ideal": round(sum(b.steps_span - b.ideal for b in rows) / count, 3),
    }


def calls_per_node(calls: Sequence[dict[str, Any]], rolled: int) -> dict[str, Any]:
    by_command: Counter = Counter()
    for call in calls:
        by_command[call_key(call)] += 1
    per_api: Counter = Counter()
    for key, count in by_command.items():
        per_api[key.split(":", 1)[0]] += count
    rolled = max(1, rolled)
    evictions = by_command["kubernetes:create pods/eviction"]
    jobs = sum(1 for call in calls if is_job_submit(call))
    catalog = {c: by_command[f"cloudstack:{c}"] for c in CATALOG_COMMANDS}
    return {
        "cloudstack_per_node": round(per_api["cloudstack"] / rolled, 2),
        "kubernetes_per_node": round(per_api["kubernetes"] / rolled, 2),
        # The load target counts a node's Kubernetes calls besides its evictions (one per pod, however
        # the cluster is rolled), and the job polls apart: what the management server sees most.
        "kubernetes_per_node_besides_evictions": round((per_api["kubernetes"] - evictions) / rolled, 2),
        "evictions_per_node": round(evictions / rolled, 2),
        "job_polls_per_node": round(by_command["cloudstack:queryAsyncJobResult"] / rolled, 2),
        # What a node costs the management server in job polls, per async job it submits.
        "jobs_per_node": round(jobs / rolled, 2),
        "polls_per_job": round(by_command["cloudstack:queryAsyncJobResult"] / jobs, 2) if jobs else None,
        "catalog_reads": catalog,
        "by_command_per_node": {k: round(v / rolled, 2) for k, v in sorted(by_command.items(), key=lambda kv: -kv[1])},
        "total": dict(per_api),
    }


#: The catalog: read once per rollout, not once per batch.
CATALOG_COMMANDS = ("listServiceOfferings", "listDiskOfferings", "listAffinityGroups")


def is_job_submit(call: dict[str, Any]) -> bool:
    """An async command CloudStack answered with a job (the sim logs the jobid it answered; a poll's
    answer carries the job's id too, so the polls are left out)."""
    return (call.get("api") == "cloudstack" and bool(call.get("jobid"))
            and call.get("command") not in ("queryAsyncJobResult", "listAsyncJobs"))


def call_key(call: dict[str, Any]) -> str:
    if call.get("api") == "cloudstack":
        return f"cloudstack:{call.get('command')}"
    return f"kubernetes:{call.get('verb')} {call.get('resource')}"


def is_list_call(call: dict[str, Any]) -> bool:
    if call.get("api") == "cloudstack":
        return str(call.get("command", "")).startswith("list")
    return call.get("verb") == "list"


def list_calls_per_batch(calls: Sequence[dict[str, Any]], batches: Sequence[Batch]) -> list[int]:
    counts = []
    for batch in batches:
        if batch.started and batch.ended:
            counts.append(sum(1 for c in calls if batch.started <= c["t"] < batch.ended and is_list_call(c)))
    return counts


def detection_latency(calls: Sequence[dict[str, Any]], timeline: Sequence[dict[str, Any]],
                      vm_ids: dict[str, str]) -> dict[str, Any]:
    """From the simulator's event to the first call that observes it.

    Jobs (stop, resize, start): the job's end event -> the next queryAsyncJobResult of that job.
    Node Ready: the ``ready`` event -> the next read of that node (none when the rollout watched
    the node come back, as it does wherever the API server serves watches: no sample then). Pod gone: its ``pod_deleted``
    -> the next read of that pod (the drain polls each evicted pod by name).
    """
    calls = sorted(calls, key=lambda c: c["t"])
    jobs: dict[tuple[str, str], list[tuple[float, str]]] = defaultdict(list)  # (command, object id) -> [(t, jobid)]
    polls: dict[str, list[float]] = defaultdict(list)
    node_reads: dict[str, list[float]] = defaultdict(list)
    pod_reads: dict[str, list[float]] = defaultdict(list)
    for call in calls:
        params = call.get("params") or {}
        if call.get("api") == "cloudstack":
            if call.get("jobid"):
                jobs[(str(call.get("command")), str(params.get("id", "")))].append((call["t"], call["jobid"]))
            if call.get("command") == "queryAsyncJobResult":
                polls[str(params.get("jobid"))].append(call["t"])
        elif call.get("resource") == "nodes" and call.get("verb") == "get" and call.get("name"):
            node_reads[call["name"]].append(call["t"])
        elif call.get("resource") == "pods" and call.get("verb") == "get" and call.get("name"):
            pod_reads[f"{call.get('namespace')}/{call['name']}"].append(call["t"])
    volume_of: dict[str, str] = {}
    for (command, object_id), _submitted in jobs.items():
        if command == "resizeVolume":
            volume_of.setdefault(object_id, object_id)
    samples: dict[str, list[float]] = defaultdict(list)
    submits = {key: sorted(v) for key, v in jobs.items()}
    for event in timeline:
        kind = event["event"]
        node = event.get("node") or ""
        if kind in ("stopped", "started", "volume_resized"):
            command = {"stopped": "stopVirtualMachine", "started": "startVirtualMachine", "volume_resized": "resizeVolume"}[kind]
            candidates = []
            for (cmd, object_id), submitted in submits.items():
                if cmd != command:
                    continue
                if command != "resizeVolume" and object_id != vm_ids.get(node):
                    continue
                candidates.extend(s for s in submitted if s[0] <= event["t"])
            if command == "resizeVolume":
                # The volume id is not in the timeline: take the resize job whose polls saw this
                # node's event first (the latest submitted before it, polled after it).
                candidates = [c for c in candidates if any(p >= event["t"] for p in polls.get(c[1], []))]
            if not candidates:
                continue
            _, jobid = max(candidates)
            seen = next((p for p in polls.get(jobid, []) if p >= event["t"]), None)
            if seen is not None and (command != "resizeVolume" or seen - event["t"] < 60):
                samples[kind].append(seen - event["t"])
        elif kind == "ready":
            seen = next((t for t in node_reads.get(node, []) if t >= event["t"]), None)
            if seen is not None:
                samples["ready"].append(seen - event["t"])
        elif kind == "pod_deleted" and event.get("pod"):
            seen = next((t for t in pod_reads.get(event["pod"], []) if t >= event["t"]), None)
            if seen is not None and seen - event["t"] < 60:
                samples["pod_gone"].append(seen - event["t"])
    summary = {}
    for kind, values in samples.items():
        values.sort()
        summary[kind] = {"n": len(values), "mean": round(statistics.mean(values), 3),
                         "p50": round(_pct(values, 0.5), 3), "p95": round(_pct(values, 0.95), 3),
                         "max": round(values[-1], 3)}
    # The polling slack of the CloudStack jobs alone: each job's end to the poll that saw it.
    job_slack = sorted(v for kind in JOB_EVENTS for v in samples.get(kind, []))
    if job_slack:
        summary["jobs"] = {"n": len(job_slack), "mean": round(statistics.mean(job_slack), 3),
                           "p50": round(_pct(job_slack, 0.5), 3), "p95": round(_pct(job_slack, 0.95), 3),
                           "max": round(job_slack[-1], 3)}
    everything = sorted(v for values in samples.values() for v in values)
    if everything:
        summary["all"] = {"n": len(everything), "mean": round(statistics.mean(everything), 3),
                          "p50": round(_pct(everything, 0.5), 3), "p95": round(_pct(everything, 0.95), 3),
                          "max": round(everything[-1], 3)}
    return summary


def _pct(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    index = min(len(values) - 1, max(0, int(round(q * (len(values) - 1)))))
    return values[index]


def concurrency(batch: Batch) -> dict[str, Optional[float]]:
    """A batch against its slowest node: the cks_node_cycle task (module start-up, preflight and
    all) and the steps' span alone (the threads), each divided by the slowest node's own cycle."""
    if not batch.slowest_node:
        return {"task_ratio": None, "steps_ratio": None}
    return {"task_ratio": round(batch.cycle_wall / batch.slowest_node, 3),
            "steps_ratio": round(batch.steps_span / batch.slowest_node, 3)}
