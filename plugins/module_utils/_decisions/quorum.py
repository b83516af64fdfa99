# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""etcd quorum arithmetic and verdicts, and which control and etcd node types can lose a node."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import EtcdError, InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.etcd_members import match_members
from ansible_collections.cloudstack.cks.plugins.module_utils._model.cluster import CONTROL, WORKER, ClusterView


def quorum_size(voters: int) -> int:
    """Members needed for a quorum of ``voters`` voting members."""
    return voters // 2 + 1


def tolerated_failures(voters: int) -> int:
    """Voting members that may be down while a quorum remains."""
    return max(0, (voters - 1) // 2)


def quorum_after(voters: int, healthy: int, going_down: int,
                 without: Sequence[str] = ()) -> tuple[bool, str]:
    """Would a quorum remain if ``going_down`` of the ``healthy`` members went down?

    ``going_down`` counts healthy members only (one already down is not lost again).
    ``without`` names them, for the message.
    """
    remaining = max(0, healthy - going_down)
    needed = quorum_size(voters)
    names = f" without {', '.join(without)}" if without else ""
    message = f"{remaining} of {voters} voting members healthy{names}; {needed} needed"
    return remaining >= needed, message


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def can_lose_a_node(node_type: str, view: ClusterView) -> tuple[bool, str]:
    """Whether a node of this type may be restarted at all, by the cluster's shape alone.

    Health comes later, in the preflight; this is the arithmetic: stacked control nodes are
    the etcd voters; with external etcd the etcd nodes are, and the control plane only needs
    another control node to serve the API.
    """
    count = len(view.nodes_of(node_type))
    if node_type == WORKER:
        # The seed clamps the batch to min(maxunavailable, workers - 1) but never below 1, so
        # even a single worker is restarted (its pods wait for it to come back).
        if count <= 1:
            return True, f"{_plural(count, 'worker')}: restarted alone, its pods wait until it is back"
        return True, f"{count} workers: up to {count - 1} restarted at a time"
    if count == 0:
        return True, f"no {node_type} nodes"
    if node_type == CONTROL and view.external_etcd:
        if count < 2:
            return False, ("a single control node (etcd is external): no other control node "
                           "would serve the Kubernetes API while it restarts")
        return True, f"{count} control nodes: another one serves the Kubernetes API"
    what = "control nodes with stacked etcd" if node_type == CONTROL else "etcd nodes"
    if count == 1:
        what = "control node with stacked etcd" if node_type == CONTROL else "etcd node"
        return False, (f"a single {what}: etcd has 1 voting member, quorum 1, "
                       "so it cannot go down without losing etcd")
    quorum = quorum_size(count)
    tolerated = tolerated_failures(count)
    if tolerated < 1:
        return False, (f"{count} {what}: {count} voting members need {quorum} for quorum, "
                       "so none can go down")
    return True, f"{count} {what}: quorum {quorum} of {count} tolerates {tolerated} down"


@dataclass(frozen=True)
class Member:
    """One etcd member as the member list names it, and what its own health endpoint said."""

    id: str
    name: str
    client_urls: tuple[str, ...] = ()
    peer_urls: tuple[str, ...] = ()
    learner: bool = False
    healthy: bool = False
    reason: str = ""  # why not healthy (empty when healthy)

    @property
    def label(self) -> str:
        # An added but never started member has no name yet; its ID is all there is.
        return self.name or f"unstarted member {self.id}"

    @property
    def started(self) -> bool:
        return bool(self.name)

    def with_health(self, healthy: bool, reason: str) -> Member:
        return Member(self.id, self.name, self.client_urls, self.peer_urls, self.learner, healthy,
                      "" if healthy else reason)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "id": self.id,
            "client_urls": list(self.client_urls),
            "peer_urls": list(self.peer_urls),
            "learner": self.learner,
            "healthy": self.healthy,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class QuorumVerdict:
    """The answer: would a quorum of the other voting members stay healthy, and is etcd ready."""

    members: tuple[Member, ...]
    going_down: tuple[str, ...]
    voters: int
    quorum: int
    healthy: int  # healthy voting members now
    healthy_after: int  # healthy voting members that are not going down
    tolerates: int  # further voters that could fail after going_down, negative: quorum lost
    ready: Optional[bool]  # None when not asked
    safe: bool
    message: str

    @property
    def unhealthy(self) -> tuple[Member, ...]:
        return tuple(m for m in self.members if not m.healthy)

    @property
    def no_voter_healthy(self) -> bool:
        """What every member answers while they elect a leader (a second or two) as much as when the
        quorum is gone: a reading that cannot tell which member is down."""
        return self.healthy == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "members": [m.to_dict() for m in self.members],
            "going_down": list(self.going_down),
            "voters": self.voters,
            "quorum": self.quorum,
            "healthy": self.healthy,
            "healthy_after": self.healthy_after,
            "tolerates": self.tolerates,
            "ready": self.ready,
            "safe": self.safe,
            "msg": self.message,
        }


def parse_members(answer: Mapping[str, Any]) -> list[Member]:
    """Members from a ``/v3/cluster/member/list`` answer of the JSON gateway."""
    raw = answer.get("members")
    if not isinstance(raw, list) or not raw:
        raise EtcdError(f"etcd answered the member list without members: {shorten(answer)}")
    members = []
    for item in raw:
        members.append(Member(
            id=str(item.get("ID", "")),  # a string already; str() keeps a JSON number exact too
            name=str(item.get("name") or ""),
            client_urls=tuple(item.get("clientURLs") or ()),
            peer_urls=tuple(item.get("peerURLs") or ()),
            learner=bool(item.get("isLearner", False)),
        ))
    return members


def judge_health(path: str, status: int, body: bytes) -> tuple[bool, str]:
    """Read one answer of ``/readyz`` (plain text ``ok``) or ``/health`` (JSON)."""
    text = body.decode("utf-8", "replace").strip()
    if path.startswith("/readyz"):
        if status == 200:
            return True, ""
        failed = [line.strip() for line in text.splitlines() if line.strip().startswith("[-]")]
        return False, f"/readyz HTTP {status}: {'; '.join(failed) or shorten(text)}"
    try:
        data = json.loads(text)
    except ValueError:
        return False, f"/health HTTP {status}: not JSON: {shorten(text)}"
    health = data.get("health") if isinstance(data, dict) else None
    if status == 200 and health in ("true", True):
        return True, ""
    reason = data.get("reason") if isinstance(data, dict) else None
    return False, f"/health HTTP {status}: health={health}" + (f" ({reason})" if reason else "")


def quorum_verdict(members: Sequence[Member], going_down: Sequence[str] = (), ready: Optional[bool] = None,
                   ready_reason: str = "", require_ready: bool = True,
                   addresses: Optional[Mapping[str, Optional[str]]] = None) -> QuorumVerdict:
    """Decide by the rule of the module docstring. ``going_down`` are member or node names,
    matched by ``etcd_members.match_members`` (``addresses``: node name to its IP address).

    A name that is not a member is refused rather than ignored: a typo must not turn
    "can m2 go down?" into "is etcd healthy?".
    """
    names = {m.name for m in members if m.name}
    match = match_members(members, list(going_down), addresses)
    if match.unknown:
        raise InvalidInput("going_down", list(match.unknown),
                           f"not etcd member name(s) ({'; '.join(f'{n}: {why}' for n, why in match.unknown.items())}); "
                           f"the members are {', '.join(sorted(names)) or 'none'}")
    leaving = tuple(dict.fromkeys(match.members[n] for n in going_down))  # keep order, drop repeats
    voters = [m for m in members if not m.learner]
    if not voters:
        raise EtcdError("etcd lists no voting members (only learners)")
    n = len(voters)
    healthy_now = [m for m in voters if m.healthy]
    healthy_leaving = [m for m in healthy_now if m.name in leaving]
    quorum_kept, arithmetic = quorum_after(n, len(healthy_now), len(healthy_leaving), leaving)
    healthy_after = len(healthy_now) - len(healthy_leaving)
    q = quorum_size(n)

    parts = [arithmetic]
    others_down = [m for m in voters if not m.healthy and m.name not in leaving]
    if others_down:
        parts.append("unhealthy: " + ", ".join(f"{m.label} ({m.reason or 'unhealthy'})" for m in others_down))
    learners = [m.label for m in members if m.learner]
    if learners:
        parts.append(f"learners not counted: {', '.join(learners)}")
    if ready is False:
        parts.append(f"etcd is not ready: {ready_reason or 'no quorum read succeeded'}")
    safe = quorum_kept and (ready is not False or not require_ready)
    if not quorum_kept:
        lost = f"{', '.join(leaving)} going down" if leaving else "now"
        parts.insert(0, f"etcd would lose quorum ({lost})")
    return QuorumVerdict(
        members=tuple(members), going_down=leaving, voters=n, quorum=q, healthy=len(healthy_now),
        healthy_after=healthy_after, tolerates=healthy_after - q, ready=ready, safe=safe,
        message="; ".join(parts),
    )


def shorten(value: Any, limit: int = 200) -> str:
    """``value`` (text, or JSON of it) cut to ``limit`` characters, for an error message."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit] + "..."
