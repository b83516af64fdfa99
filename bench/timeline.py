# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Draw a rollout as a Gantt-style SVG: one row per node, a coloured segment per step, batch
boundaries, and the ideal beside the actual. Plain SVG written by hand, no plotting library.

    python bench/timeline.py REPORT.json -o timeline.svg              # a real cloud's rollout report
    python bench/timeline.py REPORT.json --sim-timeline TL.json -o x.svg  # with cks-sim's timeline

From the report alone (the JSON report's per-node steps with their start and end times) each row
shows the steps as the collection ran them, and the ideal lane puts the batches back to back,
each as long as its slowest node's cloud-bound steps (drain, stop, change, start, verify) - what
the rollout would take with no time between and around the steps. With the simulator's timeline
(the benchmarks), a thin bar under each row shows the cloud's own work (drain, stop, change,
start, boot to Ready) as the simulator timed it, and the ideal lane is the sum over batches of the
slowest node's critical path.

Library: ``from_report(report)`` / ``from_sim(timeline, report, timings, time_scale)`` give a
``Chart``; ``render(chart)`` returns the SVG text; ``write_svg(chart, path)`` writes it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence
from xml.sax.saxutils import escape

COLOURS = {
    "drain": "#4e79a7", "stop": "#e15759", "change": "#f28e2b", "start": "#59a14f",
    "boot": "#76b7b2", "verify": "#b07aa1", "cordon": "#bab0ac",
}
LABELS = {"drain": "drain", "stop": "stop", "change": "change (offering, disk, groups)", "start": "start",
          "boot": "boot to Ready (simulator)", "verify": "verify (wait for Ready, new boot ID)",
          "cordon": "annotate / cordon / uncordon"}
# The collection's step names (cks_node_cycle RV nodes[].steps[].name) -> a colour.
STEP_KIND = {"annotate": "cordon", "cordon": "cordon", "uncordon": "cordon", "drain": "drain", "stop": "stop",
             "change_offering": "change", "resize_root_disk": "change", "update_affinity_groups": "change",
             "start": "start", "verify": "verify"}
CLOUD_BOUND = ("drain", "stop", "change", "start", "verify")


@dataclass
class Row:
    node: str
    batch: int
    segments: list[tuple[str, float, float]] = field(default_factory=list)  # kind, start, end (Unix)
    cloud: list[tuple[str, float, float]] = field(default_factory=list)  # the simulator's segments


@dataclass
class Chart:
    title: str
    origin: float
    end: float
    rows: list[Row]
    batch_starts: list[float]
    ideal: list[list[tuple[str, float]]]  # per batch: the slowest node's (kind, seconds), in order
    ideal_source: str

    @property
    def actual_seconds(self) -> float:
        return self.end - self.origin

    @property
    def ideal_seconds(self) -> float:
        return sum(sum(s for _, s in batch) for batch in self.ideal)


def _time(value: Any) -> Optional[float]:
    """A step time: Unix seconds (the module's result) or RFC 3339 text (the rollout report)."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def _cluster_name(report: dict[str, Any]) -> str:
    cluster = report.get("cluster", "?")
    return str(cluster.get("name") or cluster.get("id") or "?") if isinstance(cluster, dict) else str(cluster)


def _rows(report: dict[str, Any]) -> tuple[list[Row], list[float]]:
    results = {n["name"]: n for n in report.get("nodes") or []}
    rows: list[Row] = []
    starts: list[float] = []
    for number, batch in enumerate(report.get("batches") or [], 1):
        firsts = []
        for name in batch.get("nodes") or []:
            node = results.get(name.lower()) or results.get(name) or {}
            row = Row(name.lower(), number)
            for step in node.get("steps") or []:
                started, ended = _time(step.get("started")), _time(step.get("ended"))
                if step.get("outcome") in ("skipped", "would_skip") or started is None or ended is None:
                    continue
                if isinstance(step.get("seconds"), (int, float)):
                    # Report times are whole seconds; the duration is exact.
                    ended = started + float(step["seconds"])
                row.segments.append((STEP_KIND.get(step["name"], "cordon"), started, ended))
            if row.segments:
                firsts.append(min(s[1] for s in row.segments))
            rows.append(row)
        if firsts:
            starts.append(min(firsts))
    return rows, starts


def from_report(report: dict[str, Any], title: Optional[str] = None, origin: Optional[float] = None,
                end: Optional[float] = None) -> Chart:
    """A chart from a rollout report alone (a real cloud)."""
    rows, starts = _rows(report)
    ideal: list[list[tuple[str, float]]] = []
    for number in range(1, len(report.get("batches") or []) + 1):
        best: list[tuple[str, float]] = []
        for row in (r for r in rows if r.batch == number):
            kinds: dict[str, float] = {}
            for kind, start, stop in row.segments:
                if kind in CLOUD_BOUND:
                    kinds[kind] = kinds.get(kind, 0.0) + (stop - start)
            lane = [(k, kinds[k]) for k in CLOUD_BOUND if k in kinds]
            if sum(s for _, s in lane) > sum(s for _, s in best):
                best = lane
        ideal.append(best)
    return _chart(title or f"Rollout of {_cluster_name(report)}", rows, starts, ideal,
                  "ideal: batches back to back, each its slowest node's drain + stop + change + start + verify", origin, end)


def from_sim(timeline: Sequence[dict[str, Any]], report: dict[str, Any], timings: dict[str, float],
             time_scale: float, title: Optional[str] = None, origin: Optional[float] = None,
             end: Optional[float] = None) -> Chart:
    """A chart from the report plus cks-sim's timeline: the ideal is the simulator's critical path."""
    bench = os.path.dirname(os.path.abspath(__file__))
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import analysis  # pylint: disable=import-outside-toplevel

    rows, starts = _rows(report)
    paths = analysis.node_paths(timeline, timings, time_scale)
    for row in rows:
        path = paths.get(row.node)
        if path is not None:
            row.cloud = [(k, path.segments[k][0], path.segments[k][1]) for k in analysis.SEGMENTS if k in path.segments]
    ideal = []
    for number in range(1, len(report.get("batches") or []) + 1):
        members = [paths[r.node] for r in rows if r.batch == number and r.node in paths]
        slowest = max(members, key=lambda p: p.ideal, default=None)
        ideal.append([(k, slowest.seconds(k)) for k in analysis.SEGMENTS if slowest and slowest.seconds(k) > 0])
    return _chart(title or f"Rollout of {_cluster_name(report)}", rows, starts, ideal,
                  "ideal: batches back to back, each its slowest node's critical path as the simulator timed it",
                  origin, end)


def _chart(title: str, rows: list[Row], starts: list[float], ideal: list[list[tuple[str, float]]], source: str,
           origin: Optional[float], end: Optional[float]) -> Chart:
    times = [t for r in rows for _, a, b in r.segments + r.cloud for t in (a, b)]
    first = min(times) if times else 0.0
    last = max(times) if times else 1.0
    return Chart(title, origin if origin is not None else first, end if end is not None else last, rows, starts, ideal, source)


def _ticks(span: float) -> float:
    for step in (0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600):
        if span / step <= 12:
            return step
    return 7200.0


def render(chart: Chart) -> str:
    label_w, right, top, row_h, bar_h = 190, 30, 70, 16, 10
    width = 1100
    plot_w = width - label_w - right
    span = max(chart.actual_seconds, chart.ideal_seconds, 1e-3)
    scale = plot_w / span
    rows_h = len(chart.rows) * row_h
    ideal_y = top + rows_h + 34
    legend_y = ideal_y + 56
    height = legend_y + 20 * ((len(COLOURS) + 2) // 3) + 30

    def x(t: float) -> float:
        return label_w + (t - chart.origin) * scale

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           'font-family="DejaVu Sans, Arial, sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{label_w}" y="20" font-size="14" font-weight="bold">{escape(chart.title)}</text>',
           f'<text x="{label_w}" y="38">actual {chart.actual_seconds:.1f} s, ideal {chart.ideal_seconds:.1f} s '
           f'(wall / ideal {chart.actual_seconds / chart.ideal_seconds if chart.ideal_seconds else float("nan"):.2f}); '
           f'{len(chart.rows)} nodes in {len(chart.ideal)} batches</text>']
    tick = _ticks(span)
    t = 0.0
    while t <= span + 1e-9:
        px = label_w + t * scale
        out.append(f'<line x1="{px:.1f}" y1="{top - 8}" x2="{px:.1f}" y2="{ideal_y + 20}" stroke="#eeeeee"/>')
        out.append(f'<text x="{px:.1f}" y="{top - 12}" text-anchor="middle" fill="#555">{t:g} s</text>')
        t += tick
    for i, row in enumerate(chart.rows):
        y = top + i * row_h
        if row.batch % 2 == 0:
            out.append(f'<rect x="0" y="{y}" width="{width}" height="{row_h}" fill="#f7f7f7"/>')
        name = row.node if len(row.node) <= 28 else "…" + row.node[-27:]
        out.append(f'<text x="{label_w - 6}" y="{y + 11}" text-anchor="end">{escape(name)}</text>')
        for kind, a, b in row.segments:
            out.append(f'<rect x="{x(a):.2f}" y="{y + 1}" width="{max(0.6, (b - a) * scale):.2f}" height="{bar_h}" '
                       f'fill="{COLOURS[kind]}"><title>{escape(row.node)} {kind}: {b - a:.2f} s</title></rect>')
        for kind, a, b in row.cloud:
            out.append(f'<rect x="{x(a):.2f}" y="{y + bar_h + 2}" width="{max(0.6, (b - a) * scale):.2f}" height="3" '
                       f'fill="{COLOURS[kind]}" opacity="0.9"/>')
    for index, start in enumerate(chart.batch_starts):
        px = x(start)
        out.append(f'<line x1="{px:.1f}" y1="{top - 4}" x2="{px:.1f}" y2="{top + rows_h}" stroke="#333" '
                   'stroke-dasharray="3,3" stroke-width="0.8"/>')
        first_row = next((i for i, r in enumerate(chart.rows) if r.batch == index + 1), 0)
        out.append(f'<text x="{px + 2:.1f}" y="{top + first_row * row_h - 1}" fill="#333" font-size="9">batch {index + 1}</text>')
    # The ideal lane, and the actual as one bar for comparison.
    out.append(f'<text x="{label_w - 6}" y="{ideal_y - 12 + 9}" text-anchor="end" font-weight="bold">actual</text>')
    out.append(f'<rect x="{label_w}" y="{ideal_y - 12}" width="{chart.actual_seconds * scale:.2f}" height="9" fill="#999"/>')
    out.append(f'<text x="{label_w - 6}" y="{ideal_y + 9}" text-anchor="end" font-weight="bold">ideal</text>')
    cursor = label_w
    for number, batch in enumerate(chart.ideal, 1):
        start = cursor
        for kind, seconds in batch:
            out.append(f'<rect x="{cursor:.2f}" y="{ideal_y}" width="{max(0.3, seconds * scale):.2f}" height="11" fill="{COLOURS[kind]}"/>')
            cursor += seconds * scale
        out.append(f'<line x1="{start:.2f}" y1="{ideal_y - 2}" x2="{start:.2f}" y2="{ideal_y + 13}" stroke="#333" stroke-width="0.8"/>')
        _ = number
    out.append(f'<text x="{label_w}" y="{ideal_y + 26}" fill="#555">{escape(chart.ideal_source)}</text>')
    out.append(f'<text x="{label_w}" y="{ideal_y + 39}" fill="#555">rows: the steps as the collection ran them'
               + ('; thin bars under them: the cloud\'s own work as the simulator timed it' if any(r.cloud for r in chart.rows) else '')
               + '</text>')
    for i, kind in enumerate(COLOURS):
        lx, ly = label_w + (i % 3) * 300, legend_y + (i // 3) * 20
        out.append(f'<rect x="{lx}" y="{ly}" width="12" height="10" fill="{COLOURS[kind]}"/>')
        out.append(f'<text x="{lx + 16}" y="{ly + 9}">{escape(LABELS[kind])}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_svg(chart: Chart, path: str) -> str:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(render(chart))
    return path


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Draw a rollout report as an SVG timeline")
    parser.add_argument("report", help="the rollout's JSON report (rollout_report_path)")
    parser.add_argument("-o", "--output", default=None, help="the SVG to write (default: REPORT with .svg)")
    parser.add_argument("--sim-timeline", help="cks-sim's GET /timeline as JSON, or {timeline, timings, time_scale}: "
                                               "draw the simulator's own work and its ideal")
    parser.add_argument("--time-scale", type=float, default=None, help="the simulator's time_scale, if the file has none")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv)
    with open(args.report, encoding="utf-8") as fh:
        report = json.load(fh)
    if args.sim_timeline:
        with open(args.sim_timeline, encoding="utf-8") as fh:
            data = json.load(fh)
        bench = os.path.dirname(os.path.abspath(__file__))
        sys.path.insert(0, bench)
        from simproc import TIMINGS  # pylint: disable=import-outside-toplevel

        # Either GET /timeline's list, or {"timeline": [...], "timings": GET /state's, "time_scale": ...}.
        events = data if isinstance(data, list) else data.get("timeline") or []
        timings = dict(TIMINGS, **(data.get("timings") or {})) if isinstance(data, dict) else dict(TIMINGS)
        scale = args.time_scale or (data.get("time_scale") if isinstance(data, dict) else None) or 1.0
        chart = from_sim(events, report, timings, float(scale), title=args.title)
    else:
        chart = from_report(report, title=args.title)
    output = args.output or os.path.splitext(args.report)[0] + ".svg"
    write_svg(chart, output)
    print(f"Timeline: {output} ({len(chart.rows)} nodes, actual {chart.actual_seconds:.1f} s, ideal {chart.ideal_seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
