"""The kind of each request the sim serves, named as the collection's table names it
(plugins/module_utils/_decisions/request_kinds.py): ``cloudstack <command>``, ``kubernetes <verb>
<resource>[/<subresource>]`` (``kubernetes get <path>`` below no resource), ``etcd <call>`` for an
etcdctl run in an etcd pod (its subcommand words: ``member list``, ``endpoint health``).

The call log carries it as ``request`` (and ``etcd_request`` on the exec that ran etcdctl); a
``request_fault`` names the kind it falls on.
"""

from __future__ import annotations

from typing import Optional, Sequence

# What request_fault's `mode` may be, per API.
MODES = {"cloudstack": ("503", "530", "drop"), "kubernetes": ("503", "drop"), "etcd": ("503", "drop")}

# CloudStack's text for INTERNAL_ERROR (ApiServer.handleRequest: an unexpected exception of a command).
INTERNAL_ERROR_TEXT = "Internal error executing command, please contact your system administrator"
# What etcdctl prints when its member does not answer in time (clientv3's DeadlineExceeded).
ETCDCTL_DEADLINE = "Error: context deadline exceeded\n"


def cloudstack(command: str) -> str:
    return f"cloudstack {command}"


def kubernetes(verb: str, resource: str, path: str) -> str:
    return f"kubernetes {verb} {resource or path}"


def etcd(command: Sequence[str]) -> Optional[str]:
    """``etcd member list`` for ``etcdctl [--flags] member list [--cluster] -w json``; None for
    anything that is not etcdctl."""
    if not command or command[0].rsplit("/", 1)[-1] != "etcdctl":
        return None
    words: list[str] = []
    skip = False
    for arg in command[1:]:
        if skip:
            skip = False
            continue
        if arg.startswith("-"):
            # ``-w json``: a flag given its value apart
            skip = "=" not in arg and arg in ("-w", "--write-out", "--endpoints")
            continue
        words.append(arg)
        if len(words) == 2:
            break
    return f"etcd {' '.join(words)}" if words else None


def check_fault(fault: dict) -> None:
    """A request_fault as the admin API takes it: ``request`` names a kind, ``mode`` one its API has."""
    request = str(fault.get("request") or "")
    api = request.split(" ", 1)[0]
    if api not in MODES or " " not in request:
        raise ValueError(f"request_fault: request {request!r} is no request kind (cloudstack <command>, "
                         "kubernetes <verb> <resource>, etcd <call>)")
    mode = str(fault.get("mode", "503"))
    if mode not in MODES[api]:
        raise ValueError(f"request_fault: mode {mode!r} is not one of {', '.join(MODES[api])} for {api}")
