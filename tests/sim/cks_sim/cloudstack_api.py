"""The CloudStack JSON API of cks-sim at ``/client/api`` (GET query or POST form).

Request path, as in ``ApiServlet`` / ``ApiServer``: signature check (401), command lookup,
parameter processing (431), then the command. Async commands answer ``{jobid}`` at once and
report through queryAsyncJobResult; their refusals (VM not stopped, strict disk, ...) come back
as failed jobs, because the server checks them inside the job. Every request is logged to
``sim.calls`` without its signature and api key.

This module is the WSGI application; the commands are served by the ``cloudstack_*_api`` modules
(CKS, VMs and volumes, infrastructure listings, owners, tags, the service's own), which register
their handlers in ``cloudstack_call.HANDLERS`` when imported here.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from werkzeug.wrappers import Request, Response

from . import (apis, cloudstack_account_api, cloudstack_cks_api, cloudstack_infra_api, cloudstack_service_api,
               cloudstack_tag_api, cloudstack_vm_api, request_kinds)
from .cloud import CS_SERVER_API, CloudError
from .cloudstack_call import HANDLERS, Call, RawList
from .core import Sim, drop_connection
from .rate_limit import API_LIMIT_EXCEED, ApiRateLimit
from .signing import SignatureError, verify

API_PATH = "/client/api"
UNAUTHORIZED_TEXT = "unable to verify user credentials and/or request signature"
HIDDEN_PARAMS = {"signature", "apikey"}
# The modules whose @handler commands HANDLERS holds (importing them registers them).
HANDLER_MODULES = (cloudstack_cks_api, cloudstack_vm_api, cloudstack_infra_api, cloudstack_account_api,
                   cloudstack_tag_api, cloudstack_service_api)


# --- the WSGI application -----------------------------------------------------------------


class CloudStackApp:
    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self.callers = sim.cloud.directory.by_apikey()
        if sim.api_rate_limit is None:
            sim.api_rate_limit = ApiRateLimit(lambda: sim.cloud.cloud_opts, sim.clock.real)
        self.key_pairs = sim.cloud.directory.key_pairs_by_apikey()
        self.secrets = sim.cloud.directory.secrets()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        request = Request(environ)
        response = self.handle(request, environ)
        return response(environ, start_response)

    @staticmethod
    def _params(request: Request) -> dict[str, str]:
        params: dict[str, str] = {}
        for source in (request.args, request.form):
            for key in source.keys():
                params.setdefault(key, source.get(key, ""))
        return params

    def _json(self, body: dict[str, Any], status: int, text: Optional[str] = None) -> Response:
        response = Response(json.dumps(body, separators=(",", ":")), status=status,
                            content_type="application/json;charset=utf-8")
        if text is not None:
            response.headers["X-Description"] = text.encode("ascii", "replace").decode("ascii")[:1000]
        return response

    def _error(self, response_name: str, code: int, text: str, cserrorcode: Optional[int]) -> Response:
        body: dict[str, Any] = {"uuidList": [], "errorcode": code}
        if cserrorcode is not None:
            body["cserrorcode"] = cserrorcode
        body["errortext"] = text
        return self._json({response_name: body}, code, text)

    def handle(self, request: Request, environ: dict[str, Any]) -> Response:
        if request.path.rstrip("/") != API_PATH:
            return Response("Not Found", status=404, content_type="text/html")
        delay = self.sim.faults.latency("cloudstack") + self.sim.delay("api_latency")
        if delay > 0:
            time.sleep(delay)
        params = self._params(request)
        name = params.get("command", "")
        logged = {k: v for k, v in params.items() if k.lower() not in HIDDEN_PARAMS and k != "command"}
        transient = self.sim.faults.transient("cloudstack")
        if transient == "drop":
            self.sim.calls.add(api="cloudstack", command=name, params=logged, status=0, errorcode=None, fault="drop")
            drop_connection(environ)
            return Response(b"", status=500)
        if transient is not None:
            self.sim.calls.add(api="cloudstack", command=name, params=logged, status=503, errorcode=503, fault="5xx")
            return Response("<html><body><h1>503 Service Unavailable</h1></body></html>", status=503,
                            content_type="text/html")
        kind = request_kinds.cloudstack(name)
        planted = self.sim.faults.take("request_fault", request=kind)
        mode = str(planted.get("mode", "503")) if planted else None
        if mode == "503":
            self.sim.calls.add(api="cloudstack", command=name, request=kind, params=logged, status=503, errorcode=503,
                               fault="request_fault")
            return Response("<html><body><h1>503 Service Unavailable</h1></body></html>", status=503,
                            content_type="text/html")
        if mode == "530":
            self.sim.calls.add(api="cloudstack", command=name, request=kind, params=logged, status=530, errorcode=530,
                               fault="request_fault")
            definition = apis.command(name) if name in HANDLERS else None
            return self._error(definition["response_name"] if definition else "errorresponse", 530,
                               request_kinds.INTERNAL_ERROR_TEXT, 4250)
        response, errorcode, extra = self._dispatch(request, params, name)
        if mode == "drop" or self.sim.faults.take("lost_answer", command=name) is not None:
            # Carried out (a job was queued, a change made), but the answer never reaches the client.
            self.sim.calls.add(api="cloudstack", command=name, request=kind, params=logged, status=0,
                               errorcode=errorcode, fault="request_fault" if mode else "lost_answer", **extra)
            drop_connection(environ)
            return Response(b"", status=500)
        self.sim.calls.add(api="cloudstack", command=name, request=kind, params=logged, status=response.status_code,
                           errorcode=errorcode, **extra)
        return response

    def _dispatch(self, request: Request, params: dict[str, str], name: str) -> tuple[Response, Optional[int], dict[str, Any]]:
        definition = apis.command(name) if name in HANDLERS else None
        response_name = definition["response_name"] if definition else "errorresponse"
        try:
            apikey = verify(params, self.secrets)
        except SignatureError:
            return self._error(response_name, 401, UNAUTHORIZED_TEXT, None), 401, {}
        caller, key_pair = self.callers[apikey], self.key_pairs.get(apikey)
        if key_pair is not None and not key_pair.valid_at(datetime.now(timezone.utc)):
            # ApiServer.verifyRequest: ApiKeyPairVO.validateDate's PermissionDeniedException is a failed verification.
            return self._error(response_name, 401, UNAUTHORIZED_TEXT, None), 401, {"expired_key": key_pair.name}
        if definition is None:
            # verifyRequest refuses a command it does not know before it even checks the signature.
            return self._error("errorresponse", 401, UNAUTHORIZED_TEXT, None), 401, {}
        # ApiServer.commandAvailable -> checkCommandAvailable: the API checkers, ApiRateLimitServiceImpl among
        # them, before the command's parameters are processed; RequestLimitException -> API_LIMIT_EXCEED.
        wait_ms = self.sim.api_rate_limit.check(caller.id, root_admin=caller.role == "admin")
        if wait_ms is not None:
            text = ApiRateLimit.text(wait_ms)
            return (self._error(response_name, API_LIMIT_EXCEED, text, CS_SERVER_API), API_LIMIT_EXCEED,
                    {"throttled": True, "account": caller.name, "retry_after_ms": wait_ms})
        if not apis.may_call(caller.role, key_pair, name):
            # DynamicRoleBasedAPIAccessChecker.checkAccess: a role without the API, or a key pair whose
            # rules leave it out, throws UnavailableCommandException; ApiServer.commandAvailable answers
            # it 432 (UNSUPPORTED_ACTION_ERROR), and getSerializedApiError names it errorresponse.
            text = f"The API [{name}] does not exist or is not available for the account {caller.ref()}."
            return self._error("errorresponse", 432, text, CS_SERVER_API), 432, {}
        fault = self.sim.faults.take("cloudstack_error", command=name)
        if fault is not None:
            code = int(fault.get("code", 530))
            text = str(fault.get("errortext", f"cks-sim fault on {name}"))
            return self._error(response_name, code, text, int(fault.get("cserrorcode", 4250))), code, {"fault": "cloudstack_error"}
        cloud = self.sim.cloud
        try:
            with self.sim.lock:
                cloud.caller, cloud.caller_key = caller, key_pair
                try:
                    values = apis.parse_params(definition, params, cloud.is_admin)
                    body = HANDLERS[name](Call(self.sim, name, definition, values))
                finally:
                    cloud.caller, cloud.caller_key = cloud.directory.primary, None
        except CloudError as err:
            return self._error(response_name, err.code, err.text, err.cserrorcode), err.code, {}
        if isinstance(body, RawList):
            return Response(body.encode(response_name), status=200, content_type="application/json;charset=utf-8"), None, {}
        extra = {"jobid": body["jobid"]} if isinstance(body, dict) and "jobid" in body else {}
        return self._json({response_name: body}, 200), None, extra
