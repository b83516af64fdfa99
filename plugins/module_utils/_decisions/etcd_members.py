# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""Which etcd member is which node: by name without case, else by the member's peer address.

kubeadm names a stacked member after its node; CKS names an external etcd member after the etcd
VM's hostname with the cluster name's case (``getEtcdNodeNameForCluster`` does not lowercase)
and gives it the peer URL ``http://<guest IP>:2380``
(``KubernetesClusterStartWorker.getInitialEtcdClusterDetails``). A member whose name no longer
matches its node (replaced by hand with another ``--name``, a renamed host) is still the node
whose address its peer URL names. Only an exact, single match counts: guessing wrong would let a
batch take down a member it did not count.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Mapping, Optional, Protocol, Sequence
from urllib.parse import urlsplit


class NamedMember(Protocol):
    """What matching needs of ``quorum.Member``."""

    @property
    def name(self) -> str:
        ...

    @property
    def peer_urls(self) -> tuple[str, ...]:
        ...


@dataclass(frozen=True)
class MemberMatch:
    """``members``: each given name's member name; ``unknown``: names no member matched, with why."""

    members: dict[str, str] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)


def _address(value: str) -> Optional[str]:
    # One spelling per address, so 10.1.1.5 and an IPv6 address in any form compare equal.
    try:
        return str(ipaddress.ip_address(value.strip().strip("[]")))
    except ValueError:
        return None


def peer_addresses(member: NamedMember) -> set[str]:
    """The IP addresses in the member's peer URLs (host names left out: a name proves no address)."""
    found = set()
    for url in member.peer_urls:
        try:
            host = urlsplit(url).hostname
        except ValueError:
            continue
        address = _address(host) if host else None
        if address is not None:
            found.add(address)
    return found


def match_members(members: Sequence[NamedMember], names: Sequence[str],
                  addresses: Optional[Mapping[str, Optional[str]]] = None) -> MemberMatch:
    """Match each of ``names`` (node or member names) to a started member.

    By name without case first; a name no member bears is matched by ``addresses[name]`` (the
    node's IP address) to the one member whose peer URL has that address and whose own name is
    no node's in ``names`` or ``addresses``. Unstarted members (no name yet) never match: the
    verdict speaks of members by name.
    """
    addresses = addresses or {}
    started = [m for m in members if m.name]
    by_name = {m.name.lower(): m.name for m in started}
    nodes = {n.lower() for n in names} | {n.lower() for n in addresses}
    matched: dict[str, str] = {}
    unknown: dict[str, str] = {}
    for name in names:
        if name.lower() in by_name:
            matched[name] = by_name[name.lower()]
            continue
        address = _address(addresses.get(name) or "") if addresses.get(name) else None
        if address is None:
            unknown[name] = "no member has this name" + ("" if name in addresses else " (and no node address to match a peer URL)")
            continue
        # A member named after another node is that node's, whatever its peer URL says.
        candidates = [m.name for m in started if address in peer_addresses(m) and m.name.lower() not in nodes]
        if len(candidates) == 1:
            matched[name] = candidates[0]
        elif candidates:
            unknown[name] = f"several members have peer address {address}: {', '.join(sorted(candidates))}"
        else:
            unknown[name] = f"no member has this name or a peer URL with its address {address}"
    taken: dict[str, list[str]] = {}
    for name, member in matched.items():
        taken.setdefault(member, []).append(name)
    for member, claimants in taken.items():
        if len({c.lower() for c in claimants}) > 1:
            # Two names on one member: counting it once would hide that one node has no member.
            for name in claimants:
                if name.lower() != member.lower():
                    del matched[name]
                    unknown[name] = f"its peer address is member {member}'s, which is named after another node"
    return MemberMatch(matched, unknown)
