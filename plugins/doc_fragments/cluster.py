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
  catalog:
    description:
      - The service offerings, disk offerings and affinity groups as an earlier run of the same rollout returned
        them (RV(cloudstack.cks.cks_node_outdated#module:catalog)). The run then does not list them again - the
        rollout role reads them once per rollout, not in every batch.
      - An offering deleted since is refused by CloudStack at its change; the batch then starts that node again
        before it fails.
      - Leave it out to list them (three CloudStack list calls).
    type: dict
"""
