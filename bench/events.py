# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""What the nodes' Events cost a batch: one batch of ten workers through the collection's
``BatchCycle`` with its Events on, against cks-sim in its own process (1 control node, 11 workers,
time scale 0.05; the root disk grows by 1 GB each run, so every worker restarts).

    .venv/bin/python bench/events.py [--root CHECKOUT] [--runs 3] [--out bench/results/events.json]

Per run: the batch's wall (the module's batch run, then the flush of the Events still queued), its
slowest node, and the seconds the node threads spent inside ``record`` (summed over the threads:
time a step waited for an Event). ``--root`` runs another checkout's code (its .venv/collections) on
the same simulator, so two versions are compared on the same machine at the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Optional

HERE = os.path.dirname(os.path.abspath(__file__))


def run(root: str, runs: int) -> list[dict[str, Any]]:
    sys.path.insert(0, os.path.join(root, ".venv", "collections"))
    sys.path.insert(0, HERE)
    # pylint: disable=import-outside-toplevel
    from simproc import BenchSim, bench_spec

    from ansible_collections.cloudstack.cks.plugins.module_utils._clients.cloudstack import CloudStackClient, CloudStackOptions
    from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube import KubeClient, KubeOptions
    from ansible_collections.cloudstack.cks.plugins.module_utils._clients.node_events import NodeEvents
    from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import initial_settings
    from ansible_collections.cloudstack.cks.plugins.module_utils._model.loader import ClusterLoader
    from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.batch import BatchCycle
    from ansible_collections.cloudstack.cks.plugins.module_utils._rollout.options import CycleOptions

    rows = []
    with BenchSim.from_spec(bench_spec(11, control_nodes=1, time_scale=0.05, max_unavailable=10), etcd=False) as sim:
        env = sim.env
        cloud = CloudStackClient(CloudStackOptions(api_url=env["cloudstack_endpoint"], api_key=env["cloudstack_key"],
                                                   api_secret=env["cloudstack_secret"]))
        kube = KubeClient.connect(KubeOptions(kubeconfig=env["kubeconfig"], ca_cert=env["kube_ca"]))
        loader = ClusterLoader(cloud, kube)
        for number in range(runs):
            view = loader.load(env["cluster_id"])
            workers = sorted(n.name for n in view.nodes_of("worker"))[:10]
            settings = initial_settings(view).with_changes(root_disk_sizes={"worker": 21 + number})
            batch = BatchCycle(cloud, kube, loader, env["cluster_id"], settings, workers,
                               options=CycleOptions(batch_timeout=600))
            events = batch.node_events = NodeEvents(kube, run=f"bench-events-{number}")
            inside = [0.0]
            record = events.record

            def timed(*args: Any, record: Any = record, inside: list[float] = inside) -> None:
                started = time.monotonic()
                record(*args)
                inside[0] += time.monotonic() - started

            events.record = timed  # type: ignore[method-assign]
            started = time.monotonic()
            result = batch.run()
            ran = time.monotonic()
            if hasattr(events, "flush"):  # code before the writer had none
                events.flush()
            ended = time.monotonic()
            row = {"ok": result.error is None, "batch_run": round(ran - started, 3), "flush": round(ended - ran, 3),
                   "batch": round(ended - started, 3),
                   "slowest_node": round(max((r.ended or 0) - r.started for r in result.results), 3),
                   "steps_waited_in_record": round(inside[0], 3), "events": events.report(),
                   "load": round(os.getloadavg()[0], 2)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.dirname(HERE), help="the checkout whose code runs")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default=None, help="write the runs as JSON here")
    args = parser.parse_args(argv)
    rows = run(os.path.abspath(args.root), args.runs)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=2)
            fh.write("\n")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
