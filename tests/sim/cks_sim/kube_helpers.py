"""Small pure helpers the concerns of ``KubeWorld`` share: API timestamps, generated names and
hashes, taint tolerations, budget arithmetic and status conditions.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from typing import Any, Optional

from .kube_resources import LIFECYCLE_TAINTS, NOT_READY_TAINT, UNREACHABLE_TAINT, UNSCHEDULABLE_TAINT, ApiError

#: rand.SafeEncodeString's alphabet (apimachinery/pkg/util/rand): no vowels, no 0, 1 or 3.
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
MICROTIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$")


def now_time() -> str:
    """metav1.Time: seconds precision, UTC."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    """metav1.MicroTime: exactly six fractional digits, UTC."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def time_after(seconds: float) -> str:
    moment = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_microtime(value: Any, field_path: str, kind: str) -> Optional[str]:
    """Validate a MicroTime as the API server's decoder does, and return it in canonical UTC form
    (None, an unset field, stays None)."""
    if value is None:
        return None
    if not isinstance(value, str) or not MICROTIME_RE.match(value):
        shown = value if isinstance(value, str) else repr(value)
        raise ApiError(
            400,
            f'{kind} in version "v1" cannot be handled as a {kind}: parsing time "{shown}" as '
            f'"2006-01-02T15:04:05.000000Z07:00": cannot parse {field_path}',
            "BadRequest",
        )
    moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def safe_encode(text: str) -> str:
    """rand.SafeEncodeString: each byte of ``text`` picks a character of SAFE_ALPHABET."""
    return "".join(SAFE_ALPHABET[ord(ch) % len(SAFE_ALPHABET)] for ch in text)


def template_hash(template: dict[str, Any]) -> str:
    """The pod-template-hash the Deployment controller gives a template (controller.ComputeHash: a
    32-bit FNV-1a of the template's dump, its decimal form safe-encoded)."""
    value = 0x811C9DC5
    for byte in json.dumps(template, sort_keys=True).encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return safe_encode(str(value))


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for tol in tolerations:
        effect = tol.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        operator = tol.get("operator", "Equal")
        key = tol.get("key")
        if not key and operator == "Exists":
            return True
        if key != taint.get("key"):
            continue
        if operator == "Exists" or tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def _int_or_percent(value: Any, total: int) -> int:
    # The disruption controller rounds percentages up (GetScaledValueFromIntOrPercent(..., true)).
    if isinstance(value, str) and value.endswith("%"):
        return int(math.ceil(int(value[:-1]) * total / 100.0))
    return int(value)


def _condition(ctype: str, status: str, reason: Optional[str] = None, message: Optional[str] = None,
               when: Optional[str] = None) -> dict[str, Any]:
    cond: dict[str, Any] = {"type": ctype, "status": status, "lastProbeTime": None,
                            "lastTransitionTime": when or now_time()}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def _set_condition(conditions: list[dict[str, Any]], new: dict[str, Any]) -> None:
    """Replace a condition by type; keep lastTransitionTime when the status did not change."""
    for i, cond in enumerate(conditions):
        if cond["type"] == new["type"]:
            if cond.get("status") == new.get("status") and "lastTransitionTime" in cond:
                new = dict(new, lastTransitionTime=cond["lastTransitionTime"])
            conditions[i] = new
            return
    conditions.append(new)


def pod_ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def node_ready(node: dict[str, Any]) -> str:
    """The status of a Node's Ready condition as stored."""
    return next((c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready"), "Unknown")


def mirror_lifecycle_taints(node: dict[str, Any]) -> None:
    """The node-lifecycle controller's view: taints follow spec.unschedulable and Ready."""
    taints = [t for t in node["spec"].get("taints") or [] if t.get("key") not in LIFECYCLE_TAINTS]
    old = {(t["key"], t["effect"]): t for t in node["spec"].get("taints") or []}
    want: list[tuple[str, str]] = []
    if node["spec"].get("unschedulable"):
        want.append((UNSCHEDULABLE_TAINT, "NoSchedule"))
    ready = node_ready(node)
    if ready == "Unknown":
        want += [(UNREACHABLE_TAINT, "NoSchedule"), (UNREACHABLE_TAINT, "NoExecute")]
    elif ready == "False":
        want += [(NOT_READY_TAINT, "NoSchedule"), (NOT_READY_TAINT, "NoExecute")]
    for key, effect in want:
        taints.append(old.get((key, effect)) or {"key": key, "effect": effect, "timeAdded": now_time()})
    if taints:
        node["spec"]["taints"] = taints
    else:
        node["spec"].pop("taints", None)


def is_api_server_of(pod: dict[str, Any], node: str) -> bool:
    """Whether ``pod`` is the kube-apiserver mirror pod of ``node``."""
    return ((pod["metadata"].get("labels") or {}).get("component") == "kube-apiserver"
            and pod["spec"].get("nodeName") == node)
