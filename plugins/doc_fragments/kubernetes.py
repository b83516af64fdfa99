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
      - If not given at all, and no O(kube_host) either, it is fetched from CloudStack with
        C(getKubernetesClusterConfig), that is the admin kubeconfig CKS stored when it set the cluster up.
        It is kept in memory; the certificates it embeds are written to a private directory (mode 0700,
        files 0600) that is removed when the module ends.
    type: raw
  kube_host:
    description:
      - The URL of the Kubernetes API server, for example V(https://10.1.1.10:6443), to reach it with the
        bearer token O(kube_api_key) instead of a kubeconfig (as C(host) and C(api_key) of kubernetes.core).
      - If not given, the E(K8S_AUTH_HOST) environment variable is used (AWX's "OpenShift or Kubernetes API
        Bearer Token" credential sets it).
      - Given, O(kubeconfig) and O(context) are not used (a warning says so when both are set).
    type: str
    aliases: [host]
  kube_api_key:
    description:
      - The bearer token for O(kube_host), for example a ServiceAccount's. Required with O(kube_host).
        Never returned or shown.
      - If not given, the E(K8S_AUTH_API_KEY) environment variable is used.
      - Not called C(api_key) as in kubernetes.core, because O(api_key) is the CloudStack API key here.
    type: str
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
      - If not given, the E(K8S_AUTH_VERIFY_SSL) environment variable is read, with one difference from
        kubernetes.core - V(true) verifies, but V(false) alone never turns verification off. AWX's
        bearer-token credential sets it to V(False) whenever its CA field is empty, even with "Verify SSL"
        ticked, so the server is then verified anyway (against O(kube_ca_cert), else the kubeconfig's CA or
        the system CAs) and a warning says so. Set this option to V(false) to turn verification off.
    type: bool
    aliases: [verify_ssl]
  kube_ca_cert:
    description:
      - Path of a CA bundle to verify the API server with, instead of the kubeconfig's
        C(certificate-authority) or C(certificate-authority-data).
      - If not given, the E(K8S_AUTH_SSL_CA_CERT) environment variable is used (AWX's bearer-token
        credential writes its CA field to a file and sets it).
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
