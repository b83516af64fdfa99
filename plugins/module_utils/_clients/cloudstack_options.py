# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""How to reach the CloudStack API: ``CloudStackOptions`` from a module's arguments (the option names of
ngine_io.cloudstack), else from ``cs``'s own configuration (``CLOUDSTACK_*``, ``cloudstack.ini``), as the
``cs`` command line reads it. The client that talks to the API is ``cloudstack.py``'s."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.pacing import API_RATE_ENV, api_rate_from_env
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput

DEFAULT_POLL_INTERVAL = 0.5
DEFAULT_RETRIES = 5


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on", "y", "t"):
        return True
    if text in ("0", "false", "no", "off", "n", "f"):
        return False
    raise InvalidInput("validate_certs", value, "expected a boolean")


@dataclass(frozen=True)
class CloudStackOptions:
    """How to reach the CloudStack API (the option names of ngine_io.cloudstack).

    ``api_verify_ssl_cert`` is a CA bundle path; ``validate_certs=False`` turns verification off
    and wins over a CA path (an explicit opt-out is never silently ignored).
    """

    api_url: str
    api_key: str
    api_secret: str = field(repr=False)
    api_http_method: str = "get"
    api_timeout: int = 10
    api_verify_ssl_cert: Optional[str] = None
    validate_certs: bool = True
    poll_interval: float = DEFAULT_POLL_INTERVAL
    retries: int = DEFAULT_RETRIES
    api_rate: Optional[float] = None

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> CloudStackOptions:
        """Options from module parameters; the env fallbacks are already applied by the argspec.

        Without ``api_url`` or ``api_key``, the settings come from ``cs``'s own configuration
        (``CLOUDSTACK_*`` variables, then ``cloudstack.ini`` / ``~/.cloudstack.ini`` /
        ``CLOUDSTACK_CONFIG``, region ``CLOUDSTACK_REGION``), as the ``cs`` CLI does; values
        given as parameters still win.
        """
        values = {k: params.get(k) for k in (
            "api_url", "api_key", "api_secret", "api_http_method", "api_timeout",
            "api_verify_ssl_cert", "validate_certs",
        )}
        if not values["api_url"] or not values["api_key"]:
            ini = _read_cs_config()
            for ours, theirs in (("api_url", "endpoint"), ("api_key", "key"), ("api_secret", "secret"),
                                 ("api_http_method", "method"), ("api_timeout", "timeout"),
                                 ("api_verify_ssl_cert", "verify")):
                if values[ours] in (None, "") and ini.get(theirs) not in (None, ""):
                    values[ours] = ini[theirs]
            if values["validate_certs"] is None and "dangerous_no_tls_verify" in ini:
                values["validate_certs"] = not _to_bool(ini["dangerous_no_tls_verify"])
        for name in ("api_url", "api_key", "api_secret"):
            if not values[name]:
                raise InvalidInput(name, None, "not set: give it as a parameter, with its CLOUDSTACK_* "
                                               "environment variable, or in cloudstack.ini")
        method = str(values["api_http_method"] or "get").lower()
        if method not in ("get", "post"):
            raise InvalidInput("api_http_method", values["api_http_method"], "must be get or post")
        try:
            timeout = int(values["api_timeout"] if values["api_timeout"] not in (None, "") else 10)
        except (TypeError, ValueError):
            raise InvalidInput("api_timeout", values["api_timeout"], "must be a whole number of seconds")
        if timeout < 1:
            raise InvalidInput("api_timeout", timeout, "must be at least 1 second")
        verify = values["api_verify_ssl_cert"]
        if isinstance(verify, bool) or str(verify).lower() in ("true", "false"):
            # cs accepts CLOUDSTACK_VERIFY=true/false too; only a path is a CA bundle.
            if not _to_bool(verify) and values["validate_certs"] is None:
                values["validate_certs"] = False
            verify = None
        extra: dict[str, Any] = {k: params[k] for k in ("poll_interval", "retries") if params.get(k) is not None}
        extra["api_rate"] = api_rate_from_env(os.environ.get(API_RATE_ENV))
        return cls(
            api_url=str(values["api_url"]),
            api_key=str(values["api_key"]),
            api_secret=str(values["api_secret"]),
            api_http_method=method,
            api_timeout=timeout,
            api_verify_ssl_cert=str(verify) if verify else None,
            validate_certs=True if values["validate_certs"] is None else _to_bool(values["validate_certs"]),
            **extra,
        )


def _read_cs_config() -> dict[str, Any]:
    """``cs.read_config()``, or {} when there is no configuration (it exits when no file exists)."""
    try:
        # Loaded once by cloudstack.py, which the session imports first (without aiohttp, see there).
        import cs  # pylint: disable=import-outside-toplevel
    except ImportError:  # pragma: no cover - exercised only without the library
        return {}
    try:
        return dict(cs.read_config())
    except (SystemExit, ValueError, KeyError, OSError):
        return {}
