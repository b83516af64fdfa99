# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The rollout's timeline as a picture an operator opens: an SVG drawn from the rollout report alone
(pure; the release writes it beside the report file, ``_services/release.py``).

Per batch a header row (its number, node type, validation, the API limit's waits), then per node
one row: its path (``restart``, or the path the report names), each step it ran on a shared time
axis, and each wait named where the report knows it - a PodDisruptionBudget refusing an eviction,
the deployment planner (a start held until another node of the node's strict affinity group was
placed), the API rate limit. Plain SVG written by hand: no script, no font or style from outside,
so a browser, a file manager's preview or an AWX artifact viewer shows it as it is.
"""

from __future__ import annotations

import datetime
import os
from typing import Any, Mapping, Optional, Sequence
from xml.sax.saxutils import escape

#: Step name (the report's nodes[].steps[].name) -> what it is drawn as.
STEP_KINDS = {"annotate": "cordon", "cordon": "cordon", "exclude_from_lb": "cordon", "drain": "drain",
              "lb_wait": "drain", "stop": "stop", "change_offering": "change", "resize_root_disk": "change",
              "update_affinity_groups": "change", "start": "start", "verify": "verify", "recheck": "verify",
              "uncordon": "cordon", "unmark": "cordon"}
COLOURS = {"cordon": "#bab0ac", "drain": "#4e79a7", "stop": "#e15759", "change": "#f28e2b", "start": "#59a14f",
           "verify": "#b07aa1", "validation": "#9c755f", "wait": "#222222"}
LEGEND = {"cordon": "annotate, cordon, uncordon", "drain": "drain", "stop": "stop", "change": "change (offering, disk, groups)",
          "start": "start", "verify": "verify (Ready, new boot ID)", "validation": "validation after the batch",
          "wait": "a wait, named: a PodDisruptionBudget, the deployment planner, the API limit"}
PLANNER = "the deployment planner (strict affinity group)"
_WIDTH, _LABEL, _RIGHT, _TOP, _ROW = 1200, 300, 40, 78, 18


def picture_path(report_path: str) -> str:
    """Where the picture of the report at ``report_path`` goes: beside it, as ``.svg``."""
    root, _ext = os.path.splitext(report_path)
    return root + ".svg"


def _time(value: Any) -> Optional[float]:
    """Unix seconds from the report's RFC 3339 text (or a number)."""
    if value in (None, ""):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def node_steps(node: Mapping[str, Any]) -> list[tuple[str, str, float, float]]:
    """(step, kind, start, end) of the steps a node ran, one after another. The report's times are
    whole seconds, its durations exact: each step starts within its second, after the one before,
    and is put in the middle of where it can be (a whole second early or late would open a gap
    between two steps that followed one another at once)."""
    ran: list[tuple[str, float, float]] = []  # name, its whole second, seconds
    for step in node.get("steps") or []:
        started = _time(step.get("started"))
        if step.get("outcome") in ("skipped", "would_skip") or started is None:
            continue
        seconds = step.get("seconds")
        if not isinstance(seconds, (int, float)):
            ended = _time(step.get("ended"))
            seconds = (ended - started) if ended is not None else 0.0
        ran.append((str(step.get("name")), started, max(0.0, float(seconds))))
    latest: list[float] = []  # the latest each can have started: within its second, before the next one
    for _name, second, seconds in reversed(ran):
        latest.insert(0, min(second + 1.0, (latest[0] if latest else second + 1.0) - seconds))
    drawn: list[tuple[str, str, float, float]] = []
    cursor = 0.0
    for (name, second, seconds), last in zip(ran, latest, strict=True):
        earliest = max(second, cursor)
        begin = max(earliest, (earliest + last) / 2) if last > earliest else earliest
        drawn.append((name, STEP_KINDS.get(name, "cordon"), begin, begin + seconds))
        cursor = begin + seconds
    return drawn


def node_waits(node: Mapping[str, Any], steps: Sequence[tuple[str, str, float, float]]) -> list[tuple[str, float, float]]:
    """(what it waited for, start, end) of a node's named waits, from its changes and its error."""
    at = {name: (start, end) for name, _kind, start, end in steps}
    changes = node.get("changes") or {}
    waits: list[tuple[str, float, float]] = []
    drain = at.get("drain")
    for wait in (changes.get("drain") or {}).get("waited_for") or []:
        if drain is not None:
            begin = drain[0] + float(wait.get("after") or 0.0)
            waits.append((f"PodDisruptionBudget {wait.get('pdb') or '?'}", begin, begin + float(wait.get("seconds") or 0.0)))
    error = node.get("error") or {}
    if drain is not None and error.get("step") == "drain":
        budgets = sorted({pdb for left in error.get("pods_left") or [] for pdb in left.get("pdb") or []})
        for pdb in budgets:
            waits.append((f"PodDisruptionBudget {pdb} (until the deadline)", drain[0], drain[1]))
    planner = float((changes.get("start") or {}).get("waited_for_planner") or 0.0)
    if planner > 0 and "start" in at:
        waits.append((PLANNER, at["start"][0], at["start"][0] + planner))
    return waits


def batch_waits(batch: Mapping[str, Any]) -> list[str]:
    """The batch's waits on the APIs' rate limits (its clients' throttled calls), in words."""
    words = []
    for api, label in (("cloudstack", "CloudStack"), ("kubernetes", "Kubernetes")):
        seen = (batch.get("retries") or {}).get(api) or {}
        if seen.get("throttled"):
            words.append(f"the API limit: {label} refused {seen['throttled']} call(s), "
                         f"{float(seen.get('throttled_seconds') or 0.0):g} s waited")
    return words


def _ticks(span: float) -> float:
    for step in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200):
        if span / step <= 12:
            return float(step)
    return 14400.0


def timeline_svg(report: Mapping[str, Any]) -> str:
    """The report's rollout drawn as SVG text."""
    by_name = {str(n.get("name")).lower(): n for n in report.get("nodes") or []}
    batches = [b for b in report.get("batches") or [] if b.get("nodes")]
    rows: list[tuple[str, Any]] = []  # ("batch", batch) | ("node", (node, steps, waits))
    times: list[float] = []
    for batch in batches:
        rows.append(("batch", batch))
        validation = batch.get("validation") or {}
        times += [t for t in (_time(validation.get("started")), _time(validation.get("ended"))) if t is not None]
        for name in batch.get("nodes") or []:
            node = by_name.get(str(name).lower()) or {"name": name}
            steps = node_steps(node)
            rows.append(("node", (node, steps, node_waits(node, steps))))
            times += [t for _s, _k, a, b in steps for t in (a, b)]
    origin = _time(report.get("started")) or (min(times) if times else 0.0)
    end = max(times + [origin + 1.0, _time(report.get("ended")) or origin])
    span = end - origin
    scale = (_WIDTH - _LABEL - _RIGHT) / span
    legend_y = _TOP + len(rows) * _ROW + 28
    height = legend_y + 20 * ((len(LEGEND) + 1) // 2) + 16

    def x(t: float) -> float:
        return _LABEL + (t - origin) * scale

    cluster = report.get("cluster")
    name = (cluster.get("name") or cluster.get("id")) if isinstance(cluster, dict) else cluster
    run = f' {escape(str(report["run_id"]))}' if report.get("run_id") else ""
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height}" viewBox="0 0 {_WIDTH} {height}" '
           'font-family="DejaVu Sans, Arial, sans-serif" font-size="11">',
           f'<title>Rollout{run} of {escape(str(name or "?"))}</title>',
           f'<rect width="{_WIDTH}" height="{height}" fill="white"/>',
           f'<text x="10" y="20" font-size="14" font-weight="bold">Rollout{run} of '
           f'cluster {escape(str(name or "?"))}: {escape(str(report.get("outcome") or "?"))}</text>',
           f'<text x="10" y="38">{escape(str(report.get("started") or "?"))} to {escape(str(report.get("ended") or "?"))}, '
           f'{span:.0f} s; {sum(1 for kind, _item in rows if kind == "node")} nodes in {len(batches)} batches'
           + (f"; last error: {escape(str(report['last_error'])[:160])}" if report.get("last_error") else "") + "</text>"]
    tick, t = _ticks(span), 0.0
    while t <= span + 1e-9:
        out.append(f'<line x1="{x(origin + t):.1f}" y1="{_TOP - 10}" x2="{x(origin + t):.1f}" y2="{legend_y - 20}" stroke="#eee"/>'
                   f'<text x="{x(origin + t):.1f}" y="{_TOP - 14}" text-anchor="middle" fill="#555">{t:g} s</text>')
        t += tick
    for index, (kind, item) in enumerate(rows):
        y = _TOP + index * _ROW
        if kind == "batch":
            out += _batch_row(item, y, x)
        else:
            node, steps, waits = item
            out += _node_row(node, steps, waits, y, x)
    for i, (key, words) in enumerate(LEGEND.items()):
        lx, ly = 10 + (i % 2) * 560, legend_y + (i // 2) * 20
        out.append(f'<rect x="{lx}" y="{ly}" width="12" height="10" fill="{COLOURS[key]}"/>'
                   f'<text x="{lx + 16}" y="{ly + 9}">{escape(words)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _batch_row(batch: Mapping[str, Any], y: float, x: Any) -> list[str]:
    count = len(batch.get("nodes") or [])
    label = (f"batch {batch.get('batch', '?')}: {batch.get('node_type') or '?'}, {count} node{'s' if count != 1 else ''}, "
             f"{batch.get('outcome') or '?'}")
    out = [f'<rect x="0" y="{y}" width="{_WIDTH}" height="{_ROW}" fill="#f0f0f0"/>',
           f'<text x="10" y="{y + 13}" font-weight="bold">{escape(label)}</text>']
    validation = batch.get("validation") or {}
    started, ended = _time(validation.get("started")), _time(validation.get("ended"))
    if started is not None and ended is not None:
        out.append(f'<rect x="{x(started):.2f}" y="{y + 4}" width="{max(0.8, x(ended) - x(started)):.2f}" height="10" '
                   f'fill="{COLOURS["validation"]}"><title>validation {ended - started:.1f} s</title></rect>')
    waits = batch_waits(batch)
    if waits:
        out.append(f'<text x="{_LABEL + 4}" y="{y + 13}" fill="{COLOURS["wait"]}">waited for {escape("; ".join(waits))}</text>')
    return out


def _node_row(node: Mapping[str, Any], steps: Sequence[tuple[str, str, float, float]],
              waits: Sequence[tuple[str, float, float]], y: float, x: Any) -> list[str]:
    name = str(node.get("name") or "?")
    path = str(node.get("path") or "restart")
    label = f"{name if len(name) <= 30 else '…' + name[-29:]} · {path}"
    if node.get("outcome") not in (None, "done"):
        label += f" ({node.get('outcome')})"
    out = [f'<text x="{_LABEL - 6}" y="{y + 13}" text-anchor="end">{escape(label)}</text>']
    for step, kind, start, end in steps:
        out.append(f'<rect x="{x(start):.2f}" y="{y + 4}" width="{max(0.8, x(end) - x(start)):.2f}" height="10" '
                   f'fill="{COLOURS[kind]}"><title>{escape(name)} {escape(step)}: {end - start:.1f} s</title></rect>')
    for what, start, end in waits:
        out.append(f'<rect x="{x(start):.2f}" y="{y + 15}" width="{max(0.8, x(end) - x(start)):.2f}" height="2" '
                   f'fill="{COLOURS["wait"]}"><title>waited for {escape(what)}: {end - start:.1f} s</title></rect>')
    if waits:
        after = max([end for _s, _k, _a, end in steps] + [end for _w, _a, end in waits])
        words = "; ".join(f"{what} {end - start:.1f} s" for what, start, end in waits)
        out.append(f'<text x="{x(after) + 6:.1f}" y="{y + 13}" fill="{COLOURS["wait"]}">waited for {escape(words)}</text>')
    return out
