"""Commands run in the node's own namespaces from a privileged pod: ``nsenter`` into PID 1.

A container of a pod with ``hostPID: true`` and ``securityContext.privileged: true`` sees the
node's processes; ``nsenter --target 1 --mount --uts --ipc --net --pid -- CMD`` (or the short
flags) runs CMD as the node's init would, on the guest itself. What the guest answers here:

- ``nproc``, ``cat /sys/devices/system/cpu/online``: the vCPUs the guest has online;
  ``cat /sys/devices/system/cpu/possible``: the vCPUs the domain was started with room for.
- ``cat /proc/meminfo``, ``grep MemTotal /proc/meminfo``: MemTotal, the memory online.
- ``systemd-run [--on-active=N] [--unit=U] systemctl restart kubelet``: a transient timer that
  restarts the kubelet once this exec has ended ("Running timer as unit: U.timer").
- ``systemctl restart kubelet`` run directly: the kubelet that carries this exec's stream stops,
  so the stream ends without a status (what a client of a real node sees) and the kubelet restarts.

Without both pod settings, ``nsenter`` cannot enter PID 1's namespaces ("Operation not permitted",
exit 1). Anything else is util-linux's "failed to execute" (exit 127).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

_TARGET_FLAGS = {"-t", "--target"}
_NS_FLAGS = {"-m", "--mount", "-u", "--uts", "-i", "--ipc", "-n", "--net", "-p", "--pid"}


@dataclass(frozen=True)
class HostAnswer:
    stdout: bytes
    stderr: bytes
    code: int
    stream_cut: bool = False  # the kubelet carrying the stream went away: no status is sent


def is_host_pod(pod: dict[str, Any], container: str) -> bool:
    spec = pod.get("spec") or {}
    privileged = any(c.get("name") == container and ((c.get("securityContext") or {}).get("privileged") is True)
                     for c in spec.get("containers") or [])
    return bool(spec.get("hostPID")) and privileged


def _split_nsenter(command: tuple[str, ...]) -> tuple[Optional[str], list[str], list[str]]:
    """(target pid, namespace flags, the command after them)."""
    args = list(command[1:])
    target, flags = None, []
    while args:
        arg = args.pop(0)
        if arg == "--":
            break
        flag, eq, value = arg.partition("=")
        if flag in _TARGET_FLAGS:
            target = value if eq else (args.pop(0) if args else None)
        elif re.fullmatch(r"-t\d+", arg):
            target = arg[2:]
        elif flag in _NS_FLAGS:
            flags.append(flag)
        elif arg.startswith("-"):
            flags.append(flag)
        else:
            args.insert(0, arg)
            break
    return target, flags, args


def run(sim: Any, world: Any, node: str, host_pod: bool, command: tuple[str, ...],
        restart: Callable[[float], None]) -> HostAnswer:
    """One command of the exec (under sim.lock). ``restart(delay)`` restarts the node's kubelet."""
    target, flags, argv = _split_nsenter(command)
    if not host_pod:
        return HostAnswer(b"", b"nsenter: reassociate to namespace 'ns/ipc' failed: Operation not permitted\n", 1)
    if target != "1" or not argv or not any(_short(f) == "-m" for f in flags):
        return HostAnswer(b"", b"nsenter: neither filename nor target pid supplied for ns/mnt\n", 1)
    state = world.nodes[node]
    vm = sim.cloud.vm_by_name.get(_vm_name(world, node))
    possible = max(state.cpu, vm.domain_max_cpu if vm is not None else state.cpu)
    line = " ".join(argv)
    if line == "nproc":
        return HostAnswer(f"{state.cpu}\n".encode(), b"", 0)
    if line == "cat /sys/devices/system/cpu/online":
        return HostAnswer((f"0-{state.cpu - 1}" if state.cpu > 1 else "0").encode() + b"\n", b"", 0)
    if line == "cat /sys/devices/system/cpu/possible":
        return HostAnswer((f"0-{possible - 1}" if possible > 1 else "0").encode() + b"\n", b"", 0)
    if line in ("cat /proc/meminfo", "grep MemTotal /proc/meminfo"):
        return HostAnswer(f"MemTotal:       {state.memory_mb * 1024} kB\n".encode(), b"", 0)
    if argv[0] == "systemd-run" and argv[-3:] == ["systemctl", "restart", "kubelet"]:
        delay, unit = 0.0, "run-r0cks"
        for opt in argv[1:-3]:
            if opt.startswith("--on-active="):
                delay = float(re.sub(r"[^0-9.]", "", opt.split("=", 1)[1]) or 0)
            elif opt.startswith("--unit="):
                unit = opt.split("=", 1)[1]
        restart(sim.clock.real(max(delay, 0.1)))
        return HostAnswer(f"Running timer as unit: {unit}.timer\nWill run service as unit: {unit}.service\n".encode(), b"", 0)
    if line == "systemctl restart kubelet":
        restart(0.0)
        return HostAnswer(b"", b"", 0, stream_cut=True)
    return HostAnswer(b"", f"nsenter: failed to execute {argv[0]}: No such file or directory\n".encode(), 127)


def _short(flag: str) -> str:
    return {"--mount": "-m", "--uts": "-u", "--ipc": "-i", "--net": "-n", "--pid": "-p"}.get(flag, flag)


def _vm_name(world: Any, node: str) -> str:
    for vm in world.sim.cloud.vms.values():
        if vm.name.lower() == node:
            return vm.name
    return node
