"""The admin API of cks-sim (plain HTTP, JSON): what happened, and levers for tests.

GET /state, GET /calls[?since=T], GET /timeline[?since=T], GET /invariants[?since=T],
GET|POST|DELETE /faults (DELETE /faults/<id> removes one), POST /actions, POST /shutdown.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, Callable

from werkzeug.wrappers import Request, Response

from .core import DEFAULT_TIMINGS
from .kube_helpers import is_api_server_of

if TYPE_CHECKING:  # pragma: no cover
    from .server import SimServer


class ActionError(ValueError):
    """A POST /actions request that cannot be carried out (answered 400)."""


class AdminApp:
    def __init__(self, server: "SimServer") -> None:
        self.server = server
        self.sim = server.sim

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        request = Request(environ)
        try:
            body, status = self.route(request)
        except ActionError as exc:
            body, status = {"error": str(exc)}, 400
        except (ValueError, KeyError) as exc:
            body, status = {"error": str(exc).strip("'\"")}, 400
        response = Response(json.dumps(body, default=str), status=status, content_type="application/json")
        return response(environ, start_response)

    def _since(self, request: Request) -> float:
        try:
            return float(request.args.get("since", 0))
        except ValueError:
            raise ActionError("since must be a UNIX timestamp") from None

    def _json_body(self, request: Request) -> dict[str, Any]:
        try:
            data = json.loads(request.get_data(as_text=True) or "{}")
        except json.JSONDecodeError as exc:
            raise ActionError(f"body is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ActionError("body must be a JSON object")
        return data

    def route(self, request: Request) -> tuple[Any, int]:
        path = request.path.rstrip("/") or "/"
        method = request.method
        if path == "/state" and method == "GET":
            return self.state(), 200
        if path in ("/calls", "/invariants") and method == "GET":
            for world in list(self.sim.kube.values()):
                # A real API server's calls are read from its audit log: up to the moment asked.
                getattr(world, "read_audit", lambda: None)()
        if path == "/calls" and method == "GET":
            calls = self.sim.calls.list(self._since(request))
            api = request.args.get("api")
            return [c for c in calls if not api or c.get("api") == api], 200
        if path == "/timeline" and method == "GET":
            return self.sim.timeline.list(self._since(request)), 200
        if path == "/invariants" and method == "GET":
            return self.sim.invariants.list(self._since(request)), 200
        if path == "/faults":
            if method == "GET":
                return self.sim.faults.list(), 200
            if method == "POST":
                return self.sim.faults.add(self._json_body(request)), 201
            if method == "DELETE":
                self.sim.faults.clear()
                return {"cleared": True}, 200
        if path.startswith("/faults/") and method == "DELETE":
            self.sim.faults.remove(int(path.rsplit("/", 1)[1]))
            return {"removed": True}, 200
        if path == "/actions" and method == "POST":
            return self.action(self._json_body(request)), 200
        if path == "/shutdown" and method == "POST":
            self.server.request_stop()
            return {"stopping": True}, 202
        if path == "/" and method == "GET":
            return {"endpoints": ["/state", "/calls", "/timeline", "/invariants", "/faults", "/actions", "/shutdown"]}, 200
        return {"error": f"no route {method} {path}"}, 404

    def state(self) -> dict[str, Any]:
        sim = self.sim
        with sim.lock:
            state = {
                "time": time.time(),
                "time_scale": sim.clock.time_scale,
                "timings": dict(sim.timings),
                "cloud": sim.cloud.snapshot(),
                "kube": {cid: world.snapshot() for cid, world in sim.kube.items()},
                "faults": sim.faults.list(),
            }
        # etcd has its own lock and may talk to processes: never under sim.lock.
        state["etcd"] = sim.etcd.snapshot() if sim.etcd is not None else None
        return state

    def action(self, data: dict[str, Any]) -> dict[str, Any]:
        kind = data.get("action")
        cloud = self.sim.cloud
        with self.sim.lock:
            if kind == "set_cluster_state":
                cluster = self._cluster(data.get("cluster"))
                state = str(data.get("state", ""))
                from .spec import CLUSTER_STATES

                if state not in CLUSTER_STATES:
                    raise ActionError(f"state must be one of {', '.join(CLUSTER_STATES)}")
                cloud.set_cluster_state(cluster, state, "admin action")
                return {"cluster": cluster.id, "state": cluster.state}
            if kind in ("stop_vm", "start_vm"):
                vm = cloud.find_vm(str(data.get("vm", "")))
                job = cloud.stop_vm(vm, "adminStopVm") if kind == "stop_vm" else cloud.start_vm(vm, "adminStartVm")
                return {"vm": vm.name, "jobid": job.id}
            if kind == "set_vm_state":
                vm = cloud.find_vm(str(data.get("vm", "")))
                cloud.set_vm_state(vm, str(data.get("state", "")))
                return {"vm": vm.name, "state": vm.state}
            if kind == "set_boot_id":
                # The kubelet reports cadvisor's MachineInfo.BootID (kubelet nodestatus.MachineInfo setter),
                # which is "" where /proc/sys/kernel/random/boot_id cannot be read.
                cluster = self._cluster(data.get("cluster"))
                name = str(data.get("node", "")).lower()
                world = self.sim.kube[cluster.id]
                if name not in world.nodes:
                    raise ActionError(f"no node {name!r} in cluster {cluster.name}")
                world.kubelets.set_boot_id(name, str(data.get("boot_id", "")))
                return {"node": name, "boot_id": world.nodes[name].boot_id}
            if kind == "set_api_server":
                # The node's API server stops serving /readyz (a crash loop, a bad flag) while the
                # node stays Ready: its kube-apiserver mirror pod turns Ready=False.
                cluster = self._cluster(data.get("cluster"))
                name = str(data.get("node", "")).lower()
                world = self.sim.kube[cluster.id]
                if not any(is_api_server_of(p, name) for p in world.verbs.select("pods", "kube-system")):
                    raise ActionError(f"no control node {name!r} with a kube-apiserver pod in cluster {cluster.name}")
                world.pods.set_api_server_serving(name, bool(data.get("serving", False)))
                return {"node": name, "serving": name not in world.pods.api_servers_down}
            if kind == "scan":
                cloud.scan_once()
                return {"clusters": {c.id: c.state for c in cloud.clusters.values()}}
            if kind in ("add_host", "set_host", "set_host_cluster", "dedicate_host"):
                return self._host_action(kind, data)
            if kind == "set_config":
                return self._set_config(data)
            if kind == "restart_management_server":
                return self._restart_management_server(data)
            if kind == "compact_watch_cache":
                # etcd compaction plus a watch cache re-list: every older resourceVersion is now too old.
                worlds = [self.sim.kube[data["cluster"]]] if data.get("cluster") else list(self.sim.kube.values())
                for world in worlds:
                    world.store.watch_cache.compact()
                return {"compacted_to": {w.cluster_id: w.store.current_rv() for w in worlds}}
        raise ActionError(
            f"unknown action {kind!r}; known: set_cluster_state, stop_vm, start_vm, set_vm_state, set_boot_id, set_api_server, scan,"
            " set_config, restart_management_server, compact_watch_cache, add_host, set_host, set_host_cluster,"
            " dedicate_host")

    def _host_action(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        """Shape the zone's hosts at run time: add one, change its state, a cluster's ratios, a dedication."""
        from . import spec as specmod
        from .spec import SpecError

        cloud = self.sim.cloud
        zones = list(cloud.zone_by_name)
        try:
            if kind == "add_host":
                entry = {k: v for k, v in data.items() if k != "action"}
                if any(h.name == entry.get("name") for h in cloud.hosts.values()):
                    raise ActionError(f"a host named {entry.get('name')!r} exists already")
                clusters = [{"name": c.name, "zone": cloud.zones[c.zone_id]["name"]} for c in cloud.host_clusters.values()]
                host = cloud.add_host(specmod.host_entry(entry, "add_host", zones, clusters))
                return {"host": host.name, "id": host.id}
            if kind == "set_host":
                host = self._host(data.get("host"))
                for field, allowed in (("state", specmod.HOST_STATES), ("resourcestate", specmod.RESOURCE_STATES)):
                    if field in data:
                        if data[field] not in allowed:
                            raise ActionError(f"{field} must be one of {', '.join(allowed)}")
                        setattr(host, field, str(data[field]))
                for field in ("cpu", "memory", "cpuspeed"):
                    if field in data:
                        setattr(host, field, specmod._int(data[field], field, 1))
                return {"host": host.name, "state": host.state, "resourcestate": host.resourcestate,
                        "cpu": host.cpu, "memory": host.memory, "cpuspeed": host.cpuspeed}
            if kind == "set_host_cluster":
                name = data.get("cluster")
                cluster = next((c for c in cloud.host_clusters.values() if name in (c.id, c.name)), None)
                if cluster is None:
                    raise ActionError(f"no host cluster {name!r}")
                if "cpu_overcommit_ratio" in data:
                    cluster.cpu_ratio = specmod._ratio(data["cpu_overcommit_ratio"], "cpu_overcommit_ratio")
                if "memory_overcommit_ratio" in data:
                    cluster.memory_ratio = specmod._ratio(data["memory_overcommit_ratio"], "memory_overcommit_ratio")
                return {"cluster": cluster.name, "cpu_overcommit_ratio": cluster.cpu_ratio,
                        "memory_overcommit_ratio": cluster.memory_ratio}
            host = self._host(data.get("host"))
            group = next((g for g in cloud.affinity_groups.values() if data.get("group") in (g.id, g.name)), None)
            if group is None or group.type != "ExplicitDedication":
                raise ActionError(f"no ExplicitDedication affinity group {data.get('group')!r}")
            if any(host.id in g.dedicated_host_ids for g in cloud.affinity_groups.values()):
                raise ActionError(f"host {host.name} is dedicated already")
            group.dedicated_host_ids.append(host.id)
            cloud.dedication_ids[(group.id, host.id)] = cloud.side_ids.uuid()
            return {"host": host.name, "group": group.name}
        except SpecError as exc:
            raise ActionError(str(exc)) from None

    def _host(self, ref: Any) -> Any:
        for host in self.sim.cloud.hosts.values():
            if ref in (host.id, host.name):
                return host
        raise ActionError(f"no host {ref!r}")

    def _restart_management_server(self, data: dict[str, Any]) -> dict[str, Any]:
        """The management server dies and comes back: its API port refuses connections for
        ``seconds`` (real), and the jobs it ran end as AsyncJobManagerImpl's clean-up ends them."""
        try:
            seconds = float(data.get("seconds", 1.0))
        except (TypeError, ValueError):
            raise ActionError("seconds must be a number (real seconds the API refuses connections)") from None
        if not 0 <= seconds <= 600:
            raise ActionError("seconds must be between 0 and 600")
        outage = getattr(self.server, "cloudstack_outage", None)
        if outage is None:
            raise ActionError("this sim cannot take its CloudStack API down")
        cancelled = self.sim.cloud.cancel_jobs_of_dead_server()
        self.sim.timeline.add(event="management_server_restart", seconds=seconds, cancelled_jobs=cancelled)
        outage(seconds)
        return {"seconds": seconds, "cancelled_jobs": cancelled}

    def _cluster(self, ref: Any) -> Any:
        cloud = self.sim.cloud
        for cluster in cloud.clusters.values():
            if ref in (cluster.id, cluster.name):
                return cluster
        if ref is None and len(cloud.clusters) == 1:
            return next(iter(cloud.clusters.values()))
        raise ActionError(f"no cluster {ref!r}")

    def _set_config(self, data: dict[str, Any]) -> dict[str, Any]:
        """Change timings, time_scale, cloud options or invariant limits of the running sim."""
        sim = self.sim
        cloud = sim.cloud
        if "time_scale" in data:
            sim.clock.time_scale = float(data["time_scale"])
        for name, value in (data.get("timings") or {}).items():
            if name not in DEFAULT_TIMINGS:
                raise ActionError(f"unknown timing {name!r}")
            sim.timings[name] = float(value)
        for name, value in (data.get("cloud") or {}).items():
            if name not in cloud.cloud_opts:
                raise ActionError(f"unknown cloud option {name!r}")
            cloud.cloud_opts[name] = type(cloud.cloud_opts[name])(value)
        if "dynamic_scale" in data:
            cloud.dynamic_scale = bool(data["dynamic_scale"])
        for node_type, value in (data.get("max_unavailable") or {}).items():
            cloud.max_unavailable[node_type] = int(value)
        return {"time_scale": sim.clock.time_scale, "timings": dict(sim.timings), "cloud": dict(cloud.cloud_opts),
                "max_unavailable": dict(cloud.max_unavailable), "dynamic_scale": cloud.dynamic_scale}
