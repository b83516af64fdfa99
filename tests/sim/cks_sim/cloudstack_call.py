"""How cks-sim's CloudStack API hands a command to its handler: the handler registry (``HANDLERS``,
filled by ``@handler`` in the ``cloudstack_*_api`` modules), the ``Call`` a handler gets (typed
parameters, the world, CloudStack's list paging) and the list answers already encoded as JSON.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

from . import apis
from .cloud import CloudWorld, Job
from .core import Sim

Handler = Callable[["Call"], Any]
HANDLERS: dict[str, Handler] = {}


def handler(name: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        HANDLERS[name] = fn
        return fn

    return register


class Call:
    """One command invocation: typed parameters plus the world it acts on."""

    def __init__(self, sim: Sim, name: str, definition: dict[str, Any], values: dict[str, Any]) -> None:
        self.sim = sim
        self.cloud: CloudWorld = sim.cloud
        self.name = name
        self.definition = definition
        self.values = values

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def listing(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        """A list answer with CloudStack paging: count is the total; no results is ``{}``."""
        total = len(items)
        if total == 0:
            return {}
        page = apis.paginate(items, self.values, self.cloud.cloud_opts["page_size_max"])
        return page_body(total, self.definition["response_object"], page)

    def job(self, job: Job, **extra: Any) -> dict[str, Any]:
        return {"jobid": job.id, **extra}


class RawList:
    """A list answer whose items are already JSON text (see ``CloudWorld.vm_json``)."""

    def __init__(self, total: int, key: str, items: list[str]) -> None:
        self.total, self.key, self.items = total, key, items

    def encode(self, response_name: str) -> str:
        inner = f'"count":{self.total}'
        if self.items:
            inner += f',{json.dumps(self.key)}:[' + ",".join(self.items) + "]"
        return f'{{{json.dumps(response_name)}:{{{inner}}}}}'


def page_body(total: int, key: str, page: list[Any]) -> dict[str, Any]:
    # A page past the end still carries the total, but no (empty) list.
    return {"count": total, key: page} if page else {"count": total}


def matches_keyword(item: dict[str, Any], keyword: Optional[str], *fields: str) -> bool:
    if not keyword:
        return True
    lowered = keyword.lower()
    return any(lowered in str(item.get(f, "")).lower() for f in fields)
