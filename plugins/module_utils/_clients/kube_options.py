# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""How to reach a cluster's Kubernetes API: ``KubeOptions`` from a module's arguments (the option names of
kubernetes.core's k8s_auth_options), and the kubeconfig they name - a path, inline YAML or a dict, or by
default the one CKS stores, fetched from CloudStack. The client that talks to the API is ``kube.py``'s."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Union

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CloudStackError, InvalidInput

try:
    import yaml

    HAS_YAML = True
except ImportError:  # pragma: no cover
    HAS_YAML = False

DEFAULT_REQUEST_TIMEOUT = 20.0


@dataclass(frozen=True)
class KubeOptions:
    """How to reach a cluster's API (the option names of kubernetes.core's k8s_auth_options).

    ``kubeconfig``: a path, a dict, or the YAML text of a kubeconfig; None means fetch it from
    CloudStack. ``validate_certs`` None keeps what the kubeconfig says
    (``insecure-skip-tls-verify``); ``ca_cert`` replaces the kubeconfig's CA.
    """

    kubeconfig: Union[None, str, dict] = field(default=None, repr=False)
    context: Optional[str] = None
    validate_certs: Optional[bool] = None
    ca_cert: Optional[str] = None
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> KubeOptions:
        timeout = params.get("request_timeout")
        try:
            timeout = float(timeout) if timeout not in (None, "") else DEFAULT_REQUEST_TIMEOUT
        except (TypeError, ValueError):
            raise InvalidInput("request_timeout", timeout, "must be a number of seconds")
        if timeout <= 0:
            raise InvalidInput("request_timeout", timeout, "must be positive")
        validate = params.get("validate_certs")
        if isinstance(validate, str):
            validate = validate.strip().lower() in ("1", "true", "yes", "on", "y", "t")
        return cls(kubeconfig=params.get("kubeconfig") or None, context=params.get("context") or None,
                   validate_certs=validate, ca_cert=params.get("ca_cert") or None, request_timeout=timeout)


def parse_kubeconfig(value: Union[str, dict]) -> tuple[Optional[str], Optional[dict]]:
    """``(path, None)`` for a file, ``(None, dict)`` for inline content."""
    if isinstance(value, dict):
        return None, value
    text = str(value)
    if "\n" not in text and os.path.exists(os.path.expanduser(text)):
        return os.path.expanduser(text), None
    if HAS_YAML:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            data = None
        if isinstance(data, dict) and ("clusters" in data or "apiVersion" in data):
            return None, data
    if "\n" in text:
        raise InvalidInput("kubeconfig", "<inline content>", "is neither a kubeconfig file path nor kubeconfig YAML")
    raise InvalidInput("kubeconfig", text, "no such file")


def fetch_kubeconfig(cloudstack: Any, cluster_id: str) -> dict[str, Any]:
    """The cluster's kubeconfig as CKS stored it (admin credentials), via getKubernetesClusterConfig."""
    response = cloudstack.call("getKubernetesClusterConfig", target=cluster_id, id=cluster_id)
    config = (response.get("clusterconfig") or {}).get("configdata")
    if not config:
        raise CloudStackError("getKubernetesClusterConfig", "the cluster has no stored kubeconfig", target=cluster_id)
    try:
        data = yaml.safe_load(config)
    except yaml.YAMLError:
        data = None
    if not isinstance(data, dict):
        raise CloudStackError("getKubernetesClusterConfig", "the stored kubeconfig is not valid YAML",
                              target=cluster_id)
    return data
