# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The options naming the CKS cluster (argument spec: ``module_utils.ansible_module.cluster_argument_spec``)."""

from __future__ import annotations


class ModuleDocFragment:

    DOCUMENTATION = r"""
options:
  cluster:
    description:
      - The CKS cluster, by id or by exact name.
    type: str
    required: true
  project_id:
    description:
      - The id of the project the cluster belongs to, if it is in one.
    type: str
"""
