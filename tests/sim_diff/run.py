"""``make sim-diff``: replay the requests against cks-sim's Kubernetes and a real one, compare,
write ``out/sim-diff/report.json``; exit 1 on a difference no one explained (or a request kind
of the collection's rollouts that the replay does not make).

    .venv/bin/python -m sim_diff.run [--out out/sim-diff]      (cwd tests, tests/sim on sys.path)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import urllib.parse
import warnings
from typing import Any, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "sim"))

import urllib3  # noqa: E402
from cks_sim.harness import WaitTimeout, wait_until  # noqa: E402

from .compare import differences, view  # noqa: E402
from .kinds import kind_of  # noqa: E402
from .known import KNOWN  # noqa: E402
from .replay import Step, steps  # noqa: E402
from .world import Answer, Api, SimSide, seed_real, settled, unsettled  # noqa: E402

RECORDED = os.path.join(HERE, "recorded.json")
# Views where the sim serves a part of what the real server does (discovery): only that part is compared.
SUBSET_VIEWS = ("groups", "resources")


def step_kind(step: Step, ctx: dict[str, Any]) -> str:
    query = step.resolve(step.query, ctx) or {}
    return kind_of(step.method, step.resolve(step.path, ctx), query, step.content_type, "as=Table" in step.accept)


def send(api: Api, step: Step, ctx: dict[str, Any]) -> Answer:
    path = step.resolve(step.path, ctx)
    answer = api.request(step.method, urllib.parse.quote(path, safe="/:"), step.resolve(step.query, ctx),
                         step.resolve(step.body, ctx), step.content_type, step.accept, step.watch_seconds)
    if step.keep is not None and answer.status < 300:
        step.keep(ctx, answer.body)
    return answer


def confirm_deletion(real: Api, sim: SimSide, namespace: str, name: str) -> None:
    """The kubelet's part after a graceful delete: once the containers stopped, delete with grace 0.
    cks-sim's kubelet does it after the spec's pod_termination; the real side has no kubelet."""
    real.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}",
                 body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
    wait_until(lambda: sim.api.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}").status == 404, 10,
               f"cks-sim's kubelet to finish {namespace}/{name}", interval=0.05)


def _restrict(sim_view: Any, real_view: Any) -> Any:
    body = real_view.get("body")
    wanted = sim_view.get("body")
    if isinstance(body, dict) and isinstance(wanted, dict):
        real_view = dict(real_view, body={k: v for k, v in body.items() if k in wanted})
    elif isinstance(body, list) and isinstance(wanted, list):
        real_view = dict(real_view, body=[g for g in body if g in wanted])
    return real_view


def controllers_caught_up(sim: SimSide, real: Api) -> None:
    """After a node write: the real node controller's taints (a cordon's unschedulable) as cks-sim's,
    which writes them with the change, before the next step reads or patches the node (seen: a JSON
    patch answered before the controller put back the taint a strategic merge patch had replaced). A
    write whose outcome differs for good is the comparison's to report, not the wait's."""
    try:
        wait_until(lambda: settled(sim.api, real), 10, "the real node controller's taints", interval=0.1)
    except WaitTimeout:
        pass


def replay(sim: SimSide, real: Api) -> dict[str, Any]:
    sim_ctx: dict[str, Any] = {}
    real_ctx: dict[str, Any] = {}
    kinds: set[str] = set()
    report: dict[str, Any] = {"requests": 0, "equal": 0, "known": [], "unexplained": [], "steps": []}
    for step in steps():
        kind = step_kind(step, sim_ctx)
        kinds.add(kind)
        sim_answer = send(sim.api, step, sim_ctx)
        real_answer = send(real, step, real_ctx)
        if step.kubelet:
            confirm_deletion(real, sim, "default", step.kubelet)
        if step.method == "PATCH" and step.resolve(step.path, sim_ctx).startswith("/api/v1/nodes/"):
            controllers_caught_up(sim, real)
        sim_view, real_view = view(sim_answer, step.view), view(real_answer, step.view)
        if step.view in SUBSET_VIEWS:
            real_view = _restrict(sim_view, real_view)
        report["requests"] += 1
        where = differences(sim_view, real_view)
        entry = {"step": step.name, "kind": kind, "equal": not where}
        report["steps"].append(entry)
        if not where:
            report["equal"] += 1
            continue
        found = {"step": step.name, "kind": kind, "fields": where, "cks_sim": sim_view, "real": real_view}
        if step.name in KNOWN:
            report["known"].append(dict(found, reason=KNOWN[step.name]))
        else:
            report["unexplained"].append(found)
    report["kinds"] = len(kinds)
    report["kind_list"] = sorted(kinds)
    return report


def recorded_not_replayed(kinds: list[str]) -> list[str]:
    with open(RECORDED, encoding="utf-8") as handle:
        recorded = json.load(handle)["kinds"]
    return sorted(set(recorded) - set(kinds))


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="sim-diff", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "out", "sim-diff"))
    args = parser.parse_args(argv)
    from cks_sim.real_kube.plane import ControlPlane  # pylint: disable=import-outside-toplevel

    # The plane's readiness probes of its components' self-signed health endpoints: not ours to warn of.
    warnings.filterwarnings("ignore", category=urllib3.exceptions.InsecureRequestWarning)

    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    state = os.path.join(out, "state")
    # Both sides start from the spec's objects only: an earlier run's etcd data would be there too.
    shutil.rmtree(state, ignore_errors=True)
    began = time.monotonic()
    sim = SimSide(os.path.join(state, "sim"))
    plane = None
    try:
        # The nodes have no kubelet on the real side: a grace longer than the replay keeps them Ready.
        plane = ControlPlane(state_dir=os.path.join(state, "real"), tls=sim.tls, node_monitor_grace=600.0).start()
        started = time.monotonic()
        real = Api("kube-apiserver", plane.url, sim.tls["ca_cert"], sim.tls["client_cert"], sim.tls["client_key"])
        seed_real(sim.api, real)
        try:
            wait_until(lambda: settled(sim.api, real), 60, "the real disruption and node controllers to settle",
                       interval=0.2)
        except WaitTimeout as exc:
            raise RuntimeError(f"{exc}; (budgets, taints) of cks-sim and of the real one: {unsettled}") from None
        seeded = time.monotonic()
        report = replay(sim, real)
        done = time.monotonic()
        report["real_kubernetes"] = plane.version.get("gitVersion")
    finally:
        if plane is not None:
            plane.stop()
        sim.close()
    missing = recorded_not_replayed(report["kind_list"])
    for kind in missing:
        report["unexplained"].append({"kind": kind, "step": None,
                                      "fields": ["a kind the collection's rollouts make that the replay does not"],
                                      "cks_sim": None, "real": None})
    report["seconds"] = {"control_plane_start": round(started - began, 1), "seed": round(seeded - started, 1),
                         "replay": round(done - seeded, 1), "total": round(time.monotonic() - began, 1)}
    ordered = {k: report[k] for k in ("kinds", "requests", "equal", "known", "unexplained")}
    ordered.update({k: v for k, v in report.items() if k not in ordered})
    with open(os.path.join(out, "report.json"), "w", encoding="utf-8") as handle:
        json.dump(ordered, handle, indent=1, sort_keys=False)
    print(f"sim-diff: {report['kinds']} kinds, {report['requests']} requests: {report['equal']} equal, "
          f"{len(report['known'])} known, {len(report['unexplained'])} unexplained "
          f"({report['seconds']['total']} s; {os.path.join(out, 'report.json')})")
    for item in report["unexplained"]:
        print(f"  unexplained: {item['step'] or item['kind']}: {', '.join(item['fields'])}")
    return 1 if report["unexplained"] else 0


if __name__ == "__main__":
    sys.exit(main())
