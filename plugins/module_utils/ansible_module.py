# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The one glue between AnsibleModule and the rest of module_utils.

- ``cloudstack_argument_spec()`` / ``kubernetes_argument_spec()``: the shared connection options
  (documented by the ``cloudstack.cks.cloudstack`` and ``cloudstack.cks.kubernetes`` doc
  fragments), with their environment fallbacks and ``no_log`` on secrets;
- ``cloudstack_client(module)`` / ``kube_client(module, cloudstack, cluster_id)``: the clients;
- ``run(module, fn)``: calls ``fn()``, exits with the dict it returns, and turns a ``CksError``
  into ``fail_json(msg=..., **details)`` in this one place.

Environment variables are those of ngine_io.cloudstack (``CLOUDSTACK_*``) and kubernetes.core
(``K8S_AUTH_*``). One difference on purpose: ``CLOUDSTACK_DANGEROUS_NO_TLS_VERIFY`` means what its
name says (true = do not verify), as in the ``cs`` library. ngine_io.cloudstack feeds it to
``validate_certs`` unchanged, so there ``false`` turns verification off; here a value set for that
quirk can only make us verify, never silently stop verifying.
"""

from __future__ import annotations

import os
import traceback
from typing import Any, Callable, Mapping, NoReturn, Optional, Protocol

from ansible.module_utils.basic import AnsibleFallbackNotFound, env_fallback, missing_required_lib
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.cloudstack import CS_IMPORT_ERROR, HAS_CS, CloudStackClient, redact
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.cloudstack_options import CloudStackOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd import client_from_options
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd_exec import DEFAULT_TIMEOUT as ETCD_TIMEOUT
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd_exec import EtcdExecClient
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube import HAS_KUBERNETES, KUBERNETES_IMPORT_ERROR, KubeClient
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube_auth import VERIFY_ENV, BearerTarget, choose_tls, kube_warnings
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube_http import scrub_secrets
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube_options import (
    DEFAULT_REQUEST_TIMEOUT,
    KubeOptions,
    fetch_kubeconfig,
    parse_kubeconfig,
)
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError
from ansible_collections.cloudstack.cks.plugins.module_utils._model.loader import Catalog
from ansible_collections.cloudstack.cks.plugins.module_utils._services.quorum import ENDPOINTS, KUBECONFIG, QuorumClient, quorum_path
from ansible_collections.cloudstack.cks.plugins.module_utils._services.session import ClusterSession


class ModuleHost(Protocol):
    """What the glue below uses of AnsibleModule: AnsibleModule itself in a shipped module, the
    controller's stand-in (plugin_utils/controller_module.py) for a module run in the controller."""

    params: dict[str, Any]
    check_mode: bool
    _diff: bool
    no_log_values: set[str]

    def warn(self, warning: str) -> None:
        """Add ``warning`` to the result's warnings."""

    def exit_json(self, **kwargs: Any) -> NoReturn:
        """End the run with ``kwargs`` as its result."""

    def fail_json(self, msg: str, **kwargs: Any) -> NoReturn:
        """End the run as failed with ``msg`` and ``kwargs``."""


def libraries_present() -> bool:
    """Whether this Python has the clients' libraries (``cs`` and ``kubernetes``)."""
    return HAS_CS and HAS_KUBERNETES


def _validate_certs_from_no_tls_verify() -> bool:
    """``validate_certs`` from CLOUDSTACK_DANGEROUS_NO_TLS_VERIFY, read as its name says."""
    value = os.environ.get("CLOUDSTACK_DANGEROUS_NO_TLS_VERIFY")
    if value is None or value.strip() == "":
        raise AnsibleFallbackNotFound
    try:
        return not boolean(value, strict=True)
    except TypeError:
        raise AnsibleFallbackNotFound


def validate_certs_from_environment() -> Optional[bool]:
    """``validate_certs`` from CLOUDSTACK_DANGEROUS_NO_TLS_VERIFY (see above), None when it is unset or not a
    boolean: for the inventory plugin, whose options have no fallback functions."""
    try:
        return _validate_certs_from_no_tls_verify()
    except AnsibleFallbackNotFound:
        return None


def cloudstack_argument_spec() -> dict[str, dict[str, Any]]:
    """The CloudStack connection options (names and variables of ngine_io.cloudstack).

    None of them is required here: without ``api_url``/``api_key`` the ``cs`` configuration
    (``cloudstack.ini``) is read, and a missing setting fails with a clear message.
    """
    return {
        "api_url": {"type": "str", "fallback": (env_fallback, ["CLOUDSTACK_ENDPOINT"])},
        "api_key": {"type": "str", "no_log": False, "fallback": (env_fallback, ["CLOUDSTACK_KEY"])},
        "api_secret": {"type": "str", "no_log": True, "fallback": (env_fallback, ["CLOUDSTACK_SECRET"])},
        "api_http_method": {"type": "str", "choices": ["get", "post"],
                            "fallback": (env_fallback, ["CLOUDSTACK_METHOD"])},
        "api_timeout": {"type": "int", "fallback": (env_fallback, ["CLOUDSTACK_TIMEOUT"])},
        "api_verify_ssl_cert": {"type": "str", "fallback": (env_fallback, ["CLOUDSTACK_VERIFY"])},
        "validate_certs": {"type": "bool", "fallback": (_validate_certs_from_no_tls_verify, [])},
    }


def cluster_argument_spec() -> dict[str, dict[str, Any]]:
    """The options naming the CKS cluster (doc fragment ``cloudstack.cks.cluster``)."""
    return {
        "cluster": {"type": "str", "required": True},
        "project_id": {"type": "str"},
        "catalog": {"type": "dict"},
    }


def etcd_argument_spec() -> dict[str, dict[str, Any]]:
    """The options reaching etcd for the quorum checks (doc fragment ``cloudstack.cks.etcd``)."""
    return {
        "etcd_endpoints": {"type": "list", "elements": "str", "default": []},
        "etcd_ca_cert": {"type": "path"},
        "etcd_client_cert": {"type": "path"},
        "etcd_client_key": {"type": "path", "no_log": False},
        "etcd_validate_certs": {"type": "bool", "default": True},
        "etcd_timeout": {"type": "float", "default": 5.0},
    }


def cluster_module_argument_spec(own: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A cluster module's options: its ``own`` plus the cluster and both connection option sets."""
    spec = dict(own)
    spec.update(cloudstack_argument_spec())
    spec.update(kubernetes_argument_spec())
    spec.update(cluster_argument_spec())
    return spec


def kubernetes_argument_spec() -> dict[str, dict[str, Any]]:
    """The Kubernetes connection options (kubernetes.core's names and K8S_AUTH_* variables).

    ``validate_certs`` and ``ca_cert`` carry a ``kube_`` prefix because the CloudStack options
    already use ``validate_certs``; kubernetes.core's names stay as aliases where they are free.
    """
    return {
        "kubeconfig": {"type": "raw", "no_log": False, "fallback": (env_fallback, ["K8S_AUTH_KUBECONFIG"])},
        "context": {"type": "str", "aliases": ["kube_context"], "fallback": (env_fallback, ["K8S_AUTH_CONTEXT"])},
        # K8S_AUTH_VERIFY_SSL is read by kube_options, not as a fallback: an environment False
        # must be told apart from an option given as false (kube_auth.choose_tls).
        "kube_validate_certs": {"type": "bool", "aliases": ["verify_ssl"]},
        "kube_ca_cert": {"type": "path", "aliases": ["ssl_ca_cert"],
                         "fallback": (env_fallback, ["K8S_AUTH_SSL_CA_CERT"])},
        "kube_request_timeout": {"type": "float", "default": DEFAULT_REQUEST_TIMEOUT},
        # kubernetes.core's host and api_key; api_key is the CloudStack key here, so only host
        # keeps its kubernetes.core name as an alias.
        "kube_host": {"type": "str", "aliases": ["host"], "fallback": (env_fallback, ["K8S_AUTH_HOST"])},
        "kube_api_key": {"type": "str", "no_log": True, "fallback": (env_fallback, ["K8S_AUTH_API_KEY"])},
    }


def cloudstack_client(module: ModuleHost) -> CloudStackClient:
    if not HAS_CS:
        module.fail_json(msg=missing_required_lib("cs"), exception=CS_IMPORT_ERROR)
    options = CloudStackOptions.from_params(module.params)
    module.no_log_values.add(options.api_secret)
    return CloudStackClient(options)


def kube_options(params: Mapping[str, Any], warn: Callable[[str], None] = lambda note: None) -> KubeOptions:
    """KubeOptions from the module's option names (see ``kubernetes_argument_spec``); ``warn``
    gets what was chosen and why where that differs from what the environment asked for."""
    tls = choose_tls(params.get("kube_validate_certs"), os.environ.get(VERIFY_ENV), params.get("kube_ca_cert"))
    bearer = BearerTarget.from_params(params.get("kube_host"), params.get("kube_api_key"))
    for note in [tls.warning] + kube_warnings(params):
        if note:
            warn(note)
    return KubeOptions.from_params({
        "kubeconfig": bearer.kubeconfig() if bearer else params.get("kubeconfig"),
        "context": None if bearer else params.get("context"),
        "validate_certs": tls.validate_certs,
        "ca_cert": params.get("kube_ca_cert"),
        "request_timeout": params.get("kube_request_timeout"),
    })


def kube_client(module: ModuleHost, cloudstack: Optional[CloudStackClient] = None,
                cluster_id: Optional[str] = None) -> KubeClient:
    """The cluster's Kubernetes client; without a kubeconfig option it is fetched from CloudStack."""
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
    options = kube_options(module.params, module.warn)
    config: Any = options.kubeconfig
    if config is None and cloudstack is not None and cluster_id:
        config = fetch_kubeconfig(cloudstack, cluster_id)
    elif config is not None:
        inline = parse_kubeconfig(config)[1]
        config = inline if inline is not None else config
    if isinstance(config, dict):
        # Mask the credentials in anything the module returns, as kubernetes.core does.
        module.no_log_values.update(_kubeconfig_secrets(config))
        options = KubeOptions(kubeconfig=config, context=options.context,
                              validate_certs=options.validate_certs, ca_cert=options.ca_cert,
                              request_timeout=options.request_timeout)
    return KubeClient.connect(options, cloudstack=cloudstack, cluster_id=cluster_id)


def cluster_session(module: ModuleHost) -> ClusterSession:
    """The module's way into its cluster (``cluster``, ``project_id`` and the connection options).

    Without a kubeconfig option the Kubernetes client is built from the cluster's own kubeconfig,
    fetched from CloudStack by the cluster's id, so the session looks the cluster up first.
    """
    cloud = cloudstack_client(module)
    return ClusterSession(cloud, lambda cluster_id: kube_client(module, cloud, cluster_id), str(module.params["cluster"]),
                          module.params.get("project_id"), needs_cluster_id=module.params.get("kubeconfig") is None,
                          diff=bool(module._diff), catalog=Catalog.from_option(module.params.get("catalog")))


def run_service(module: ModuleHost, service: Callable[[ClusterSession, Mapping[str, Any], bool], Mapping[str, Any]]) -> None:
    """Run ``service(session, params, check_mode)`` on the module's cluster, and exit or fail with its result."""

    def work() -> Mapping[str, Any]:
        with cluster_session(module) as session:
            return service(session, module.params, module.check_mode)

    run(module, work)


def run_quorum(module: ModuleHost, service: Callable[[QuorumClient, Mapping[str, Any], str], Mapping[str, Any]]) -> None:
    """Run ``service(client, params, path)`` with the quorum client the options choose (``quorum.quorum_path``).

    The endpoints need neither CloudStack nor Kubernetes; a kubeconfig needs no CloudStack call;
    the cluster alone is looked up in CloudStack for its own kubeconfig, as the other modules do.
    """

    def work() -> Mapping[str, Any]:
        path = quorum_path(module.params)
        direct = client_from_options(module.params) if path == ENDPOINTS else None
        if direct is not None:
            return service(direct, module.params, path)
        given = module.params.get("etcd_timeout")
        # 0 or less is refused by the client, not turned into the default.
        timeout = ETCD_TIMEOUT if given is None else float(given)
        if path == KUBECONFIG:
            kube = kube_client(module)
            try:
                return service(EtcdExecClient(kube, timeout=timeout), module.params, path)
            finally:
                kube.close()
        with cluster_session(module) as session:
            return service(EtcdExecClient(session.kube, timeout=timeout), module.params, path)

    run(module, work)


def _kubeconfig_secrets(config: Mapping[str, Any]) -> set[str]:
    secrets: set[str] = set()
    for entry in config.get("users") or []:
        user = (entry or {}).get("user") or {}
        for key in ("token", "client-key-data", "password"):
            value = user.get(key)
            if isinstance(value, str) and value:
                secrets.add(value)
    return secrets


def run(module: ModuleHost, fn: Callable[[], Optional[Mapping[str, Any]]]) -> None:
    """Run the module's work: exit with the dict ``fn`` returns, or fail with a clear message."""
    try:
        result = fn()
    except CksError as exc:
        module.fail_json(msg=exc.msg, **_safe_details(exc.details))
    except Exception as exc:  # the last net: a clear message, never a secret
        text = scrub_secrets(redact(str(exc)))
        module.fail_json(msg=f"unexpected {type(exc).__name__}: {text}",
                         exception=scrub_secrets(redact(traceback.format_exc())))
    else:
        answer = dict(result or {})
        # A service's warnings are the run's (exit_json's own `warnings` is deprecated).
        for warning in answer.pop("warnings", None) or []:
            module.warn(str(warning))
        module.exit_json(**answer)


_RESERVED = frozenset({"msg", "failed", "changed", "exception", "invocation", "warnings", "deprecations"})


def _safe_details(details: Mapping[str, Any]) -> dict[str, Any]:
    # A detail named like a result key Ansible owns would break fail_json; keep it under another name.
    out: dict[str, Any] = {}
    for key, value in details.items():
        name = f"error_{key}" if key in _RESERVED or key.startswith(("_ansible", "ansible_")) else key
        out[name] = value
    return out
