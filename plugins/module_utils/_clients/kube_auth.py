# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""How a module reaches the Kubernetes API when it is not handed a kubeconfig: an API server URL
and a bearer token (``kube_host`` / ``kube_api_key``, kubernetes.core's ``host`` / ``api_key`` and
their ``K8S_AUTH_HOST`` / ``K8S_AUTH_API_KEY`` variables, which AWX's built-in "OpenShift or
Kubernetes API Bearer Token" credential sets), and whether to verify the API server's certificate.

Pure: options and environment values in, a decision out; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput

TRUE_WORDS = ("1", "true", "yes", "on", "y", "t")
FALSE_WORDS = ("0", "false", "no", "off", "n", "f")
VERIFY_ENV = "K8S_AUTH_VERIFY_SSL"


@dataclass(frozen=True)
class TlsChoice:
    """Whether to verify the API server (None: as the kubeconfig says), and why, when the
    choice differs from what the environment asked for."""

    validate_certs: Optional[bool]
    warning: Optional[str] = None


def _env_bool(name: str, value: str) -> bool:
    word = value.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise InvalidInput(name, value, "must be true or false")


def choose_tls(explicit: Optional[bool], env_verify: Optional[str], ca_cert: Optional[str]) -> TlsChoice:
    """``kube_validate_certs`` as given wins. From the environment, ``K8S_AUTH_VERIFY_SSL=true``
    verifies and an empty value means not set; ``K8S_AUTH_VERIFY_SSL=false`` never turns
    verification off by itself: AWX's bearer-token credential sets it whenever its CA field is
    empty, even with "Verify SSL" ticked, so it cannot tell a wish from a blank field. The
    module then verifies (with ``kube_ca_cert`` if one is given, else the kubeconfig's CA or the
    system CAs) and says so."""
    if explicit is not None:
        return TlsChoice(explicit)
    if env_verify is None or not env_verify.strip():
        return TlsChoice(None)
    if _env_bool(VERIFY_ENV, env_verify):
        return TlsChoice(True)
    against = f"the CA in kube_ca_cert ({ca_cert})" if ca_cert else "the kubeconfig's CA, else the system CAs"
    return TlsChoice(True, (
        f"{VERIFY_ENV}=False was not taken as a reason to stop verifying the Kubernetes API server's "
        f"certificate: it is verified against {against}. AWX sets {VERIFY_ENV}=False whenever its "
        f"bearer-token credential has no CA, even with Verify SSL ticked; give the CA there, or set "
        f"kube_validate_certs: false on the module (module_defaults) to turn verification off."))


@dataclass(frozen=True)
class BearerTarget:
    """An API server URL and a bearer token, as kubernetes.core's ``host`` and ``api_key``."""

    host: str
    api_key: str = ""

    @classmethod
    def from_params(cls, host: Optional[str], api_key: Optional[str]) -> Optional[BearerTarget]:
        host = (host or "").strip()
        api_key = (api_key or "").strip()
        if not host and not api_key:
            return None
        if not host:
            raise InvalidInput("kube_host", None, "is needed with kube_api_key (K8S_AUTH_API_KEY): the URL of "
                                                  "the Kubernetes API server, e.g. https://10.1.1.10:6443")
        if not host.startswith(("https://", "http://")):
            raise InvalidInput("kube_host", host, "must be the URL of the Kubernetes API server, "
                                                  "e.g. https://10.1.1.10:6443")
        if not api_key:
            raise InvalidInput("kube_api_key", None, f"is needed with kube_host={host} (K8S_AUTH_HOST): the bearer "
                                                     "token of a ServiceAccount allowed what the rollout does")
        return cls(host.rstrip("/"), api_key)

    def kubeconfig(self) -> dict[str, Any]:
        """An in-memory kubeconfig with one context: the server and the token, no CA of its own
        (``kube_ca_cert`` or the system CAs verify the server)."""
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "cks", "cluster": {"server": self.host}}],
            "users": [{"name": "cks-bearer", "user": {"token": self.api_key}}],
            "contexts": [{"name": "cks", "context": {"cluster": "cks", "user": "cks-bearer"}}],
            "current-context": "cks",
        }


def kube_warnings(params: Mapping[str, Any]) -> list[str]:
    """The notes the module passes on about where its Kubernetes connection came from."""
    notes = []
    if (params.get("kube_host") or "").strip() and params.get("kubeconfig") not in (None, ""):
        notes.append("kube_host (K8S_AUTH_HOST) and kubeconfig (K8S_AUTH_KUBECONFIG) were both given: "
                     "the connection is kube_host with kube_api_key; the kubeconfig and its context are not used")
    return notes
