"""Events as the API server serves them: one stored object, two views (core/v1 and events.k8s.io/v1).

The API server keeps one internal Event and converts it for each group version
(``pkg/apis/events/v1/conversion.go``: ``regarding`` <-> ``involvedObject``, ``note`` <-> ``message``,
``deprecatedSource`` <-> ``source``, ``deprecatedFirstTimestamp``/``deprecatedLastTimestamp``/
``deprecatedCount`` <-> ``firstTimestamp``/``lastTimestamp``/``count``; ``reportingController`` is
core's ``reportingComponent``). cks-sim stores the core/v1 form and converts the events.k8s.io/v1 view on
the way in and out. A field selector on the events.k8s.io view names ``regarding.*`` and
``reportingController``; it is translated to the core names before it is applied.

Validation follows ``pkg/apis/core/validation/events.go``: an events.k8s.io/v1 create
(``ValidateEventCreate``) needs ``eventTime``, ``reportingController`` (a qualified name),
``reportingInstance``, ``action`` and ``reason`` (at most 128 characters each), ``note`` at most 1 kB,
``type`` Normal or Warning, a ``series`` with ``count`` >= 2 and a ``lastObservedTime``, a cluster-scoped
``regarding`` only in ``default`` or ``kube-system``, and refuses the ``deprecated*`` fields ("needs to be
unset"); on update everything but ``series``, ``note`` and the metadata is immutable. A core/v1 create
with an ``eventTime`` (``legacyValidateEvent``) needs the same new fields, and may carry the legacy
ones too (source, first/last timestamp, count), as client-go's recorders write them.

Events live an hour (the API server's ``--event-ttl``, 1h by default), counted in simulated time from
their last write (the registry gives each write a new etcd lease); ``kube.event_ttl`` in the spec
changes it.
"""

from __future__ import annotations

import re
from typing import Any

from .kube import ApiError, Resource
from .kube_resources import go_value

GROUP = "events.k8s.io"
EVENTS_V1 = Resource("events", "Event", GROUP, "v1", True,
                     ("create", "delete", "get", "list", "patch", "update", "watch"), ("ev",))

#: events.k8s.io/v1 field labels -> the stored (core/v1) field they select on.
V1_FIELDS = {
    **{f"regarding.{part}": f"involvedObject.{part}"
       for part in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
    "reason": "reason", "type": "type", "reportingController": "reportingComponent",
    "deprecatedSource": "source", "metadata.name": "metadata.name", "metadata.namespace": "metadata.namespace",
}

_QUALIFIED = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_MICRO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$")
_IMMUTABLE = ("action", "reason", "reportingController", "reportingInstance", "regarding", "related", "type",
              "eventTime")


# ---------------------------------------------------------------------------------------------
# The two views


def to_v1(core: dict[str, Any]) -> dict[str, Any]:
    """The events.k8s.io/v1 view of a stored (core/v1) Event."""
    out: dict[str, Any] = {"apiVersion": f"{GROUP}/v1", "kind": "Event", "metadata": core.get("metadata", {})}
    out["eventTime"] = core.get("eventTime")
    for key in ("series", "reportingInstance", "action", "reason", "related", "type"):
        if core.get(key) not in (None, ""):
            out[key] = core[key]
    if core.get("reportingComponent"):
        out["reportingController"] = core["reportingComponent"]
    out["regarding"] = core.get("involvedObject") or {}
    if core.get("message"):
        out["note"] = core["message"]
    if core.get("source"):
        out["deprecatedSource"] = core["source"]
    for old, new in (("firstTimestamp", "deprecatedFirstTimestamp"), ("lastTimestamp", "deprecatedLastTimestamp")):
        if core.get(old):
            out[new] = core[old]
    if core.get("count"):
        out["deprecatedCount"] = core["count"]
    return out


def to_core(v1: dict[str, Any]) -> dict[str, Any]:
    """The stored (core/v1) form of an events.k8s.io/v1 Event."""
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Event", "metadata": v1.get("metadata") or {},
                           "involvedObject": v1.get("regarding") or {}, "source": v1.get("deprecatedSource") or {},
                           "firstTimestamp": v1.get("deprecatedFirstTimestamp"),
                           "lastTimestamp": v1.get("deprecatedLastTimestamp"),
                           "eventTime": v1.get("eventTime"),
                           "reportingComponent": v1.get("reportingController", ""),
                           "reportingInstance": v1.get("reportingInstance", "")}
    for key in ("series", "action", "reason", "related", "type"):
        if v1.get(key) not in (None, ""):
            out[key] = v1[key]
    if v1.get("note"):
        out["message"] = v1["note"]
    if v1.get("deprecatedCount"):
        out["count"] = v1["deprecatedCount"]
    return out


def core_field_selector(text: str) -> str:
    """An events.k8s.io/v1 field selector in the stored form's field names (unknown labels stay, and
    are refused as core/v1 refuses them)."""
    terms = []
    for term in [t.strip() for t in (text or "").split(",") if t.strip()]:
        m = re.match(r"^([A-Za-z0-9_.]+)(\s*(?:==|=|!=)\s*.*)$", term)
        if m and m.group(1) in V1_FIELDS:
            terms.append(V1_FIELDS[m.group(1)] + m.group(2))
        elif m and m.group(1).startswith("involvedObject."):
            terms.append("unsupported." + term)  # core's names are not this group's
        else:
            terms.append(term)
    return ",".join(terms)


# ---------------------------------------------------------------------------------------------
# Validation of the events.k8s.io/v1 view


def _invalid(name: str, causes: list[tuple[str, Any, str]]) -> ApiError:
    # The API server validates the internal (core) Event whichever group the request came through:
    # the details name the Kind Event and no group.
    text = "; ".join(f"{f}: {m}" if v is None else f"{f}: Invalid value: {go_value(v)}: {m}" for f, v, m in causes)
    return ApiError(422, f'Event.events.k8s.io "{name}" is invalid: {text}', "Invalid", {
        "name": name, "kind": "Event",
        "causes": [{"reason": "FieldValueRequired" if v is None else "FieldValueInvalid",
                    "message": m if v is None else f"Invalid value: {go_value(v)}: {m}", "field": f}
                   for f, v, m in causes]})


def validate_create(event: dict[str, Any], namespace: str) -> None:
    """An events.k8s.io/v1 create: the new fields required, the deprecated ones refused."""
    name = (event.get("metadata") or {}).get("name") or ""
    causes = _new_style_causes(event.get("regarding") or {}, "regarding", event, namespace, "reportingController")
    for field in ("deprecatedFirstTimestamp", "deprecatedLastTimestamp", "deprecatedCount"):
        if event.get(field):
            causes.append((field, "", "needs to be unset"))
    source = event.get("deprecatedSource") or {}
    if source.get("component") or source.get("host"):
        causes.append(("deprecatedSource", "", "needs to be unset"))
    if causes:
        raise _invalid(name, causes)


def validate_core_create(event: dict[str, Any], namespace: str) -> None:
    """A core/v1 create (legacyValidateEvent): an Event with an ``eventTime`` is a new-style one and
    needs the new fields too; one without is the legacy recorder's, taken as it is."""
    if not isinstance(event, dict) or not event.get("eventTime"):
        return
    name = (event.get("metadata") or {}).get("name") or ""
    v1 = to_v1(event)
    causes = _new_style_causes(event.get("involvedObject") or {}, "involvedObject", v1, namespace, "reportingComponent")
    if causes:
        text = "; ".join(f"{f}: {m}" if v is None else f"{f}: Invalid value: {v!r}: {m}" for f, v, m in causes)
        details = [{"reason": "FieldValueRequired" if v is None else "FieldValueInvalid",
                    "message": m if v is None else f"Invalid value: {go_value(v)}: {m}", "field": f}
                   for f, v, m in causes]
        raise ApiError(422, f'Event "{name}" is invalid: {text}', "Invalid",
                       {"name": name, "kind": "Event", "causes": details})


def _new_style_causes(regarding: dict[str, Any], ref_field: str, event: dict[str, Any], namespace: str,
                      controller_field: str) -> list[tuple[str, Any, str]]:
    causes: list[tuple[str, Any, str]] = []
    if not regarding.get("namespace") and namespace not in ("", "default", "kube-system"):
        causes.append((f"{ref_field}.namespace", regarding.get("namespace", ""), "does not match event.namespace"))
    elif regarding.get("namespace") and regarding["namespace"] != namespace:
        causes.append((f"{ref_field}.namespace", regarding["namespace"], "does not match event.namespace"))
    if not event.get("eventTime"):
        causes.append(("eventTime", None, "Required value"))
    elif not _MICRO.match(str(event["eventTime"])):
        raise ApiError(400, f'Event in version "v1" cannot be handled as a Event: parsing time '
                            f'"{event["eventTime"]}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse eventTime',
                       "BadRequest")
    if event.get("type") not in ("Normal", "Warning"):
        causes.append(("type", event.get("type", ""), 'supported values: "Normal", "Warning"'))
    controller = event.get("reportingController") or ""
    if not controller:
        # ValidateQualifiedName on "" first, then the required check (validation/events.go).
        causes += [(controller_field, "", "name part must be non-empty"),
                   (controller_field, "", "name part must consist of alphanumeric characters, '-', '_' or '.', and "
                                          "must start and end with an alphanumeric character (e.g. 'MyName',  or "
                                          "'my.name',  or '123-abc', regex used for validation is "
                                          "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
                   (controller_field, None, "Required value")]
    elif not _QUALIFIED.match(controller) or len(controller.split("/")[-1]) > 63:
        causes.append((controller_field, controller, "name part must consist of alphanumeric characters, "
                                                     "'-', '_' or '.'"))
    for field in ("reportingInstance", "action", "reason"):
        value = event.get(field) or ""
        if not value:
            causes.append((field, None, "Required value"))
        elif len(value) > 128:
            causes.append((field, "", "can have at most 128 characters"))
    if len((event.get("note") or "").encode()) > 1024:
        causes.append(("note", "", "can have at most 1024 characters"))
    return causes + _series_causes(event)


def _series_causes(event: dict[str, Any]) -> list[tuple[str, Any, str]]:
    series = event.get("series")
    if series is None:
        return []
    causes: list[tuple[str, Any, str]] = []
    if not isinstance(series.get("count"), int) or series["count"] < 2:
        causes.append(("series.count", series.get("count"), "should be at least 2"))
    if not series.get("lastObservedTime"):
        causes.append(("series.lastObservedTime", None, "Required value"))
    return causes


def validate_update(old: dict[str, Any], new: dict[str, Any]) -> None:
    name = (new.get("metadata") or {}).get("name") or ""
    causes: list[tuple[str, Any, str]] = [(field, new.get(field), "field is immutable")
                                          for field in _IMMUTABLE if new.get(field) != old.get(field)]
    causes += _series_causes(new)
    if causes:
        raise _invalid(name, causes)
