# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The options reaching etcd for the quorum checks (argument spec: ``module_utils.ansible_module.etcd_argument_spec``)."""

from __future__ import annotations


class ModuleDocFragment:

    DOCUMENTATION = r"""
options:
  etcd_endpoints:
    description:
      - etcd client URLs to ask about the members and the quorum (see C(cloudstack.cks.cks_etcd_quorum)),
        V(https://) for the stacked etcd of a kubeadm control plane, V(http://) for CKS external etcd nodes.
      - Given, they take precedence over the default path.
      - Empty, stacked etcd (kubeadm) is asked through the Kubernetes API instead - C(etcdctl) runs inside the
        C(etcd-<node>) pod of a control node that stays up, through C(pods/exec), with the pod's own certificates
        (see docs/etcd-checks.md); external etcd nodes are then not asked, and a rollout that needs them is refused.
    type: list
    elements: str
    default: []
  etcd_ca_cert:
    description:
      - CA bundle of the etcd server certificates, for V(https://) endpoints.
    type: path
  etcd_client_cert:
    description:
      - Client certificate for etcd (stacked etcd asks for one). Requires O(etcd_client_key).
    type: path
  etcd_client_key:
    description:
      - Private key of O(etcd_client_cert). Read, never returned.
    type: path
  etcd_validate_certs:
    description:
      - If V(false), the etcd server certificates are not verified.
    type: bool
    default: true
  etcd_timeout:
    description:
      - Seconds to wait for each answer of etcd.
    type: float
    default: 5
"""
