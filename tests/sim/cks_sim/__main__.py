"""``python -m cks_sim serve --spec SPEC --state-dir DIR``: run cks-sim until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Optional

from .spec import SpecError, load_spec, parse_scale


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cks-sim", description="Simulated CloudStack + CKS cluster")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the APIs until SIGTERM; writes STATE_DIR/env.json when ready")
    serve.add_argument("--spec", required=True, help="spec YAML (see tests/sim/examples/small.yml)")
    serve.add_argument("--state-dir", required=True, help="directory for env.json, kubeconfigs, TLS and etcd data")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--cloudstack-port", type=int, default=0, help="0 = a free port")
    serve.add_argument("--kube-port", type=int, default=0, help="0 = a free port")
    serve.add_argument("--admin-port", type=int, default=0, help="0 = a free port")
    serve.add_argument("--time-scale", type=float, default=None, help="override the spec's time_scale")
    serve.add_argument("--scale", action="append", default=[], metavar="NAME=COUNT",
                       help="override counts: workers, control_nodes, etcd_nodes, hosts (repeatable)")
    serve.add_argument("--no-etcd", action="store_true", help="do not start real etcd members")
    serve.add_argument("--kube", choices=("memory", "real"), default=os.environ.get("CKS_SIM_KUBE") or "memory",
                       help="memory: cks-sim's own Kubernetes API; real: a real kube-apiserver, controllers and "
                            "scheduler (make kube-plane builds them) with cks-sim playing the kubelets "
                            "(default: the CKS_SIM_KUBE environment variable, else memory)")
    serve.add_argument("--kube-planes", type=int, default=int(os.environ.get("CKS_SIM_KUBE_PLANES") or 0),
                       metavar="N", help="--kube real: how many clusters' control planes run at once; the others "
                                         "start when their API is first asked for, the least recently used idle one "
                                         "stopping (default: the CKS_SIM_KUBE_PLANES environment variable, else 6 a "
                                         "core within the available memory)")
    check = sub.add_parser("check", help="validate a spec and print it normalised")
    check.add_argument("--spec", required=True)
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        overrides = {}
        if getattr(args, "scale", None):
            overrides["scale"] = parse_scale(args.scale)
        if getattr(args, "time_scale", None) is not None:
            overrides["time_scale"] = args.time_scale
        spec = load_spec(args.spec, overrides)
    except SpecError as exc:
        print(f"cks-sim: bad spec: {exc}", file=sys.stderr)
        return 2
    if args.command == "check":
        import json

        shown = dict(spec, account=dict(spec["account"], secretkey="********"),
                     accounts=[dict(a, secretkey="********" if a["secretkey"] else None) for a in spec["accounts"]])
        print(json.dumps(shown, indent=2))
        return 0

    from .server import SimServer

    server = SimServer(spec, args.state_dir, host=args.host, cloudstack_port=args.cloudstack_port,
                       kube_port=args.kube_port, admin_port=args.admin_port, with_etcd=not args.no_etcd, kube=args.kube,
                       kube_planes=args.kube_planes)
    stop_requested = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop_requested.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        server.start()
    except SpecError as exc:
        print(f"cks-sim: bad spec: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # real_kube.plane.PlaneError: no binary, or a component did not start
        print(f"cks-sim: {exc}", file=sys.stderr)
        return 1
    env = server.env
    print(f"cks-sim: CloudStack {env['cloudstack_endpoint']}  admin {env['admin_url']}  "
          f"kube {env.get('kube_url')}  env {args.state_dir}/env.json", flush=True)
    while not stop_requested.is_set() and not server.stopped.is_set():
        stop_requested.wait(0.2)
    server.stop()
    print("cks-sim: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
