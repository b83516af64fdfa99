"""The CloudStack client with ``cs`` (its HTTP layer) replaced by a script: each command answers from
a list of values, callables or exceptions, in order, and every command sent is kept.

    c, fake = client_and_fake({"listZones": [{"zone": []}], "stopVirtualMachine": [api_error(431, "...")]})
    fake.sent                                 # [(command, params), ...]
"""

from __future__ import annotations

from typing import Any, Callable

import cs

from ansible_collections.cloudstack.cks.plugins.module_utils._clients import cloudstack as mod
from ansible_collections.cloudstack.cks.plugins.module_utils._clients import cloudstack_options as cs_options

SECRET = "s3cr3t-S3CR3T"


class FakeResponse:
    def __init__(self, status: int) -> None:
        self.status_code = status


class FakeCS:
    """Answers each command from a list of callables or values, in order."""

    def __init__(self, script: dict[str, list[Any]]) -> None:
        self.script = script
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.timeout = 10

    def __getattr__(self, command: str) -> Callable[..., Any]:
        def handler(**params: Any) -> Any:
            self.sent.append((command, params))
            answer = self.script[command].pop(0)
            if isinstance(answer, BaseException):
                raise answer
            return answer(params) if callable(answer) else answer
        return handler


def api_error(status: int, text: str, code: int | None = None) -> cs.CloudStackApiException:
    return cs.CloudStackApiException(f"HTTP {status} response from CloudStack",
                                     error={"errorcode": code or status, "errortext": text},
                                     response=FakeResponse(status))


def client_and_fake(script: dict[str, list[Any]], **options: Any) -> tuple[mod.CloudStackClient, FakeCS]:
    c = mod.CloudStackClient(cs_options.CloudStackOptions(api_url="http://127.0.0.1:9/client/api", api_key="k",
                                                          api_secret=SECRET, **options))
    fake = FakeCS(script)
    c._cs = fake
    c._sleep = lambda s: None
    return c, fake
