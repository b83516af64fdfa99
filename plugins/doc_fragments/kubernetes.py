# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The Kubernetes connection options (argument spec: ``module_utils.ansible_module.kubernetes_argument_spec``)."""

from __future__ import annotations


class ModuleDocFragment:

    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - The cluster's kubeconfig - a file path, a dictionary, or the kubeconfig's YAML text.
      - If not given, the E(K8S_AUTH_KUBECONFIG) environment variable is used.
      - If not given at all, it is fetched from CloudStack with C(getKubernetesClusterConfig), that
        is the admin kubeconfig CKS stored when it set the cluster up. It is kept in memory; the
        certificates it embeds are written to a private directory (mode 0700, files 0600) that
        is removed when the module ends.
    type: raw
  context:
    description:
      - The kubeconfig context to use; its current context if not given.
      - If not given, the E(K8S_AUTH_CONTEXT) environment variable is used.
    type: str
    aliases: [kube_context]
  kube_validate_certs:
    description:
      - Whether to verify the API server's TLS certificate. If not given, the kubeconfig decides
        (C(insecure-skip-tls-verify)), which normally means verify.
      - If not given, the E(K8S_AUTH_VERIFY_SSL) environment variable is used.
    type: bool
    aliases: [verify_ssl]
  kube_ca_cert:
    description:
      - Path of a CA bundle to verify the API server with, instead of the kubeconfig's
        C(certificate-authority) or C(certificate-authority-data).
      - If not given, the E(K8S_AUTH_SSL_CA_CERT) environment variable is used.
    type: path
    aliases: [ssl_ca_cert]
  kube_request_timeout:
    description:
      - Timeout of one request to the Kubernetes API, in seconds (connect and read each).
        Requests are not retried by the HTTP library; waits are bounded by each module's deadline.
    type: float
    default: 20
requirements:
  - kubernetes >= 35.0.0, != 36.0.0
  - PyYAML
"""
